package conn

import "testing"

// TestHashSpread checks that structured traffic (one client, sequential
// ports; or sequential clients, one port) spreads over home cells like a
// random function: 2^16 keys into 2^16 cells should fill about 1-1/e
// (63.2%) of them. Seeds are fixed, so the result is deterministic.
func TestHashSpread(t *testing.T) {
	const n = 1 << 16
	type tuple struct {
		srcIP   uint32
		srcPort uint16
		dstIP   uint32
		dstPort uint16
	}
	tests := []struct {
		name string
		key  func(i int) tuple
	}{
		{"sequential source ports", func(i int) tuple { return tuple{0xC6336401, uint16(i), 0xC0000201, 80} }},
		{"sequential destination ports (replies)", func(i int) tuple { return tuple{0x0A000001, 8080, 0xC6336401, uint16(i)} }},
		{"sequential clients", func(i int) tuple { return tuple{0x64400000 + uint32(i), 40000, 0xC0000201, 80} }},
		{"clients stepping by 256", func(i int) tuple { return tuple{uint32(i) << 8, 40000, 0xC0000201, 80} }},
		{"sequential destinations", func(i int) tuple { return tuple{0x0A000001, 8080, 0x64400000 + uint32(i), 40000} }},
	}
	for _, seed := range []uint64{1, 2, 0xdeadbeef} {
		var s [2]uint64
		state := seed
		s[0], s[1] = splitmix64(&state), splitmix64(&state)
		for _, tt := range tests {
			var used [n]bool
			filled := 0
			for i := 0; i < n; i++ {
				k := tt.key(i)
				home := hashKey(&s, 6, k.srcIP, k.srcPort, k.dstIP, k.dstPort) & (n - 1)
				if !used[home] {
					used[home] = true
					filled++
				}
			}
			if frac := float64(filled) / n; frac < 0.62 || frac > 0.645 {
				t.Errorf("seed %d, %s: %.3f of cells used, want about 0.632", seed, tt.name, frac)
			}
		}
	}
}

// TestHashSeedMatters checks that the seed changes where a key lands, the
// property that stops a sender from precomputing collisions.
func TestHashSeedMatters(t *testing.T) {
	a, b := [2]uint64{1, 2}, [2]uint64{1, 3}
	same := 0
	for port := 0; port < 1000; port++ {
		if hashKey(&a, 6, 1, uint16(port), 2, 80) == hashKey(&b, 6, 1, uint16(port), 2, 80) {
			same++
		}
	}
	if same != 0 {
		t.Errorf("%d of 1000 keys hash the same under different seeds", same)
	}
}
