package sched

import (
	"reflect"
	"testing"
)

const (
	A = 0
	B = 1
	C = 2
	D = 3
)

func TestWeightedRoundRobinSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int32
		c       counts
		want    []int
	}{
		// ip_vs_wrr_schedule: cw = 4 takes A; cw = 3 A B; cw = 2 A B C;
		// cw = 1 A B C; then cw is back at 4.
		{"4,3,2", []int32{4, 3, 2}, nil, []int{A, A, B, A, B, C, A, B, C, A, A, B, A, B, C, A, B, C}},
		// seed 001: weight 2 gets two for each one of weight 1.
		{"1,2", []int32{1, 2}, nil, []int{B, A, B, B, A, B}},
		// gcd 2: di = 2, mw = 4 - 1 = 3, passes cw = 3 then 1.
		{"2,4 as 1,2", []int32{2, 4}, nil, []int{B, A, B, B, A, B}},
		{"equal is rr", []int32{3, 3, 3}, nil, []int{A, B, C, A, B, C}},
		{"5,1,1", []int32{5, 1, 1}, nil, []int{A, A, A, A, A, B, C, A, A, A, A, A, B, C}},
		{"quiescent skipped", []int32{2, 0, 1}, nil, []int{A, A, C, A, A, C}},
		{"all quiescent", []int32{0, 0, 0}, nil, []int{-1, -1}},
		{"empty", nil, nil, []int{-1}},
		{"overloaded skipped", []int32{1, 1, 1}, counts{B: {0, 9}}, []int{A, C, A, C}},
		{"overloaded heavy one", []int32{4, 3, 2}, counts{A: {9, 0}}, []int{B, B, C, B, C, B, B, C, B, C}},
		{"all overloaded", []int32{2, 1}, counts{A: {9, 0}, B: {9, 0}}, []int{-1, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dests(tc.weights...)
			for i := range d {
				d[i].Upper = 9
			}
			s := mustNew(t, "wrr", d, Options{})
			got := make([]int, len(tc.want))
			for i := range got {
				got[i] = s.Schedule(&Flow{}, tc.c)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// After all were overloaded, wrr resumes where IPVS would.
func TestWeightedRoundRobinRecovers(t *testing.T) {
	d := dests(1, 1, 1)
	for i := range d {
		d[i].Upper = 1
	}
	s := mustNew(t, "wrr", d, Options{})
	var got []int
	for i := 0; i < 2; i++ {
		got = append(got, s.Schedule(&Flow{}, nil))
	}
	all := counts{A: {1, 0}, B: {1, 0}, C: {1, 0}}
	got = append(got, s.Schedule(&Flow{}, all))
	for i := 0; i < 4; i++ {
		got = append(got, s.Schedule(&Flow{}, nil))
	}
	if want := []int{A, B, -1, C, A, B, C}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// Over many connections each server gets its weight's share.
func TestWeightedRoundRobinShares(t *testing.T) {
	s := mustNew(t, "wrr", dests(4, 3, 2, 0, 7), Options{})
	n := make([]int, 5)
	for i := 0; i < 16*100; i++ {
		n[s.Schedule(&Flow{}, nil)]++
	}
	if want := []int{400, 300, 200, 0, 700}; !reflect.DeepEqual(n, want) {
		t.Fatalf("shares %v, want %v", n, want)
	}
}
