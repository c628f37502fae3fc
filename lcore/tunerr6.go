package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// ICMPv6 errors about our IPv6-in-IPv6 packets (VS/TUN over IPv6), as
// tunerr.go does for IPIP: a router between lbd and a real server that
// cannot forward one tells lbd, quoting the outer header and what
// follows; the error becomes one for the client about the packet it sent
// the VIP, from the VIP. A Packet Too Big is learnt as the path MTU to
// the real server and passed on with room for the outer header. IPv6
// routers never fragment, so every too-big packet is refused this way.

// tunnel6HeaderLen is the outer header VS/TUN over IPv6 adds.
const tunnel6HeaderLen = tun6HeaderLen

// pathMTUs6 is pathMTUs for IPv6 real servers: direct-mapped by the
// address's keyed fold, each slot holding the full address, so a
// collision forgets an MTU and never gives one server another's.
type pathMTUs6 [256]struct {
	rip     hdr.Addr6
	mtu     uint16
	expires int64
}

func pathMTUSlot6(rip *hdr.Addr6) uint8 { return uint8(conn.Fold6(rip)) }

// get is the MTU towards rip: the port's, or a lower one learnt and not
// expired.
func (t *pathMTUs6) get(rip *hdr.Addr6, portMTU uint16, now int64) uint16 {
	e := &t[pathMTUSlot6(rip)]
	if e.rip == *rip && e.mtu != 0 && e.mtu < portMTU && now < e.expires {
		return e.mtu
	}
	return portMTU
}

// learn records a reported MTU towards rip (raised to IPv6's minimum,
// 1280: a forged Packet Too Big cannot shrink packets below it) and
// returns it.
func (t *pathMTUs6) learn(rip *hdr.Addr6, reported uint32, now int64) uint16 {
	mtu := uint16(min(reported, 0xffff))
	if reported < minMTU6 {
		mtu = minMTU6
	}
	e := &t[pathMTUSlot6(rip)]
	e.rip, e.mtu, e.expires = *rip, mtu, now+pathMTUExpiry
	return mtu
}

// untunnelICMPv6 rewrites, in place, an ICMPv6 error (its message at
// d.l4) quoting one of our IPv6-in-IPv6 packets (q, with q.outer) into an
// error from the VIP to the client about the inner packet: [eth][IPv6
// vip -> client][ICMPv6 typ code word][the inner packet as quoted, at
// most what fits in 1280 bytes]. The router's headers and the outer
// header leave; the ICMPv6 checksum is computed afresh (the message is
// new). A drop reason if the mbuf cannot be cut so.
func untunnelICMPv6(d *desc, q quote6, word uint32, vip, client hdr.Addr6) Stat {
	m := d.m
	icmp := hdr.ICMP(m.Data()[d.l4:])
	typ, code := icmp.Type(), icmp.Code()
	inner := int(d.l4) + q.off // the inner header's offset in the frame
	quoted := min(len(q.ip), minMTU6-icmp6ErrorHeader)
	shift := inner - (l3 + icmp6ErrorHeader)
	data := m.Data()
	copy(data[shift:shift+hdr.EthernetLen], data[:hdr.EthernetLen])
	if m.Adj(shift) != nil || m.SetLen(l3+icmp6ErrorHeader+quoted) != nil {
		return DropBadICMP
	}
	data = m.Data()
	hdr.IPv6(data[l3:]).Encode(uint16(hdr.ICMPLen+quoted), hdr.ProtoICMPv6, hdr.DefaultTTL, vip, client)
	msg := hdr.ICMP(data[l3+hdr.IPv6Len : l3+icmp6ErrorHeader+quoted])
	msg.SetType(typ)
	msg.SetCode(code)
	binary.BigEndian.PutUint32(msg[4:], word)
	msg.SetChecksum(hdr.TransportChecksum6(vip, client, hdr.ProtoICMPv6, msg))
	m.SetOlFlags(0)
	return 0
}

// tooBig6 answers a packet too big for the tunnel (mtu, the port's or the
// path's) with a Packet Too Big from the VIP it was sent to, with room
// for the outer header: never below 1280, the least an IPv6 host sends,
// so a path narrower than 1320 bytes drops what does not fit (too_big).
// An ICMPv6 error passed on to a real server is never answered.
func (w *Worker) tooBig6(d *desc, mtu uint16) exit {
	if d.class != classFlow6 {
		return drop(DropTooBig)
	}
	report := max(uint32(mtu)-tunnel6HeaderLen, minMTU6)
	return w.icmp6ToSender(d, hdr.ICMPv6PacketTooBig, 0, report, d.ip6().Dst(), ICMPv6TooBig, DropTooBig)
}

// tunnelError6 delivers an ICMPv6 error quoting one of our IPv6-in-IPv6
// packets to the client of the connection its inner packet belongs to
// (d.flow is the inner packet: client -> VIP), from the VIP. A Packet
// Too Big must report an MTU below the size of the packet it refused; it
// is learnt for the real server and passed on less the outer header.
func (w *Worker) tunnelError6(d *desc) exit {
	ip := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	q, _ := parseQuote6(icmp)
	src, dst := q.ip.Src(), q.ip.Dst()
	k := &d.flow
	id, _, ok := w.table.Lookup6(k.proto, &src, k.sport, &dst, k.dport)
	if !ok {
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	a := w.table.Addrs6(id)
	if c.Fwd != fwd.TUN || q.outer.Dst() != a.RIP || !w.snap.isLocal6(q.outer.Src()) || !w.snap.isLocal6(ip.Dst()) {
		return drop(DropNoConn) // not an IPv6-in-IPv6 packet of ours
	}
	word := binary.BigEndian.Uint32(icmp[4:])
	if icmp.Type() == hdr.ICMPv6PacketTooBig {
		if word >= uint32(hdr.IPv6Len)+uint32(q.outer.PayloadLength()) {
			return drop(DropBadICMP)
		}
		mtu := w.pmtu6.learn(&a.RIP, word, w.now)
		word = max(uint32(mtu)-tunnel6HeaderLen, minMTU6)
	}
	if why := untunnelICMPv6(d, q, word, a.VIP, a.Client); why != 0 {
		return drop(why)
	}
	w.cnt.own[ICMPErrors]++
	return w.route6(&a.Client)
}
