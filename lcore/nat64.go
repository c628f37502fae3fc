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
// Not translated: fragments (dropped, fragment), ICMP errors.

// newNAT64 enters a scheduled NAT64 connection with a local address and
// port of this worker.
func (w *Worker) newNAT64(c *conn.Conn, svc *Service, a *conn.Addrs6) (uint32, Stat) {
	x := conn.Ext{}
	n := len(svc.LocalAddrs)
	found := false
	for i := 0; i < n && !found; i++ {
		lip := svc.LocalAddrs[(w.lipNext+i)%n]
		if p := w.lpools[lip]; p != nil {
			if x.LPort, found = p.get(); found {
				x.LIP = lip
			}
		}
	}
	w.lipNext++
	if !found {
		return 0, DropNoLocalPort
	}
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
// room (and its extension headers'), the transport header stays.
func (w *Worker) nat64Out(d *desc, c *conn.Conn, id uint32) exit {
	if d.frag != fragNone {
		return drop(DropFragment) // its IPv6 fragment header is not translated
	}
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	e := w.route(c.RIP)
	if e.kind != exitTransmit {
		return e
	}
	ip6 := d.ip6()
	l4 := d.l4Bytes6()
	hop, tc := ip6.HopLimit()-1, ip6.TrafficClass()
	off := l4ChecksumOffset(c.Proto)
	cs := hdr.UpdatePseudo64(binary.BigEndian.Uint16(l4[off:]), a.Client, a.VIP, x.LIP, c.RIP)
	cs = hdr.Update16(hdr.Update16(cs, binary.BigEndian.Uint16(l4[0:]), x.LPort), binary.BigEndian.Uint16(l4[2:]), c.RPort)
	if c.Proto == hdr.ProtoUDP && cs == 0 {
		cs = 0xffff
	}
	binary.BigEndian.PutUint16(l4[0:], x.LPort)
	binary.BigEndian.PutUint16(l4[2:], c.RPort)
	binary.BigEndian.PutUint16(l4[off:], cs)
	m := d.m
	if m.SetLen(int(d.l4)+len(l4)) != nil || m.Adj(int(d.l4)-l3-hdr.IPv4MinLen) != nil {
		return drop(DropBadIPv6)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv4)
	hdr.IPv4(data[l3:]).Encode(&hdr.IPv4Fields{
		TOS: tc, TotalLength: uint16(hdr.IPv4MinLen + len(l4)), ID: w.ipID, Flags: hdr.IPv4FlagDontFragment,
		TTL: hop, Protocol: c.Proto, Src: x.LIP, Dst: c.RIP,
	})
	w.ipID++
	m.SetOlFlags(0)
	return e
}

// nat64In turns the server's IPv4 reply into the IPv6 packet to the
// client, in place: the IPv6 header takes the IPv4 header's room and 20
// bytes of headroom (less with IPv4 options). A packet that would not fit
// the client port's MTU is dropped (too_big).
func (w *Worker) nat64In(d *desc, c *conn.Conn, id uint32) exit {
	if d.frag != fragNone {
		return drop(DropFragment)
	}
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	e := w.route6(&a.Client)
	if e.kind != exitTransmit {
		return e
	}
	ip := d.ip()
	l4 := ip.Payload()
	if hdr.IPv6Len+len(l4) > int(w.snap.Ports[e.to].MTU) {
		return drop(DropTooBig)
	}
	ttl, tos, ihl := ip.TTL()-1, ip.TOS(), ip.HeaderLen()
	off := l4ChecksumOffset(c.Proto)
	old := binary.BigEndian.Uint16(l4[off:])
	cs := hdr.UpdatePseudo46(old, c.RIP, x.LIP, a.VIP, a.Client)
	cs = hdr.Update16(hdr.Update16(cs, binary.BigEndian.Uint16(l4[0:]), c.VPort), binary.BigEndian.Uint16(l4[2:]), c.ClientPort)
	binary.BigEndian.PutUint16(l4[0:], c.VPort)
	binary.BigEndian.PutUint16(l4[2:], c.ClientPort)
	m := d.m
	if m.SetLen(l3+ihl+len(l4)) != nil {
		return drop(DropBadIPv4)
	}
	if grow := hdr.IPv6Len - ihl; grow > 0 {
		if _, err := m.Prepend(grow); err != nil {
			return drop(DropNoHeadroom)
		}
	} else if m.Adj(-grow) != nil {
		return drop(DropBadIPv4)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv6)
	ip6 := hdr.IPv6(data[l3:])
	ip6.Encode(uint16(len(l4)), c.Proto, ttl, a.VIP, a.Client)
	ip6[0], ip6[1] = 6<<4|tos>>4, tos<<4
	switch {
	case c.Proto == hdr.ProtoUDP && old == 0:
		// Sent without a checksum: IPv6 requires one, computed here.
		binary.BigEndian.PutUint16(l4[off:], 0)
		cs = hdr.TransportChecksum6(a.VIP, a.Client, hdr.ProtoUDP, l4)
	case c.Proto == hdr.ProtoUDP && cs == 0:
		cs = 0xffff
	}
	binary.BigEndian.PutUint16(l4[off:], cs)
	m.SetOlFlags(0)
	return e
}
