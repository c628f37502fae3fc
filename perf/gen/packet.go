package gen

import (
	"encoding/binary"
	"fmt"

	"github.com/dplb/dplb/lcore/hdr"
)

// Pattern is the kind of traffic the client side sends.
type Pattern int

// The traffic patterns.
const (
	// Established opens every flow once (SYN, answered by a SYN-ACK) and
	// then sends data segments (ACK|PSH) round-robin over the flows.
	Established Pattern = iota
	// Connect sends SYN, one data segment and FIN for each flow in turn:
	// the new-connection workload.
	Connect
	// UDP sends datagrams round-robin over the flows.
	UDP
	// SYN sends only SYNs, each from the next client address and port of
	// the whole client space (-clients x -client-ports), wrapping around:
	// every packet a new connection for the balancer while the space lasts.
	SYN
)

func (p Pattern) String() string {
	switch p {
	case Established:
		return "established"
	case Connect:
		return "syn-data-fin"
	case UDP:
		return "udp"
	case SYN:
		return "syn"
	}
	return fmt.Sprintf("pattern(%d)", int(p))
}

// ParsePattern reads a pattern name as String writes it.
func ParsePattern(s string) (Pattern, error) {
	for _, p := range []Pattern{Established, Connect, UDP, SYN} {
		if p.String() == s {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown pattern %q (want established, syn-data-fin, syn or udp)", s)
}

// Frame layout. Every packet the generator sends carries a 32-bit sequence
// number and the low 32 bits of its send time in nanoseconds: for TCP in
// the sequence and acknowledgement fields (so 60-byte frames, 64 on the wire
// with the FCS, still carry them), for UDP in the first 8 bytes of the
// payload. A server answering TCP swaps the two fields, as a reply's seq/ack
// would be, so the client finds them swapped in the reply.
const (
	ipOff     = hdr.EthernetLen
	l4Off     = ipOff + hdr.IPv4MinLen
	tcpEnd    = l4Off + hdr.TCPMinLen // 54
	udpEnd    = l4Off + hdr.UDPLen    // 42
	stampLen  = 8
	MinFrame  = 60   // Ethernet minimum without FCS
	MaxFrame  = 1514 // Ethernet MTU frame without FCS
	tcpWindow = 65535
)

// Builder writes the client side's packets from a template: only the
// source address and port, the flags and the stamp change from packet to
// packet, so the checksums are the template's sums plus those fields.
//
// The same builder writes IPv6 frames (NewBuilder6): the client address
// that changes is then the low 32 bits of an IPv6 address, whose other 96
// bits are in the template, and there is no IP header checksum.
type Builder struct {
	tmpl   []byte
	proto  uint8
	six    bool
	srcOff int    // the (low 32 bits of the) source address
	l4     int    // the TCP or UDP header
	ipSum  uint32 // IPv4 header sum with source 0 and checksum 0
	l4Sum  uint32 // pseudo-header + L4 header + payload with source, port, stamp, flags 0
	frame  int
	srcMAC hdr.MAC
}

// NewBuilder prepares frames of size bytes (without FCS, MinFrame..MaxFrame)
// from srcMAC to dstMAC for vip:vport, TCP or UDP.
func NewBuilder(proto uint8, size int, srcMAC, dstMAC hdr.MAC, vip uint32, vport uint16) (*Builder, error) {
	b, err := newBuilder(proto, size, l4Off, srcMAC, dstMAC, hdr.EtherTypeIPv4, vport)
	if err != nil {
		return nil, err
	}
	t := b.tmpl
	ip := hdr.IPv4(t[ipOff:])
	ip.Encode(&hdr.IPv4Fields{TotalLength: uint16(size - ipOff), Flags: hdr.IPv4FlagDontFragment,
		TTL: hdr.DefaultTTL, Protocol: proto, Dst: vip})
	ip.SetChecksum(0) // Build adds the source and the checksum per packet
	b.srcOff = ipOff + 12
	b.ipSum = hdr.Checksum(t[ipOff:l4Off], 0)
	b.l4Sum = hdr.Checksum(t[l4Off:], hdr.PseudoHeaderSum(0, vip, proto, uint16(size-l4Off)))
	return b, nil
}

// newBuilder checks the protocol and size and writes the template's
// Ethernet header, L4 header (l4 bytes in) and payload; the IP header and
// the sums are the caller's.
func newBuilder(proto uint8, size, l4 int, srcMAC, dstMAC hdr.MAC, etherType uint16, vport uint16) (*Builder, error) {
	end := l4 + hdr.TCPMinLen
	if proto == hdr.ProtoUDP {
		end = l4 + hdr.UDPLen + stampLen
	} else if proto != hdr.ProtoTCP {
		return nil, fmt.Errorf("protocol %d: want TCP or UDP", proto)
	}
	if lo := max(MinFrame, end); size < lo || size > MaxFrame {
		return nil, fmt.Errorf("frame size %d: want %d..%d bytes (without FCS)", size, lo, MaxFrame)
	}
	b := &Builder{tmpl: make([]byte, size), proto: proto, l4: l4, frame: size, srcMAC: srcMAC}
	t := b.tmpl
	eth := hdr.Ethernet(t)
	eth.SetDst(dstMAC)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(etherType)
	// A recognisable payload after the headers.
	for i := end; i < size; i++ {
		t[i] = byte(i)
	}
	if proto == hdr.ProtoTCP {
		tcp := hdr.TCP(t[l4:])
		tcp.SetDstPort(vport)
		tcp.SetDataOffset(hdr.TCPMinLen)
		tcp.SetWindow(tcpWindow)
		tcp.SetFlags(0)
	} else {
		u := hdr.UDP(t[l4:])
		u.SetDstPort(vport)
		u.SetLength(uint16(size - l4))
	}
	return b, nil
}

// Size is the frame length.
func (b *Builder) Size() int { return b.frame }

// Build writes one frame into p (len(p) >= Size) for the flow src:sport:
// TCP flags (ignored for UDP), the sequence number and the send stamp.
// It does not allocate.
func (b *Builder) Build(p []byte, src uint32, sport uint16, flags uint8, seq, stamp uint32) {
	copy(p, b.tmpl)
	binary.BigEndian.PutUint32(p[b.srcOff:], src)
	srcSum := src>>16 + src&0xffff
	if !b.six {
		binary.BigEndian.PutUint16(p[ipOff+10:], ^hdr.Fold(b.ipSum+srcSum))
	}
	l4 := b.l4
	binary.BigEndian.PutUint16(p[l4:], sport)
	sum := b.l4Sum + srcSum + uint32(sport) + seq>>16 + seq&0xffff + stamp>>16 + stamp&0xffff
	if b.proto == hdr.ProtoTCP {
		binary.BigEndian.PutUint32(p[l4+4:], seq)
		binary.BigEndian.PutUint32(p[l4+8:], stamp)
		p[l4+13] = flags
		sum += uint32(flags) // low byte of the data offset/flags word
		binary.BigEndian.PutUint16(p[l4+16:], ^hdr.Fold(sum))
		return
	}
	u := l4 + hdr.UDPLen
	binary.BigEndian.PutUint32(p[u:], seq)
	binary.BigEndian.PutUint32(p[u+4:], stamp)
	c := ^hdr.Fold(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(p[l4+6:], c)
}

// Kind classifies a received frame.
type Kind uint8

// Frame kinds.
const (
	KindOther    Kind = iota // not ours: count and drop
	KindTCP                  // TCP with stamp
	KindUDP                  // UDP with stamp
	KindARPReq               // ARP request
	KindARPReply             // ARP reply
	KindIPIPTCP              // TCP with stamp inside IPIP (VS/TUN)
	KindIPIPUDP              // UDP with stamp inside IPIP
	KindNS                   // IPv6 neighbour solicitation
	KindNA                   // IPv6 neighbour advertisement
)

// Stamp reads the sequence number and send stamp from a frame the
// generator built, as received on the server side (fields as sent) or on
// the client side (a reply: TCP fields swapped by the server). It checks
// only what it needs to read safely.
func Stamp(p []byte, reply bool) (k Kind, flags uint8, seq, stamp uint32) {
	if len(p) < hdr.EthernetLen {
		return KindOther, 0, 0, 0
	}
	switch binary.BigEndian.Uint16(p[12:]) {
	case hdr.EtherTypeARP:
		if len(p) < hdr.EthernetLen+hdr.ARPLen {
			return KindOther, 0, 0, 0
		}
		if binary.BigEndian.Uint16(p[ipOff+6:]) == hdr.ARPRequest {
			return KindARPReq, 0, 0, 0
		}
		return KindARPReply, 0, 0, 0
	case hdr.EtherTypeIPv4:
	case hdr.EtherTypeIPv6:
		return stamp6(p, reply)
	default:
		return KindOther, 0, 0, 0
	}
	if len(p) < l4Off || p[ipOff] != 0x45 {
		return KindOther, 0, 0, 0
	}
	if p[ipOff+9] == hdr.ProtoIPIP && !reply {
		// VS/TUN: the client's packet inside an outer IPv4 header.
		k, flags, seq, stamp = stampL3(p, ipOff+hdr.IPv4MinLen, false)
		switch k {
		case KindTCP:
			k = KindIPIPTCP
		case KindUDP:
			k = KindIPIPUDP
		}
		return k, flags, seq, stamp
	}
	return stampL3(p, ipOff, reply)
}

// stampL3 reads the stamp of the IPv4 packet at p[ip:].
func stampL3(p []byte, ip int, reply bool) (k Kind, flags uint8, seq, stamp uint32) {
	l4 := ip + hdr.IPv4MinLen
	if len(p) < l4 || p[ip] != 0x45 {
		return KindOther, 0, 0, 0
	}
	return stampL4(p, l4, p[ip+9], reply)
}

// stampL4 reads the stamp of the TCP or UDP header at p[l4:].
func stampL4(p []byte, l4 int, proto uint8, reply bool) (k Kind, flags uint8, seq, stamp uint32) {
	switch proto {
	case hdr.ProtoTCP:
		if len(p) < l4+hdr.TCPMinLen {
			return KindOther, 0, 0, 0
		}
		a, c := binary.BigEndian.Uint32(p[l4+4:]), binary.BigEndian.Uint32(p[l4+8:])
		if reply {
			a, c = c, a
		}
		return KindTCP, p[l4+13], a, c
	case hdr.ProtoUDP:
		u := l4 + hdr.UDPLen
		if len(p) < u+stampLen {
			return KindOther, 0, 0, 0
		}
		return KindUDP, 0, binary.BigEndian.Uint32(p[u:]), binary.BigEndian.Uint32(p[u+4:])
	}
	return KindOther, 0, 0, 0
}

// ReplyMode says how the server side answers data.
type ReplyMode int

// Reply modes.
const (
	ReplyACK  ReplyMode = iota // a bare ACK (60-byte frame) for each data segment
	ReplyEcho                  // the segment back with its payload (same size)
	ReplyNone                  // nothing: one-way traffic (SYNs and FINs are still answered)
)

// ParseReplyMode reads ack, echo or none.
func ParseReplyMode(s string) (ReplyMode, error) {
	switch s {
	case "ack":
		return ReplyACK, nil
	case "echo":
		return ReplyEcho, nil
	case "none":
		return ReplyNone, nil
	}
	return 0, fmt.Errorf("unknown reply mode %q (want ack, echo or none)", s)
}

// Answer turns a received TCP or UDP frame into the server's reply in place,
// as Stamp classified it: MACs, addresses and ports swapped, SYN answered by
// SYN-ACK, FIN by FIN-ACK, data by an ACK or an echo. It returns the reply's
// length, or 0 when nothing is to be sent. It does not allocate.
func Answer(p []byte, k Kind, flags uint8, mode ReplyMode) int {
	if len(p) < MinFrame {
		return 0
	}
	six := binary.BigEndian.Uint16(p[12:]) == hdr.EtherTypeIPv6
	l4 := l4Off
	if six {
		l4 = l4Off6
	}
	swapL2L3L4(p, six, l4)
	if k == KindUDP {
		if mode == ReplyNone {
			return 0
		}
		return len(p) // UDP checksum is invariant under the swaps
	}
	var out uint8
	switch {
	case flags&hdr.TCPFlagRST != 0:
		return 0
	case flags&hdr.TCPFlagSYN != 0:
		out = hdr.TCPFlagSYN | hdr.TCPFlagACK
	case flags&hdr.TCPFlagFIN != 0:
		out = hdr.TCPFlagFIN | hdr.TCPFlagACK
	case mode == ReplyNone:
		return 0
	case mode == ReplyEcho:
		out = hdr.TCPFlagACK | hdr.TCPFlagPSH
	default:
		out = hdr.TCPFlagACK
	}
	// seq and ack swap: invariant in the checksum too.
	swapBytes(p[l4+4:l4+8], p[l4+8:l4+12])
	tcp := hdr.TCP(p[l4:])
	if mode == ReplyEcho && out&(hdr.TCPFlagSYN|hdr.TCPFlagFIN) == 0 {
		hi := uint16(p[l4+12]) << 8
		p[l4+13] = out
		tcp.SetChecksum(hdr.Update16(tcp.Checksum(), hi|uint16(flags), hi|uint16(out)))
		return len(p)
	}
	// A bare ACK, SYN-ACK or FIN-ACK: no payload (IPv4: padded to the
	// minimum frame).
	p[l4+12] = hdr.TCPMinLen / 4 << 4
	p[l4+13] = out
	tcp = tcp[:hdr.TCPMinLen]
	tcp.SetChecksum(0)
	if six {
		ip := hdr.IPv6(p[ipOff:])
		ip.SetPayloadLength(hdr.TCPMinLen)
		tcp.SetChecksum(hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
		return l4Off6 + hdr.TCPMinLen
	}
	ip := hdr.IPv4(p[ipOff:])
	ip.SetTotalLength(hdr.IPv4MinLen + hdr.TCPMinLen)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
	clear(p[tcpEnd:MinFrame])
	return MinFrame
}

// swapL2L3L4 swaps a frame's MACs, IP addresses and ports (the L4 header
// l4 bytes in).
func swapL2L3L4(p []byte, six bool, l4 int) {
	swapBytes(p[0:6], p[6:12])
	if six {
		swapBytes(p[ipOff+8:ipOff+24], p[ipOff+24:ipOff+40])
	} else {
		swapBytes(p[ipOff+12:ipOff+16], p[ipOff+16:ipOff+20])
	}
	swapBytes(p[l4:l4+2], p[l4+2:l4+4])
}

// swapBytes swaps a and b, of equal length (at most 16 bytes).
func swapBytes(a, b []byte) {
	var t [16]byte
	n := copy(t[:], a)
	copy(a, b)
	copy(b, t[:n])
}

// Range is an inclusive range of IPv4 addresses.
type Range struct{ First, Last uint32 }

// Contains reports whether a is in r.
func (r Range) Contains(a uint32) bool { return a >= r.First && a <= r.Last }

// Len is the number of addresses.
func (r Range) Len() int { return int(r.Last-r.First) + 1 }

// AnswerARP turns an ARP request for an address of r into the reply from
// mac in place and returns true; anything else is left alone.
func AnswerARP(p []byte, mac hdr.MAC, r Range) bool {
	arp := hdr.ARP(p[hdr.EthernetLen:])
	if !arp.IsValid() || arp.Op() != hdr.ARPRequest || !r.Contains(arp.TargetIP()) {
		return false
	}
	smac, sip, tip := arp.SenderMAC(), arp.SenderIP(), arp.TargetIP()
	arp.SetReply(mac, tip, smac, sip)
	eth := hdr.Ethernet(p)
	eth.SetDst(smac)
	eth.SetSrc(mac)
	return true
}

// ARPRequest writes a "who has target, tell src" broadcast into p
// (len(p) >= MinFrame) and returns the frame length.
func ARPRequest(p []byte, mac hdr.MAC, src, target uint32) int {
	clear(p[:MinFrame])
	eth := hdr.Ethernet(p)
	eth.SetDst(hdr.BroadcastMAC)
	eth.SetSrc(mac)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(p[hdr.EthernetLen:]).SetRequest(mac, src, target)
	return MinFrame
}

// ARPReplySender reads who answered an ARP reply.
func ARPReplySender(p []byte) (ip uint32, mac hdr.MAC, ok bool) {
	arp := hdr.ARP(p[hdr.EthernetLen:])
	if !arp.IsValid() || arp.Op() != hdr.ARPReply {
		return 0, hdr.MAC{}, false
	}
	return arp.SenderIP(), arp.SenderMAC(), true
}
