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

// maxRx is the highest rate received at the server side over a case's steps.
func maxRx(c *Case) (rx, loss float64) {
	for _, s := range c.steps {
		if s.SrvPPS > rx {
			rx, loss = s.SrvPPS, s.Loss
		}
	}
	return rx, loss
}

func summarize(cases []*Case) []Row {
	ref := map[string]float64{}
	for _, c := range cases {
		ref[c.Name], _ = maxRx(c)
	}
	var rows []Row
	for _, c := range cases {
		if len(c.steps) == 0 {
			continue
		}
		r := Row{Case: c.Name, P99AtLowest: c.steps[0].OneWay.P99}
		r.MaxRxPPS, r.LossAtMax = maxRx(c)
		if v := ref["loop"]; v > 0 && c.Name != "loop" {
			r.VsLoop = r.MaxRxPPS / v
		}
		if v := ref["testpmd"]; v > 0 && c.Name != "testpmd" {
			r.VsTestpmd = r.MaxRxPPS / v
		}
		rows = append(rows, r)
	}
	return rows
}

func printSummary(res Results) {
	fmt.Printf("\n== summary (%s, %s)\n", res.CPUs, res.Date)
	fmt.Printf("%-8s %12s %11s %11s %8s %9s %9s %9s %9s\n", "case", "offered_pps", "sent_pps", "rx_pps", "loss_%", "p50_us", "p99_us", "p99.9_us", "rtt_p99")
	for _, c := range res.Cases {
		for _, s := range c.steps {
			off := "max"
			if s.Offered > 0 {
				off = fmt.Sprintf("%.0f", s.Offered)
			}
			fmt.Printf("%-8s %12s %11.0f %11.0f %8.3f %9.1f %9.1f %9.1f %9.1f\n", c.Name, off, s.SentPPS, s.SrvPPS,
				100*s.Loss, s.OneWay.P50, s.OneWay.P99, s.OneWay.P999, s.RoundTrip.P99)
		}
	}
	fmt.Printf("\n%-8s %12s %10s %12s %10s\n", "case", "max_rx_pps", "vs_loop", "vs_testpmd", "p99@low_us")
	for _, r := range res.Summary {
		fmt.Printf("%-8s %12.0f %10s %12s %10.1f\n", r.Case, r.MaxRxPPS, ratio(r.VsLoop), ratio(r.VsTestpmd), r.P99AtLowest)
	}
	fmt.Fprintln(os.Stdout)
}

func ratio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
