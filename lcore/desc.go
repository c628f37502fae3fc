package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// The packet descriptor. Every received packet is parsed and validated
// once, into a desc in the worker's per-burst array; steering, the
// connection lookup, the state machine and the rewrites read the desc and
// the header views it locates, never the raw bytes again. A burst is
// parsed whole before any packet of it is processed, the shape a batched
// pipeline (prefetch the lookups of the burst, then rewrite) builds on.

// class says what a parsed packet is, and so which stage takes it.
type class uint8

const (
	classInvalid     class = iota // dropped: desc.verdict says why
	classFlow                     // TCP or UDP: a connection's packet
	classEcho                     // ICMP echo request: flow has the identifier as its source port
	classICMPError                // ICMP error quoting a TCP or UDP packet
	classTunnelError              // ICMP error quoting an IPIP packet (VS/TUN); flow is the inner packet's
	classARP                      // a valid Ethernet/IPv4 ARP packet
	classFragment                 // a TCP or UDP fragment past the first: flow has no ports (frag.go)
	classND6                      // an IPv6 neighbour solicitation or advertisement that passed RFC 4861's checks (nd6.go)
	classEcho6                    // an ICMPv6 echo request (nd6.go)
	classFlow6                    // TCP or UDP over IPv6: flow has ports and protocol, addresses 0 (packet6.go)
	classFragment6                // an IPv6 TCP or UDP fragment past the first: flow has the protocol only (frag6.go)
	classICMPError6               // an ICMPv6 error quoting an IPv6 TCP or UDP packet: flow has its ports and protocol (icmp6err.go)
	classTunError6                // an ICMPv6 error quoting our IPv6-in-IPv6 packet: flow is the inner packet's (tunerr6.go)
	classEchoReply                // an ICMP echo reply: a SNAT'd ping's (flow has the identifier as its destination port), an ICMP probe's answer, or dropped (probe.go)
	classEchoReply6               // an ICMPv6 echo reply, likewise
)

// flowKey is a TCP or UDP packet's addresses and ports as it travels (an
// ICMP echo's identifier is a port: snat.go).
type flowKey struct {
	src, dst     uint32
	sport, dport uint16
	proto        uint8
}

// reverse is the key of the packets going the other way.
func (k flowKey) reverse() flowKey {
	return flowKey{src: k.dst, dst: k.src, sport: k.dport, dport: k.sport, proto: k.proto}
}

// desc is one received packet, parsed.
type desc struct {
	m       *mbuf.Mbuf
	in      int // index of the port it arrived on
	class   class
	verdict Stat    // classInvalid: the drop reason
	flags   uint8   // TCP flags (classFlow)
	frag    uint8   // fragNone, fragFirst (classFlow, with its ports) or fragLater (classFragment)
	l4      uint16  // offset of the transport (or ICMP) header in the frame
	flow    flowKey // classFlow: the packet's flow; classICMPError: the quoted packet's
	owner   int     // the worker that processes it (set by steering; -1: here)
	// svc is a SYN's service index + 1 as the lookup stage found it in
	// the snapshot the burst is processed with (0: not looked up).
	svc int32
	// hash is the flow key's index hash as the lookup stage computed it
	// (hashed: it did), so neither the lookup nor a new connection's
	// insertion hashes the key again.
	hash   uint32
	hashed bool
	// cookie: a bare SYN to a SYN-proxied service, which the lookup stage
	// found and which is answered with a cookie before any lookup
	// (synproxy.go).
	cookie bool
	// steered: handed over by a steering entry (steerentry.go); this
	// worker holds its connection.
	steered bool
}

// l3 is the IPv4 header's offset: the dataplane sees untagged Ethernet.
const l3 = hdr.EthernetLen

func (d *desc) eth() hdr.Ethernet { return hdr.Ethernet(d.m.Data()) }

// ip views the IPv4 header and what follows it (to the end of the frame).
func (d *desc) ip() hdr.IPv4 { return hdr.IPv4(d.m.Data()[l3:]) }

// l4Bytes views the transport segment (IPv4 payload, without padding).
func (d *desc) l4Bytes() []byte { return d.ip().Payload() }

// quotedIP views the IPv4 header an ICMP error quotes, and what follows.
func (d *desc) quotedIP() hdr.IPv4 { return hdr.IPv4(hdr.ICMP(d.l4Bytes()).Payload()) }

func (d *desc) invalid(why Stat) { d.class, d.verdict = classInvalid, why }

// parse fills d from a received packet: every check the dataplane makes
// of a packet's headers is here, once.
func parse(d *desc, m *mbuf.Mbuf, in int) {
	*d = desc{m: m, in: in, owner: -1}
	if m.NbSegs() != 1 {
		d.invalid(DropMultiSegment)
		return
	}
	eth := hdr.Ethernet(m.Data())
	if !eth.IsValid() {
		d.invalid(DropBadEthernet)
		return
	}
	switch eth.EtherType() {
	case hdr.EtherTypeIPv4:
	case hdr.EtherTypeARP:
		if !hdr.ARP(eth.Payload()).IsValid() {
			d.invalid(DropBadARP)
			return
		}
		d.class = classARP
		return
	case hdr.EtherTypeIPv6:
		parse6(d, eth)
		return
	default:
		d.invalid(DropNotIPv4)
		return
	}
	ip := hdr.IPv4(eth.Payload())
	if !ip.IsValid(len(ip)) {
		d.invalid(DropBadIPv4)
		return
	}
	// Trust the NIC's verdict when it gives one; check in software otherwise.
	switch fl := m.OlFlags(); {
	case fl&mbuf.RxIPCksumBad == mbuf.RxIPCksumBad && fl&mbuf.RxIPCksumGood != mbuf.RxIPCksumGood:
		d.invalid(DropBadIPChecksum)
		return
	case fl&mbuf.RxIPCksumGood != 0 && fl&mbuf.RxIPCksumBad == 0:
	default:
		if !ip.IsChecksumValid() {
			d.invalid(DropBadIPChecksum)
			return
		}
	}
	d.l4 = uint16(l3 + ip.HeaderLen())
	d.flow = flowKey{src: ip.Src(), dst: ip.Dst(), proto: ip.Protocol()}
	if ip.IsFragment() {
		if !parseFragment(d, ip) {
			return
		}
		if d.frag == fragLater {
			d.class = classFragment
			return
		}
	}
	switch d.flow.proto {
	case hdr.ProtoTCP:
		tcp := hdr.TCP(ip.Payload())
		if !tcp.IsValid() {
			d.invalid(DropBadL4)
			return
		}
		d.flow.sport, d.flow.dport, d.flags = tcp.SrcPort(), tcp.DstPort(), tcp.Flags()
		d.class = classFlow
	case hdr.ProtoUDP:
		udp := hdr.UDP(ip.Payload())
		// A first fragment holds the header, not the whole Length.
		if !udp.IsValid() && (d.frag == fragNone || len(udp) < hdr.UDPLen) {
			d.invalid(DropBadL4)
			return
		}
		d.flow.sport, d.flow.dport = udp.SrcPort(), udp.DstPort()
		d.class = classFlow
	case hdr.ProtoICMP:
		parseICMP(d, hdr.ICMP(ip.Payload()))
	default:
		d.invalid(DropUnsupportedProto)
	}
}

// parseFragment checks a fragment of a TCP or UDP datagram and sets
// d.frag; false (d invalid) for what is dropped: fragments of other
// protocols, fragments whose data is not a multiple of 8 bytes but more
// follow, a first fragment without the whole transport header (RFC 1858's
// tiny fragments), a TCP fragment at offset 8 (which could rewrite the
// first one's flags), or one reaching past 65535 bytes.
func parseFragment(d *desc, ip hdr.IPv4) bool {
	proto := d.flow.proto
	if proto != hdr.ProtoTCP && proto != hdr.ProtoUDP {
		d.invalid(DropFragment)
		return false
	}
	off, n := int(ip.FragmentOffset()), len(ip.Payload())
	more := ip.Flags()&hdr.IPv4FlagMoreFragments != 0
	switch {
	case ip.HeaderLen()+off+n > 0xffff:
		d.invalid(DropFragOversize)
		return false
	case more && n%8 != 0, off == 8 && proto == hdr.ProtoTCP:
		d.invalid(DropBadFragment)
		return false
	case off == 0:
		if proto == hdr.ProtoTCP && !hdr.TCP(ip.Payload()).IsValid() {
			d.invalid(DropBadFragment)
			return false
		}
		if proto == hdr.ProtoUDP && n < hdr.UDPLen {
			d.invalid(DropBadFragment)
			return false
		}
		d.frag = fragFirst
	default:
		d.frag = fragLater
	}
	return true
}

// parseICMP classifies an ICMP message; for an error it checks the quoted
// packet once (a whole IPv4 header and the 8 bytes with the ports) and
// keeps its flow. When the quoted packet is IPIP (one of our VS/TUN
// packets), the same checks apply to the inner packet it carries.
func parseICMP(d *desc, icmp hdr.ICMP) {
	if !icmp.IsValid() {
		d.invalid(DropBadICMP)
		return
	}
	switch t := icmp.Type(); {
	case t == hdr.ICMPEchoRequest:
		// The identifier stands in for the querier's port, the answer's
		// destination port (a SNAT rule's ping, snat.go).
		d.flow.sport = icmp.ID()
		d.class = classEcho
		return
	case t == hdr.ICMPEchoReply:
		d.flow.dport = icmp.ID()
		d.class = classEchoReply
		return
	case !hdr.IsICMPError(t):
		d.invalid(DropICMPType)
		return
	}
	q := hdr.IPv4(icmp.Payload())
	if len(icmp) < hdr.ICMPErrorMinLen || q[0]>>4 != 4 || q.HeaderLen() < hdr.IPv4MinLen || len(q) < q.HeaderLen()+8 {
		d.invalid(DropBadICMP)
		return
	}
	class := classICMPError
	if q.Protocol() == hdr.ProtoIPIP {
		// About a packet we sent a real server in IPIP: the connection is
		// the inner packet's, if the quote holds its header and ports.
		if q.FragmentOffset() != 0 {
			d.invalid(DropBadICMP)
			return
		}
		q = hdr.IPv4(q[q.HeaderLen():])
		if len(q) < hdr.IPv4MinLen || q[0]>>4 != 4 || q.HeaderLen() < hdr.IPv4MinLen || len(q) < q.HeaderLen()+8 {
			d.invalid(DropBadICMP) // truncated quote: no connection to name
			return
		}
		class = classTunnelError
	}
	proto := q.Protocol()
	if proto == hdr.ProtoICMP && class == classICMPError && q.FragmentOffset() == 0 &&
		hdr.ICMP(q[q.HeaderLen():]).Type() == hdr.ICMPEchoRequest {
		// About a ping a SNAT rule sent on (a router's time exceeded for
		// traceroute -I and mtr, an unreachable): its identifier is its
		// source port, as the ping's own (snat.go).
		d.flow = flowKey{src: q.Src(), dst: q.Dst(), sport: hdr.ICMP(q[q.HeaderLen():]).ID(), proto: proto}
		d.class = class
		return
	}
	if proto != hdr.ProtoTCP && proto != hdr.ProtoUDP {
		d.invalid(DropNoConn)
		return
	}
	ql4 := hdr.UDP(q[q.HeaderLen():]) // the ports sit alike in TCP and UDP
	d.flow = flowKey{src: q.Src(), dst: q.Dst(), sport: ql4.SrcPort(), dport: ql4.DstPort(), proto: proto}
	d.class = class
}
