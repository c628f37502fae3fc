package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// DPVS's TCP option address (TOA, toa: true on a service). A FullNAT
// server sees the connection come from a local address; DPVS tells it
// the client's in a TCP option (kind 254, length 8: the client's port and
// IPv4 address; length 20 with an IPv6 client's, for NAT64 and FNAT66) that its toa
// kernel module on the server reads from the segment completing the
// handshake, and reports as the socket's peer. As DPVS does, every client
// segment that acknowledges exactly the server's SYN-ACK gets the option:
// the handshake's ACK, a retransmission of it, and data sent before the
// server's first byte, so whichever of them completes the handshake on
// the server carries it. Behind the SYN proxy the server's handshake is
// completed by lbd's own ACK (ackServer), which carries it among its
// options, and the ISN the client acknowledges is the cookie. The option
// goes after the segment's own options (a NAT64 segment's once IPv4): the
// Ethernet, IPv4 and TCP headers move into the mbuf's headroom, the data
// offset grows, and the IP length and both checksums are updated for the
// added bytes, never recomputed. It adds no sequence space: nothing else
// changes. A segment whose TCP header has no room for the option, or that
// would no longer fit the server port's MTU, goes without it
// (toa_no_room).

const (
	toaKind = 254
	toaLen  = 8  // the client's port and IPv4 address
	toaLen6 = 20 // the client's port and IPv6 address (a NAT64 or FNAT66 connection's)
)

// Bits of conn.Conn.Flags. The extension's flags are the SYN proxy's and
// the PROXY header's, which toa excludes, but all sixteen are taken.
const (
	flagTOA       uint8 = 1 << 1 // the connection's handshake gets the option
	flagServerISN uint8 = 1 << 2 // Ext.ServerISN holds the server's ISN as the client numbers it (its SYN-ACK's, or the SYN proxy's cookie)
)

// tcpOf views d's TCP segment, IPv6 when six, else IPv4, and its IP
// packet's length.
func (d *desc) tcpOf(six bool) (hdr.TCP, int) {
	if six {
		tcp := hdr.TCP(d.l4Bytes6())
		return tcp, int(d.l4) - l3 + len(tcp)
	}
	ip := d.ip()
	return hdr.TCP(ip.Payload()), int(ip.TotalLength())
}

// putClientOption writes DPVS's option layout, TOA's and UOA's alike,
// into opt (8 bytes, or 20 with a6): kind, length, the client's port and
// address (a6's IPv6 client when a6 is not nil).
func putClientOption(opt []byte, kind uint8, c *conn.Conn, a6 *conn.Addrs6) {
	opt[0], opt[1] = kind, byte(len(opt))
	binary.BigEndian.PutUint16(opt[2:], c.ClientPort)
	if a6 != nil {
		copy(opt[4:], a6.Client[:])
	} else {
		binary.BigEndian.PutUint32(opt[4:], c.ClientIP)
	}
}

// toa notes the server's initial sequence number from its SYN-ACK
// (Reply) and puts the option in a client segment (Original) that
// acknowledges it; out is the port the segment leaves by. The segment is
// IPv4 (a NAT64 connection's once translated: a6 holds its addresses,
// and the option its IPv6 client), or IPv6 when six (FNAT66's: a6 holds
// its addresses).
func (w *Worker) toa(d *desc, c *conn.Conn, x *conn.Ext, dir conn.Dir, out int, a6 *conn.Addrs6, six bool) {
	if c.Proto != hdr.ProtoTCP || d.frag != fragNone {
		return
	}
	tcp, ipLen := d.tcpOf(six)
	flags := tcp.Flags()
	if dir == conn.Reply {
		// A SYN proxy's connection knows it from the start: its cookie.
		if c.Flags&flagServerISN == 0 && flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK {
			x.ServerISN = tcp.Seq()
			c.Flags |= flagServerISN
		}
		return
	}
	if c.Flags&flagServerISN == 0 || flags&(hdr.TCPFlagSYN|hdr.TCPFlagRST|hdr.TCPFlagACK) != hdr.TCPFlagACK || tcp.Ack() != x.ServerISN+1 {
		return
	}
	n := toaLen
	if a6 != nil {
		n = toaLen6
	}
	off := tcp.DataOffset()
	if off+n > hdr.TCPMaxLen || ipLen+n > int(w.snap.Ports[out].MTU) {
		w.cnt.own[TOANoRoom]++
		return
	}
	l4Old := uint16(len(tcp))
	opt := d.openAfterTCPHeader(n)
	if opt == nil {
		w.cnt.own[TOANoRoom]++
		return
	}
	putClientOption(opt, toaKind, c, a6)
	if six {
		grownTCP6(d, opt, l4Old)
	} else {
		grownTCP(d.ip(), opt)
	}
	// The option is part of the header now: its data offset grows (the
	// byte's low bits, reserved and AE, kept).
	tcp, _ = d.tcpOf(six)
	oldWord := binary.BigEndian.Uint16(tcp[12:])
	tcp[12] = byte((off+n)/4)<<4 | tcp[12]&0x0f
	tcp.SetChecksum(hdr.Update16(tcp.Checksum(), oldWord, binary.BigEndian.Uint16(tcp[12:])))
	w.cnt.own[TOAOptions]++
}
