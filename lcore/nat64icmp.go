package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// ICMP errors of NAT64 connections, translated as RFC 7915 says (its
// sections 4.2 and 5.2 for the types and codes, 4.3 and 5.3 for the
// quoted packet). An ICMPv4 error from the servers' side quoting
// LIP:lport -> RIP:rport (found, as FullNAT's, by the IPv4 lookup of its
// reverse, the entry's reply key; icmp.go) becomes an ICMPv6 error from
// the VIP to the client quoting client:cport -> VIP:vport: the router
// that sent it has an IPv4 address an IPv6 client cannot be given. An
// ICMPv6 error from the client's side quoting VIP:vport -> client:cport
// (found by the IPv6 lookup, icmp6err.go) becomes an ICMPv4 error from
// the LIP to the server quoting RIP:rport -> LIP:lport. Both are
// rewritten in place: the quoted transport bytes stay where they are,
// the headers before them are written anew, 20 bytes of headroom more
// (or 40 fewer) for each of the outer and quoted headers. The message's
// checksum is carried over by RFC 1624 for what changes (the ICMP
// headers, the quoted headers and ports, the pseudo-header ICMPv6 adds,
// the bytes cut off), never recomputed: one wrong on arrival stays
// wrong. Errors RFC 7915 does not translate are dropped as icmp_type.

// plateaus are RFC 1191's MTU plateaus, for a "fragmentation needed"
// from a router that reports none (RFC 7915 4.2).
var plateaus = [...]uint16{32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68}

// icmp4To6 maps an ICMPv4 error (type, code, the word after the
// checksum) about a packet of size bytes to its ICMPv6 translation (RFC
// 7915 4.2), or a drop reason: icmp_type for what is not translated,
// bad_icmp for a "fragmentation needed" reporting an MTU the refused
// packet fitted.
func icmp4To6(typ, code uint8, word uint32, size uint16) (uint8, uint8, uint32, Stat) {
	switch typ {
	case hdr.ICMPDestUnreachable:
		switch code {
		case 0, 1, 5, 6, 7, 8, 11, 12: // unreachable networks and hosts, source route failed
			return hdr.ICMPv6DestUnreachable, 0, 0, 0
		case 2: // protocol unreachable: a parameter problem at the next header
			return hdr.ICMPv6ParamProblem, 1, 6, 0
		case hdr.ICMPCodePortUnreachable:
			return hdr.ICMPv6DestUnreachable, 4, 0, 0
		case hdr.ICMPCodeFragNeeded:
			mtu := uint16(word)
			if mtu >= size {
				return 0, 0, 0, DropBadICMP
			}
			if mtu == 0 { // a router before RFC 1191: the plateau below the packet's size
				for _, p := range plateaus {
					if mtu = p; p < size {
						break
					}
				}
			}
			return hdr.ICMPv6PacketTooBig, 0, max(uint32(mtu)+hdr.IPv6Len-hdr.IPv4MinLen, minMTU6), 0
		case 9, 10, 13, 15: // administratively prohibited, precedence cutoff
			return hdr.ICMPv6DestUnreachable, 1, 0, 0
		}
	case hdr.ICMPTimeExceeded:
		if code <= 1 { // hop limit, reassembly: the same codes
			return hdr.ICMPv6TimeExceeded, code, 0, 0
		}
	case hdr.ICMPParamProblem:
		// The pointer (the word's first byte) moves to the IPv6 header's
		// field (RFC 7915 figure 3); fields IPv6 lacks are not translated.
		if code != 0 && code != 2 {
			break
		}
		switch p := word >> 24; {
		case p <= 1:
			return hdr.ICMPv6ParamProblem, 0, p, 0
		case p <= 3:
			return hdr.ICMPv6ParamProblem, 0, 4, 0 // total length: payload length
		case p == 8:
			return hdr.ICMPv6ParamProblem, 0, 7, 0 // TTL: hop limit
		case p == 9:
			return hdr.ICMPv6ParamProblem, 0, 6, 0 // protocol: next header
		case p >= 12 && p <= 15:
			return hdr.ICMPv6ParamProblem, 0, 8, 0 // source
		case p >= 16 && p <= 19:
			return hdr.ICMPv6ParamProblem, 0, 24, 0 // destination
		}
	}
	return 0, 0, 0, DropICMPType
}

// icmp6To4 maps an ICMPv6 error (type, code, word) about a packet of
// size bytes to its ICMPv4 translation (RFC 7915 5.2), or a drop reason
// as icmp4To6's. A Packet Too Big's MTU, raised to 1280 first as lbd
// believes no less (tunerr6.go), loses the 20 bytes IPv4's header saves.
func icmp6To4(typ, code uint8, word uint32, size int) (uint8, uint8, uint32, Stat) {
	switch typ {
	case hdr.ICMPv6DestUnreachable:
		switch code {
		case 0, 2, 3: // no route, beyond the source's scope, address unreachable
			return hdr.ICMPDestUnreachable, 1, 0, 0
		case 1: // administratively prohibited
			return hdr.ICMPDestUnreachable, 10, 0, 0
		case 4:
			return hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0, 0
		}
	case hdr.ICMPv6PacketTooBig:
		if uint64(word) >= uint64(size) {
			return 0, 0, 0, DropBadICMP
		}
		return hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, min(max(word, minMTU6)-(hdr.IPv6Len-hdr.IPv4MinLen), 0xffff), 0
	case hdr.ICMPv6TimeExceeded:
		if code <= 1 {
			return hdr.ICMPTimeExceeded, code, 0, 0
		}
	case hdr.ICMPv6ParamProblem:
		switch code {
		case 1: // unrecognized next header
			return hdr.ICMPDestUnreachable, 2, 0, 0
		case 0: // the pointer moves to the IPv4 header's field (figure 6)
			var p uint32
			switch {
			case word <= 1:
				p = word
			case word == 4 || word == 5:
				p = 2 // payload length: total length
			case word == 6:
				p = 9 // next header: protocol
			case word == 7:
				p = 8 // hop limit: TTL
			case word >= 8 && word <= 23:
				p = 12
			case word >= 24 && word <= 39:
				p = 16
			default:
				return 0, 0, 0, DropICMPType // the flow label has no IPv4 field
			}
			return hdr.ICMPParamProblem, 0, p << 24, 0
		}
	}
	return 0, 0, 0, DropICMPType
}

// quotedPrefix is how much of a quoted transport header of n bytes an
// error's translation rewrites: the ports, and the checksum when the quote
// holds it (UDP's always: it is within the 8 bytes every quote has).
func quotedPrefix(proto uint8, n int) int {
	if proto == hdr.ProtoTCP && n >= 18 {
		return 18
	}
	return 8
}

// natQuoted64 gives a quoted transport header's first bytes (l4, as
// quotedPrefix cuts them) the ports sport and dport and updates its
// checksum, where l4 holds it, for those and for the pseudo-header's
// addresses: from IPv4's lip -> rip to IPv6's client -> VIP when to6,
// else from IPv6's VIP -> client to IPv4's rip -> lip. A UDP checksum of
// 0 (none) stays 0.
func natQuoted64(l4 []byte, proto uint8, sport, dport uint16, to6 bool, a *conn.Addrs6, lip, rip uint32) {
	os, od := binary.BigEndian.Uint16(l4[0:]), binary.BigEndian.Uint16(l4[2:])
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	off := l4ChecksumOffset(proto)
	if len(l4) < off+2 {
		return
	}
	old := binary.BigEndian.Uint16(l4[off:])
	if proto == hdr.ProtoUDP && old == 0 {
		return
	}
	var cs uint16
	if to6 {
		cs = hdr.UpdatePseudo46(old, lip, rip, a.Client, a.VIP)
	} else {
		cs = hdr.UpdatePseudo64(old, a.VIP, a.Client, rip, lip)
	}
	cs = hdr.Update16(hdr.Update16(cs, os, sport), od, dport)
	if proto == hdr.ProtoUDP && cs == 0 {
		cs = 0xffff
	}
	binary.BigEndian.PutUint16(l4[off:], cs)
}

// moveFrameStart moves where the frame starts, its Ethernet header with
// it: shift bytes later (what lies between is dropped) or, negative,
// earlier into the headroom.
func moveFrameStart(m *mbuf.Mbuf, shift int) Stat {
	if shift < 0 {
		if _, err := m.Prepend(-shift); err != nil {
			return DropNoHeadroom
		}
		data := m.Data()
		copy(data[:l3], data[-shift:-shift+l3])
		return 0
	}
	data := m.Data()
	copy(data[shift:shift+l3], data[:l3])
	if m.Adj(shift) != nil {
		return DropBadICMP
	}
	return 0
}

// icmpError64 translates an ICMPv4 error from a NAT64 connection's
// server side, about a packet lbd sent (LIP:lport -> RIP:rport), into the
// ICMPv6 error the client gets from the VIP about the packet it sent
// (client:cport -> VIP:vport): [eth][IPv6 VIP -> client][ICMPv6][IPv6
// header (a fragment header when the quote is a first fragment)][the
// quoted transport bytes, cut so the error stays within 1280 bytes].
func (w *Worker) icmpError64(d *desc, c *conn.Conn, id uint32) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	ip := d.ip()
	icmp := hdr.ICMP(ip.Payload())
	q := d.quotedIP()
	qhl, size := q.HeaderLen(), q.TotalLength()
	if q.FragmentOffset() != 0 || int(size) < qhl+8 {
		return drop(DropBadICMP) // a later fragment names no ports; a length no packet of ours had
	}
	typ, code, word, why := icmp4To6(icmp.Type(), icmp.Code(), binary.BigEndian.Uint32(icmp[4:]), size)
	if why != 0 {
		return drop(why)
	}
	e := w.route6(&a.Client)
	if e.kind != exitTransmit {
		return e
	}
	fh := 0
	if q.Flags()&hdr.IPv4FlagMoreFragments != 0 {
		fh = fragHdrLen
	}
	ql4 := q[qhl:]
	n := min(len(ql4), minMTU6-icmp6ErrorHeader-hdr.IPv6Len-fh) // even when it cuts
	pre := quotedPrefix(c.Proto, n)
	csum := icmp.Checksum()
	// What changes, summed before: the ICMP header (its checksum aside),
	// the quoted IPv4 header, the quoted ports and checksum, what is cut.
	// Each piece starts at an even offset of the message.
	old := hdr.Checksum(icmp[0:2], 0)
	old = hdr.Checksum(icmp[4:8], old)
	old = hdr.Checksum(q[:qhl], old)
	old = hdr.Checksum(ql4[:pre], old)
	old = hdr.Checksum(ql4[n:], old)
	if c.Proto == hdr.ProtoTCP && x.SeqIn != 0 { // back into the client's numbering (PROXY v2)
		q := hdr.TCP(ql4) // seq only: a quote may hold no more
		q.SetSeq(hdr.UnshiftSeq(q.Seq(), x.SeqIn, x.ClientISN+1))
	}
	natQuoted64(ql4[:pre], c.Proto, c.ClientPort, c.VPort, true, a, x.LIP, c.RIP)
	ttl, tos := ip.TTL()-1, ip.TOS()
	qtos, qttl, qid := q.TOS(), q.TTL(), q.ID()
	m := d.m
	at := int(d.l4) + hdr.ICMPLen + qhl // the quoted transport header, in the frame
	to := l3 + icmp6ErrorHeader + hdr.IPv6Len + fh
	if why := moveFrameStart(m, at-to); why != 0 {
		return drop(why)
	}
	if m.SetLen(to+n) != nil {
		return drop(DropBadICMP)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv6)
	ip6 := hdr.IPv6(data[l3:])
	ip6.Encode(uint16(to+n-l3-hdr.IPv6Len), hdr.ProtoICMPv6, ttl, a.VIP, a.Client)
	ip6[0], ip6[1] = 6<<4|tos>>4, tos<<4
	msg := hdr.ICMP(data[l3+hdr.IPv6Len : to+n])
	msg[0], msg[1] = typ, code
	binary.BigEndian.PutUint32(msg[4:], word)
	qip := hdr.IPv6(msg[hdr.ICMPLen:])
	if fh == 0 {
		qip.Encode(size-uint16(qhl), c.Proto, qttl, a.Client, a.VIP)
	} else { // a first fragment (RFC 7915 4.1): the IPv4 ID zero-extended
		qip.Encode(size-uint16(qhl)+fragHdrLen, hdr.ExtFragment, qttl, a.Client, a.VIP)
		frag := qip[hdr.IPv6Len : hdr.IPv6Len+fragHdrLen]
		frag[0], frag[1] = c.Proto, 0
		binary.BigEndian.PutUint16(frag[2:], 1) // offset 0, more fragments
		binary.BigEndian.PutUint32(frag[4:], uint32(qid))
	}
	qip[0], qip[1] = 6<<4|qtos>>4, qtos<<4
	// After: the same pieces rewritten, and ICMPv6's pseudo-header.
	sum := hdr.PseudoHeaderSum6(a.VIP, a.Client, hdr.ProtoICMPv6, uint32(len(msg)))
	sum = hdr.Checksum(msg[0:2], sum)
	sum = hdr.Checksum(msg[4:8], sum)
	sum = hdr.Checksum(msg[hdr.ICMPLen:hdr.ICMPLen+hdr.IPv6Len+fh], sum)
	sum = hdr.Checksum(ql4[:pre], sum)
	msg.SetChecksum(hdr.UpdateBlock(csum, old, sum))
	m.SetOlFlags(0)
	w.cnt.own[ICMPErrors]++
	return e
}

// icmpError46 translates an ICMPv6 error from a NAT64 connection's client
// side, about a packet lbd sent (VIP:vport -> client:cport; q, its quote),
// into the ICMPv4 error the server gets from the LIP about the packet it
// sent (RIP:rport -> LIP:lport): [eth][IPv4 LIP -> RIP][ICMP][IPv4 header
// (a first fragment's fields when the quote has a fragment header)][the
// quoted transport bytes]. The quoted extension headers are dropped.
func (w *Worker) icmpError46(d *desc, c *conn.Conn, id uint32, q quote6) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	ip6 := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	size := hdr.IPv6Len + int(q.ip.PayloadLength())
	l4len := size - q.ext.Off // the refused packet's transport length
	if l4len < 8 || hdr.IPv4MinLen+l4len > 0xffff {
		return drop(DropBadICMP)
	}
	typ, code, word, why := icmp6To4(icmp.Type(), icmp.Code(), binary.BigEndian.Uint32(icmp[4:]), size)
	if why != 0 {
		return drop(why)
	}
	e := w.route(c.RIP)
	if e.kind != exitTransmit {
		return e
	}
	ql4 := q.l4
	pre := quotedPrefix(c.Proto, len(ql4))
	csum := icmp.Checksum()
	// What changes, summed before: the pseudo-header, the ICMPv6 header
	// (its checksum aside), the quoted IPv6 header and its extension
	// headers (8-byte units), the quoted ports and checksum.
	old := hdr.PseudoHeaderSum6(ip6.Src(), ip6.Dst(), hdr.ProtoICMPv6, uint32(len(icmp)))
	old = hdr.Checksum(icmp[0:2], old)
	old = hdr.Checksum(icmp[4:8], old)
	old = hdr.Checksum(q.ip[:q.ext.Off], old)
	old = hdr.Checksum(ql4[:pre], old)
	if c.Proto == hdr.ProtoTCP && x.SeqOut != 0 { // back into the server's numbering (a SYN proxy)
		q := hdr.TCP(ql4) // seq only, as icmpError64
		q.SetSeq(q.Seq() - x.SeqOut)
	}
	natQuoted64(ql4[:pre], c.Proto, c.RPort, x.LPort, false, a, x.LIP, c.RIP)
	hop, tc := ip6.HopLimit()-1, ip6.TrafficClass()
	qf := hdr.IPv4Fields{
		TOS: q.ip.TrafficClass(), TotalLength: uint16(hdr.IPv4MinLen + l4len), Flags: hdr.IPv4FlagDontFragment,
		TTL: q.ip.HopLimit(), Protocol: c.Proto, Src: c.RIP, Dst: x.LIP,
	}
	if q.ext.Fragment { // a first fragment (RFC 7915 5.1.1)
		qf.ID, qf.Flags = uint16(q.ext.FragID), 0
		if q.ext.MoreFrags {
			qf.Flags = hdr.IPv4FlagMoreFragments
		}
	}
	m := d.m
	at := int(d.l4) + q.off + q.ext.Off // the quoted transport header, in the frame
	to := l3 + 2*hdr.IPv4MinLen + hdr.ICMPLen
	n := len(ql4)
	if why := moveFrameStart(m, at-to); why != 0 {
		return drop(why)
	}
	if m.SetLen(to+n) != nil {
		return drop(DropBadICMP)
	}
	data := m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv4)
	hdr.IPv4(data[l3:]).Encode(&hdr.IPv4Fields{
		TOS: tc, TotalLength: uint16(to + n - l3), ID: w.ipID, TTL: hop, Protocol: hdr.ProtoICMP, Src: x.LIP, Dst: c.RIP,
	})
	w.ipID++
	msg := hdr.ICMP(data[l3+hdr.IPv4MinLen : to+n])
	msg[0], msg[1] = typ, code
	binary.BigEndian.PutUint32(msg[4:], word)
	hdr.IPv4(msg[hdr.ICMPLen:]).Encode(&qf)
	sum := hdr.Checksum(msg[0:2], 0)
	sum = hdr.Checksum(msg[4:8], sum)
	sum = hdr.Checksum(msg[hdr.ICMPLen:hdr.ICMPLen+hdr.IPv4MinLen], sum)
	sum = hdr.Checksum(ql4[:pre], sum)
	msg.SetChecksum(hdr.UpdateBlock(csum, old, sum))
	m.SetOlFlags(0)
	w.cnt.own[ICMPErrors]++
	return e
}
