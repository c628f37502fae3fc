package sched

import (
	"reflect"
	"strings"
	"testing"
)

var allNames = []string{"dh", "fo", "lblc", "lblcr", "lc", "mh", "nq", "ovf", "rr", "sed", "sh", "twos", "wlc", "wrr"}

func dests(weights ...int32) []Dest {
	d := make([]Dest, len(weights))
	for i, w := range weights {
		d[i] = Dest{ID: uint32(i), Addr: 0xC6336400 + uint32(i), Port: 80, Weight: w}
	}
	return d
}

// counts is a fake Counts: id -> {active, inactive}.
type counts map[uint32][2]uint32

func (c counts) Active(id uint32) uint32   { return c[id][0] }
func (c counts) Inactive(id uint32) uint32 { return c[id][1] }

// active makes counts with the given active connections by index (= ID).
func active(a ...uint32) counts {
	c := counts{}
	for i, n := range a {
		c[uint32(i)] = [2]uint32{n, 0}
	}
	return c
}

func mustNew(t testing.TB, name string, d []Dest, o Options) Scheduler {
	t.Helper()
	s, err := New(name, d, o)
	if err != nil {
		t.Fatalf("New(%q): %v", name, err)
	}
	return s
}

func TestRoundRobinSequences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int32
		c       counts
		want    []int
	}{
		{"three equal", []int32{1, 1, 1}, nil, []int{0, 1, 2, 0, 1, 2, 0}},
		{"weights are ignored", []int32{5, 1}, nil, []int{0, 1, 0, 1}},
		{"quiescent skipped", []int32{1, 0, 1}, nil, []int{0, 2, 0, 2}},
		{"all quiescent", []int32{0, 0}, nil, []int{-1, -1}},
		{"empty", nil, nil, []int{-1}},
		{"one", []int32{1}, nil, []int{0, 0, 0}},
		{"overloaded skipped", []int32{1, 1, 1}, counts{1: {5, 0}}, []int{0, 2, 0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := dests(tc.weights...)
			for i := range d {
				d[i].Upper = 5
			}
			s := mustNew(t, "rr", d, Options{})
			got := make([]int, len(tc.want))
			for i := range got {
				got[i] = s.Schedule(&Flow{}, tc.c)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRoundRobinPlain: with every dest weighted and no thresholds rr
// takes its turn without a search (plain), and picks as the search does.
func TestRoundRobinPlain(t *testing.T) {
	for _, weights := range [][]int32{{1}, {1, 1}, {5, 1, 2}, {1, 0, 1}, {0}, nil} {
		s := mustNew(t, "rr", dests(weights...), Options{}).(*roundRobin)
		plain := len(weights) > 0
		for _, w := range weights {
			plain = plain && w > 0
		}
		if s.plain != plain {
			t.Fatalf("%v: plain %v", weights, s.plain)
		}
		searched := mustNew(t, "rr", dests(weights...), Options{}).(*roundRobin)
		searched.plain = false
		for i := range 3*len(weights) + 1 {
			if got, want := s.Schedule(&Flow{}, nil), searched.Schedule(&Flow{}, nil); got != want {
				t.Fatalf("%v: pick %d: %d, the search's %d", weights, i, got, want)
			}
		}
	}
	d := dests(1, 1)
	d[1].Upper = 10
	if s := mustNew(t, "rr", d, Options{}).(*roundRobin); s.plain {
		t.Fatal("plain with a threshold")
	}
}

func TestRegistry(t *testing.T) {
	want := `unknown scheduler "nope" (known: ` + strings.Join(allNames, ", ") + `)`
	if _, err := New("nope", nil, Options{}); err == nil || err.Error() != want {
		t.Fatalf("unknown scheduler: %v", err)
	}
	if got := Names(); !reflect.DeepEqual(got, allNames) {
		t.Fatalf("Names = %v", got)
	}
	for _, n := range allNames {
		for _, d := range [][]Dest{nil, dests(1), dests(0, 0)} {
			s := mustNew(t, n, d, Options{MHTableSize: 251, Flags: FlagFallback | FlagPort})
			if got := s.Schedule(&Flow{}, nil); len(d) == 0 || d[0].Weight == 0 {
				if got != -1 {
					t.Errorf("%s over %d dests without weight: got %d, want -1", n, len(d), got)
				}
			}
		}
	}
}

// flows gives a varied set of flows for properties that hold for all.
func flows(n int) []Flow {
	f := make([]Flow, n)
	for i := range f {
		f[i] = Flow{SrcIP: 0x0A000000 + uint32(i)*7919, DstIP: 0xCB007100 + uint32(i%13), SrcPort: uint16(1024 + i), DstPort: 80, Proto: 6, Now: int64(i) * 1e6}
	}
	return f
}

func TestScheduleDoesNotAllocate(t *testing.T) {
	for _, n := range allNames {
		t.Run(n, func(t *testing.T) {
			d := dests(3, 1, 0, 2, 5)
			d[1].Upper = 2
			s := mustNew(t, n, d, Options{Flags: FlagFallback | FlagPort})
			fs := flows(64)
			c := active(0, 3, 1, 4, 9)
			i := 0
			if a := testing.AllocsPerRun(1000, func() {
				s.Schedule(&fs[i%len(fs)], c)
				i++
			}); a != 0 {
				t.Fatalf("Schedule allocates %.1f times", a)
			}
		})
	}
}

// Weight 0 is quiescent for every scheduler: with one real server of
// weight 1 among quiescent ones, every new connection goes to it whatever
// the counts (ovf: while its active do not exceed the weight).
func TestQuiescentNeverChosen(t *testing.T) {
	for _, n := range allNames {
		t.Run(n, func(t *testing.T) {
			s := mustNew(t, n, dests(0, 1, 0), Options{Flags: FlagFallback})
			for _, f := range flows(300) {
				if got := s.Schedule(&f, active(0, 1, 0)); got != 1 {
					t.Fatalf("flow %+v: got %d, want 1", f, got)
				}
			}
		})
	}
}

// The -x/-y hysteresis, the same for every scheduler: a single real server
// (weight 100, so ovf's own rule stays out of the way) takes new
// connections until its total reaches Upper, then none until the total
// drops below Lower (or 3/4 of Upper when Lower is 0).
func TestThresholdHysteresis(t *testing.T) {
	type step struct {
		active, inactive uint32
		want             int
	}
	for _, tc := range []struct {
		name         string
		upper, lower uint32
		steps        []step
	}{
		{"no limit", 0, 0, []step{{0, 0, 0}, {0, 100000, 0}}},
		{"lower 0 is 3/4 of upper", 4, 0, []step{
			{0, 0, 0}, {1, 2, 0}, {2, 2, -1}, {1, 2, -1}, {0, 3, -1}, {2, 0, 0}, {3, 0, 0}, {0, 4, -1}, {0, 7, -1}, {0, 2, 0},
		}},
		{"lower set", 10, 5, []step{
			{9, 0, 0}, {5, 5, -1}, {6, 0, -1}, {0, 5, -1}, {4, 0, 0}, {9, 0, 0}, {9, 1, -1},
		}},
		{"upper 1", 1, 0, []step{{0, 0, 0}, {0, 1, -1}, {0, 0, 0}}},
	} {
		for _, n := range allNames {
			t.Run(tc.name+"/"+n, func(t *testing.T) {
				d := dests(100)
				d[0].Upper, d[0].Lower = tc.upper, tc.lower
				s := mustNew(t, n, d, Options{Flags: FlagFallback})
				for i, st := range tc.steps {
					c := counts{0: {st.active, st.inactive}}
					if got := s.Schedule(&Flow{SrcIP: 1, DstIP: 2}, c); got != st.want {
						t.Fatalf("step %d (%d active, %d inactive): got %d, want %d", i, st.active, st.inactive, got, st.want)
					}
				}
			})
		}
	}
}

// Schedulers that look at other servers must move away from an overloaded
// one, and give none when all are overloaded.
func TestOverloadedAvoided(t *testing.T) {
	for _, n := range allNames {
		t.Run(n, func(t *testing.T) {
			d := dests(1, 1)
			d[0].Upper, d[1].Upper = 3, 3
			s := mustNew(t, n, d, Options{Flags: FlagFallback})
			for _, f := range flows(100) {
				if got := s.Schedule(&f, counts{0: {0, 3}}); got != 1 {
					t.Fatalf("dest 0 overloaded: got %d, want 1", got)
				}
			}
			if got := s.Schedule(&Flow{}, counts{0: {0, 3}, 1: {3, 0}}); got != -1 {
				t.Fatalf("all overloaded: got %d, want -1", got)
			}
		})
	}
}

func TestNilFlowAndCounts(t *testing.T) {
	for _, n := range allNames {
		s := mustNew(t, n, dests(1, 2), Options{})
		for _, f := range []*Flow{nil, {}} {
			got := s.Schedule(f, nil)
			if got < -1 || got > 1 {
				t.Errorf("%s: Schedule(%v, nil) = %d", n, f, got)
			}
		}
	}
}

// TestRoundRobinAhead: rr foretells each of its next picks, k ahead,
// without changing them; with a dest that may be skipped it does not
// claim to know.
func TestRoundRobinAhead(t *testing.T) {
	s := mustNew(t, "rr", dests(1, 1, 1), Options{})
	fs, ok := s.(Foresight)
	if !ok {
		t.Fatal("rr is not a Foresight")
	}
	s.Schedule(&Flow{}, nil) // start away from dest 0
	var foretold [7]int
	for k := range foretold {
		idx, ok := fs.Ahead(k)
		if !ok {
			t.Fatalf("Ahead(%d) not known", k)
		}
		foretold[k] = idx
	}
	for k, want := range foretold {
		if got := s.Schedule(&Flow{}, nil); got != want {
			t.Fatalf("pick %d: %d, foretold %d", k, got, want)
		}
	}
	for _, w := range [][]int32{{1, 0, 1}, nil} {
		if idx, ok := mustNew(t, "rr", dests(w...), Options{}).(Foresight).Ahead(0); ok {
			t.Errorf("weights %v: Ahead(0) = %d, known; want unknown", w, idx)
		}
	}
	d := dests(1, 1)
	d[1].Upper = 10 // thresholds: a dest may be skipped
	if _, ok := mustNew(t, "rr", d, Options{}).(Foresight).Ahead(0); ok {
		t.Error("with thresholds: Ahead(0) known; want unknown")
	}
}
