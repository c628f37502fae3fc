package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"
)

// A receiver of the PROXY protocol version 2 (HAProxy's proxy-protocol
// spec, section 2.2), as a real server behind a FullNAT director runs it:
// every connection starts with the binary header naming the client, and
// the server answers as if the client had connected itself. A connection
// without a valid header is closed.

var proxyV2Sig = []byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

// proxyListener accepts connections whose first bytes are a PROXY v2
// header, and gives them the header's source as their remote address.
type proxyListener struct{ net.Listener }

type proxyConn struct {
	net.Conn
	remote net.Addr
}

func (c *proxyConn) RemoteAddr() net.Addr { return c.remote }

func (l proxyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		src, err := readProxyV2(c)
		_ = c.SetReadDeadline(time.Time{})
		if err != nil {
			fmt.Printf("proxy-protocol: %s: %v\n", c.RemoteAddr(), err)
			c.Close()
			continue
		}
		return &proxyConn{Conn: c, remote: net.TCPAddrFromAddrPort(src)}, nil
	}
}

// readProxyV2 reads one header and returns the source it names (LOCAL
// connections, a proxy's own health checks, keep the real peer).
func readProxyV2(r io.Reader) (netip.AddrPort, error) {
	var h [16]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return netip.AddrPort{}, fmt.Errorf("reading the header: %w", err)
	}
	if !bytes.Equal(h[:12], proxyV2Sig) {
		return netip.AddrPort{}, errors.New("no PROXY v2 signature")
	}
	if h[12]>>4 != 2 {
		return netip.AddrPort{}, fmt.Errorf("version %d", h[12]>>4)
	}
	body := make([]byte, binary.BigEndian.Uint16(h[14:]))
	if _, err := io.ReadFull(r, body); err != nil {
		return netip.AddrPort{}, fmt.Errorf("reading the addresses: %w", err)
	}
	if h[12]&0x0F != 1 {
		return netip.AddrPort{}, errors.New("a LOCAL header: no client to report")
	}
	switch {
	case h[13] == 0x11 && len(body) >= 12: // TCP over IPv4
		src := netip.AddrFrom4([4]byte(body[0:4]))
		return netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[8:])), nil
	case h[13] == 0x21 && len(body) >= 36: // TCP over IPv6
		src := netip.AddrFrom16([16]byte(body[0:16]))
		return netip.AddrPortFrom(src, binary.BigEndian.Uint16(body[32:])), nil
	}
	return netip.AddrPort{}, fmt.Errorf("family/protocol %#02x with %d address bytes", h[13], len(body))
}
