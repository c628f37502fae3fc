package sched

import (
	"math"
	"reflect"
	"testing"
)

func seeded(t *testing.T, weights []int32, upper uint32, seed uint64) *powerOfTwo {
	d := dests(weights...)
	for i := range d {
		d[i].Upper = upper
	}
	p := mustNew(t, "twos", d, Options{}).(*powerOfTwo)
	p.seed(seed)
	return p
}

func TestTwosDeterministicWithSeed(t *testing.T) {
	a, b := seeded(t, []int32{1, 2, 3}, 0, 42), seeded(t, []int32{1, 2, 3}, 0, 42)
	var sa, sb []int
	for i := 0; i < 100; i++ {
		sa = append(sa, a.Schedule(&Flow{}, nil))
		sb = append(sb, b.Schedule(&Flow{}, nil))
	}
	if !reflect.DeepEqual(sa, sb) {
		t.Fatalf("same seed, different choices:\n%v\n%v", sa, sb)
	}
}

// Shares over many draws, against IPVS's arithmetic: r is uniform in
// [0, total] (total+1 values) and the first dest whose running weight
// reaches r is picked, so the first dest has one extra value; the second
// pick wins only when strictly less loaded per weight.
func TestTwosShares(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int32
		upper   uint32
		c       counts
		want    []float64
	}{
		// r in 0..4: A for 0,1; B for 2,3,4. Equal load: choice1 stays.
		{"by weight when idle", []int32{1, 3}, 0, nil, []float64{.4, .6}},
		// r in 0..2: A for 0,1. A only when both picks are A: 4/9.
		{"less loaded of two", []int32{1, 1}, 0, active(10, 0), []float64{4.0 / 9, 5.0 / 9}},
		{"quiescent and overloaded skipped", []int32{1, 0, 1, 1}, 1, counts{C: {0, 1}}, []float64{2.0 / 3, 0, 0, 1.0 / 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := seeded(t, tc.weights, tc.upper, 7)
			const n = 90000
			got := make([]float64, len(tc.weights))
			for i := 0; i < n; i++ {
				got[p.Schedule(&Flow{}, tc.c)]++
			}
			for i := range got {
				got[i] /= n
				if math.Abs(got[i]-tc.want[i]) > 0.01 {
					t.Fatalf("shares %v, want %v", got, tc.want)
				}
			}
		})
	}
}
