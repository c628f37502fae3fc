package main

import (
	"fmt"
	"strings"
)

// targets11 are issue #11's targets with what this run measured:
// reported, never asserted.
func targets11(cases []*Case) []Target {
	byName := map[string]*Case{}
	var tsc uint64
	for _, c := range cases {
		byName[c.Name] = c
		if c.tscHz > 0 {
			tsc = c.tscHz
		}
	}
	rx := func(c *Case) float64 {
		if c == nil || maxStep(c) < 0 {
			return 0
		}
		return c.steps[maxStep(c)].SrvPPS
	}
	var out []Target
	for _, m := range []string{"nat", "dr", "tun"} {
		t := Target{Target: fmt.Sprintf("flow scale, %s: 1M flows at 0.8x or more of the 1k-flow rate", m), Measured: "not run", Verdict: "n/a"}
		if a, b := rx(byName[m]), rx(byName[m+"-1M"]); a > 0 && b > 0 {
			t.Measured = fmt.Sprintf("%.2fx (%s / %s Mpps)", b/a, mpps(b), mpps(a))
			t.Verdict = verdict(b/a >= 0.8)
			t.measured(b/a, fmt.Sprintf("%.2fx", b/a))
		}
		out = append(out, t)
	}
	if a, b := rx(byName["nat"]), rx(byName["nat-10M"]); a > 0 && b > 0 {
		out = append(out, Target{Target: "flow scale, nat: 10M flows (reported)", Measured: fmt.Sprintf("%.2fx (%s / %s Mpps)", b/a, mpps(b), mpps(a)), Verdict: "n/a"})
	}
	out = append(out, lookupRow(nil)) // issue11Targets puts the run's measure in

	for _, n := range []struct {
		name  string
		limit float64
	}{{"nat-new", 2e6}, {"dr-new", 3e6}, {"tun-new", 3e6}} {
		t := Target{Target: fmt.Sprintf("new connections, %s: %s/s or more on one lcore, %s live entries or more", n.name, si(n.limit), si(newConnLive)), Measured: "not run", Verdict: "n/a"}
		if c := byName[n.name]; c != nil && len(c.Metrics) > 0 {
			v, live, at := 0.0, uint64(0), 0
			for i, m := range c.Metrics {
				if m.NewConnsPerSec > v {
					v, live, at = m.NewConnsPerSec, m.LiveConns, i
				}
			}
			// The target holds with 4M live entries or more as they arrive.
			t.Measured = fmt.Sprintf("%s/s, %s live entries after that step", si(v), si(float64(live)))
			if ceiling := newConnCeiling(c.Metrics[at], tsc); ceiling != "" {
				t.Measured += "; " + ceiling
			}
			t.Verdict = verdict(v >= n.limit && live >= newConnLive)
			t.measured(v, si(v)+"/s")
		}
		out = append(out, t)
	}

	for _, m := range []string{"nat", "dr", "tun"} {
		t := Target{Target: fmt.Sprintf("tail, %s: p99 at %s pps within 2x the reference's p99 + 10 µs", m, si(latencyOffered)), Measured: "not run", Verdict: "n/a"}
		c := byName[m]
		ref := (*Case)(nil)
		if c != nil {
			ref = refFor(c, byName)
		}
		if c != nil && ref != nil && latencyStep(c) >= 0 && latencyStep(ref) >= 0 {
			s, r := c.steps[latencyStep(c)], ref.steps[latencyStep(ref)]
			limit := 2*r.OneWay.P99 + 10
			t.Measured = fmt.Sprintf("p99 %.1f µs (limit %.1f: %s p99 %.1f); p99.9 %.1f µs (%s %.1f)", s.OneWay.P99, limit, ref.Name, r.OneWay.P99,
				s.OneWay.P999, ref.Name, r.OneWay.P999)
			t.Verdict = verdict(s.OneWay.P99 <= limit)
			// Ordered by the margin: the reference's p99 moves too.
			t.measured(s.OneWay.P99-limit, fmt.Sprintf("%.1f (limit %.1f)", s.OneWay.P99, limit))
		}
		out = append(out, t)
	}

	for _, m := range []struct {
		name  string
		limit float64
	}{{"nat", 100}, {"dr", 60}, {"tun", 0}} {
		name := fmt.Sprintf("cost, %s: busy cycles/pkt minus the reference's", m.name)
		if m.limit > 0 {
			name += fmt.Sprintf(" within %.0f", m.limit)
		}
		t := Target{Target: name, Measured: "not run", Verdict: "n/a"}
		c := byName[m.name]
		if c == nil || maxStep(c) < 0 || maxStep(c) >= len(c.Metrics) {
			out = append(out, t)
			continue
		}
		met := c.Metrics[maxStep(c)]
		ref := refFor(c, byName)
		rc := effectiveCPP(ref, tsc)
		var parts []string
		for _, s := range stages {
			parts = append(parts, fmt.Sprintf("%s %.0f", s, met.StageCPP[s]))
		}
		stagesText := ""
		if len(met.StageCPP) > 0 {
			stagesText = fmt.Sprintf("; stages %s: own work (parse+lookup+process) %.0f", strings.Join(parts, ", "), met.ownCycles())
		}
		if rc == 0 {
			t.Measured = fmt.Sprintf("lbd busy %.0f; no reference%s", met.CyclesPerPacket, stagesText)
		} else {
			d := met.CyclesPerPacket - rc
			t.measured(d, fmt.Sprintf("%.0f", d))
			t.Measured = fmt.Sprintf("%.0f (lbd busy %.0f - %s %.0f effective)%s", d, met.CyclesPerPacket, ref.Name, rc, stagesText)
			switch {
			case d < 0:
				// The reference forwarded less than lbd: it was starved
				// (a busy machine), so the difference says nothing.
				t.Verdict = "n/a (reference slower than lbd)"
			case m.limit > 0:
				t.Verdict = verdict(d <= m.limit)
			}
		}
		out = append(out, t)
	}
	return append(out, synCookieTarget(byName["nat-synproxy"], tsc))
}

// newConnLive is how many live entries issue #11's new-connection target
// wants in the table while the connections arrive.
const newConnLive = 4e6

// newConnCeiling says what the worker's own time per new connection
// allows, from step m of a -new case: its busy share, the TSC cycles of
// busy time per connection (the SYN, and for NAT the server's SYN-ACK,
// with the expiry that makes room), and the rate that cost gives at 100%
// busy: when the generator, not lbd, was the limit, the rate lbd could
// take. Empty when the step counted no busy time.
func newConnCeiling(m StepMetrics, tsc uint64) string {
	busy := 0.0
	for _, b := range m.LcoreBusy {
		busy = max(busy, b)
	}
	if busy <= 0 || m.NewConnsPerSec <= 0 || tsc == 0 {
		return ""
	}
	perConn := float64(tsc) * busy / 100 / m.NewConnsPerSec
	return fmt.Sprintf("at %.0f%% busy, %.0f busy cycles per connection: %s/s at 100%% busy", busy, perConn, si(float64(tsc)/perConn))
}

// synCookieTarget is issue #15's SYN proxy rate: cookies answered per
// second on one lcore, with what the lcore's busy cycles per SYN say it
// could answer at 100% busy (when lbgen, not lbd, was the limit).
func synCookieTarget(c *Case, tsc uint64) Target {
	t := Target{Target: "SYN cookies (issue #15), nat-synproxy: 3M/s or more on one lcore", Measured: "not run", Verdict: "n/a"}
	if c == nil || maxStep(c) < 0 {
		return t
	}
	best := c.steps[maxStep(c)].CliPPS
	t.Measured, t.Verdict = fmt.Sprintf("%s/s", si(best)), verdict(best >= 3e6)
	t.measured(best, si(best)+"/s")
	if i := maxStep(c); i < len(c.Metrics) && c.Metrics[i].CyclesPerPacket > 0 && tsc > 0 {
		m := c.Metrics[i]
		busy := 0.0
		for _, b := range m.LcoreBusy {
			busy = max(busy, b)
		}
		t.Measured += fmt.Sprintf(" at %.0f%% busy, %.0f busy cycles per SYN: %s/s at 100%% busy", busy, m.CyclesPerPacket, si(float64(tsc)/m.CyclesPerPacket))
	}
	return t
}
