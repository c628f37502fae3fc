package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// NAT64 (an IPv6 VIP in front of IPv4 servers, as DPVS's): FullNAT with
// the header translated. The client's IPv6 packet to VIP:vport leaves as
// IPv4 from a local address and port of the service (LIP:lport, the
// FullNAT pools: the port is one this worker owns, so the replies steer
// here) to RIP:rport; the server's reply to LIP:lport goes back as IPv6
// from VIP:vport to the client. The entry is an IPv6 one (folds of the
// client and VIP, the addresses beside it) with FullNAT's extension, its
// reply key IPv4's (conn.Insert6Ext). The transport checksum is updated
// for the pseudo-header's addresses and the ports, never recomputed,
// except for an IPv4 UDP datagram sent without one (IPv6 requires it).
// With proxy_protocol the client's first bytes get a PROXY v2 header
// naming its IPv6 endpoints once the segment is IPv4 (insertProxyHeader).
// Fragments are translated one by one (RFC 7915), following their first
// fragment's connection as any fragment does (frag.go); ICMP errors change
// family both ways (nat64icmp.go).

// newNAT64 enters a scheduled NAT64 connection with a local address and
// port of this worker.
func (w *Worker) newNAT64(d *desc, c *conn.Conn, svc *Service, a *conn.Addrs6) (uint32, Stat) {
	x := conn.Ext{}
	var found bool
	if x.LIP, x.LPort, found = pickLocalPort(w.lpools, svc.LocalAddrs, &w.lipNext); !found {
		return 0, DropNoLocalPort
	}
	startFullNAT(&x, c, svc, d.l4Bytes6(), proxyV2Len6)
	id, err := w.table.Insert6Ext(c, a, &x)
	if err != nil {
		w.lpools[x.LIP].put(x.LPort)
	}
	return id, insertDrop(err)
}

// l4ChecksumOffset is where a TCP or UDP header keeps its checksum.
func l4ChecksumOffset(proto uint8) int {
	if proto == hdr.ProtoTCP {
		return 16
	}
	return 6
}

// nat64Out turns the client's IPv6 packet into the IPv4 one to the
// server, in place: the IPv4 header takes the end of the IPv6 header's
// room (and its extension headers'), the transport header stays. A
// fragment (RFC 7915 5.1.1) leaves as an IPv4 fragment with the low 16
// bits of its identification, its offset and M flag, and DF clear; its
// transport header, in the first fragment only, is updated as a whole
// packet's (the checksum covers the whole datagram).
func (w *Worker) nat64Out(d *desc, c *conn.Conn, id uint32) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	e := w.route(c.RIP)
	if e.kind != exitTransmit {
		return e
	}
	ip6 := d.ip6()
	l4 := d.l4Bytes6()
	hop, tc := ip6.HopLimit()-1, ip6.TrafficClass()
	f := hdr.IPv4Fields{
		TOS: tc, TotalLength: uint16(hdr.IPv4MinLen + len(l4)), ID: w.ipID, Flags: hdr.IPv4FlagDontFragment,
		TTL: hop, Protocol: c.Proto, Src: x.LIP, Dst: c.RIP,
	}
	if d.frag != fragNone {
		fh := int(d.l4) - l3 - 8 // the fragment header, right before the data (fragInfo6)
		fo := binary.BigEndian.Uint16(ip6[fh+2:])
		f.ID, f.Flags, f.FragmentOffset = uint16(binary.BigEndian.Uint32(ip6[fh+4:])), 0, fo&^7
		if fo&1 != 0 {
			f.Flags = hdr.IPv4FlagMoreFragments
		}
		if int(f.FragmentOffset)+len(l4) > 0xffff-hdr.IPv4MinLen {
			return drop(DropFragOversize) // the IPv4 datagram would pass 65535 bytes
		}
	} else {
		w.ipID++
	}
	if d.frag != fragLater {
		off := l4ChecksumOffset(c.Proto)
		cs := hdr.UpdatePseudo64(binary.BigEndian.Uint16(l4[off:]), a.Client, a.VIP, x.LIP, c.RIP)
		cs = hdr.Update16(hdr.Update16(cs, binary.BigEndian.Uint16(l4[0:]), x.LPort), binary.BigEndian.Uint16(l4[2:]), c.RPort)
		if c.Proto == hdr.ProtoUDP && cs == 0 {
			cs = 0xffff
		}
		binary.BigEndian.PutUint16(l4[0:], x.LPort)
		binary.BigEndian.PutUint16(l4[2:], c.RPort)
		binary.BigEndian.PutUint16(l4[off:], cs)
	}
	m := d.m
	if m.SetLen(int(d.l4)+len(l4)) != nil || m.Adj(int(d.l4)-l3-hdr.IPv4MinLen) != nil {
		return drop(DropBadIPv6)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv4)
	hdr.IPv4(data[l3:]).Encode(&f)
	m.SetOlFlags(0)
	if c.Proto == hdr.ProtoTCP && d.frag != fragLater {
		// The packet is IPv4 now: the PROXY v2 header (naming the IPv6
		// client and VIP) before the client's first byte, and every
		// segment after it moved along (FullNAT's way, fullnat.go); a SYN
		// proxy's deltas (synproxy6.go) the same way.
		d.l4 = l3 + hdr.IPv4MinLen
		if x.Flags&extProxy != 0 {
			if why := w.insertProxyHeader(d, c, x, a); why != 0 {
				return drop(why)
			}
		}
		if c.Flags&flagTOA != 0 {
			w.toa(d, c, x, conn.Original, e.to, a, false)
		}
		adjustSeq(hdr.TCP(d.ip().Payload()), x, conn.Original, true)
	}
	if wantsUOA(d, c, x, conn.Original) {
		d.l4 = l3 + hdr.IPv4MinLen
		w.uoa(d, c, x, e, a) // the IPv6 client's
	}
	return e
}

// fragHdrLen is the length of an IPv6 fragment header.
const fragHdrLen = 8

// nat64In turns the server's IPv4 reply into the IPv6 packet to the
// client, in place: the IPv6 header takes the IPv4 header's room and 20
// bytes of headroom (less with IPv4 options). An IPv4 fragment (RFC 7915
// 4.1) becomes an IPv6 one, 8 bytes more of headroom for the fragment
// header (its identification the IPv4 ID zero-extended, offset and M
// flag copied); its first fragment's transport header is updated as a
// whole packet's, and a UDP datagram sent in fragments without a
// checksum, which IPv6 requires and which would have to be summed over
// fragments lbd never holds together, is dropped whole
// (fragment_no_checksum, frag.go). A packet that would not fit the client
// port's MTU is dropped (too_big); if it carries the transport header
// (unfragmented or a first fragment), its sender gets a "fragmentation
// needed" with the IPv4 MTU that fits: the port's MTU less 28 (the IPv6
// header's growth and a fragment header), so that the server's next
// datagrams come in fragments that fit once translated, or less 20 for an
// unfragmented packet with DF.
func (w *Worker) nat64In(d *desc, c *conn.Conn, id uint32) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	e := w.route6(&a.Client)
	if e.kind != exitTransmit {
		return e
	}
	ip := d.ip()
	l4 := ip.Payload()
	fh := 0
	if d.frag != fragNone {
		fh = fragHdrLen
	}
	if mtu := int(w.snap.Ports[e.to].MTU); hdr.IPv6Len+fh+len(l4) > mtu {
		switch {
		case d.frag == fragLater:
			return drop(DropTooBig)
		case d.frag == fragNone && ip.DF():
			return w.fragNeeded(d, uint16(mtu-(hdr.IPv6Len-hdr.IPv4MinLen)))
		}
		return w.fragNeeded(d, uint16(mtu-(hdr.IPv6Len-hdr.IPv4MinLen)-fragHdrLen))
	}
	if c.Flags&flagTOA != 0 {
		w.toa(d, c, x, conn.Reply, e.to, a, false) // the server's ISN, from its SYN-ACK
	}
	if d.frag != fragLater {
		off := l4ChecksumOffset(c.Proto)
		old := binary.BigEndian.Uint16(l4[off:])
		if c.Proto == hdr.ProtoUDP && old == 0 && d.frag != fragNone {
			return drop(DropFragNoChecksum)
		}
		cs := hdr.UpdatePseudo46(old, c.RIP, x.LIP, a.VIP, a.Client)
		cs = hdr.Update16(hdr.Update16(cs, binary.BigEndian.Uint16(l4[0:]), c.VPort), binary.BigEndian.Uint16(l4[2:]), c.ClientPort)
		binary.BigEndian.PutUint16(l4[0:], c.VPort)
		binary.BigEndian.PutUint16(l4[2:], c.ClientPort)
		switch {
		case c.Proto == hdr.ProtoUDP && old == 0:
			// Sent without a checksum: IPv6 requires one, computed here.
			binary.BigEndian.PutUint16(l4[off:], 0)
			cs = hdr.TransportChecksum6(a.VIP, a.Client, hdr.ProtoUDP, l4)
		case c.Proto == hdr.ProtoUDP && cs == 0:
			cs = 0xffff
		}
		binary.BigEndian.PutUint16(l4[off:], cs)
		if c.Proto == hdr.ProtoTCP {
			// Back into the client's numbering (PROXY v2, a SYN proxy);
			// the server's MSS leaves room for the PROXY v2 header in the
			// client's first segment.
			tcp := hdr.TCP(l4)
			adjustSeq(tcp, x, conn.Reply, true)
			if tcp.Flags()&hdr.TCPFlagSYN != 0 && x.Flags&extProxy != 0 {
				if mtu := w.snap.Ports[d.in].MTU; mtu > hdr.IPv4MinLen+hdr.TCPMinLen+proxyV2Len6 {
					tcp.ClampMSS(mtu-hdr.IPv4MinLen-hdr.TCPMinLen-proxyV2Len6, true)
				}
			}
		}
	}
	ttl, tos, ihl := ip.TTL()-1, ip.TOS(), ip.HeaderLen()
	fragID, fo := uint32(ip.ID()), ip.FragmentOffset()
	if ip.Flags()&hdr.IPv4FlagMoreFragments != 0 {
		fo |= 1
	}
	m := d.m
	if m.SetLen(l3+ihl+len(l4)) != nil {
		return drop(DropBadIPv4)
	}
	if grow := hdr.IPv6Len + fh - ihl; grow > 0 {
		if _, err := m.Prepend(grow); err != nil {
			return drop(DropNoHeadroom)
		}
	} else if m.Adj(-grow) != nil {
		return drop(DropBadIPv4)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv6)
	ip6 := hdr.IPv6(data[l3:])
	if fh == 0 {
		ip6.Encode(uint16(len(l4)), c.Proto, ttl, a.VIP, a.Client)
	} else {
		ip6.Encode(uint16(fh+len(l4)), hdr.ExtFragment, ttl, a.VIP, a.Client)
		frag := ip6[hdr.IPv6Len : hdr.IPv6Len+fragHdrLen]
		frag[0], frag[1] = c.Proto, 0
		binary.BigEndian.PutUint16(frag[2:], fo)
		binary.BigEndian.PutUint32(frag[4:], fragID)
	}
	ip6[0], ip6[1] = 6<<4|tos>>4, tos<<4
	m.SetOlFlags(0)
	return e
}
