package conn

// Multipliers from splitmix64 / Stafford's mix13: odd, so each
// multiplication is a bijection on uint64 and no input bits are lost.
const (
	mulA = 0x9E3779B97F4A7C15
	mulB = 0xBF58476D1CE4E5B9
	mulC = 0x94D049BB133111EB
)

// hashKey hashes a 5-tuple with two multiply-xorshift rounds over two packed
// words. The per-table seed keys both rounds so that a remote sender cannot
// precompute tuples that pile up in one probe run.
//
// Every step is a bijection on uint64, so two distinct tuples that share
// either packed word cannot collide before the final fold to 32 bits.
func hashKey(seed *[2]uint64, proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) uint32 {
	a := uint64(srcIP)<<32 | uint64(dstIP)
	// Ports sit in the low bits: a multiply carries bits only upward, so
	// inputs varying only in high bits would leave the low (home) bits of
	// the second round poorly mixed.
	b := uint64(proto)<<32 | uint64(srcPort)<<16 | uint64(dstPort)

	h := (a ^ seed[0]) * mulA
	h ^= h >> 32
	h = (h ^ b ^ seed[1]) * mulB
	h ^= h >> 29
	h *= mulC
	h ^= h >> 32
	return uint32(h)
}

// splitmix64 expands one seed into independent-looking words.
func splitmix64(state *uint64) uint64 {
	*state += mulA
	z := *state
	z = (z ^ z>>30) * mulB
	z = (z ^ z>>27) * mulC
	return z ^ z>>31
}
