package sched

import "testing"

func TestLeastConnFamily(t *testing.T) {
	type cs = counts
	for _, tc := range []struct {
		sched   string
		name    string
		weights []int32
		c       counts
		want    int
	}{
		{"lc", "no connections: first", []int32{1, 1, 1}, nil, A},
		{"lc", "least overhead", []int32{1, 1, 1}, cs{A: {2, 0}, B: {1, 0}, C: {1, 1}}, B},
		{"lc", "active weighs 256 inactive", []int32{1, 1}, cs{A: {1, 0}, B: {0, 255}}, B},
		{"lc", "256 inactive tie one active: first", []int32{1, 1}, cs{A: {1, 0}, B: {0, 256}}, A},
		{"lc", "weights ignored", []int32{1, 100}, cs{A: {1, 0}, B: {2, 0}}, A},
		{"lc", "quiescent skipped", []int32{0, 1}, cs{B: {5, 0}}, B},
		{"lc", "all quiescent", []int32{0, 0}, nil, -1},

		{"wlc", "per weight", []int32{1, 3}, cs{A: {1, 0}, B: {2, 0}}, B},                 // 256/1 > 512/3
		{"wlc", "tie goes to first", []int32{2, 1}, cs{A: {2, 0}, B: {1, 0}}, A},          // 512/2 = 256/1
		{"wlc", "inactive counts", []int32{1, 1}, cs{A: {0, 10}, B: {0, 5}}, B},           //
		{"wlc", "heavier wins at equal load", []int32{1, 2}, cs{A: {1, 0}, B: {1, 0}}, B}, // 256 > 128
		{"wlc", "no connections: first", []int32{1, 5}, nil, A},
		{"wlc", "quiescent skipped", []int32{5, 0, 1}, cs{A: {9, 0}}, C},
		{"wlc", "big counts do not overflow", []int32{1<<31 - 1, 1<<31 - 1}, cs{A: {1<<32 - 1, 0}, B: {1<<32 - 2, 0}}, B},

		{"sed", "(active+1)/weight", []int32{1, 3}, cs{A: {1, 0}, B: {3, 0}}, B},   // 2/1 > 4/3
		{"sed", "tie goes to first", []int32{1, 3}, cs{A: {0, 0}, B: {2, 0}}, A},   // 1/1 = 3/3
		{"sed", "inactive ignored", []int32{1, 1}, cs{A: {0, 1000}, B: {1, 0}}, A}, // 1 < 2
		{"sed", "idle heavy one", []int32{1, 10}, cs{B: {1, 0}}, B},                // 1/1 > 2/10
		{"sed", "all quiescent", []int32{0}, nil, -1},

		{"nq", "idle wins at once", []int32{1, 10}, cs{B: {1, 0}}, A},
		{"nq", "first idle wins", []int32{1, 5, 1}, cs{A: {3, 0}}, B},
		{"nq", "idle after busy", []int32{1, 5, 1}, cs{A: {1, 0}, B: {2, 0}}, C},
		{"nq", "else sed", []int32{1, 5}, cs{A: {1, 0}, B: {2, 0}}, B},            // 2/1 > 3/5
		{"nq", "else sed, tie first", []int32{2, 4}, cs{A: {1, 0}, B: {3, 0}}, A}, // 2/2 = 4/4
		{"nq", "inactive ignored", []int32{1, 1}, cs{A: {1, 0}, B: {0, 500}}, B},
		{"nq", "quiescent idle skipped", []int32{0, 1}, cs{B: {4, 0}}, B},
	} {
		t.Run(tc.sched+"/"+tc.name, func(t *testing.T) {
			s := mustNew(t, tc.sched, dests(tc.weights...), Options{})
			if got := s.Schedule(&Flow{}, tc.c); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFailoverOverflow(t *testing.T) {
	type cs = counts
	for _, tc := range []struct {
		sched   string
		name    string
		weights []int32
		upper   uint32
		c       counts
		want    int
	}{
		{"fo", "highest weight", []int32{1, 3, 2}, 0, nil, B},
		{"fo", "whatever its load", []int32{1, 3, 2}, 0, cs{B: {1000, 0}}, B},
		{"fo", "tie goes to first", []int32{2, 3, 3}, 0, nil, B},
		{"fo", "next when overloaded", []int32{1, 3, 2}, 10, cs{B: {10, 0}}, C},
		{"fo", "all overloaded", []int32{1, 3}, 1, cs{A: {1, 0}, B: {0, 1}}, -1},
		{"fo", "quiescent", []int32{0, 0}, 0, nil, -1},

		{"ovf", "highest weight", []int32{1, 3, 2}, 0, nil, B},
		{"ovf", "up to weight active", []int32{1, 3, 2}, 0, cs{B: {3, 0}}, B},
		{"ovf", "overflows past weight", []int32{1, 3, 2}, 0, cs{B: {4, 0}}, C},
		{"ovf", "then the next", []int32{1, 3, 2}, 0, cs{B: {4, 0}, C: {3, 0}}, A},
		{"ovf", "inactive do not count", []int32{1, 3}, 0, cs{B: {0, 500}}, B},
		{"ovf", "all full", []int32{1, 3}, 0, cs{A: {2, 0}, B: {4, 0}}, -1},
		{"ovf", "tie goes to first", []int32{3, 3}, 0, nil, A},
		{"ovf", "threshold", []int32{1, 3}, 2, cs{B: {0, 2}}, A},
	} {
		t.Run(tc.sched+"/"+tc.name, func(t *testing.T) {
			d := dests(tc.weights...)
			for i := range d {
				d[i].Upper = tc.upper
			}
			s := mustNew(t, tc.sched, d, Options{})
			if got := s.Schedule(&Flow{}, tc.c); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}
