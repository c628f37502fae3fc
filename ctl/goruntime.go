package ctl

import (
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// The Go runtime's side of the tail latency: a garbage collection stops
// the world, the workers with it, so the perf run reads the collections
// and their pauses next to the workers' loop iteration times.

var runtimeSamples = []string{
	"/gc/cycles/total:gc-cycles",
	"/sched/pauses/total/gc:seconds",
	"/gc/heap/live:bytes",
	"/gc/gogc:percent",
	"/gc/gomemlimit:bytes",
}

// readRuntime reads the collector's counters (control work: allocates).
func readRuntime() *api.Runtime {
	s := make([]metrics.Sample, len(runtimeSamples))
	for i, n := range runtimeSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	rt := &api.Runtime{}
	rt.GCPauses = make([]uint64, lcore.LoopBuckets)
	for i := range lcore.LoopBuckets {
		rt.BucketBoundsNanos = append(rt.BucketBoundsNanos, lcore.LoopBucketBound(i).Nanoseconds())
	}
	if s[0].Value.Kind() == metrics.KindUint64 {
		rt.GCCycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[1].Value.Float64Histogram()
		for i, n := range h.Counts {
			if n == 0 {
				continue
			}
			lo, hi := h.Buckets[i], h.Buckets[i+1]
			mid := lo
			if !math.IsInf(hi, 1) && !math.IsInf(lo, -1) {
				mid = (lo + hi) / 2
			}
			rt.GCPauseSeconds += float64(n) * max(mid, 0)
			rt.GCPauses[bucketOf(lo)] += n
		}
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		rt.HeapBytes = s[2].Value.Uint64()
	}
	if s[3].Value.Kind() == metrics.KindUint64 {
		rt.GOGC = int(s[3].Value.Uint64()) // off reads as 0
	}
	if s[4].Value.Kind() == metrics.KindUint64 {
		rt.MemoryLimitBytes = int64(min(s[4].Value.Uint64(), math.MaxInt64))
	}
	return rt
}

// bucketOf is the loop bucket of a duration in seconds.
func bucketOf(sec float64) int {
	for i := range lcore.LoopBuckets - 1 {
		if sec < lcore.LoopBucketBound(i).Seconds() {
			return i
		}
	}
	return lcore.LoopBuckets - 1
}

// loopAccounting is an lcore's loop iteration times and stage cycles as
// the API reports them.
func loopAccounting(l *api.Lcore, ws lcore.Stats, ts ThreadSched) {
	l.RunQueueWaitSeconds = ts.RunQueueWait.Seconds()
	l.Preemptions = ts.Involuntary
	l.LoopMaxMicros = float64(ws[lcore.LoopMaxNanos]) / float64(time.Microsecond)
	l.LoopIterations = make([]uint64, lcore.LoopBuckets)
	for i := range l.LoopIterations {
		l.LoopIterations[i] = ws[lcore.LoopIterations0+lcore.Stat(i)]
	}
	l.StageCycles = map[string]uint64{
		"rx": ws[lcore.StageRxCycles], "parse": ws[lcore.StageParseCycles], "lookup": ws[lcore.StageLookupCycles],
		"process": ws[lcore.StageProcessCycles], "tx": ws[lcore.StageTxCycles],
	}
}

// ThreadSched is a thread's scheduler statistics (/proc/PID/task/TID):
// the time it waited on a run queue while runnable, and how often the OS
// took the CPU from it. A poll-mode worker never yields, so its waits are
// other threads (ours or the machine's) running on its CPU.
type ThreadSched struct {
	RunQueueWait time.Duration
	Involuntary  uint64
}

// threadSched reads them for thread tid of this process (zeros when it
// cannot: no such thread, no /proc).
func threadSched(tid int) ThreadSched {
	var ts ThreadSched
	if tid <= 0 {
		return ts
	}
	dir := "/proc/self/task/" + strconv.Itoa(tid) + "/"
	if b, err := os.ReadFile(dir + "schedstat"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 2 {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			ts.RunQueueWait = time.Duration(n)
		}
	}
	if b, err := os.ReadFile(dir + "status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "nonvoluntary_ctxt_switches:"); ok {
				ts.Involuntary, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	return ts
}
