package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

// maxStep is the index of the step with the highest rate received at the
// server side (-1 without steps).
func maxStep(c *Case) int {
	best, rx := -1, -1.0
	for i, s := range c.steps {
		if s.SrvPPS > rx {
			best, rx = i, s.SrvPPS
		}
	}
	return best
}

// latencyOffered is the offered load at which the summary shows latency:
// well below every case's saturation on this machine.
const latencyOffered = 1e6

// latencyStep is the step at latencyOffered, else the lowest offered load.
func latencyStep(c *Case) int {
	for i, s := range c.steps {
		if s.Offered == latencyOffered {
			return i
		}
	}
	if len(c.steps) > 0 {
		return 0
	}
	return -1
}

// refFor is the reference forwarder of a case: testpmd-1way for one-way
// cases when it ran, else testpmd.
func refFor(c *Case, byName map[string]*Case) *Case {
	if c.OneWay {
		if r := byName["testpmd-1way"]; r != nil && len(r.steps) > 0 {
			return r
		}
	}
	return byName["testpmd"]
}

func summarize(cases []*Case) []Row {
	byName := map[string]*Case{}
	for _, c := range cases {
		byName[c.Name] = c
	}
	rx := func(c *Case) float64 {
		if c == nil || maxStep(c) < 0 {
			return 0
		}
		return c.steps[maxStep(c)].SrvPPS
	}
	var rows []Row
	for _, c := range cases {
		i := maxStep(c)
		if i < 0 {
			continue
		}
		s := c.steps[i]
		r := Row{Case: c.Name, MaxRxPPS: s.SrvPPS, LossAtMax: s.Loss}
		if v := rx(byName["loop"]); v > 0 && c.Name != "loop" {
			r.VsLoop = s.SrvPPS / v
		}
		if ref := refFor(c, byName); ref != nil && ref != c && rx(ref) > 0 && c.Spec != nil {
			r.VsTestpmd, r.Reference = s.SrvPPS/rx(ref), ref.Name
		}
		if i < len(c.Metrics) {
			m := c.Metrics[i]
			r.CyclesPerPacket = m.CyclesPerPacket
			for _, b := range m.LcoreBusy {
				r.BusyPercent = max(r.BusyPercent, b)
			}
		}
		for _, m := range c.Metrics {
			r.NewConnsPerSec = max(r.NewConnsPerSec, m.NewConnsPerSec)
		}
		if j := latencyStep(c); j >= 0 {
			l := c.steps[j]
			r.LatOffered, r.P50, r.P99, r.P999 = l.Offered, l.OneWay.P50, l.OneWay.P99, l.OneWay.P999
		}
		rows = append(rows, r)
	}
	return rows
}

func printSummary(res Results) {
	fmt.Printf("\n== steps (%s, %s)\n", res.CPUs, res.Date)
	fmt.Printf("%-13s %11s %11s %11s %8s %8s %8s %9s %8s %8s\n", "case", "offered_pps", "sent_pps", "rx_pps", "loss_%", "cyc/pkt", "p50_us", "p99_us", "p99.9_us", "rtt_p99")
	for _, c := range res.Cases {
		for i, s := range c.steps {
			off := "max"
			if s.Offered > 0 {
				off = fmt.Sprintf("%.0f", s.Offered)
			}
			cpp := "-"
			if i < len(c.Metrics) && c.Metrics[i].CyclesPerPacket > 0 {
				cpp = fmt.Sprintf("%.0f", c.Metrics[i].CyclesPerPacket)
			}
			fmt.Printf("%-13s %11s %11.0f %11.0f %8.3f %8s %8.1f %9.1f %8.1f %8.1f\n", c.Name, off, s.SentPPS, s.SrvPPS,
				100*s.Loss, cpp, s.OneWay.P50, s.OneWay.P99, s.OneWay.P999, s.RoundTrip.P99)
		}
	}
	fmt.Printf("\n%-13s %10s %8s %7s %8s %8s %9s %9s %s\n", "case", "max_rx_pps", "cyc/pkt", "busy_%", "vs_loop", "vs_ref", "new_c/s", "loss_%", "p50/p99/p99.9 us @1M")
	for _, r := range res.Summary {
		fmt.Printf("%-13s %10.0f %8s %7s %8s %8s %9s %9.3f %.1f/%.1f/%.1f\n", r.Case, r.MaxRxPPS, dash(r.CyclesPerPacket, "%.0f"),
			dash(r.BusyPercent, "%.0f"), ratio(r.VsLoop), ratio(r.VsTestpmd), dash(r.NewConnsPerSec, "%.0f"), 100*r.LossAtMax, r.P50, r.P99, r.P999)
	}
	if s := res.IPv6; s != nil {
		fmt.Printf("\n== IPv6 beside IPv4 (bytes per connection: IPv4 %.0f, IPv6 %.0f)\n", s.BytesPerConn4, s.BytesPerConn6)
		for _, r := range s.Rows {
			fmt.Printf("%-13s %-13s %8s Mpps %8s Mpps  IPv6/IPv4 %s  cyc/pkt %s / %s\n", r.V4, r.V6, mpps(r.V4PPS), mpps(r.V6PPS),
				ratio(r.Ratio), dash(r.V4CPP, "%.0f"), dash(r.V6CPP, "%.0f"))
		}
	}
	fmt.Println("\n== targets (issue #7; tracked, not asserted)")
	for _, t := range res.Targets {
		fmt.Printf("%-58s %-40s %s\n", t.Target, t.Measured, t.Verdict)
	}
	fmt.Fprintln(os.Stdout)
}

func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func dash(v float64, f string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(f, v)
}
