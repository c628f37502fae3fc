package lcore

import "math/bits"

// SipHash-2-4 (Aumasson and Bernstein), the keyed pseudo-random function
// Linux uses for its SYN cookies, over a message of exactly three or six
// 64-bit words (24 or 48 bytes, little-endian as the reference reads
// them): an IPv4 or IPv6 cookie's inputs, hashed without building a byte
// buffer.

// sipRound is one SipRound.
func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13) ^ v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16) ^ v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21) ^ v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17) ^ v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

// sipHash3 is SipHash-2-4 with key (k0, k1) of the 24-byte message m0 m1 m2.
func sipHash3(k0, k1, m0, m1, m2 uint64) uint64 {
	return sipHash(k0, k1, []uint64{m0, m1, m2, 24 << 56}) // the last word: the length, no tail bytes
}

// sipHash6 is SipHash-2-4 with key (k0, k1) of the 48-byte message m0..m5.
func sipHash6(k0, k1, m0, m1, m2, m3, m4, m5 uint64) uint64 {
	return sipHash(k0, k1, []uint64{m0, m1, m2, m3, m4, m5, 48 << 56})
}

// sipHash is SipHash-2-4 of whole 64-bit words, the last the length
// word. One function with its rounds inlined: the cookie of every SYN of
// a flood goes through it.
func sipHash(k0, k1 uint64, m []uint64) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	for _, w := range m {
		v3 ^= w
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
		v0 ^= w
	}
	v2 ^= 0xff
	for range 4 {
		v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	}
	return v0 ^ v1 ^ v2 ^ v3
}
