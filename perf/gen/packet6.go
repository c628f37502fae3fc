package gen

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/hdr"
)

// IPv6 traffic. Flows, queues and patterns are the IPv4 ones: a client
// or server address is the Range's 32-bit number as the low 32 bits of an
// IPv6 address whose upper 96 bits are a Net6 (2001:db8:1::100 is 0x100
// in the network 2001:db8:1::/96), so the flow tables, the per-packet
// choice of flow and the builder's incremental checksums stay the IPv4
// generator's. Neighbour discovery takes ARP's place.

// l4Off6 is where the TCP or UDP header starts in an IPv6 frame (no
// extension headers).
const l4Off6 = ipOff + hdr.IPv6Len // 54

// MinFrame6 is the smallest IPv6 TCP frame (a bare segment, 78 bytes on
// the wire); an IPv6 UDP frame with its stamp needs 70.
const MinFrame6 = l4Off6 + hdr.TCPMinLen

// ndFrame is an NS or NA with a link-layer address option.
const ndFrame = l4Off6 + hdr.NDLen + hdr.NDOptLen

// Net6 is the upper 96 bits of IPv6 addresses whose low 32 bits a Range
// or a flow holds.
type Net6 [12]byte

// Addr is the address low in the network.
func (n *Net6) Addr(low uint32) (a hdr.Addr6) {
	copy(a[:12], n[:])
	binary.BigEndian.PutUint32(a[12:], low)
	return a
}

// Split6 splits an IPv6 address into its network and low 32 bits.
func Split6(a hdr.Addr6) (n Net6, low uint32) {
	copy(n[:], a[:12])
	return n, binary.BigEndian.Uint32(a[12:])
}

// Six is what the generator needs beyond the IPv4 Config for IPv6 flows:
// the networks of the client and server addresses (Config.Clients and
// Config.Servers are their low 32 bits), the VIP and the balancer's
// server-side address (zero: none).
type Six struct {
	ClientNet, ServerNet Net6
	VIP                  hdr.Addr6
	LBServerAddr         hdr.Addr6
}

// NewBuilder6 is NewBuilder for IPv6: frames from addresses in net (the
// client's low 32 bits change per packet) to vip:vport. A TCP frame is
// at least MinFrame6 bytes.
func NewBuilder6(proto uint8, size int, srcMAC, dstMAC hdr.MAC, net Net6, vip hdr.Addr6, vport uint16) (*Builder, error) {
	b, err := newBuilder(proto, size, l4Off6, srcMAC, dstMAC, hdr.EtherTypeIPv6, vport)
	if err != nil {
		return nil, err
	}
	b.six, b.srcOff = true, ipOff+8+12
	l4len := uint16(size - l4Off6)
	src := net.Addr(0) // Build adds the low 32 bits per packet
	hdr.IPv6(b.tmpl[ipOff:]).Encode(l4len, proto, hdr.DefaultTTL, src, vip)
	b.l4Sum = hdr.Checksum(b.tmpl[l4Off6:], hdr.PseudoHeaderSum6(src, vip, proto, uint32(l4len)))
	return b, nil
}

// stamp6 is Stamp for an IPv6 frame (no extension headers: the
// generator sends none and the balancer adds none), and classifies
// neighbour solicitations and advertisements.
func stamp6(p []byte, reply bool) (k Kind, flags uint8, seq, stamp uint32) {
	if len(p) < l4Off6 || p[ipOff]>>4 != 6 {
		return KindOther, 0, 0, 0
	}
	next := p[ipOff+6]
	if next != hdr.ProtoICMPv6 {
		return stampL4(p, l4Off6, next, reply)
	}
	if len(p) < l4Off6+hdr.NDLen {
		return KindOther, 0, 0, 0
	}
	switch p[l4Off6] {
	case hdr.ICMPv6NeighSolicit:
		return KindNS, 0, 0, 0
	case hdr.ICMPv6NeighAdvert:
		return KindNA, 0, 0, 0
	}
	return KindOther, 0, 0, 0
}

// AnswerNS turns a neighbour solicitation for an address of r in net
// into the advertisement from mac in place and returns its length; 0
// (nothing changed) for anything else, and for a solicitation from the
// unspecified address (duplicate address detection: not answered here).
func AnswerNS(p []byte, mac hdr.MAC, net *Net6, r Range) int {
	ip := hdr.IPv6(p[ipOff:])
	if len(p) < ndFrame || !ip.IsValid(len(p)-ipOff) || ip.HopLimit() != hdr.NDHopLimit || int(ip.PayloadLength()) < hdr.NDLen {
		return 0
	}
	nd := hdr.ND(ip.Payload())
	target, src := nd.Target(), ip.Src()
	tnet, low := Split6(target)
	if !nd.IsValid() || tnet != *net || !r.Contains(low) || src.IsUnspecified() {
		return 0
	}
	dstMAC := hdr.Ethernet(p).Src()
	if m, ok := nd.LinkAddr(hdr.NDOptSourceLL); ok {
		dstMAC = m
	}
	writeND(p, mac, dstMAC, target, src, hdr.ICMPv6NeighAdvert, hdr.NAFlagSolicited|hdr.NAFlagOverride, target, hdr.NDOptTargetLL)
	return ndFrame
}

// NSRequest writes a solicitation for target from src (mac) to target's
// solicited-node group into p (len(p) >= ndFrame) and returns the frame
// length.
func NSRequest(p []byte, mac hdr.MAC, src, target hdr.Addr6) int {
	group := target.SolicitedNode()
	writeND(p, mac, group.MulticastMAC(), src, group, hdr.ICMPv6NeighSolicit, 0, target, hdr.NDOptSourceLL)
	return ndFrame
}

// writeND writes an NS or NA frame of ndFrame bytes.
func writeND(p []byte, mac, dstMAC hdr.MAC, src, dst hdr.Addr6, typ, flags uint8, target hdr.Addr6, opt uint8) {
	eth := hdr.Ethernet(p)
	eth.SetDst(dstMAC)
	eth.SetSrc(mac)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(p[ipOff:]).Encode(hdr.NDLen+hdr.NDOptLen, hdr.ProtoICMPv6, hdr.NDHopLimit, src, dst)
	nd := hdr.ND(p[l4Off6:ndFrame])
	nd.EncodeND(typ, flags, target, opt, mac)
	hdr.ICMP(nd).SetChecksum(hdr.TransportChecksum6(src, dst, hdr.ProtoICMPv6, nd))
}

// NASender reads who answered with a neighbour advertisement: its target
// and link-layer address (the option's, else the frame's source).
func NASender(p []byte) (target hdr.Addr6, mac hdr.MAC, ok bool) {
	ip := hdr.IPv6(p[ipOff:])
	if !ip.IsValid(len(p)-ipOff) || int(ip.PayloadLength()) < hdr.NDLen {
		return hdr.Addr6{}, hdr.MAC{}, false
	}
	nd := hdr.ND(ip.Payload())
	if !nd.IsValid() || nd[0] != hdr.ICMPv6NeighAdvert {
		return hdr.Addr6{}, hdr.MAC{}, false
	}
	mac, ok = nd.LinkAddr(hdr.NDOptTargetLL)
	if !ok {
		mac = hdr.Ethernet(p).Src()
	}
	return nd.Target(), mac, true
}
