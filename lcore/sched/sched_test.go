package sched

import (
	"reflect"
	"testing"
)

func dests(weights ...int32) []Dest {
	d := make([]Dest, len(weights))
	for i, w := range weights {
		d[i] = Dest{ID: uint32(i), Addr: 0xC6336400 + uint32(i), Port: 80, Weight: w}
	}
	return d
}

func TestRoundRobinSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int32
		want    []int
	}{
		{"three equal", []int32{1, 1, 1}, []int{0, 1, 2, 0, 1, 2, 0}},
		{"weights are ignored", []int32{5, 1}, []int{0, 1, 0, 1}},
		{"quiescent skipped", []int32{1, 0, 1}, []int{0, 2, 0, 2}},
		{"all quiescent", []int32{0, 0}, []int{-1, -1}},
		{"empty", nil, []int{-1}},
		{"one", []int32{1}, []int{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New("rr", dests(tc.weights...), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := make([]int, len(tc.want))
			for i := range got {
				got[i] = s.Schedule(&Flow{}, nil)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	if _, err := New("nope", nil, Options{}); err == nil || err.Error() != `unknown scheduler "nope" (known: rr)` {
		t.Fatalf("unknown scheduler: %v", err)
	}
	if got := Names(); !reflect.DeepEqual(got, []string{"rr"}) {
		t.Fatalf("Names = %v", got)
	}
}

func TestScheduleDoesNotAllocate(t *testing.T) {
	s, _ := New("rr", dests(1, 1, 0, 1), Options{})
	f := &Flow{}
	if n := testing.AllocsPerRun(1000, func() { s.Schedule(f, nil) }); n != 0 {
		t.Fatalf("Schedule allocates %.1f times", n)
	}
}
