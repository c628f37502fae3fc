package lcore

import "testing"

// TestSipHash3ReferenceVector: the reference implementation's vector for
// a 24-byte message (key 00..0f, message 00..17).
func TestSipHash3ReferenceVector(t *testing.T) {
	const k0, k1 = 0x0706050403020100, 0x0f0e0d0c0b0a0908
	got := sipHash3(k0, k1, 0x0706050403020100, 0x0f0e0d0c0b0a0908, 0x1716151413121110)
	if want := uint64(0xb8ad50c6f649af94); got != want {
		t.Fatalf("SipHash-2-4 of 00..17 = %#x, want %#x", got, want)
	}
}
