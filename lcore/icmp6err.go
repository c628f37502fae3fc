package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// ICMPv6 errors (RFC 4443): those about a connection through lbd are
// translated (NAT66) or passed on (DR, TUN) as ICMP errors are for IPv4
// (icmp.go, tunerr.go); those lbd sends (Packet Too Big for a packet that
// does not fit a tunnel, Time Exceeded when the hop limit runs out) quote
// as much of the packet as fits in 1280 bytes and are rate-limited per
// worker, and never answer an ICMPv6 error.

// minMTU6 is IPv6's minimum link MTU (RFC 8200 section 5): what an ICMPv6
// error may fill, and the lowest Packet Too Big MTU believed.
const minMTU6 = 1280

// icmp6ErrorHeader is what an error adds in front of the packet it
// quotes: an IPv6 header and the ICMPv6 header.
const icmp6ErrorHeader = hdr.IPv6Len + hdr.ICMPLen

// quote6 is the packet an ICMPv6 error quotes, located: its IPv6 header
// (ip, the inner one when the quote is one of our IPv6-in-IPv6 packets,
// whose header is then outer), its transport header's first bytes (l4,
// at least the 8 with the ports) and protocol.
type quote6 struct {
	outer, ip hdr.IPv6
	l4        []byte
	proto     uint8
	off       int      // ip's offset in the ICMPv6 message
	ext       hdr.Ext6 // ip's extension headers, walked: l4's offset, a first fragment's fields
}

// parseQuote6 locates the packet an ICMPv6 error message quotes; a drop
// reason when the quote does not name a TCP or UDP connection: a quote
// too short for the ports or cut inside its extension headers, a later
// fragment (no ports), another protocol.
func parseQuote6(icmp hdr.ICMP) (q quote6, why Stat) {
	if len(icmp) < hdr.ICMPLen {
		return q, DropBadICMP
	}
	ip, x, why := walkQuote6(icmp[hdr.ICMPLen:])
	if why != 0 {
		return q, why
	}
	q.off = hdr.ICMPLen
	if x.Proto == hdr.ProtoIPv6 {
		q.outer, q.off = ip, q.off+x.Off
		if ip, x, why = walkQuote6(ip[x.Off:]); why != 0 {
			return q, why
		}
	}
	if x.Proto != hdr.ProtoTCP && x.Proto != hdr.ProtoUDP {
		return q, DropNoConn
	}
	if len(ip) < x.Off+8 {
		return q, DropBadICMP
	}
	q.ip, q.l4, q.proto, q.ext = ip, ip[x.Off:], x.Proto, x
	return q, 0
}

// walkQuote6 checks a quoted IPv6 header and walks its extension headers
// within the quote; a later fragment has no transport header to find.
func walkQuote6(b []byte) (hdr.IPv6, hdr.Ext6, Stat) {
	ip := hdr.IPv6(b)
	if len(ip) < hdr.IPv6Len || ip[0]>>4 != 6 {
		return nil, hdr.Ext6{}, DropBadICMP
	}
	x, v := ip.WalkExtQuote()
	if v == hdr.ExtUnknown && x.Proto == hdr.ProtoIPv6 {
		v = hdr.ExtOK // not a header the walk follows, but one the caller does
	}
	if v != hdr.ExtOK || x.Fragment && x.FragOffset != 0 {
		return nil, hdr.Ext6{}, DropBadICMP
	}
	return ip, x, 0
}

// natICMPv6Error translates, in place, an ICMPv6 error (ip, its message
// icmp, the quote q) about a NAT66 connection's packet. toServer: it came
// from the client's side about a packet the client got from VIP:vport, so
// the outer destination and the quoted source become addr:port (the real
// server's); otherwise it came from the real server's side about a packet
// lbd sent it, and the outer source and the quoted destination become
// addr:port (the VIP's). The quoted transport checksum, where the quote
// holds it, and the ICMPv6 checksum are updated for what changes (RFC
// 1624), not recomputed: one that was wrong on arrival stays wrong.
func natICMPv6Error(ip hdr.IPv6, icmp hdr.ICMP, q quote6, toServer bool, addr hdr.Addr6, port uint16) {
	csum := icmp.Checksum()
	var oldOuter, oldQuoted hdr.Addr6
	portOff := 2
	if toServer {
		oldOuter, oldQuoted, portOff = ip.Dst(), q.ip.Src(), 0
		ip.SetDst(addr)
		q.ip.SetSrc(addr)
	} else {
		oldOuter, oldQuoted = ip.Src(), q.ip.Dst()
		ip.SetSrc(addr)
		q.ip.SetDst(addr)
	}
	// The outer address counts through the pseudo-header; the quoted
	// one, its port and transport checksum sit at even offsets of the
	// message: each is one RFC 1624 update.
	csum = hdr.UpdateAddr6(csum, oldOuter, addr)
	csum = hdr.UpdateAddr6(csum, oldQuoted, addr)
	oldPort := binary.BigEndian.Uint16(q.l4[portOff:])
	binary.BigEndian.PutUint16(q.l4[portOff:], port)
	csum = hdr.Update16(csum, oldPort, port)
	sumOff := 6 // UDP's checksum, within the 8 bytes every quote holds
	if q.proto == hdr.ProtoTCP {
		sumOff = 16
	}
	if len(q.l4) >= sumOff+2 {
		old := binary.BigEndian.Uint16(q.l4[sumOff:])
		if old != 0 || q.proto == hdr.ProtoTCP { // a UDP 0 is no checksum
			c := hdr.Update16(hdr.UpdateAddr6(old, oldQuoted, addr), oldPort, port)
			if c == 0 && q.proto == hdr.ProtoUDP {
				c = 0xffff
			}
			binary.BigEndian.PutUint16(q.l4[sumOff:], c)
			csum = hdr.Update16(csum, old, c)
		}
	}
	icmp.SetChecksum(csum)
}

// unshiftQuotedSeq6 takes delta off the seq of the TCP segment quoted by
// the ICMPv6 error icmp, keeping the quoted TCP checksum (where the quote
// holds it) and the ICMPv6 one right. The seq sits at an even offset of
// the message: one RFC 1624 update each.
func unshiftQuotedSeq6(icmp hdr.ICMP, q quote6, delta uint32) {
	old := binary.BigEndian.Uint32(q.l4[4:])
	seq := old - delta
	binary.BigEndian.PutUint32(q.l4[4:], seq)
	csum := hdr.Update32(icmp.Checksum(), old, seq)
	if len(q.l4) >= 18 {
		oldSum := binary.BigEndian.Uint16(q.l4[16:])
		sum := hdr.Update32(oldSum, old, seq)
		binary.BigEndian.PutUint16(q.l4[16:], sum)
		csum = hdr.Update16(csum, oldSum, sum)
	}
	icmp.SetChecksum(csum)
}

// icmp6ToSender turns the IPv6 packet d, in place, into an ICMPv6 error
// (typ, code, and the 32-bit word after the checksum: Packet Too Big's
// MTU, Parameter Problem's pointer) from the address from to the packet's
// source, and sends it back out of the port it came in on, to the MAC it
// came from. The error quotes as much of the packet as fits in 1280 bytes
// (RFC 4443 section 2.4). Not sent, and the packet dropped as unsent, when
// the worker's ICMPv6 budget is spent or the source names no single host
// (unspecified, multicast); the caller never passes an ICMPv6 error.
func (w *Worker) icmp6ToSender(d *desc, typ, code uint8, word uint32, from hdr.Addr6, sent, unsent Stat) exit {
	m, ip := d.m, d.ip6()
	sender, senderMAC := ip.Src(), d.eth().Src()
	if sender.IsUnspecified() || sender.IsMulticast() || from.IsUnspecified() ||
		!w.icmp6Bucket.take(w.now, timeExceededCost, timeExceededBurst) {
		return drop(unsent)
	}
	quoted := min(hdr.IPv6Len+int(ip.PayloadLength()), minMTU6-icmp6ErrorHeader)
	if _, err := m.Prepend(icmp6ErrorHeader); err != nil {
		return drop(DropNoHeadroom)
	}
	data := m.Data()
	// [header room][eth][IPv6 ...] -> [eth][IPv6][ICMPv6][the packet, cut]
	copy(data[:hdr.EthernetLen], data[icmp6ErrorHeader:icmp6ErrorHeader+hdr.EthernetLen])
	n := icmp6ErrorHeader + quoted
	if err := m.SetLen(hdr.EthernetLen + n); err != nil {
		return drop(DropBadIPv6)
	}
	data = m.Data()
	hdr.IPv6(data[l3:]).Encode(uint16(hdr.ICMPLen+quoted), hdr.ProtoICMPv6, hdr.DefaultTTL, from, sender)
	msg := hdr.ICMP(data[l3+hdr.IPv6Len : l3+n])
	msg.SetType(typ)
	msg.SetCode(code)
	binary.BigEndian.PutUint32(msg[4:], word)
	msg.SetChecksum(hdr.TransportChecksum6(from, sender, hdr.ProtoICMPv6, msg))
	m.SetOlFlags(0)
	w.cnt.own[sent]++
	return transmit(d.in, senderMAC)
}

// parseICMPv6Error classifies an ICMPv6 error by the packet it quotes:
// classICMPError6 (or classTunError6 when the quote is one of our
// IPv6-in-IPv6 packets, flow then the inner packet's) with the quoted
// ports and protocol; the addresses are read again where the error is
// handled.
func parseICMPv6Error(d *desc, icmp hdr.ICMP) {
	q, why := parseQuote6(icmp)
	if why != 0 {
		d.invalid(why)
		return
	}
	d.flow = flowKey{sport: binary.BigEndian.Uint16(q.l4), dport: binary.BigEndian.Uint16(q.l4[2:]), proto: q.proto}
	d.class = classICMPError6
	if q.outer != nil {
		d.class = classTunError6
	}
}

// ownerQuote6 is ownerOf for an ICMPv6 error: the client's endpoint in
// the quoted packet, which left towards the client (source a VIP) or
// towards a real server (source the client); our IPv6-in-IPv6 packet's
// inner one came from the client.
func (w *Worker) ownerQuote6(d *desc) int {
	if w.vips6 == nil {
		return -1
	}
	q, _ := parseQuote6(hdr.ICMP(d.l4Bytes6()))
	src := q.ip.Src()
	if _, fromVIP := w.vips6[src]; fromVIP && d.class == classICMPError6 {
		dst := q.ip.Dst()
		return Owner6(&dst, d.flow.dport, w.nworkers)
	}
	return Owner6(&src, d.flow.sport, w.nworkers)
}

// icmpError6 delivers an ICMPv6 error about a tracked connection, as
// icmpError does for IPv4: the quoted packet left the balancer (or a
// real server, for DR and TUN), so its reverse is the connection's key.
// NAT66 translates it (natICMPv6Error); DR and TUN pass it to the real
// server unchanged. An error whose hop limit runs out is dropped, never
// answered.
func (w *Worker) icmpError6(d *desc) exit {
	ip := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	q, _ := parseQuote6(icmp)
	qsrc, qdst := q.ip.Src(), q.ip.Dst()
	k := &d.flow
	if k.proto == hdr.ProtoUDP && isProbePort(k.sport) && w.snap.isLocal6(qsrc) && icmp.Type() == hdr.ICMPv6DestUnreachable {
		return w.probeUnreachable(d, 0, &qdst, k.dport, k.sport) // about a UDP probe of ours
	}
	id, dir, ok := w.table.Lookup6(k.proto, &qdst, k.dport, &qsrc, k.sport)
	if !ok {
		if w.snap.isLocal6(ip.Dst()) {
			return drop(DropToLocal) // about the kernel's traffic, maybe
		}
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	if c.Flags&flagSteer != 0 {
		return w.steer(d, c) // about a packet lbd sent an FNAT66 server, for the worker holding its connection
	}
	if ip.HopLimit() <= 1 {
		return drop(DropTTLExpired)
	}
	a := w.table.Addrs6(id)
	if c.Fwd != fwd.FullNAT {
		w.cnt.own[ICMPErrors]++
	}
	switch c.Fwd {
	case fwd.NAT:
	case fwd.FullNAT:
		if isFNAT66(a) {
			return w.icmpErrorFNAT66(d, c, id, dir, q)
		}
		// NAT64: about a packet lbd sent the client (its original key)
		return w.icmpError46(d, c, id, q)
	case fwd.TUN:
		return w.encapsulate6(d, &a.RIP)
	default:
		ip.SetHopLimit(ip.HopLimit() - 1)
		d.m.SetOlFlags(0)
		return w.route6(&a.RIP)
	}
	towards := &a.RIP
	if dir == conn.Original {
		natICMPv6Error(ip, icmp, q, true, a.RIP, c.RPort)
		if c.Flags&flagSeqAdj != 0 && q.proto == hdr.ProtoTCP {
			// A proxied handshake: the server numbers its bytes from its
			// own ISN, and checks that an error's quoted seq is its own.
			if x := w.table.Ext(id); x != nil && x.SeqOut != 0 {
				unshiftQuotedSeq6(icmp, q, x.SeqOut)
			}
		}
	} else {
		natICMPv6Error(ip, icmp, q, false, a.VIP, c.VPort)
		towards = &a.Client
	}
	ip.SetHopLimit(ip.HopLimit() - 1)
	d.m.SetOlFlags(0)
	return w.route6(towards)
}

// timeExceeded6 answers a TCP or UDP packet whose hop limit runs out here
// with an ICMPv6 Time Exceeded from the receiving port's IPv6 address
// (none: dropped as ttl_expired, as when the budget is spent).
func (w *Worker) timeExceeded6(d *desc) exit {
	return w.icmp6ToSender(d, hdr.ICMPv6TimeExceeded, 0, 0, w.snap.Ports[d.in].Addr6, ICMPv6HopLimit, DropTTLExpired)
}
