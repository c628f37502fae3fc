package main

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Target is one of the issues' targets with what this run measured. The
// verdicts are reported, never asserted.
type Target struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Verdict  string `json:"verdict"` // met, not met, or n/a (not measured)
	// Rounds is this target's figure in each round of the run that
	// measured it, in round order, when the run had more than one
	// (rounds.go); Measured and Verdict are then the median round's.
	Rounds []string `json:"rounds,omitempty"`
	// value orders the rounds (valued: this round measured it); short
	// is the figure shown for it among the rounds.
	value  float64
	short  string
	valued bool
}

// measured records the figure rounds are compared by, and how it reads.
func (t *Target) measured(v float64, short string) {
	t.value, t.short, t.valued = v, short, true
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// forwardedPPS is what the forwarder in the middle handled per second at
// a step: both directions when the server side answers.
func forwardedPPS(c *Case, s step) float64 {
	if c.OneWay {
		return s.SrvPPS
	}
	return s.SrvPPS + s.CliPPS
}

// effectiveCPP is the forwarder's CPU cycles per forwarded packet at its
// highest received rate, counting the whole forwarding CPU (busy or
// not): TSC rate / packets forwarded per second. It is the one
// cycles-per-packet figure testpmd and lbd share; it is an upper bound
// of the work per packet when the forwarder was not saturated.
func effectiveCPP(c *Case, tsc uint64) float64 {
	if c == nil || tsc == 0 || maxStep(c) < 0 {
		return 0
	}
	i := maxStep(c)
	if f := forwardedPPS(c, c.steps[i]); f > 0 {
		return float64(tsc) / f
	}
	return 0
}

func targets(cases []*Case) []Target {
	byName := map[string]*Case{}
	var tsc uint64
	for _, c := range cases {
		byName[c.Name] = c
		if c.tscHz > 0 {
			tsc = c.tscHz
		}
	}
	var out []Target
	cppTarget := func(name, label string, limit float64) {
		t := Target{Target: fmt.Sprintf("%s established: within %.1fx the reference's cycles/packet", label, limit), Verdict: "n/a"}
		c := byName[name]
		if c == nil || maxStep(c) < 0 {
			t.Measured = "not run"
			out = append(out, t)
			return
		}
		ref := refFor(c, byName)
		lc, rc := effectiveCPP(c, tsc), effectiveCPP(ref, tsc)
		busy := "-"
		if i := maxStep(c); i < len(c.Metrics) && c.Metrics[i].CyclesPerPacket > 0 {
			busy = fmt.Sprintf("%.0f", c.Metrics[i].CyclesPerPacket)
		}
		if lc == 0 || rc == 0 {
			t.Measured = fmt.Sprintf("lbd busy %s cyc/pkt; no reference", busy)
			out = append(out, t)
			return
		}
		r := lc / rc
		t.Measured = fmt.Sprintf("%.2fx (%.0f vs %s %.0f cyc per forwarded pkt at max; lbd busy %s)", r, lc, ref.Name, rc, busy)
		t.Verdict = verdict(r <= limit)
		out = append(out, t)
	}
	cppTarget("nat", "VS/NAT", 1.5)
	cppTarget("dr", "VS/DR", 1.3)
	cppTarget("tun", "VS/TUN", 1.3)

	t := Target{Target: "new connections: 1M/s or more on one lcore", Verdict: "n/a", Measured: "not run"}
	parts, met, unmet := []string{}, []string{}, []string{}
	for _, n := range []string{"nat-new", "dr-new", "tun-new"} {
		c := byName[n]
		if c == nil || c.Spec == nil || c.Spec.Lcores != 1 {
			continue
		}
		v := 0.0
		for _, m := range c.Metrics {
			v = max(v, m.NewConnsPerSec)
		}
		parts = append(parts, fmt.Sprintf("%s %s/s", n, si(v)))
		if v >= 1e6 {
			met = append(met, n)
		} else {
			unmet = append(unmet, n)
		}
	}
	if len(parts) > 0 {
		t.Measured = strings.Join(parts, ", ")
		switch {
		case len(unmet) == 0:
			t.Verdict = "met"
		case len(met) == 0:
			t.Verdict = "not met"
		default:
			t.Verdict = fmt.Sprintf("met by %s, not met by %s", strings.Join(met, ", "), strings.Join(unmet, ", "))
		}
	}
	out = append(out, t)

	out = append(out,
		Target{Target: "connection entry 64 bytes or less (IPv4)", Measured: "64 bytes (compile-time check in lcore/conn; not measured by this run)", Verdict: "met"},
		Target{Target: "10 million connections in 1 GiB or less", Measured: "104 bytes per connection with index, free list and expiry bound: 10.3M per GiB (perf/README.md; not measured by this run)", Verdict: "met"})

	for _, n := range []string{"nat", "dr", "tun"} {
		t := Target{Target: fmt.Sprintf("%s: p99 added latency < 20 µs at 80%% of the zero-loss rate", n), Verdict: "n/a", Measured: "not run"}
		c := byName[n]
		if c != nil && len(c.steps) > 0 {
			t.Measured, t.Verdict = addedLatency(c, byName["loop"])
		}
		out = append(out, t)
	}
	return out
}

// addedLatency finds the zero-loss rate (the highest sent rate of a step
// without loss), the step with the highest offered load at most 80% of it,
// and the p99 one-way latency there minus the loop's at the same offered
// load (the generator's own share).
func addedLatency(c, loop *Case) (string, string) {
	zlr := 0.0
	for _, s := range c.steps {
		if s.Loss <= 0 && s.Sent() > 0 {
			zlr = max(zlr, s.SentPPS)
		}
	}
	if zlr == 0 {
		return "no step without loss", "n/a"
	}
	at := -1
	for i, s := range c.steps {
		if s.Offered > 0 && s.Offered <= 0.8*zlr && (at < 0 || s.Offered > c.steps[at].Offered) {
			at = i
		}
	}
	if at < 0 {
		return fmt.Sprintf("zero-loss rate %s pps; no step at or below 80%% of it", si(zlr)), "n/a"
	}
	s := c.steps[at]
	base, note := 0.0, "loop not run: raw p99"
	if loop != nil {
		for _, l := range loop.steps {
			if l.Offered == s.Offered {
				base, note = l.OneWay.P99, fmt.Sprintf("loop %.1f", l.OneWay.P99)
			}
		}
	}
	added := s.OneWay.P99 - base
	return fmt.Sprintf("%.1f µs (p99 %.1f, %s) at %s pps; zero-loss rate %s pps", added, s.OneWay.P99, note, si(s.Offered), si(zlr)),
		verdict(added < 20)
}

// Sent reports whether the step sent anything.
func (s step) Sent() float64 { return s.SentPPS }

// plotGroup is one SVG of the report.
type plotGroup struct {
	suffix, title string
	cases         []*Case
	file          string
}

// plotGroups splits the cases into readable plots: the references with
// the three methods, flow counts, new connections, lcores.
func plotGroups(cases []*Case) []*plotGroup {
	var refs, base, flows, news, lcs []*Case
	for _, c := range cases {
		switch {
		case c.Spec == nil:
			refs = append(refs, c)
		case c.Spec.Pattern == "syn":
			news = append(news, c)
		case c.Spec.Lcores > 1:
			lcs = append(lcs, c)
		case strings.Contains(c.Name, "-"):
			flows = append(flows, c)
		default:
			base = append(base, c)
		}
	}
	var g []*plotGroup
	add := func(suffix, title string, cs ...[]*Case) {
		var all []*Case
		for _, l := range cs {
			all = append(all, l...)
		}
		if len(all) > 0 {
			g = append(g, &plotGroup{suffix: suffix, title: title, cases: all})
		}
	}
	add("", "references and lbd with the default flows", refs, base)
	if len(flows) > 0 {
		add("-flows", "flow counts", base, flows)
	}
	if len(news) > 0 {
		add("-new", "new connections (every packet a SYN)", news)
	}
	if len(lcs) > 0 {
		add("-lcores", "worker lcores", base, lcs)
	}
	return g
}

func mpps(v float64) string { return fmt.Sprintf("%.2f", v/1e6) }

// report writes the markdown report.
func report(res Results, o options, plots []*plotGroup, stem string) []byte {
	var b bytes.Buffer
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	byName := map[string]*Case{}
	for _, c := range res.Cases {
		byName[c.Name] = c
	}
	p("# dplb perf run %s\n\n", res.Date)
	p("Host `%s`, %s, kernel %s, load average before the run `%s`, after it `%s` (other work on the shared CPUs skews every number).\n", res.Host, res.CPUs, res.Kernel, res.LoadBefore, res.LoadAfter)
	p("Offered loads %s, %v warm-up + %v measured per step, %d-byte frames (without FCS), memif between lbgen and the forwarder, %s.\n",
		o.rates, o.warmup, o.duration, o.size, map[bool]string{true: "hugepages", false: "`--no-huge`"}[o.huge])
	p("Command: `%s`. Raw data: [`%s.json`](%s.json). How to read this: `perf/README.md`.\n\n", strings.Join(res.Options, " "), stem, stem)

	p("## Summary\n\n")
	p("Per case, the step with the highest rate received at the server side (`max`): Mpps, lbd's busy cycles per packet and the busiest lcore's busy share in that step, loss; latency (one way, client TX to server RX) at %s pps offered; the received rate relative to the reference forwarder (testpmd, or testpmd-1way for the one-way DR/TUN cases) and to the generator looped on itself. testpmd reports no cycles (`-`).\n\n", si(latencyOffered))
	p("| case | what | max Mpps | cycles/pkt | busy %% | loss @max | p50 / p99 / p99.9 µs | vs ref | vs loop | new conn/s |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Summary {
		c := byName[r.Case]
		vsRef := ratio(r.VsTestpmd)
		if r.Reference != "" {
			vsRef += " (" + r.Reference + ")"
		}
		p("| %s | %s | %s | %s | %s | %.3f%% | %.1f / %.1f / %.1f | %s | %s | %s |\n", r.Case, c.About, mpps(r.MaxRxPPS),
			dash(r.CyclesPerPacket, "%.0f"), dash(r.BusyPercent, "%.0f"), 100*r.LossAtMax, r.P50, r.P99, r.P999,
			vsRef, ratio(r.VsLoop), siDash(r.NewConnsPerSec))
	}
	for _, c := range res.Cases {
		if c.Error != "" {
			p("\n**%s failed:** %s\n", c.Name, c.Error)
		}
	}

	p("\n## Targets (issue #7)\n\nTracked, not asserted. Cycles per packet compared with the reference are *effective* cycles: the TSC rate over the packets forwarded per second at the highest received rate (both directions for NAT and testpmd, one way for DR, TUN and testpmd-1way), since testpmd counts no cycles; lbd's own busy cycles per packet (its cycle accounting) are given alongside. When the generator, not the forwarder, was the limit the effective figure overstates the forwarder's cost.\n\n")
	p("| target | measured | verdict |\n|---|---|---|\n")
	for _, t := range res.Targets {
		p("| %s | %s | %s |\n", t.Target, t.Measured, t.Verdict)
	}

	p("\n## Targets (issue #11)\n\nTracked, not asserted. Flow scale compares the highest received rates; tail compares one-way p99 at %s pps offered with the reference forwarder's in this run; cost subtracts the reference's effective cycles per forwarded packet (see above) from lbd's busy cycles per packet at the highest rate, and gives lbd's stage accounting (TSC cycles per packet by stage; parse + lookup + process is lbd's own work, RX and TX the driver's, which testpmd pays too).\n\n", si(latencyOffered))
	if len(res.Rounds) > 0 {
		p("With %d rounds (section Rounds below), a target the rounds measured gives the median round: its figures and verdict, and under `rounds` each round's figure in round order (for the tail, p99 and its limit in µs; for the cost, cycles).\n\n", len(res.Rounds)+1)
	}
	p("| target | measured | verdict | rounds |\n|---|---|---|---|\n")
	for _, t := range res.Issue11 {
		p("| %s | %s | %s | %s |\n", t.Target, t.Measured, t.Verdict, strings.Join(t.Rounds, ", "))
	}
	roundsSection(&b, res)
	evidenceSection(&b, res)
	ipv6Section(&b, res.IPv6)

	p("\n## Plots\n\nReceived rate at the server side and one-way p99 latency (log scale) against the offered load (the sent rate for `max`).\n\n")
	for _, g := range plots {
		p("**%s**\n\n![%s](%s)\n\n", g.title, g.title, g.file)
	}

	p("## Steps\n\n`cycles/pkt`, `busy %%` (per lcore), `new conn/s` and `handed off` come from lbd's counters (`lbctl -L -n --per-lcore -o json` after each step, differences between steps; busy share over the whole step including warm-up and drain, cycles over the packets lbd's lcores received in both directions). `sent` below `offered` means the generator or the memif ring was the limit.\n\n")
	for _, c := range res.Cases {
		p("### %s\n\n%s\n\n", c.Name, c.About)
		if d, ok := c.Extra["drops"].(map[string]uint64); ok && len(d) > 0 {
			var ks []string
			for k := range d {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			var parts []string
			for _, k := range ks {
				parts = append(parts, fmt.Sprintf("`%s` %d", k, d[k]))
			}
			p("lbd drops over the whole case (setup included), by reason: %s.\n\n", strings.Join(parts, ", "))
		}
		if len(c.steps) == 0 {
			p("No steps measured.\n\n")
			continue
		}
		p("| offered | sent Mpps | rx Mpps | loss | cycles/pkt | busy %% | p50 µs | p99 µs | p99.9 µs | rtt p99 µs | new conn/s | handed off | lbd drops |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for i, s := range c.steps {
			off := "max"
			if s.Offered > 0 {
				off = si(s.Offered)
			}
			cpp, busy, ncs, ho, dr := "-", "-", "-", "-", "-"
			if i < len(c.Metrics) && c.Metrics[i].LbdPackets > 0 {
				m := c.Metrics[i]
				cpp = fmt.Sprintf("%.0f", m.CyclesPerPacket)
				var bs []string
				for _, v := range m.LcoreBusy {
					bs = append(bs, fmt.Sprintf("%.0f", v))
				}
				busy = strings.Join(bs, "/")
				ncs, ho, dr = siDash(m.NewConnsPerSec), fmt.Sprint(m.HandedOff), fmt.Sprint(m.Drops)
			}
			rtt := "-"
			if !c.OneWay {
				rtt = fmt.Sprintf("%.1f", s.RoundTrip.P99)
			}
			p("| %s | %s | %s | %.3f%% | %s | %s | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n", off, mpps(s.SentPPS), mpps(s.SrvPPS),
				100*s.Loss, cpp, busy, s.OneWay.P50, s.OneWay.P99, s.OneWay.P999, rtt, ncs, ho, dr)
		}
		p("\n")
	}
	return b.Bytes()
}

func siDash(v float64) string {
	if v == 0 || math.IsNaN(v) {
		return "-"
	}
	return si(v)
}
