package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/lcore/hdr"
)

// udpserve answers every datagram with "<name> <source ip:port as seen>",
// sent from the address the datagram was sent to (IP_PKTINFO), so that a
// server bound to the wildcard answers from the VIP in VS/DR and VS/TUN.
// With -v it prints "rx <from> <to> <payload>" per datagram. A datagram
// longer than the answer gets an answer as long as itself, padded with
// padByte (a 4 KiB query, a 4 KiB answer: fragmented by the kernel both
// ways on a 1500-byte MTU).
func udpserve(args []string) error {
	fs := flag.NewFlagSet("udpserve", flag.ContinueOnError)
	listen := fs.String("listen", ":5353", "comma-separated listen addresses")
	name := fs.String("name", "", "name put at the start of every answer")
	verbose := fs.Bool("v", false, "print one line per datagram received")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" {
		h, _ := os.Hostname()
		*name = h
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	var conns []*net.UDPConn
	for _, addr := range strings.Split(*listen, ",") {
		ua, err := net.ResolveUDPAddr(family("udp", addr), addr)
		if err != nil {
			return err
		}
		c, err := net.ListenUDP(family("udp", addr), ua)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if err := setPktinfo(c); err != nil {
			return err
		}
		fmt.Printf("ready %s\n", c.LocalAddr())
		go func() { errc <- answerUDP(c, *name, *verbose) }()
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}

func setPktinfo(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
		if a, ok := c.LocalAddr().(*net.UDPAddr); ok && serr == nil && a.IP.To4() == nil {
			// A dual-stack socket: answer IPv6 queries from their
			// destination too (the VIP, for VS/DR and VS/TUN).
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("IP_PKTINFO: %w", serr)
	}
	return nil
}

func answerUDP(c *net.UDPConn, name string, verbose bool) error {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, from, err := c.ReadMsgUDP(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		var dst net.IP
		var replyOOB []byte
		if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
			for _, m := range msgs {
				if m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo {
					// struct in_pktinfo: ifindex, spec_dst, addr (the header's destination)
					dst = net.IPv4(m.Data[8], m.Data[9], m.Data[10], m.Data[11])
					info := unix.Inet4Pktinfo{}
					copy(info.Spec_dst[:], m.Data[8:12])
					replyOOB = unix.PktInfo4(&info)
				}
				if m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo {
					// struct in6_pktinfo: addr (the header's destination), ifindex
					dst = net.IP(append([]byte(nil), m.Data[:16]...))
					info := unix.Inet6Pktinfo{}
					copy(info.Addr[:], m.Data[:16])
					replyOOB = unix.PktInfo6(&info)
				}
			}
		}
		reply := []byte(fmt.Sprintf("%s %s\n", name, from))
		if n > len(reply) {
			reply = pad(reply, n)
		}
		if verbose {
			fmt.Printf("rx %s %s %q\n", from, dst, firstLine(buf[:n]))
		}
		if _, _, err := c.WriteMsgUDP(reply, replyOOB, from); err != nil && verbose {
			fmt.Printf("tx error %s: %v\n", from, err)
		}
	}
}

// udpget sends n queries to -addr, each from a new socket (a new source
// port), and waits up to -timeout for one answer each. It prints one JSON
// line per query (Result: remote is the source of the answer) and a
// summary line; exit status 1 if any query got no answer.
func udpget(args []string, out io.Writer) (failed bool, err error) {
	fs := flag.NewFlagSet("udpget", flag.ContinueOnError)
	addr := fs.String("addr", "192.0.2.100:53", "address to query")
	n := fs.Int("n", 1, "number of queries")
	timeout := fs.Duration("timeout", 2*time.Second, "time to wait for each answer")
	bind := fs.String("bind", "", "local IPv4 address to send from (default: the route's)")
	size := fs.Int("size", 0, "pad each query to this many bytes; the answer must be as long and padded alike")
	port := fs.Int("port", 0, "source port of every query, as a resolver's one socket (0: a fresh one each)")
	quicServer := fs.String("quic-server", "", "each query is a QUIC 1-RTT packet whose destination connection ID names this server's address (DPVS's encoding), as after a client's move to a new port")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if *size < 0 || *size > 65507 {
		return false, fmt.Errorf("udpget: -size %d out of range 0..65507", *size)
	}
	network := family("udp", *addr)
	raddr, err := net.ResolveUDPAddr(network, *addr)
	if err != nil {
		return false, err
	}
	var local net.IP
	if *bind != "" {
		if local = net.ParseIP(*bind); local == nil || (local.To4() == nil) == (network == "udp4") {
			return false, fmt.Errorf("udpget: -bind %q is not an address of the -addr's version", *bind)
		}
	} else {
		// Connecting a UDP socket sends nothing; it picks the source address.
		c, err := net.DialUDP(network, nil, raddr)
		if err != nil {
			return false, err
		}
		local = c.LocalAddr().(*net.UDPAddr).IP
		c.Close()
	}
	var server net.IP
	if *quicServer != "" {
		if server = net.ParseIP(*quicServer); server == nil {
			return false, fmt.Errorf("udpget: -quic-server %q is not an address", *quicServer)
		}
		if s4 := server.To4(); s4 != nil {
			server = s4
		}
	}
	enc := json.NewEncoder(out)
	sum := Summary{Summary: true}
	for i := 0; i < *n; i++ {
		var q []byte
		if server != nil {
			if q, err = quicPacket(server); err != nil {
				return false, err
			}
		}
		res := query(&net.UDPAddr{IP: local, Port: *port}, raddr, i, *size, q, *timeout)
		if res.Err == "" {
			sum.OK++
		} else {
			sum.Failed++
		}
		if err := enc.Encode(res); err != nil {
			return true, err
		}
	}
	if err := enc.Encode(sum); err != nil {
		return true, err
	}
	return sum.Failed > 0, nil
}

// query sends one datagram from a fresh unconnected socket bound to
// local, so that an answer from any source is received and its source
// recorded.
func query(local *net.UDPAddr, raddr *net.UDPAddr, i, size int, q []byte, timeout time.Duration) (res Result) {
	res.I = i
	start := time.Now()
	defer func() { res.Millis = time.Since(start).Milliseconds() }()
	network := "udp4"
	if raddr.IP.To4() == nil {
		network = "udp6"
	}
	c, err := net.ListenUDP(network, local)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	defer c.Close()
	res.Local = c.LocalAddr().String()
	if err := c.SetDeadline(start.Add(timeout)); err != nil {
		res.Err = err.Error()
		return res
	}
	if q == nil {
		q = []byte(fmt.Sprintf("query %d\n", i))
	}
	if size > len(q) {
		q = pad(q, size)
	}
	if _, err := c.WriteToUDP(q, raddr); err != nil {
		res.Err = err.Error()
		return res
	}
	buf := make([]byte, 65536)
	n, from, err := c.ReadFromUDP(buf)
	if err != nil {
		res.Err = err.Error()
		return res
	}
	res.Remote = from.String()
	res.Body = strings.TrimSpace(string(firstLine(buf[:n])))
	if size > 0 {
		line := len(firstLine(buf[:n]))
		if want := pad(buf[:line:line], size); n != size || !bytes.Equal(buf[:n], want) {
			res.Err = fmt.Sprintf("answer of %d bytes, want %d padded", n, size)
		}
	}
	return res
}

// pad extends a message to n bytes with a pattern that depends on each
// byte's position, so a misplaced or corrupted fragment shows.
func pad(msg []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, msg)
	for i := len(msg); i < n; i++ {
		out[i] = byte('a' + i%26)
	}
	return out
}

// firstLine is a message up to and including its first newline.
func firstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return b
}

// quicPacket is a QUIC 1-RTT packet (short header) to a connection ID
// that names server (its last 4 bytes, 8 of an IPv6 address) in DPVS's
// encoding, the rest random, as a server set up for it issues them.
func quicPacket(server net.IP) ([]byte, error) {
	nonce := make([]byte, 20)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	n := min(len(server), 8)
	b, ok := hdr.AppendQUICCID([]byte{0x40 | nonce[0]&0x3f}, 16, server, n, 0, nonce)
	if !ok {
		return nil, fmt.Errorf("udpget: no connection ID for %s", server)
	}
	return append(b, nonce[:8]...), nil // a packet number and some protected payload
}
