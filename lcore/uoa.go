package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// DPVS's UDP option of address (UOA, uoa: ipo or opp on a service): TOA's
// counterpart for UDP. A FullNAT server sees the datagrams come from a
// local address; DPVS tells it the client's in an option (code 31,
// length 8: the client's port and IPv4 address; length 20 with an IPv6
// client's, for NAT64 and FNAT66) that its uoa kernel module on the server reads,
// remembers by 4-tuple and hands to the program that asks (getsockopt).
// As DPVS does, the option goes in the first datagrams of each connection
// towards the server (uoaTrail), not in every one:
//   - ipo: as an IPv4 option, after the fixed header (before any option
//     the datagram has). A server without the module ignores it.
//   - opp: in DPVS's "option protocol" header, between the IPv4 header
//     and the UDP header (IP protocol 248; the header's version 1 for an
//     IPv4 client, 2 for an IPv6 one; its protocol 17, its length 4 plus
//     the option's), which switches that drop IPv4 options forward. Only
//     a server with the module takes such a datagram.
//
// The Ethernet and IPv4 headers move into the mbuf's headroom; the IPv4
// length and checksum are updated for the added bytes, never recomputed.
// The UDP checksum stays as it was: its pseudo-header (addresses, 17 and
// the UDP length) is unchanged, and the module gives the datagram back to
// the server's UDP as protocol 17. A datagram that would no longer fit
// the server port's MTU, or whose IPv4 options leave no room, goes as it
// is, and the option goes just ahead of it in an empty datagram of the
// connection's (DPVS's way: uoa_alone). Fragments never carry it: an opp
// header would shift the later fragments' offsets.

const (
	uoaCode        = 31 // IPOPT_UOA: option 31, not copied into fragments
	uoaLen         = 8  // the client's port and IPv4 address
	uoaLen6        = 20 // the client's port and IPv6 address (a NAT64 or FNAT66 connection's)
	uoaOPPLen      = 4  // the option protocol's own header
	ipProtoOPP     = 248
	ipv4MaxOptions = 40
	// uoaTrail is how many datagrams of a connection carry the option:
	// DPVS's uoa_max_trail default.
	uoaTrail = 3
)

// UOA modes of a Service.
const (
	UOAOff uint8 = iota
	UOAIPOption
	UOAOptionProtocol
)

// Bits of conn.Ext.Flags of a UDP connection: the SYN proxy's MSS index
// and timestamp bits (synproxy.go, synopts.go), which only TCP
// connections have and only their paths read.
const (
	extUOALeftShift        = extSynMSS // bits 3-4: datagrams still to carry the option
	extUOALeft      uint16 = 3 << extUOALeftShift
	extUOAOPP       uint16 = extSynTS // the option goes in an option protocol header
)

// startUOA marks a new UDP FullNAT or NAT64 connection of a service with
// uoa for the option in its first datagrams.
func startUOA(x *conn.Ext, mode uint8) {
	switch mode {
	case UOAIPOption:
		x.Flags |= uoaTrail << extUOALeftShift
	case UOAOptionProtocol:
		x.Flags |= uoaTrail<<extUOALeftShift | extUOAOPP
	}
}

// wantsUOA reports whether the datagram d, travelling dir on connection
// c, is to carry the option: its checksums must then be updated here, not
// left to the NIC.
func wantsUOA(d *desc, c *conn.Conn, x *conn.Ext, dir conn.Dir) bool {
	return c.Proto == hdr.ProtoUDP && dir == conn.Original && x.Flags&extUOALeft != 0 && d.frag == fragNone
}

// uoa puts the option in IPv4 datagram d to the server (wantsUOA; its
// addresses already the server's), which leaves by e; with a6 (a NAT64
// connection's addresses) the option carries the IPv6 client. A datagram
// with no room for it goes as it is, an empty datagram of the
// connection's carrying the option sent just ahead of it (uoaAlone).
func (w *Worker) uoa(d *desc, c *conn.Conn, x *conn.Ext, e exit, a6 *conn.Addrs6) {
	n := uoaLen
	if a6 != nil {
		n = uoaLen6
	}
	opp := x.Flags&extUOAOPP != 0
	add := n
	if opp {
		add += uoaOPPLen
	}
	ip := d.ip()
	room := (opp || ip.HeaderLen()-hdr.IPv4MinLen+n <= ipv4MaxOptions) && int(ip.TotalLength())+add <= int(w.snap.Ports[e.to].MTU)
	switch {
	case room && insertUOA(d, c, n, opp, a6):
		w.cnt.own[UOAOptions]++
	case w.uoaAlone(d, c, n, opp, e, a6):
		w.cnt.own[UOAAlone]++
	default:
		return // no mbuf (counted): a later datagram tries again
	}
	x.Flags -= 1 << extUOALeftShift
}

// insertUOA puts the option (n bytes; in an option protocol header with
// opp) into IPv4 datagram d, which has room for it, and updates its
// header; false without the headroom.
func insertUOA(d *desc, c *conn.Conn, n int, opp bool, a6 *conn.Addrs6) bool {
	add := n
	if opp {
		add += uoaOPPLen
	}
	hlen := d.ip().HeaderLen()
	// What moves: the Ethernet header and the IPv4 header up to where the
	// new bytes go (after the fixed header for an option, after the
	// whole header for the option protocol's).
	at := l3 + hdr.IPv4MinLen
	if opp {
		at = l3 + hlen
	}
	if _, err := d.m.Prepend(add); err != nil {
		return false
	}
	data := d.m.Data()
	copy(data, data[add:add+at])
	b := data[at : at+add]
	opt := b
	if opp {
		b[0] = 1 << 4 // version 1: an IPv4 client
		if a6 != nil {
			b[0] = 2 << 4
		}
		b[1] = hdr.ProtoUDP
		binary.BigEndian.PutUint16(b[2:], uint16(add))
		opt = b[uoaOPPLen:]
	}
	putClientOption(opt[:n], uoaCode, c, a6)

	ip := d.ip()
	oldLen := ip.TotalLength()
	ip.SetTotalLength(oldLen + uint16(add))
	cs := hdr.Update16(ip.Checksum(), oldLen, oldLen+uint16(add))
	if opp {
		// The TTL and protocol share a word.
		old := uint16(ip.TTL())<<8 | hdr.ProtoUDP
		ip.SetProtocol(ipProtoOPP)
		cs = hdr.Update16(cs, old, uint16(ip.TTL())<<8|ipProtoOPP)
	} else {
		// The option joins the header: the version and length byte grows
		// (its word with the TOS), and the checksum covers the option.
		old := binary.BigEndian.Uint16(ip[0:])
		ip.SetVersionIHL(hlen + n)
		cs = hdr.Update16(cs, old, binary.BigEndian.Uint16(ip[0:]))
		cs = hdr.UpdateBlock(cs, 0, hdr.Checksum(opt, 0))
	}
	ip.SetChecksum(cs)
	d.l4 += uint16(add)
	return true
}

// uoaAlone sends the option in an empty UDP datagram of the connection's
// (DPVS's way for a datagram with no room): the addresses, ports, TOS
// and TTL of datagram d as it leaves by e, queued ahead of it. The
// server's module learns the client from it; its program reads an empty
// datagram, as under DPVS. It allocates an mbuf (a cgo call), which only
// the first datagrams of a connection with no room for the option do;
// false when the pool is empty.
func (w *Worker) uoaAlone(d *desc, c *conn.Conn, n int, opp bool, e exit, a6 *conn.Addrs6) bool {
	ip := d.ip()
	udp := hdr.UDP(ip.Payload())
	m, b := w.newFrame(hdr.EthernetLen + hdr.IPv4MinLen + hdr.UDPLen)
	if m == nil {
		return false
	}
	hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv4)
	hdr.IPv4(b[l3:]).Encode(&hdr.IPv4Fields{
		TOS: ip.TOS(), TotalLength: hdr.IPv4MinLen + hdr.UDPLen, ID: w.ipID, Flags: hdr.IPv4FlagDontFragment,
		TTL: ip.TTL(), Protocol: hdr.ProtoUDP, Src: ip.Src(), Dst: ip.Dst(),
	})
	w.ipID++
	u := hdr.UDP(b[l3+hdr.IPv4MinLen:])
	u.SetSrcPort(udp.SrcPort())
	u.SetDstPort(udp.DstPort())
	u.SetLength(hdr.UDPLen)
	u.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoUDP, u))
	alone := desc{m: m, l4: l3 + hdr.IPv4MinLen}
	if !insertUOA(&alone, c, n, opp, a6) {
		m.Free() // cannot happen: a new mbuf has its headroom
		return false
	}
	m.SetOlFlags(0)
	w.leave(m, d.in, e)
	return true
}

// uoa6 is uoa for an FNAT66 connection's IPv6 datagram d (its addresses
// already the server's): the option, the IPv6 client's, goes in an option
// protocol header (version 2) right after the IPv6 header, whose next
// header becomes 248 and payload length grows; the UDP checksum's
// pseudo-header (the addresses, 17, the UDP length) is unchanged. IPv6
// has no IPv4 option: opp only (the configuration refuses ipo). A
// datagram with extension headers, or no room in the MTU, goes as it is,
// the option ahead of it in an empty datagram of its own.
func (w *Worker) uoa6(d *desc, c *conn.Conn, x *conn.Ext, e exit, a *conn.Addrs6) {
	add := uoaOPPLen + uoaLen6
	udp := d.l4Bytes6()
	room := int(d.l4) == l3+hdr.IPv6Len && hdr.IPv6Len+len(udp)+add <= int(w.snap.Ports[e.to].MTU)
	switch {
	case room && insertUOA6(d, c, a):
		w.cnt.own[UOAOptions]++
	case w.uoaAlone6(d, c, e, a):
		w.cnt.own[UOAAlone]++
	default:
		return // no mbuf (counted): a later datagram tries again
	}
	x.Flags -= 1 << extUOALeftShift
}

// insertUOA6 puts the option protocol header with the option into IPv6
// datagram d (no extension headers), after its fixed header; false
// without the headroom.
func insertUOA6(d *desc, c *conn.Conn, a *conn.Addrs6) bool {
	add := uoaOPPLen + uoaLen6
	at := l3 + hdr.IPv6Len
	if _, err := d.m.Prepend(add); err != nil {
		return false
	}
	data := d.m.Data()
	copy(data, data[add:add+at])
	b := data[at : at+add]
	b[0], b[1] = 2<<4, hdr.ProtoUDP // version 2: an IPv6 client
	binary.BigEndian.PutUint16(b[2:], uint16(add))
	putClientOption(b[uoaOPPLen:], uoaCode, c, a)
	ip := d.ip6()
	ip.SetNextHeader(ipProtoOPP)
	ip.SetPayloadLength(ip.PayloadLength() + uint16(add))
	d.l4 += uint16(add)
	return true
}

// uoaAlone6 is uoaAlone for IPv6: an empty UDP datagram of the
// connection's, from and to datagram d's addresses and ports, with its
// traffic class and hop limit, carrying the option, queued ahead of d.
func (w *Worker) uoaAlone6(d *desc, c *conn.Conn, e exit, a *conn.Addrs6) bool {
	ip := d.ip6()
	udp := hdr.UDP(d.l4Bytes6())
	m, b := w.newFrame(hdr.EthernetLen + hdr.IPv6Len + hdr.UDPLen)
	if m == nil {
		return false
	}
	hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv6)
	out := hdr.IPv6(b[l3:])
	src, dst := ip.Src(), ip.Dst()
	out.Encode(hdr.UDPLen, hdr.ProtoUDP, ip.HopLimit(), src, dst)
	tc := ip.TrafficClass()
	out[0], out[1] = 6<<4|tc>>4, tc<<4
	u := hdr.UDP(b[l3+hdr.IPv6Len:])
	u.SetSrcPort(udp.SrcPort())
	u.SetDstPort(udp.DstPort())
	u.SetLength(hdr.UDPLen)
	u.SetChecksum(hdr.TransportChecksum6(src, dst, hdr.ProtoUDP, u))
	alone := desc{m: m, l4: l3 + hdr.IPv6Len}
	if !insertUOA6(&alone, c, a) {
		m.Free() // cannot happen: a new mbuf has its headroom
		return false
	}
	m.SetOlFlags(0)
	w.leave(m, d.in, e)
	return true
}
