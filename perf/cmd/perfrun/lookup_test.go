package main

import (
	"strings"
	"testing"
)

func TestMeasureLookupScale(t *testing.T) {
	s, err := measureLookupScale(1<<10, 1<<14) // the 10M table is the run's; small ones here
	if err != nil {
		t.Fatal(err)
	}
	if len(s.NsPerKey) != lookupTurns || s.Ratio <= 0 {
		t.Fatalf("%+v", s)
	}
	for i, turn := range s.NsPerKey {
		if f := s.FloorNsPerKey[i]; turn[0] <= 0 || turn[1] <= 0 || f[0] <= 0 || f[1] <= 0 {
			t.Fatalf("a turn timed nothing: %+v, floor %+v", s.NsPerKey, s.FloorNsPerKey)
		}
	}
}

func TestLookupRow(t *testing.T) {
	if r := lookupRow(nil); r.Verdict != "n/a" || r.Target != lookupTarget {
		t.Errorf("not measured: %+v", r)
	}
	s := &LookupScale{Small: 1 << 10, Large: 10_000_000, NsPerKey: [][2]float64{{30, 58}, {31, 70}, {29, 57}}, Ratio: 1.97}
	r := lookupRow(s)
	if r.Verdict != "met" || !strings.Contains(r.Measured, "median of 3 turns: 1.97x (58.0 / 30.0, 70.0 / 31.0, 57.0 / 29.0 ns per lookup among 10M / 1.02k") {
		t.Errorf("measured: %+v", r)
	}
	s.FloorNsPerKey = [][2]float64{{4, 30}, {5, 29}, {4, 31}}
	if r := lookupRow(s); !strings.HasSuffix(r.Measured, "; the memory alone, the two lines a lookup reaches per key (a lower bound): median 30.0 / 4.0 ns") {
		t.Errorf("with the floor: %+v", r)
	}
	if s.Ratio = 2.1; lookupRow(s).Verdict != "not met" {
		t.Error("2.1x met the 2x target")
	}
	// issue11Targets gives the run's measure in place of the rounds' n/a.
	res := Results{Lookup: s}
	var found bool
	for _, tg := range issue11Targets(res) {
		if tg.Target == lookupTarget {
			found = true
			if tg.Verdict != "not met" {
				t.Errorf("issue11Targets' row: %+v", tg)
			}
		}
	}
	if !found {
		t.Error("issue11Targets has no lookup row")
	}
}
