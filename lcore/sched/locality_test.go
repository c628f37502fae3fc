package sched

import (
	"testing"
	"time"
)

const hour = int64(time.Hour)

type lstep struct {
	now  int64
	dst  uint32
	c    counts
	want int
}

func runSteps(t *testing.T, s Scheduler, steps []lstep) {
	t.Helper()
	for i, st := range steps {
		if got := s.Schedule(&Flow{DstIP: st.dst, Now: st.now}, st.c); got != st.want {
			t.Fatalf("step %d (t=%dns dst=%#x): got %d, want %d", i, st.now, st.dst, got, st.want)
		}
	}
}

func TestLBLC(t *testing.T) {
	const x, y = 0x0A000001, 0x0A000002
	for _, tc := range []struct {
		name    string
		weights []int32
		upper   uint32
		steps   []lstep
	}{
		{"new address by wlc, then sticks", []int32{1, 1}, 0, []lstep{
			{0, x, nil, A},
			{1, x, active(0, 0), A},
			{2, y, active(1, 0), B}, // wlc
			{3, x, active(1, 1), A}, // mapped: not wlc's first choice matters
			{4, x, active(1, 0), A}, // A active 1 = weight: not overloaded
		}},
		{"overloaded when another is under half", []int32{1, 1}, 0, []lstep{
			{0, x, nil, A},
			{1, x, active(2, 0), B}, // A 2 > 1 and B 0*2 < 1: remap by wlc
			{2, x, active(0, 2), A}, // B 2 > 1 and A under half: remap
			{3, x, active(0, 0), A},
		}},
		{"busy but nobody under half: stays", []int32{2, 2}, 0, []lstep{
			{0, x, nil, A},
			{1, x, active(3, 1), A}, // A 3 > 2 but B 1*2 = 2, not < 2
			{2, x, active(3, 0), B}, // now B is under half
		}},
		{"threshold remaps", []int32{1, 1}, 2, []lstep{
			{0, x, nil, A},
			{1, x, counts{A: {0, 2}}, B},
			{2, x, counts{A: {0, 1}}, B}, // the new mapping stays
		}},
		{"expires after 24h unused", []int32{1, 1}, 0, []lstep{
			{0, x, nil, A},
			{24*hour - 1, x, active(1, 0), A}, // still mapped; use refreshes it
			{48*hour - 2, x, active(1, 0), A},
			{72*hour - 2, x, active(1, 0), B}, // unused 24h: gone, wlc picks B
		}},
		{"none available", []int32{0, 0}, 0, []lstep{{0, x, nil, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dests(tc.weights...)
			for i := range d {
				d[i].Upper = tc.upper
			}
			runSteps(t, mustNew(t, "lblc", d, Options{}), tc.steps)
		})
	}
}

func TestLBLCR(t *testing.T) {
	const x = 0x0A000001
	for _, tc := range []struct {
		name    string
		weights []int32
		steps   []lstep
	}{
		{"set grows when members overloaded", []int32{1, 1, 1}, []lstep{
			{0, x, nil, A},             // {A}
			{1, x, active(2, 0, 0), B}, // A overloaded: wlc adds B, {A,B}
			{2, x, active(2, 0, 0), B}, // least loaded member
			{3, x, active(2, 2, 0), C}, // B overloaded too: add C
			{4, x, active(0, 2, 2), A}, // A is back the least loaded member
			{5, x, active(1, 0, 1), B}, // members compared by wlc
		}},
		{"ties go to the newest member", []int32{1, 1, 1}, []lstep{
			{0, x, nil, A},
			{1, x, active(2, 0, 0), B},
			{2, x, active(0, 0, 0), B},
		}},
		{"busiest dropped after the set is unchanged 24h", []int32{1, 1, 1}, []lstep{
			{0, x, nil, A},
			{1, x, active(2, 0, 0), B},           // {A,B} modified at t=1
			{12 * hour, x, active(1, 0, 0), B},   // used, unchanged
			{24*hour + 1, x, active(0, 1, 0), A}, // exactly 24h: A still a member, and less loaded
			{24*hour + 2, x, active(1, 0, 0), B}, // more than 24h: B chosen, then the busiest (A) dropped
			{24*hour + 3, x, active(0, 1, 0), B}, // {B}: B at its weight is not overloaded
		}},
		{"choice made before the drop", []int32{1, 1}, []lstep{
			{0, x, nil, A},
			{1, x, active(2, 0), B},           // {A,B}
			{24*hour + 2, x, active(0, 3), A}, // least loaded A chosen; busiest B dropped: {A}
			{24*hour + 3, x, active(1, 0), A}, // only A left (B would win by wlc)
		}},
		{"entry expires after 24h unused", []int32{1, 1}, []lstep{
			{0, x, nil, A},
			{24 * hour, x, active(1, 0), B},
		}},
		{"none available", []int32{0, 0}, []lstep{{0, x, nil, -1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, mustNew(t, "lblcr", dests(tc.weights...), Options{}), tc.steps)
		})
	}
}

func TestLBLCRSetMembers(t *testing.T) {
	l := mustNew(t, "lblcr", dests(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), Options{}).(*lblcr)
	const x = 7
	// Each step overloads every current member, so wlc adds the next.
	c := counts{}
	for i := 0; i < 10; i++ {
		if got := l.Schedule(&Flow{DstIP: x}, c); got != i {
			t.Fatalf("step %d: got %d", i, got)
		}
		c[uint32(i)] = [2]uint32{2 + uint32(i), 0}
	}
	e := &l.table[l.find(x, 0)]
	// The set is full at 8: the 9th and 10th replaced the busiest members
	// (7, then 8).
	want := []uint16{0, 1, 2, 3, 4, 5, 6, 9}
	got := e.set[:e.n]
	if len(got) != len(want) {
		t.Fatalf("set %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("set %v, want %v", got, want)
		}
	}
}

// collide finds n addresses sharing one probe window.
func collide(n int) []uint32 {
	var out []uint32
	want := hash32(1, localityBits)
	for a := uint32(1); len(out) < n; a++ {
		if hash32(a, localityBits) == want {
			out = append(out, a)
		}
	}
	return out
}

func TestLocalityTableFull(t *testing.T) {
	addrs := collide(localityProbe + 1)
	l := mustNew(t, "lblc", dests(1, 1), Options{}).(*lblc)
	r := mustNew(t, "lblcr", dests(1, 1), Options{}).(*lblcr)
	for i, a := range addrs[:localityProbe] {
		l.Schedule(&Flow{DstIP: a, Now: int64(10 + i)}, nil)
		r.Schedule(&Flow{DstIP: a, Now: int64(10 + i)}, nil)
	}
	// refresh the first, so the second is the least recently used
	l.Schedule(&Flow{DstIP: addrs[0], Now: 100}, nil)
	r.Schedule(&Flow{DstIP: addrs[0], Now: 100}, nil)
	l.Schedule(&Flow{DstIP: addrs[localityProbe], Now: 101}, nil)
	r.Schedule(&Flow{DstIP: addrs[localityProbe], Now: 101}, nil)
	for i, a := range addrs {
		wantIn := i != 1
		if got := l.find(a, 102) >= 0; got != wantIn {
			t.Errorf("lblc: address %d present %v, want %v", i, got, wantIn)
		}
		if got := r.find(a, 102) >= 0; got != wantIn {
			t.Errorf("lblcr: address %d present %v, want %v", i, got, wantIn)
		}
	}
}

// The sweep frees every expired entry within one turn of the table, a few
// slots per Schedule.
func TestLocalitySweep(t *testing.T) {
	l := mustNew(t, "lblc", dests(1), Options{}).(*lblc)
	r := mustNew(t, "lblcr", dests(1), Options{}).(*lblcr)
	for a := uint32(0); a < 1000; a++ {
		l.Schedule(&Flow{DstIP: a * 7, Now: 0}, nil)
		r.Schedule(&Flow{DstIP: a * 7, Now: 0}, nil)
	}
	used := func() (n, m int) {
		for i := range l.table {
			if l.table[i].dest >= 0 {
				n++
			}
			if r.table[i].n > 0 {
				m++
			}
		}
		return
	}
	if n, m := used(); n != 1000 || m != 1000 {
		t.Fatalf("%d and %d entries, want 1000", n, m)
	}
	now := 25 * hour
	for i := 0; i < LocalityTableSize/localitySweep; i++ {
		l.Schedule(&Flow{DstIP: 1 << 30, Now: now}, nil)
		r.Schedule(&Flow{DstIP: 1 << 30, Now: now}, nil)
	}
	if n, m := used(); n != 1 || m != 1 {
		t.Fatalf("%d and %d entries left after a sweep, want 1 (the live one)", n, m)
	}
}
