package hdr

import (
	"encoding/binary"
	"math/bits"
)

// Internet checksum (RFC 1071) and incremental update (RFC 1624).
//
// Sums here are ones'-complement sums that are not yet complemented. The value
// written into a header is ^Fold(sum). Because ones'-complement addition is
// addition modulo 0xFFFF, a sum can be carried as a wider integer and folded
// later; Checksum folds before returning so results chain without overflow.

// Checksum adds b, as a sequence of big-endian 16-bit words, to initial and
// returns the sum folded to 16 bits (0 <= result <= 0xFFFF) but not
// complemented. An odd trailing byte is padded with a zero on the right, as
// RFC 1071 requires. When chaining calls, every piece but the last must have
// even length, or the later bytes land in the wrong half of their words.
// initial may be any value, folded or not (a PseudoHeaderSum, say).
func Checksum(b []byte, initial uint32) uint32 {
	sum := uint64(initial)
	var carry uint64
	for len(b) >= 32 {
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[0:]), 0)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[8:]), carry)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[16:]), carry)
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b[24:]), carry)
		sum += carry // end-around carry; cannot overflow again
		b = b[32:]
	}
	for len(b) >= 8 {
		sum, carry = bits.Add64(sum, binary.BigEndian.Uint64(b), 0)
		sum += carry
		b = b[8:]
	}
	// Fewer than 8 bytes left: add them as a zero-padded 64-bit word.
	if len(b) > 0 {
		var tail uint64
		for i, c := range b {
			tail |= uint64(c) << (56 - 8*i)
		}
		sum, carry = bits.Add64(sum, tail, 0)
		sum += carry
	}
	// 2^32 and 2^16 are both 1 modulo 0xFFFF, so folding preserves the sum.
	sum = sum>>32 + sum&0xffffffff
	sum = sum>>32 + sum&0xffffffff
	return uint32(Fold(uint32(sum)))
}

// Fold reduces a 32-bit ones'-complement sum to 16 bits by adding the carries
// back in. It does not complement: the header field is ^Fold(sum).
// A non-zero sum never folds to zero.
func Fold(sum uint32) uint16 {
	sum = sum>>16 + sum&0xffff
	sum = sum>>16 + sum&0xffff
	return uint16(sum)
}

// PseudoHeaderSum returns the unfolded ones'-complement sum of the IPv4
// pseudo-header (RFC 793 section 3.1, RFC 768): source, destination, zero,
// protocol and the transport length (header plus data). It is < 2^19, so it
// can seed Checksum directly.
func PseudoHeaderSum(src, dst uint32, proto uint8, length uint16) uint32 {
	return src>>16 + src&0xffff + dst>>16 + dst&0xffff + uint32(proto) + uint32(length)
}

// transportChecksumOffset is where TCP and UDP keep their checksum field.
func transportChecksumOffset(proto uint8) int {
	switch proto {
	case ProtoTCP:
		return tcpChecksum
	case ProtoUDP:
		return udpChecksum
	}
	return -1
}

// sumSkipping returns Checksum(b, initial) with the 16-bit word at the even
// offset off treated as zero, when b holds it.
func sumSkipping(b []byte, off int, initial uint32) uint32 {
	if off < 0 || len(b) < off+2 {
		return Checksum(b, initial)
	}
	return Checksum(b[off+2:], Checksum(b[:off], initial))
}

// TransportChecksum computes the full TCP or UDP checksum of segment (header
// plus data; for UDP exactly Length bytes) over the IPv4 pseudo-header,
// treating the checksum field as zero.
// For UDP a computed 0 is returned as 0xFFFF, since 0 on the wire means "no
// checksum". It reads the whole payload, so the dataplane uses the RFC 1624
// helpers instead; this is the oracle for tests and for building packets.
// For other protocols the whole segment is summed as it stands.
func TransportChecksum(src, dst uint32, proto uint8, segment []byte) uint16 {
	sum := PseudoHeaderSum(src, dst, proto, uint16(len(segment)))
	c := ^Fold(sumSkipping(segment, transportChecksumOffset(proto), sum))
	if proto == ProtoUDP && c == 0 {
		c = 0xffff
	}
	return c
}

// ICMPChecksum computes the full ICMPv4 checksum of msg (header plus data,
// no pseudo-header), treating the checksum field as zero.
func ICMPChecksum(msg []byte) uint16 {
	return ^Fold(sumSkipping(msg, icmpChecksum, 0))
}

// Update16 returns checksum csum adjusted for one 16-bit word of the covered
// data changing from old to new, by RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m').
// Eqn. 3 (not eqn. 2) is used so the result never becomes the -0 (0xFFFF)
// a full recomputation cannot produce.
func Update16(csum, old, new uint16) uint16 {
	return ^Fold(uint32(^csum) + uint32(^old) + uint32(new))
}

// Update32 is Update16 for a 32-bit field (an IPv4 address, a TCP sequence
// number) aligned on a 16-bit boundary of the covered data.
func Update32(csum uint16, old, new uint32) uint16 {
	return ^Fold(uint32(^csum) +
		uint32(^uint16(old>>16)) + uint32(^uint16(old)) +
		uint32(new>>16) + uint32(new&0xffff))
}

// UpdateBlock is Update16 for a block of the covered data rewritten in
// place (an even number of bytes at an even offset): oldSum and newSum are
// its Checksum before and after. A checksum that was wrong stays wrong.
func UpdateBlock(csum uint16, oldSum, newSum uint32) uint16 {
	return ^Fold(uint32(^csum) + uint32(^uint16(oldSum)) + newSum)
}

// UpdateUDP16 is Update16 with the UDP rules (RFC 768): a checksum of 0
// means the sender did not compute one, so it stays 0, and a computed 0 is
// sent as 0xFFFF.
func UpdateUDP16(csum, old, new uint16) uint16 {
	if csum == 0 {
		return 0
	}
	if c := Update16(csum, old, new); c != 0 {
		return c
	}
	return 0xffff
}

// UpdateUDP32 is Update32 with the UDP rules of UpdateUDP16.
func UpdateUDP32(csum uint16, old, new uint32) uint16 {
	if csum == 0 {
		return 0
	}
	if c := Update32(csum, old, new); c != 0 {
		return c
	}
	return 0xffff
}
