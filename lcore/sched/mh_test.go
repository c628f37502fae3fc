package sched

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// The kernel's own self-test vector for hsiphash_1u32 on 64-bit
// (lib/tests/siphash_kunit.c, test_vectors_hsiphash[4]).
func TestHsiphashVector(t *testing.T) {
	if got := hsiphash1u32(0x03020100, 0x0706050403020100, 0x0f0e0d0c0b0a0908); got != 0x88d38328 {
		t.Fatalf("hsiphash_1u32 = %#x, want 0x88d38328", got)
	}
}

func mhDests(n int) []Dest {
	d := make([]Dest, n)
	for i := range d {
		d[i] = Dest{ID: uint32(100 + i), Addr: 0x0A010000 + uint32(i)*3, Port: 8080, Weight: 1}
	}
	return d
}

func shares(tab []int32, n int) []int {
	s := make([]int, n)
	for _, e := range tab {
		s[e]++
	}
	return s
}

func TestMaglevDeterministic(t *testing.T) {
	d := mhDests(7)
	d[2].Weight = 3
	a, b := maglevTable(d, 251), maglevTable(d, 251)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("entry %d differs: %d vs %d", i, a[i], b[i])
		}
	}
	// The input order does not matter: entries name the same servers.
	p := make([]Dest, len(d))
	perm := rand.New(rand.NewPCG(1, 2)).Perm(len(d))
	for i, j := range perm {
		p[i] = d[j]
	}
	c := maglevTable(p, 251)
	for i := range a {
		if d[a[i]].ID != p[c[i]].ID {
			t.Fatalf("entry %d: %d vs %d after shuffling", i, d[a[i]].ID, p[c[i]].ID)
		}
	}
	// Golden head of a small table, so any change of hash or fill shows:
	// the table must be the same on every machine and every release.
	want := []int32{0, 1, 1, 0, 2, 0, 1, 2, 2, 0, 2, 1, 1, 2, 2, 1, 1, 0, 1, 2, 1, 0, 1, 0}
	if got := maglevTable(mhDests(3), 251)[:len(want)]; !reflect.DeepEqual(got, want) {
		t.Fatalf("table head %v, want %v", got, want)
	}
}

func TestMaglevBalance(t *testing.T) {
	const m = DefaultMHTableSize
	for _, n := range []int{2, 3, 10, 100, 655} {
		tab := maglevTable(mhDests(n), m)
		for i, s := range shares(tab, n) {
			ideal := float64(m) / float64(n)
			if dev := (float64(s) - ideal) / ideal; dev > 0.01 || dev < -0.01 {
				t.Errorf("n=%d: dest %d has %d entries, %.2f%% off %.0f", n, i, s, dev*100, ideal)
			}
		}
	}
}

func TestMaglevWeights(t *testing.T) {
	const m = DefaultMHTableSize
	for _, tc := range []struct {
		name    string
		weights []int32
		want    []float64 // expected share
	}{
		{"1,2,3,4", []int32{1, 2, 3, 4}, []float64{.1, .2, .3, .4}},
		{"gcd scaled", []int32{1000, 3000}, []float64{.25, .75}},
		{"quiescent gets none", []int32{1, 0, 1}, []float64{.5, 0, .5}},
		// IPVS shifts weights/gcd to 6 bits: 200/4=50 turns, 100/4=25.
		{"shifted", []int32{100, 200, 100}, []float64{.25, .5, .25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := mhDests(len(tc.weights))
			for i, w := range tc.weights {
				d[i].Weight = w
			}
			for i, s := range shares(maglevTable(d, m), len(d)) {
				got := float64(s) / m
				if got-tc.want[i] > 0.01*tc.want[i]+1e-9 || tc.want[i]-got > 0.01*tc.want[i]+1e-9 {
					t.Errorf("dest %d: share %.4f, want %.4f", i, got, tc.want[i])
				}
			}
		})
	}
}

// Removing one of N servers moves its 1/N of the entries and few others.
func TestMaglevDisruption(t *testing.T) {
	const m = DefaultMHTableSize
	for _, n := range []int{5, 10, 50} {
		d := mhDests(n)
		before := maglevTable(d, m)
		gone := n / 2
		rest := append(append([]Dest{}, d[:gone]...), d[gone+1:]...)
		after := maglevTable(rest, m)
		moved, others := 0, 0
		for i := range before {
			if d[before[i]].ID != rest[after[i]].ID {
				moved++
				if int(before[i]) != gone {
					others++
				}
			}
		}
		frac := float64(moved) / m
		t.Logf("n=%d: %.4f of entries moved (1/N = %.4f), %d not from the removed server", n, frac, 1/float64(n), others)
		if frac < 1/float64(n) || frac > 1.3/float64(n) {
			t.Errorf("n=%d: %.4f of entries moved, want about 1/N = %.4f", n, frac, 1/float64(n))
		}
	}
}

func TestMaglevEdges(t *testing.T) {
	for _, tab := range [][]int32{maglevTable(nil, 251), maglevTable(mhDests(3)[:0], 251), maglevTable([]Dest{{Weight: 0}}, 251)} {
		for i, e := range tab {
			if e != -1 {
				t.Fatalf("entry %d = %d in a table without weights", i, e)
			}
		}
	}
	for i, e := range maglevTable(mhDests(1), 251) {
		if e != 0 {
			t.Fatalf("single dest: entry %d = %d", i, e)
		}
	}
	// as many servers as entries: each gets one
	if s := shares(maglevTable(mhDests(251), 251), 251); s[0] != 1 || s[250] != 1 {
		t.Fatalf("251 dests in 251 entries: %v", s)
	}
	for _, tc := range []struct {
		m int
		n int
	}{{4, 1}, {1, 0}, {-7, 0}, {65536, 1}, {251, 252}} {
		if _, err := New("mh", mhDests(tc.n), Options{MHTableSize: tc.m}); err == nil {
			t.Errorf("mh with M=%d and %d dests: no error", tc.m, tc.n)
		}
	}
}

func TestMaglevSchedule(t *testing.T) {
	d := mhDests(4)
	tab := maglevTable(d, 251)
	plain := mustNew(t, "mh", d, Options{MHTableSize: 251})
	port := mustNew(t, "mh", d, Options{MHTableSize: 251, Flags: FlagPort})
	other := mustNew(t, "mh", d, Options{MHTableSize: 251}) // another lcore
	for _, f := range flows(300) {
		want := int(tab[hsiphash32(f.SrcIP, mhKey1)%251])
		if got := plain.Schedule(&f, nil); got != want {
			t.Fatalf("flow %+v: got %d, want %d", f, got, want)
		}
		if got := other.Schedule(&f, nil); got != want {
			t.Fatalf("another instance: got %d, want %d", got, want)
		}
		want = int(tab[hsiphash32(f.SrcIP+uint32(f.SrcPort), mhKey1)%251])
		if got := port.Schedule(&f, nil); got != want {
			t.Fatalf("mh-port flow %+v: got %d, want %d", f, got, want)
		}
	}
}

func TestMaglevFallback(t *testing.T) {
	d := mhDests(4)
	for i := range d {
		d[i].Upper = 1
	}
	tab := maglevTable(d, 251)
	c := counts{d[1].ID: {1, 0}} // dest 1 overloaded
	strict := mustNew(t, "mh", d, Options{MHTableSize: 251})
	fb := mustNew(t, "mh", d, Options{MHTableSize: 251, Flags: FlagFallback})
	hit := 0
	for _, f := range flows(400) {
		h := hsiphash32(f.SrcIP, mhKey1) % 251
		got, gotFB := strict.Schedule(&f, c), fb.Schedule(&f, c)
		if tab[h] != 1 {
			if got != int(tab[h]) || gotFB != int(tab[h]) {
				t.Fatalf("available dest %d: got %d and %d", tab[h], got, gotFB)
			}
			continue
		}
		hit++
		// IPVS's probe: rehash with roffset = h, h+1, ...
		want := -1
		for off := uint32(0); off < 251; off++ {
			if e := tab[hsiphash32((off+h)%251+f.SrcIP, mhKey1)%251]; e != 1 {
				want = int(e)
				break
			}
		}
		if got != -1 || gotFB != want || want < 0 {
			t.Fatalf("overloaded dest: strict %d (want -1), fallback %d (want %d)", got, gotFB, want)
		}
	}
	if hit == 0 {
		t.Fatal("no flow hashed to the overloaded dest")
	}
	all := counts{}
	for i := range d {
		all[d[i].ID] = [2]uint32{1, 0}
	}
	if got := fb.Schedule(&Flow{SrcIP: 9}, all); got != -1 {
		t.Fatalf("all overloaded with fallback: %d", got)
	}
}
