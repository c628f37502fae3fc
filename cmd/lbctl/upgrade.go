package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// upgradeWait bounds the wait for the new lbd to answer: DPDK's start-up
// and the install of the connection table.
const upgradeWait = 60 * time.Second

// upgrade asks lbd to hand over to a new binary, then waits until the
// new lbd answers (a later start time) and prints what it made of the
// handover.
func upgrade(ctx context.Context, c api.Command, stdout, stderr io.Writer) int {
	if c.Binary != "" {
		abs, err := filepath.Abs(c.Binary) // lbd's working directory is not ours
		if err != nil {
			fmt.Fprintf(stderr, "lbctl: --binary %s: %v\n", c.Binary, err)
			return exitUsage
		}
		c.Binary = abs
	}
	before, err := api.Call(ctx, c.Socket, api.Request{Op: api.OpList})
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
	}
	var started time.Time
	if before.Info != nil {
		started = before.Info.Started
	}
	// Checking the binary runs it with -check: more than a listing's time.
	cctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	resp, err := api.Call(cctx, c.Socket, c.Request)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "lbctl: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "lbd is handing over to %s\n", resp.Text)
	deadline := time.Now().Add(upgradeWait)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "lbctl: %v\n", ctx.Err())
			return exitError
		case <-time.After(200 * time.Millisecond):
		}
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		now, err := api.Call(lctx, c.Socket, api.Request{Op: api.OpList})
		cancel()
		if err != nil || now.Info == nil || !now.Info.Started.After(started) {
			continue // the old lbd stopping, or the new one starting
		}
		fmt.Fprintf(stdout, "lbd upgraded: running since %s\n", now.Info.Started.Format(time.RFC3339))
		if now.Info.Handover != "" {
			fmt.Fprintf(stdout, "handover: %s\n", now.Info.Handover)
		} else {
			fmt.Fprintln(stdout, "handover: none installed (see lbd's log for why)")
		}
		return exitOK
	}
	fmt.Fprintf(stderr, "lbctl: the new lbd did not answer on %s within %v; see lbd's log\n", c.Socket, upgradeWait)
	return exitError
}
