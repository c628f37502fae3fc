package main

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dplb/dplb/lcore/conn"
)

// Issue #11's lookup target, timed in the run: conn.LookupSpreadBursts
// (BenchmarkLookupBurst's code) in a table of 1k connections and in one
// of 10M, in turns, so that both see the same moment of the machine.
// Each turn also times conn.TouchSpreadBursts (BenchmarkLookupFloor's):
// the two lines a lookup reaches per key, with nothing of its own work,
// a lower bound of the lookup at each size, so the report shows how much
// of the 10M lookup is the machine's memory.

// lookupTarget names the target's row (targets11).
const lookupTarget = "flow scale: a lookup among 10M connections within 2x the 1k case"

// LookupScale is what the run measured of it.
type LookupScale struct {
	Small, Large int // live connections of the two tables
	// NsPerKey are ns per lookup in each turn: [turn][0 small, 1 large].
	NsPerKey [][2]float64 `json:"ns_per_key"`
	Ratio    float64      `json:"ratio_median"` // the median turn's large / small
	// FloorNsPerKey are the memory's alone, likewise.
	FloorNsPerKey [][2]float64 `json:"floor_ns_per_key"`
}

// lookupTurns and lookupKeys: 5 turns of 2M lookups a table, about 2 s
// with the 10M table's filling (1.5 GB, released after).
const (
	lookupTurns = 5
	lookupKeys  = 1 << 21
)

// measureLookupScale times lookups among small and large live
// connections (tables twice their size, as lbd's default leaves room).
func measureLookupScale(small, large int) (*LookupScale, error) {
	var tables [2]*conn.Table
	for i, live := range []int{small, large} {
		t, err := conn.FillSpread(2*ceilPow2(live), live, 7)
		if err != nil {
			return nil, fmt.Errorf("lookup scale: a table of %d connections: %w", live, err)
		}
		tables[i] = t
	}
	s := &LookupScale{Small: small, Large: large}
	var ratios []float64
	var sink uint64
	for range lookupTurns {
		var turn, floor [2]float64
		for i, live := range []int{small, large} {
			start := time.Now()
			_, keys, ok := tables[i].LookupSpreadBursts(live, lookupKeys/32, 0)
			if !ok {
				return nil, fmt.Errorf("lookup scale: a connection of the %d missing", live)
			}
			turn[i] = float64(time.Since(start).Nanoseconds()) / float64(keys)
			start = time.Now()
			keys, sum := tables[i].TouchSpreadBursts(live, lookupKeys/32, uint64(start.UnixNano()))
			floor[i] = float64(time.Since(start).Nanoseconds()) / float64(keys)
			sink += sum
		}
		s.NsPerKey = append(s.NsPerKey, turn)
		s.FloorNsPerKey = append(s.FloorNsPerKey, floor)
		ratios = append(ratios, turn[1]/turn[0])
	}
	lookupSink = sink
	sort.Float64s(ratios)
	s.Ratio = ratios[len(ratios)/2]
	return s, nil
}

// lookupSink keeps what the floor's reads summed.
var lookupSink uint64

func ceilPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// lookupRow is the target's row from what the run measured.
func lookupRow(s *LookupScale) Target {
	t := Target{Target: lookupTarget, Verdict: "n/a", Measured: "not measured by this run (-lookup=false)"}
	if s == nil {
		return t
	}
	t.Measured = fmt.Sprintf("median of %d turns: %.2fx (", len(s.NsPerKey), s.Ratio)
	for i, turn := range s.NsPerKey {
		if i > 0 {
			t.Measured += ", "
		}
		t.Measured += fmt.Sprintf("%.1f / %.1f", turn[1], turn[0])
	}
	t.Measured += fmt.Sprintf(" ns per lookup among %s / %s connections, bursts of 32 as an lcore)", si(float64(s.Large)), si(float64(s.Small)))
	if len(s.FloorNsPerKey) > 0 {
		var large, small []float64
		for _, f := range s.FloorNsPerKey {
			large, small = append(large, f[1]), append(small, f[0])
		}
		t.Measured += fmt.Sprintf("; the memory alone, the two lines a lookup reaches per key (a lower bound): median %.1f / %.1f ns", median(large), median(small))
	}
	t.Verdict = verdict(s.Ratio <= 2)
	return t
}

// median is the middle of xs (the upper middle of an even count).
func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}
