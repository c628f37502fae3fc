package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestCasesOfRounds: the later rounds measure the cases the targets read,
// in the list's order, and nothing else.
func TestCasesOfRounds(t *testing.T) {
	got := casesOfRounds("loop, testpmd,nat,nat6,nat-1m,nat-10m,dr-new,nat-synproxy,nat-2lc")
	want := []string{"testpmd", "nat", "nat-1m", "dr-new", "nat-synproxy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestMedianRounds: a target measured in several rounds is the median
// round's, whatever the order of the rounds, with every round's figure in
// round order; one measured once stays the first round's.
func TestMedianRounds(t *testing.T) {
	round := func(v float64, verdict string, once bool) []Target {
		a := Target{Target: "rate", Measured: si(v) + "/s", Verdict: verdict}
		a.measured(v, si(v)+"/s")
		b := Target{Target: "lookup", Measured: "not measured by this run", Verdict: "n/a"}
		ts := []Target{a, b}
		if once {
			c := Target{Target: "10M", Measured: "0.84x", Verdict: "n/a"}
			c.measured(0.84, "0.84x")
			ts = append(ts, c)
		}
		return ts
	}
	got := medianRounds([][]Target{round(2.9e6, "not met", true), round(3.5e6, "met", false), round(3.1e6, "met", false)})
	if len(got) != 3 {
		t.Fatalf("%d targets: %+v", len(got), got)
	}
	if r := got[0]; r.Verdict != "met" || r.Measured != "median of 3 rounds: "+si(3.1e6)+"/s" ||
		!reflect.DeepEqual(r.Rounds, []string{si(2.9e6) + "/s", si(3.5e6) + "/s", si(3.1e6) + "/s"}) {
		t.Fatalf("median: %+v", r)
	}
	if r := got[1]; r.Measured != "not measured by this run" || r.Rounds != nil {
		t.Fatalf("unmeasured: %+v", r)
	}
	if r := got[2]; r.Measured != "0.84x" || r.Rounds != nil {
		t.Fatalf("measured once: %+v", r)
	}
	// Of an even count, the lower middle one.
	got = medianRounds([][]Target{round(4e6, "met", false), round(1e6, "not met", false)})
	if !strings.HasPrefix(got[0].Measured, "median of 2 rounds: "+si(1e6)) {
		t.Fatalf("even: %+v", got[0])
	}
	// One round: the targets as they are.
	if got := medianRounds([][]Target{round(2.9e6, "not met", false)}); got[0].Measured != si(2.9e6)+"/s" || got[0].Rounds != nil {
		t.Fatalf("one round: %+v", got[0])
	}
}

// TestRoundsReport: the report's Rounds section gives each repeated case's
// figures round by round, and the targets table the rounds' figures.
func TestRoundsReport(t *testing.T) {
	mk := func(rx, p99 float64) *Case {
		return &Case{Name: "nat", steps: []step{{Offered: 1e6, SrvPPS: 1e6, OneWay: struct {
			P50  float64 `json:"p50_us"`
			P99  float64 `json:"p99_us"`
			P999 float64 `json:"p999_us"`
		}{P99: p99}}, {SrvPPS: rx}}}
	}
	res := Results{Cases: []*Case{mk(2.1e6, 12.5)}, Rounds: [][]*Case{{mk(1.9e6, 20)}, {mk(2.3e6, 11)}}}
	res.Issue11 = issue11Targets(res)
	out := string(report(res, options{}, nil, "x"))
	if !strings.Contains(out, "| nat | 2.10, p99 12.5 | 1.90, p99 20.0 | 2.30, p99 11.0 |") {
		t.Fatalf("no rounds row in:\n%s", out)
	}
}
