package main

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Rounds. On this machine's two shared vCPUs the host's speed moves by
// 1.5x and more from one minute to the next, with every stage of a case
// (the driver's as much as lbd's own work) moving together: one sample of
// a case is as much a sample of the host as of the code. A run therefore
// measures the cases that issue #11's and #15's targets read again, in
// further rounds after the first (each round runs them in the same order,
// so a case's samples are minutes apart), and each of those targets gives
// the median round: its figure, and every round's beside it. The median
// needs no direction (higher or lower is better), and with three rounds
// one disturbed round cannot decide a verdict either way.

// roundCases are the cases issue #11's and #15's targets read: the
// references (for the tail and the cost), the three methods at 1k and 1M
// flows, new connections, and the SYN cookies.
var roundCases = map[string]bool{
	"testpmd": true, "testpmd-1way": true,
	"nat": true, "dr": true, "tun": true,
	"nat-1m": true, "dr-1m": true, "tun-1m": true,
	"nat-new": true, "dr-new": true, "tun-new": true,
	"nat-synproxy": true,
}

// roundRates are the steps those targets read, the latency step and the
// highest rate, after one at 500k pps: a case's first step carries its
// start-up (testpmd's, measured first, had a single 20 ms stall and ten
// times its p99).
const roundRates = "500k,1M,max"

// casesOfRounds are the cases of the run's list that the later rounds
// measure again, in the list's order.
func casesOfRounds(list string) []string {
	var out []string
	for _, name := range strings.Split(list, ",") {
		if name = strings.TrimSpace(name); roundCases[name] {
			out = append(out, name)
		}
	}
	return out
}

// medianRounds gives each target of the first round's list the median of
// the rounds that measured it (the lower middle one of an even count),
// with every round's figure in Rounds. A target measured by fewer than two
// rounds is the first round's as it is.
func medianRounds(rounds [][]Target) []Target {
	if len(rounds) == 0 {
		return nil
	}
	out := make([]Target, 0, len(rounds[0]))
	for _, t := range rounds[0] {
		var got []Target
		for _, r := range rounds {
			for _, u := range r {
				if u.Target == t.Target && u.valued {
					got = append(got, u)
				}
			}
		}
		if len(got) < 2 {
			out = append(out, t)
			continue
		}
		var figures []string
		for _, u := range got {
			figures = append(figures, u.short)
		}
		sort.SliceStable(got, func(i, j int) bool { return got[i].value < got[j].value })
		m := got[(len(got)-1)/2]
		m.Measured = fmt.Sprintf("median of %d rounds: %s", len(got), m.Measured)
		m.Rounds = figures
		out = append(out, m)
	}
	return out
}

// issue11Targets are issue #11's and #15's targets over the first round
// (the run's cases) and the later ones.
func issue11Targets(res Results) []Target {
	rounds := [][]Target{targets11(res.Cases)}
	for _, r := range res.Rounds {
		rounds = append(rounds, targets11(r))
	}
	out := medianRounds(rounds)
	for i := range out {
		if out[i].Target == lookupTarget { // measured once, not per round
			out[i] = lookupRow(res.Lookup)
		}
	}
	return out
}

// roundsSection is each repeated case's highest rate and p99 at the
// latency step, round by round.
func roundsSection(b *bytes.Buffer, res Results) {
	if len(res.Rounds) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Rounds\n\nThe cases the targets above read, measured in %d rounds: the first is the run above, the later ones ran them again in the same order at %s pps offered. Per round: the highest rate received (Mpps; cookies answered for `nat-synproxy`, new connections per second for the `-new` cases as well), then the one-way p99 at %s pps (µs; none for the cookies, which are answered to the client).\n\n",
		len(res.Rounds)+1, roundRates, si(latencyOffered))
	fmt.Fprintf(b, "| case |")
	for r := range len(res.Rounds) + 1 {
		fmt.Fprintf(b, " round %d |", r+1)
	}
	fmt.Fprintf(b, "\n|---|%s\n", strings.Repeat("---|", len(res.Rounds)+1))
	for _, name := range casesOfRoundsIn(res) {
		fmt.Fprintf(b, "| %s |", name)
		for _, round := range append([][]*Case{res.Cases}, res.Rounds...) {
			fmt.Fprintf(b, " %s |", roundFigure(caseNamed(round, name)))
		}
		fmt.Fprintln(b)
	}
}

// casesOfRoundsIn are the names of the cases the later rounds measured.
func casesOfRoundsIn(res Results) []string {
	var names []string
	seen := map[string]bool{}
	for _, r := range res.Rounds {
		for _, c := range r {
			if !seen[c.Name] {
				seen[c.Name] = true
				names = append(names, c.Name)
			}
		}
	}
	return names
}

func caseNamed(cases []*Case, name string) *Case {
	for _, c := range cases {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// roundFigure is a case's highest received rate, its new connections per
// second (the -new cases) and its p99 at the latency step.
func roundFigure(c *Case) string {
	if c == nil || maxStep(c) < 0 {
		return "-"
	}
	s := c.steps[maxStep(c)]
	out := mpps(s.SrvPPS)
	best := 0.0 // as the new-connection target reads it: the best step's
	for _, m := range c.Metrics {
		best = max(best, m.NewConnsPerSec)
	}
	if best > 0 {
		out += fmt.Sprintf(" (%s conn/s)", si(best))
	}
	if i := latencyStep(c); i >= 0 && c.steps[i].Offered == latencyOffered && c.steps[i].OneWay.P99 > 0 {
		out += fmt.Sprintf(", p99 %.1f", c.steps[i].OneWay.P99)
	}
	return out
}
