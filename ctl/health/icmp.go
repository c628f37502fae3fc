package health

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ICMP message types, and ICMPv6's (RFC 4443).
const (
	icmpEchoReply   = 0
	icmpUnreachable = 3
	icmpEcho        = 8

	icmp6Unreachable = 1
	icmp6Echo        = 128
	icmp6EchoReply   = 129
)

// icmpFamily is what differs between ICMP echo over IPv4 and over IPv6.
type icmpFamily struct {
	domain, proto              int
	echo, reply, unreachable   byte
	rawHasIPHeader, checksumIn bool // a raw socket's reads start with the IP header; we compute the checksum
}

var (
	icmp4 = icmpFamily{unix.AF_INET, unix.IPPROTO_ICMP, icmpEcho, icmpEchoReply, icmpUnreachable, true, true}
	// The kernel computes ICMPv6 checksums (the pseudo-header has the
	// addresses it picks) and gives raw sockets the message alone.
	icmp6 = icmpFamily{unix.AF_INET6, unix.IPPROTO_ICMPV6, icmp6Echo, icmp6EchoReply, icmp6Unreachable, false, false}
)

func sockaddr(a netip.Addr) unix.Sockaddr {
	if a.Is4() {
		return &unix.SockaddrInet4{Addr: a.As4()}
	}
	return &unix.SockaddrInet6{Addr: a.As16()}
}

// icmpPayload marks our echo requests.
var icmpPayload = []byte("dplb-health-check")

// probeICMP sends one echo request (ICMPv6 for an IPv6 server) and waits
// for its reply. It uses an unprivileged ICMP socket (SOCK_DGRAM, allowed
// by net.ipv4.ping_group_range, which covers ICMPv6 too) and falls back
// to a raw socket (root or CAP_NET_RAW).
func probeICMP(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	dst := t.ProbeAddr().Addr().Unmap()
	fam := icmp4
	if dst.Is6() {
		fam = icmp6
	}
	if src := c.SourceAddr(); src.IsValid() && src.Is4() != dst.Is4() {
		return false, "icmp: source " + src.String() + " and server " + dst.String() + " are of different IP versions"
	}
	raw := false
	fd, err := unix.Socket(fam.domain, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, fam.proto)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		raw = true
		fd, err = unix.Socket(fam.domain, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, fam.proto)
	}
	if err != nil {
		return false, "icmp socket: " + err.Error()
	}
	f := os.NewFile(uintptr(fd), "icmp") // owns fd from here
	defer f.Close()
	if src := c.SourceAddr(); src.IsValid() {
		if err := unix.Bind(fd, sockaddr(src)); err != nil {
			return false, "icmp: binding " + src.String() + ": " + errReason(ctx, err, c.Timeout)
		}
	}
	if err := unix.Connect(fd, sockaddr(dst)); err != nil {
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
	req[0] = fam.echo
	binary.BigEndian.PutUint16(req[4:], id)
	binary.BigEndian.PutUint16(req[6:], seq)
	copy(req[8:], icmpPayload)
	if fam.checksumIn {
		binary.BigEndian.PutUint16(req[2:], icmpChecksum(req))
	}
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
		if raw && fam.rawHasIPHeader {
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
		case fam.reply:
			// The kernel rewrites the id of a datagram socket and hands
			// it only its own replies; a raw socket must match the id.
			if binary.BigEndian.Uint16(msg[6:]) == seq && (!raw || binary.BigEndian.Uint16(msg[4:]) == id) {
				return true, ""
			}
		case fam.unreachable:
			if raw && (fam.rawHasIPHeader && echoQuoted(msg[8:], id, seq) || !fam.rawHasIPHeader && echo6Quoted(msg[8:], id, seq)) {
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

// echo6Quoted reports whether the IPv6 packet quoted in an ICMPv6 error
// is our echo request (directly after the fixed header: we send no
// extension headers).
func echo6Quoted(ip []byte, id, seq uint16) bool {
	if len(ip) < 48 || ip[6] != unix.IPPROTO_ICMPV6 {
		return false
	}
	e := ip[40:]
	return e[0] == icmp6Echo && binary.BigEndian.Uint16(e[4:]) == id && binary.BigEndian.Uint16(e[6:]) == seq
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
