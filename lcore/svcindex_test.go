package lcore

import (
	"math/rand/v2"
	"testing"
)

// TestServiceIndex: the index finds what a map of the same keys does,
// for keys present and absent, at sizes around its growth steps.
func TestServiceIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 3, 5, 8, 9, 100, 1000} {
		want := map[uint64]int32{}
		x := newServiceIndex(n)
		for i := range n {
			// Services on a few VIPs and neighbouring ports, as configured.
			k := ServiceKey{VIP: 0xC0000200 + uint32(rng.IntN(4)), Port: uint16(80 + rng.IntN(2*n+1)), Proto: 6 + 11*uint8(rng.IntN(2))}.packed()
			want[k] = int32(i)
			x.add(k, int32(i))
		}
		for k, i := range want {
			if got, ok := x.get(k); !ok || got != i {
				t.Fatalf("n %d: key %#x: %d %v, want %d", n, k, got, ok, i)
			}
		}
		for range 10000 {
			k := ServiceKey{VIP: 0xC0000200 + uint32(rng.IntN(8)), Port: uint16(rng.IntN(4 * (n + 1))), Proto: uint8(rng.IntN(20))}.packed()
			i, in := want[k]
			if got, ok := x.get(k); ok != in || got != i {
				t.Fatalf("n %d: key %#x: %d %v, want %d %v", n, k, got, ok, i, in)
			}
		}
	}
}

// BenchmarkServiceIndex: a SYN's service lookup among 8 services; x-map is
// the ratio to a Go map lookup of the same keys in the same run.
func BenchmarkServiceIndex(b *testing.B) {
	m := map[uint64]int32{}
	x := newServiceIndex(8)
	var keys [8]uint64
	for i := range keys {
		keys[i] = ServiceKey{VIP: 0xC0000200 + uint32(i/2), Port: 80 + uint16(i%2), Proto: 6}.packed()
		m[keys[i]] = int32(i)
		x.add(keys[i], int32(i))
	}
	var sum int32
	start := b.Elapsed()
	for i := 0; i < b.N; i++ {
		v, _ := m[keys[i&7]]
		sum += v
	}
	ref := b.Elapsed() - start
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, _ := x.get(keys[i&7])
		sum += v
	}
	b.StopTimer()
	if ref > 0 {
		b.ReportMetric(float64(b.Elapsed())/float64(ref), "x-map")
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}
