package runtime

import (
	"fmt"
	"time"

	"github.com/dplb/dplb/lcore"
)

// traceTimeout bounds the wait for the owner's answer: one commands job,
// a few tens of microseconds on a running worker.
const traceTimeout = 2 * time.Second

// Trace implements ctl.Dataplane: the worker that owns the flow answers
// from its own table and scheduler, between two bursts.
func (d *DPDK) Trace(f lcore.TraceFlow) (lcore.TraceResult, error) {
	if len(d.workers) == 0 {
		return lcore.TraceResult{}, fmt.Errorf("no workers")
	}
	w := d.workers[f.Owner(len(d.workers))]
	r := &lcore.TraceRequest{TraceFlow: f}
	d.cmdMu.Lock()
	ok := w.Commands().Push(lcore.Command{Kind: lcore.CmdTrace, Trace: r})
	d.cmdMu.Unlock()
	if !ok {
		return lcore.TraceResult{}, fmt.Errorf("lcore %d: command ring full", w.ID())
	}
	deadline := time.Now().Add(traceTimeout)
	for !r.Done() {
		if time.Now().After(deadline) {
			// r stays the worker's: it may still answer into it.
			return lcore.TraceResult{}, fmt.Errorf("lcore %d did not answer the trace within %v", w.ID(), traceTimeout)
		}
		time.Sleep(50 * time.Microsecond)
	}
	return r.Result, nil
}
