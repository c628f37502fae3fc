package ctl

import (
	"runtime"
	"testing"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// TestReadRuntime: a forced collection shows in the cycles and pauses,
// filed in the loop iterations' buckets.
func TestReadRuntime(t *testing.T) {
	before := readRuntime()
	runtime.GC()
	after := readRuntime()
	if after.GCCycles <= before.GCCycles {
		t.Fatalf("gc cycles %d -> %d after runtime.GC", before.GCCycles, after.GCCycles)
	}
	var n0, n1 uint64
	for i := range after.GCPauses {
		n0 += before.GCPauses[i]
		n1 += after.GCPauses[i]
	}
	if n1 <= n0 || after.GCPauseSeconds <= before.GCPauseSeconds {
		t.Fatalf("pauses %d -> %d, %g -> %g s", n0, n1, before.GCPauseSeconds, after.GCPauseSeconds)
	}
	if len(after.BucketBoundsNanos) != lcore.LoopBuckets || after.BucketBoundsNanos[0] != 512 || after.BucketBoundsNanos[lcore.LoopBuckets-1] != 0 {
		t.Fatalf("bounds %v", after.BucketBoundsNanos)
	}
	if bucketOf(0) != 0 || bucketOf(1e-6) != 1 || bucketOf(2e-6) != 2 || bucketOf(10) != lcore.LoopBuckets-1 {
		t.Fatalf("bucketOf: %d %d %d", bucketOf(0), bucketOf(1e-6), bucketOf(10))
	}
}

func TestLoopAccountingView(t *testing.T) {
	var ws lcore.Stats
	ws[lcore.LoopMaxNanos] = 2500
	ws[lcore.LoopIterations0+3] = 7
	ws[lcore.StageLookupCycles] = 99
	var l api.Lcore
	loopAccounting(&l, ws, ThreadSched{})
	if l.LoopMaxMicros != 2.5 || len(l.LoopIterations) != lcore.LoopBuckets || l.LoopIterations[3] != 7 || l.StageCycles["lookup"] != 99 {
		t.Fatalf("%+v", l)
	}
}
