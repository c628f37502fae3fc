package health

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ICMP message types.
const (
	icmpEchoReply   = 0
	icmpUnreachable = 3
	icmpEcho        = 8
)

// icmpPayload marks our echo requests.
var icmpPayload = []byte("dplb-health-check")

// probeICMP sends one echo request and waits for its reply. It uses an
// unprivileged ICMP socket (SOCK_DGRAM, allowed by
// net.ipv4.ping_group_range) and falls back to a raw socket (root or
// CAP_NET_RAW).
func probeICMP(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	dst := t.ProbeAddr().Addr()
	if !dst.Is4() {
		return false, "icmp: not an IPv4 address"
	}
	raw := false
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		raw = true
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
	}
	if err != nil {
		return false, "icmp socket: " + err.Error()
	}
	f := os.NewFile(uintptr(fd), "icmp") // owns fd from here
	defer f.Close()
	if src := c.SourceAddr(); src.IsValid() {
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src.As4()}); err != nil {
			return false, "icmp: binding " + src.String() + ": " + errReason(ctx, err, c.Timeout)
		}
	}
	if err := unix.Connect(fd, &unix.SockaddrInet4{Addr: dst.As4()}); err != nil {
		return false, "icmp: " + errReason(ctx, err, c.Timeout)
	}
	if dl, ok := ctx.Deadline(); ok {
		f.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { f.SetDeadline(time.Now()) })
	defer stop()

	id := uint16(rand.Uint32())
	seq := uint16(rand.Uint32())
	req := make([]byte, 8+len(icmpPayload))
	req[0] = icmpEcho
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], seq)
	copy(req[8:], icmpPayload)
	binary.BigEndian.PutUint16(req[2:], icmpChecksum(req))
	if _, err := f.Write(req); err != nil {
		return false, "icmp: sending: " + errReason(ctx, err, c.Timeout)
	}
	buf := make([]byte, 1500)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() != context.Canceled {
				return false, "no echo reply within " + c.Timeout.String()
			}
			return false, "icmp: " + errReason(ctx, err, c.Timeout)
		}
		msg := buf[:n]
		if raw {
			// A raw socket reads the IP header too, and sees every ICMP
			// message from dst, our own request included on loopback.
			if len(msg) < 20 || msg[0]>>4 != 4 || len(msg) < int(msg[0]&0x0f)*4 {
				continue
			}
			msg = msg[int(msg[0]&0x0f)*4:]
		}
		if len(msg) < 8 {
			continue
		}
		switch msg[0] {
		case icmpEchoReply:
			// The kernel rewrites the id of a datagram socket and hands
			// it only its own replies; a raw socket must match the id.
			if binary.BigEndian.Uint16(msg[6:]) == seq && (!raw || binary.BigEndian.Uint16(msg[4:]) == id) {
				return true, ""
			}
		case icmpUnreachable:
			if raw && echoQuoted(msg[8:], id, seq) {
				return false, fmt.Sprintf("destination unreachable (code %d)", msg[1])
			}
		}
	}
}

// echoQuoted reports whether the IP packet quoted in an ICMP error is our
// echo request.
func echoQuoted(ip []byte, id, seq uint16) bool {
	if len(ip) < 20 {
		return false
	}
	hl := int(ip[0]&0x0f) * 4
	if len(ip) < hl+8 || ip[9] != unix.IPPROTO_ICMP {
		return false
	}
	e := ip[hl:]
	return e[0] == icmpEcho && binary.BigEndian.Uint16(e[4:]) == id && binary.BigEndian.Uint16(e[6:]) == seq
}

// icmpChecksum is the Internet checksum of b (RFC 1071), its checksum
// field zero.
func icmpChecksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
