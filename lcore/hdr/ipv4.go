package hdr

import "encoding/binary"

// IPv4 header (RFC 791 section 3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|Version|  IHL  |Type of Service|          Total Length         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Identification        |Flags|      Fragment Offset    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Time to Live |    Protocol   |         Header Checksum       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Source Address                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Destination Address                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Options                    |    Padding    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ipv4VersionIHL   = 0
	ipv4TOS          = 1
	ipv4TotalLength  = 2
	ipv4ID           = 4
	ipv4FlagsFragOff = 6
	ipv4TTL          = 8
	ipv4Protocol     = 9
	ipv4Checksum     = 10
	ipv4Src          = 12
	ipv4Dst          = 16

	ipv4FragOffMask = 0x1fff
)

// Protocol numbers the dataplane handles, and the minimum header length.
const (
	ProtoICMP  = 1
	ProtoIPIP  = 4 // IPv4 in IPv4 (RFC 2003): VS/TUN
	ProtoTCP   = 6
	ProtoUDP   = 17
	IPv4MinLen = 20
)

// DefaultTTL is the time to live of the packets the dataplane makes.
const DefaultTTL = 64

// IPv4 flag bits as returned by Flags.
const (
	IPv4FlagMoreFragments = 0x1
	IPv4FlagDontFragment  = 0x2
)

// IPv4 is a view over an IPv4 header and what follows it. The view may run
// past TotalLength (Ethernet padding, the rest of the mbuf); Payload trims it.
// Accessors assume IsValid passed.
type IPv4 []byte

// IsValid is the gate before any accessor. pktLen is how many bytes the NIC
// delivered from the start of this header (mbuf pkt_len minus L2), which may
// exceed len(b) when the view covers only the first segment. TotalLength is
// checked against both: against pktLen so a length field that lies about the
// wire is caught, against len(b) so Payload stays in bounds.
func (b IPv4) IsValid(pktLen int) bool {
	if len(b) < IPv4MinLen || b[ipv4VersionIHL]>>4 != 4 {
		return false
	}
	hl := b.HeaderLen()
	tl := int(b.TotalLength())
	return hl >= IPv4MinLen && hl <= len(b) && tl >= hl && tl <= len(b) && tl <= pktLen
}

// HeaderLen returns the header length in bytes (IHL * 4), options included.
func (b IPv4) HeaderLen() int { return int(b[ipv4VersionIHL]&0x0f) * 4 }

// TOS returns the type-of-service (DSCP and ECN) byte.
func (b IPv4) TOS() uint8 { return b[ipv4TOS] }

// TotalLength returns the length of header plus data in bytes.
func (b IPv4) TotalLength() uint16 { return binary.BigEndian.Uint16(b[ipv4TotalLength:]) }

// ID returns the identification field used to reassemble fragments.
func (b IPv4) ID() uint16 { return binary.BigEndian.Uint16(b[ipv4ID:]) }

// Flags returns the three flag bits (IPv4FlagDontFragment, IPv4FlagMoreFragments).
func (b IPv4) Flags() uint8 { return b[ipv4FlagsFragOff] >> 5 }

// FragmentOffset returns the fragment offset in bytes (the field is in 8-byte units).
func (b IPv4) FragmentOffset() uint16 {
	return (binary.BigEndian.Uint16(b[ipv4FlagsFragOff:]) & ipv4FragOffMask) * 8
}

// IsFragment reports whether b is any fragment, first or later: only an
// unfragmented datagram has both MF clear and offset zero. Later fragments
// carry no transport header, so ports cannot be read from them.
func (b IPv4) IsFragment() bool {
	return binary.BigEndian.Uint16(b[ipv4FlagsFragOff:])&(IPv4FlagMoreFragments<<13|ipv4FragOffMask) != 0
}

// DF reports whether the sender forbade fragmentation, which decides between
// fragmenting and answering ICMP "fragmentation needed" when a packet grows.
func (b IPv4) DF() bool { return b.Flags()&IPv4FlagDontFragment != 0 }

// TTL returns the time to live.
func (b IPv4) TTL() uint8 { return b[ipv4TTL] }

// Protocol returns the transport protocol number.
func (b IPv4) Protocol() uint8 { return b[ipv4Protocol] }

// Checksum returns the header checksum field as it stands.
func (b IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(b[ipv4Checksum:]) }

// Src returns the source address.
func (b IPv4) Src() uint32 { return binary.BigEndian.Uint32(b[ipv4Src:]) }

// Dst returns the destination address.
func (b IPv4) Dst() uint32 { return binary.BigEndian.Uint32(b[ipv4Dst:]) }

// Payload returns the transport segment: bytes HeaderLen to TotalLength,
// without any link-layer padding.
func (b IPv4) Payload() []byte { return b[b.HeaderLen():b.TotalLength()] }

// SetVersionIHL writes version 4 and the header length in bytes (a multiple
// of 4, 20 to 60); used when building packets.
func (b IPv4) SetVersionIHL(headerLen int) { b[ipv4VersionIHL] = 4<<4 | uint8(headerLen/4)&0x0f }

// SetTOS writes the type-of-service byte.
func (b IPv4) SetTOS(tos uint8) { b[ipv4TOS] = tos }

// SetTotalLength writes the total length.
func (b IPv4) SetTotalLength(n uint16) { binary.BigEndian.PutUint16(b[ipv4TotalLength:], n) }

// SetID writes the identification field.
func (b IPv4) SetID(id uint16) { binary.BigEndian.PutUint16(b[ipv4ID:], id) }

// SetFlagsFragmentOffset writes the flag bits and the offset in bytes (a
// multiple of 8).
func (b IPv4) SetFlagsFragmentOffset(flags uint8, offset uint16) {
	binary.BigEndian.PutUint16(b[ipv4FlagsFragOff:], uint16(flags&0x7)<<13|(offset/8)&ipv4FragOffMask)
}

// SetTTL writes the time to live without touching the checksum.
func (b IPv4) SetTTL(ttl uint8) { b[ipv4TTL] = ttl }

// SetProtocol writes the transport protocol number.
func (b IPv4) SetProtocol(p uint8) { b[ipv4Protocol] = p }

// SetChecksum writes the header checksum field.
func (b IPv4) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[ipv4Checksum:], c) }

// SetSrc writes the source address without touching any checksum.
func (b IPv4) SetSrc(a uint32) { binary.BigEndian.PutUint32(b[ipv4Src:], a) }

// SetDst writes the destination address without touching any checksum.
func (b IPv4) SetDst(a uint32) { binary.BigEndian.PutUint32(b[ipv4Dst:], a) }

// CalculateChecksum computes the RFC 791 header checksum over HeaderLen
// bytes, treating the checksum field as zero. Store it with SetChecksum.
func (b IPv4) CalculateChecksum() uint16 {
	if b.HeaderLen() == IPv4MinLen {
		return ^Fold(optionlessSum(b, 0))
	}
	return ^Fold(sumSkipping(b[:b.HeaderLen()], ipv4Checksum, 0))
}

// IsChecksumValid reports whether the header sums to 0xFFFF (-0) with the
// checksum field included, as a receiver checks it (RFC 1071).
func (b IPv4) IsChecksumValid() bool {
	if b.HeaderLen() == IPv4MinLen {
		return Fold(optionlessSum(b, b.Checksum())) == 0xffff
	}
	return Fold(Checksum(b[:b.HeaderLen()], 0)) == 0xffff
}

// optionlessSum is the ones'-complement sum of a 20-byte header with csum in
// place of the checksum field, unrolled because nearly every packet has no
// options and this runs per packet when TX offload is missing.
func optionlessSum(b IPv4, csum uint16) uint32 {
	_ = b[IPv4MinLen-1]
	sum := uint64(binary.BigEndian.Uint32(b[0:])) +
		uint64(binary.BigEndian.Uint32(b[4:])) +
		uint64(binary.BigEndian.Uint16(b[ipv4TTL:])) + uint64(csum) +
		uint64(binary.BigEndian.Uint32(b[ipv4Src:])) +
		uint64(binary.BigEndian.Uint32(b[ipv4Dst:]))
	sum = sum>>32 + sum&0xffffffff // < 2^32 + 5
	sum = sum>>32 + sum&0xffffffff
	return uint32(sum)
}

// SetSrcWithChecksumUpdate rewrites the source address and adjusts the header
// checksum incrementally. The transport checksum covers the address too
// (pseudo-header): update it with TCP/UDP.UpdateChecksumForAddr.
func (b IPv4) SetSrcWithChecksumUpdate(a uint32) {
	b.SetChecksum(Update32(b.Checksum(), b.Src(), a))
	b.SetSrc(a)
}

// SetDstWithChecksumUpdate rewrites the destination address and adjusts the
// header checksum incrementally; see SetSrcWithChecksumUpdate.
func (b IPv4) SetDstWithChecksumUpdate(a uint32) {
	b.SetChecksum(Update32(b.Checksum(), b.Dst(), a))
	b.SetDst(a)
}

// SetTTLWithChecksumUpdate writes the TTL and adjusts the header checksum.
// TTL shares its 16-bit word with Protocol, which is why the word is updated.
func (b IPv4) SetTTLWithChecksumUpdate(ttl uint8) {
	old := binary.BigEndian.Uint16(b[ipv4TTL:])
	b[ipv4TTL] = ttl
	b.SetChecksum(Update16(b.Checksum(), old, binary.BigEndian.Uint16(b[ipv4TTL:])))
}

// DecTTLWithChecksumUpdate decrements the TTL as a forwarding hop must. It
// returns false and leaves the packet untouched when the TTL is 0 or 1: the
// packet must then be dropped (and may be answered with ICMP time exceeded).
// Every forwarded packet runs it, so it is small enough to be inlined: the
// TTL's word falls by 0x0100, so the checksum rises by as much with the
// end-around carry, and a sum of 0xFFFF (-0) is written 0, as full
// recomputation gives (Linux's ip_decrease_ttl).
func (b IPv4) DecTTLWithChecksumUpdate() bool {
	_ = b[ipv4Checksum+1]
	ttl := b[ipv4TTL]
	if ttl <= 1 {
		return false
	}
	b[ipv4TTL] = ttl - 1
	sum := uint32(binary.BigEndian.Uint16(b[ipv4Checksum:])) + 0x0100
	if sum >= 0xffff {
		sum++
	}
	binary.BigEndian.PutUint16(b[ipv4Checksum:], uint16(sum))
	return true
}

// IPv4Fields are the fields of an option-less IPv4 header, for Encode.
type IPv4Fields struct {
	TOS            uint8
	TotalLength    uint16
	ID             uint16
	Flags          uint8  // IPv4FlagDontFragment, IPv4FlagMoreFragments
	FragmentOffset uint16 // in bytes, a multiple of 8
	TTL            uint8
	Protocol       uint8
	Src, Dst       uint32
}

// Encode writes a 20-byte header (no options) from f, checksum included:
// the one way the dataplane, its tests and the traffic generator build an
// IPv4 header, as gVisor's header.IPv4.Encode. It writes 32-bit words
// and sums the checksum from them: summing the header back after
// byte and half-word stores reads them with wider loads, which stall
// store forwarding (VS/TUN encapsulates every packet with it).
func (b IPv4) Encode(f *IPv4Fields) {
	_ = b[IPv4MinLen-1]
	w0 := uint32(4<<4|IPv4MinLen/4)<<24 | uint32(f.TOS)<<16 | uint32(f.TotalLength)
	w1 := uint32(f.ID)<<16 | uint32(f.Flags&0x7)<<13 | uint32((f.FragmentOffset/8)&ipv4FragOffMask)
	w2 := uint32(f.TTL)<<24 | uint32(f.Protocol)<<16 // the checksum below
	sum := w0>>16 + w0&0xffff + w1>>16 + w1&0xffff + w2>>16 +
		f.Src>>16 + f.Src&0xffff + f.Dst>>16 + f.Dst&0xffff
	be := binary.BigEndian
	be.PutUint32(b[0:], w0)
	be.PutUint32(b[4:], w1)
	be.PutUint32(b[8:], w2|uint32(^Fold(sum)))
	be.PutUint32(b[ipv4Src:], f.Src)
	be.PutUint32(b[ipv4Dst:], f.Dst)
}
