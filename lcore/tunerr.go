package lcore

import (
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// ICMP errors about our VS/TUN packets. A router between lbd and a real
// server that cannot forward one of our IPIP packets tells lbd (the outer
// source), quoting the outer header and what follows. As IPVS does
// (ip_vs_in_icmp), the error is turned into one for the client about the
// packet it sent to the VIP, from the VIP; a "fragmentation needed" is
// learnt as the path MTU to the real server and passed on with room for
// the IPIP header, so the client's path MTU discovery adapts.

// minPathMTU is the lowest path MTU learnt from a router, as Linux's
// default min_pmtu: a forged "fragmentation needed" cannot shrink packets
// to a real server below it.
const minPathMTU = 552

// pathMTUExpiry is how long a learnt path MTU holds (Linux's
// mtu_expires): afterwards the port's MTU is tried again.
const pathMTUExpiry = 600e9 // ns

// tunnelError delivers an ICMP error quoting one of our IPIP packets to
// the client of the connection its inner packet belongs to (d.flow is the
// inner packet: client -> VIP).
func (w *Worker) tunnelError(d *desc) exit {
	k := &d.flow
	id, _, ok := w.table.Lookup(k.proto, k.src, k.sport, k.dst, k.dport)
	if !ok {
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	ip := d.ip()
	icmp := hdr.ICMP(ip.Payload())
	outer := d.quotedIP()
	if c.Fwd != fwd.TUN || outer.Dst() != c.RIP || !w.snap.isLocal(outer.Src()) || !w.snap.isLocal(ip.Dst()) {
		return drop(DropNoConn) // not an IPIP packet of ours
	}
	inner := hdr.IPv4(outer[outer.HeaderLen():])
	typ, code := icmp.Type(), icmp.Code()
	rest := [4]byte(icmp[4:hdr.ICMPLen]) // passed on as it is, but for an MTU
	if typ == hdr.ICMPDestUnreachable && code == hdr.ICMPCodeFragNeeded {
		// Our outer header copies DF: without it a router fragments. A
		// reported MTU must be below the size of the packet it refused
		// (0, from routers older than RFC 1191, is not guessed at).
		if !inner.DF() || icmp.MTU() == 0 || icmp.MTU() >= outer.TotalLength() {
			return drop(DropBadICMP)
		}
		mtu := w.pmtu.learn(c.RIP, icmp.MTU(), w.now)
		rest = [4]byte{0, 0, byte((mtu - ipipHeaderLen) >> 8), byte(mtu - ipipHeaderLen)}
	}
	// [eth][IP][ICMP][outer IP][inner ...] -> [eth][IP][ICMP][inner ...]:
	// the message keeps what the router quoted of the inner packet, the
	// new headers take the place of the old ones and of the outer header.
	quoted := len(inner)
	if quoted > maxQuote {
		quoted = maxQuote
	}
	shift := ip.HeaderLen() + outer.HeaderLen() - hdr.IPv4MinLen
	m := d.m
	data := m.Data()
	copy(data[shift:shift+hdr.EthernetLen], data[:hdr.EthernetLen])
	if err := m.Adj(shift); err != nil {
		return drop(DropBadICMP)
	}
	total := hdr.IPv4MinLen + hdr.ICMPLen + quoted
	if err := m.SetLen(hdr.EthernetLen + total); err != nil {
		return drop(DropBadICMP)
	}
	data = m.Data()
	hdr.IPv4(data[l3:]).Encode(&hdr.IPv4Fields{
		TotalLength: uint16(total), TTL: hdr.DefaultTTL, Protocol: hdr.ProtoICMP,
		Src: c.VIP, Dst: c.ClientIP,
	})
	icmp = hdr.ICMP(data[l3+hdr.IPv4MinLen : l3+total])
	icmp.SetType(typ)
	icmp.SetCode(code)
	copy(icmp[4:hdr.ICMPLen], rest[:])
	icmp.SetChecksumFull()
	m.SetOlFlags(0)
	w.cnt.own[ICMPErrors]++
	return w.route(c.ClientIP)
}

// maxQuote is the most of the inner packet passed on: an ICMP error fits
// in 576 bytes (RFC 1812).
const maxQuote = 576 - hdr.IPv4MinLen - hdr.ICMPLen

// pathMTUs remembers, per worker, the path MTUs to real servers that
// routers reported for our IPIP packets: a small direct-mapped table (a
// collision forgets the older entry, which costs one more ICMP round trip,
// never a wrong MTU for another server). Each worker learns from the
// errors about its own connections.
type pathMTUs [256]struct {
	rip     uint32
	mtu     uint16
	expires int64
}

func pathMTUSlot(rip uint32) uint8 { return uint8(rip ^ rip>>8 ^ rip>>16 ^ rip>>24) }

// get is the MTU towards rip: the port's, or a lower one learnt and not
// expired.
func (t *pathMTUs) get(rip uint32, portMTU uint16, now int64) uint16 {
	e := &t[pathMTUSlot(rip)]
	if e.rip == rip && e.mtu != 0 && e.mtu < portMTU && now < e.expires {
		return e.mtu
	}
	return portMTU
}

// learn records a reported MTU towards rip (raised to minPathMTU) and
// returns it.
func (t *pathMTUs) learn(rip uint32, reported uint16, now int64) uint16 {
	if reported < minPathMTU {
		reported = minPathMTU
	}
	e := &t[pathMTUSlot(rip)]
	e.rip, e.mtu, e.expires = rip, reported, now+pathMTUExpiry
	return reported
}
