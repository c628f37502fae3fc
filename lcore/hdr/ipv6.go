package hdr

import (
	"encoding/binary"
	"net/netip"
)

// IPv6 header (RFC 8200 section 3):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version| Traffic Class |           Flow Label                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload Length        |  Next Header  |   Hop Limit   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Source Address (128 bits)                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  Destination Address (128 bits)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ipv6VersionTC  = 0
	ipv6PayloadLen = 4
	ipv6NextHeader = 6
	ipv6HopLimit   = 7
	ipv6Src        = 8
	ipv6Dst        = 24
)

// IPv6Len is the fixed IPv6 header's length; ProtoICMPv6 its ICMP.
const (
	IPv6Len     = 40
	ProtoICMPv6 = 58
	ProtoIPv6   = 41 // IPv6 in IPv6 (RFC 2473): VS/TUN of an IPv6 service
)

// Addr6 is an IPv6 address as its 16 bytes: comparable and hashable
// without allocation, like the uint32 of an IPv4 address.
type Addr6 [16]byte

// Addr6From converts a netip.Addr (IPv4 ones as ::ffff:a.b.c.d).
func Addr6From(a netip.Addr) Addr6 { return a.As16() }

// Netip is the address as a netip.Addr (for the control plane and logs).
func (a Addr6) Netip() netip.Addr { return netip.AddrFrom16(a) }

// String formats the address the usual way (not for the packet path).
func (a Addr6) String() string { return a.Netip().String() }

// IsMulticast reports whether a is in ff00::/8.
func (a Addr6) IsMulticast() bool { return a[0] == 0xff }

// IsUnspecified reports whether a is ::.
func (a Addr6) IsUnspecified() bool { return a == Addr6{} }

// SolicitedNode is a's solicited-node multicast address (RFC 4291
// section 2.7.1): ff02::1:ff00:0/104 with a's low 24 bits, where
// neighbour solicitations for a are sent.
func (a Addr6) SolicitedNode() Addr6 {
	return Addr6{0xff, 0x02, 10: 0, 11: 0x01, 12: 0xff, 13: a[13], 14: a[14], 15: a[15]}
}

// MulticastMAC is the Ethernet address of an IPv6 multicast group (RFC
// 2464 section 7): 33:33 and the group's low 32 bits.
func (a Addr6) MulticastMAC() MAC { return MAC{0x33, 0x33, a[12], a[13], a[14], a[15]} }

// AllNodes is ff02::1, where unsolicited neighbour advertisements go.
var AllNodes = Addr6{0xff, 0x02, 15: 1}

// IPv6 is a view over an IPv6 header and what follows it. The view may
// run past the payload length (Ethernet padding); Payload trims it.
// Accessors assume IsValid passed.
type IPv6 []byte

// IsValid is the gate before any accessor: version 6, the fixed header,
// and a payload length within both the view and the pktLen bytes the NIC
// delivered from this header on. A zero payload length with a hop-by-hop
// header would be a jumbogram (RFC 2675), which no Ethernet frame holds.
func (b IPv6) IsValid(pktLen int) bool {
	if len(b) < IPv6Len || b[ipv6VersionTC]>>4 != 6 {
		return false
	}
	n := IPv6Len + int(b.PayloadLength())
	return n <= len(b) && n <= pktLen
}

// TrafficClass returns the traffic class byte.
func (b IPv6) TrafficClass() uint8 { return b[0]<<4 | b[1]>>4 }

// FlowLabel returns the 20-bit flow label.
func (b IPv6) FlowLabel() uint32 { return binary.BigEndian.Uint32(b[0:]) & 0xfffff }

// PayloadLength returns the length of what follows the fixed header,
// extension headers included.
func (b IPv6) PayloadLength() uint16 { return binary.BigEndian.Uint16(b[ipv6PayloadLen:]) }

// NextHeader returns the type of the header after the fixed one.
func (b IPv6) NextHeader() uint8 { return b[ipv6NextHeader] }

// HopLimit returns the hop limit.
func (b IPv6) HopLimit() uint8 { return b[ipv6HopLimit] }

// Src returns the source address.
func (b IPv6) Src() Addr6 { return Addr6(b[ipv6Src : ipv6Src+16]) }

// Dst returns the destination address.
func (b IPv6) Dst() Addr6 { return Addr6(b[ipv6Dst : ipv6Dst+16]) }

// Payload returns what follows the fixed header, up to the payload length.
func (b IPv6) Payload() []byte { return b[IPv6Len : IPv6Len+int(b.PayloadLength())] }

// SetPayloadLength writes the payload length.
func (b IPv6) SetPayloadLength(n uint16) { binary.BigEndian.PutUint16(b[ipv6PayloadLen:], n) }

// SetNextHeader writes the next header type.
func (b IPv6) SetNextHeader(p uint8) { b[ipv6NextHeader] = p }

// SetHopLimit writes the hop limit (IPv6 has no header checksum).
func (b IPv6) SetHopLimit(h uint8) { b[ipv6HopLimit] = h }

// SetSrc writes the source address.
func (b IPv6) SetSrc(a Addr6) { copy(b[ipv6Src:ipv6Src+16], a[:]) }

// SetDst writes the destination address.
func (b IPv6) SetDst(a Addr6) { copy(b[ipv6Dst:ipv6Dst+16], a[:]) }

// Encode writes a fixed header: version 6, traffic class and flow label
// zero, the given payload length, next header and hop limit, addresses.
func (b IPv6) Encode(payloadLen uint16, next, hopLimit uint8, src, dst Addr6) {
	binary.BigEndian.PutUint32(b[0:], 6<<28)
	b.SetPayloadLength(payloadLen)
	b.SetNextHeader(next)
	b.SetHopLimit(hopLimit)
	b.SetSrc(src)
	b.SetDst(dst)
}

// PseudoHeaderSum6 returns the unfolded ones'-complement sum of the IPv6
// pseudo-header (RFC 8200 section 8.1): source, destination, the
// upper-layer length as 32 bits and the next header. It seeds Checksum.
func PseudoHeaderSum6(src, dst Addr6, proto uint8, length uint32) uint32 {
	var sum uint32
	for i := 0; i < 16; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(src[i:])) + uint32(binary.BigEndian.Uint16(dst[i:]))
	}
	return sum + length>>16 + length&0xffff + uint32(proto)
}

// TransportChecksum6 computes the full TCP, UDP or ICMPv6 checksum of
// segment over the IPv6 pseudo-header, treating the checksum field as
// zero. A computed 0 is returned as 0xFFFF for UDP, whose checksum is
// mandatory over IPv6 (RFC 8200 section 8.1).
func TransportChecksum6(src, dst Addr6, proto uint8, segment []byte) uint16 {
	off := transportChecksumOffset(proto)
	if proto == ProtoICMPv6 {
		off = icmpChecksum
	}
	sum := PseudoHeaderSum6(src, dst, proto, uint32(len(segment)))
	c := ^Fold(sumSkipping(segment, off, sum))
	if proto == ProtoUDP && c == 0 {
		c = 0xffff
	}
	return c
}

// UpdateAddr6 returns csum adjusted for a 16-byte address covered by it
// (through the pseudo-header) changing from old to new (RFC 1624).
func UpdateAddr6(csum uint16, old, new Addr6) uint16 {
	return UpdateBlock(csum, Checksum(old[:], 0), Checksum(new[:], 0))
}
