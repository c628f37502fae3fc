package main

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Evidence for the tail and the cost per packet (issue #11), per step,
// from the difference of lbctl's JSON after the step and before it: the
// Go garbage collector's cycles and pauses, the workers' poll loop
// iteration times, and the TSC cycles per packet of each stage of the
// bursts.

// runtimeJSON is lbctl's runtime section (api.Runtime).
type runtimeJSON struct {
	GCCycles          uint64   `json:"gc_cycles"`
	GCPauseSeconds    float64  `json:"gc_pause_seconds"`
	GCPauses          []uint64 `json:"gc_pauses"`
	HeapBytes         uint64   `json:"heap_bytes"`
	GOGC              int      `json:"gogc"`
	BucketBoundsNanos []int64  `json:"bucket_bounds_ns"`
}

// Evidence is one step's share of it.
type Evidence struct {
	GCCycles  uint64  `json:"gc_cycles"`
	GCPauseMs float64 `json:"gc_pause_ms"` // total stop-the-world time of the step's collections
	// GCPauseMaxUs and LoopMaxUs are the upper bounds of the buckets of
	// the step's longest GC pause and longest loop iteration (any
	// lcore); for the open last bucket, the lifetime longest iteration.
	GCPauseMaxUs float64 `json:"gc_pause_max_us"`
	LoopMaxUs    float64 `json:"loop_max_us"`
	// LoopIterations are the step's iterations by duration, all lcores,
	// bucket i below BoundsNs[i] (the last: the rest).
	LoopIterations []uint64 `json:"loop_iterations,omitempty"`
	BoundsNs       []int64  `json:"bucket_bounds_ns,omitempty"`
	// RunQueueWaitMs is how long the OS kept the workers' threads
	// runnable but off their CPUs, Preemptions how often it took them
	// off (all lcores).
	RunQueueWaitMs float64 `json:"run_queue_wait_ms"`
	Preemptions    uint64  `json:"preemptions"`
	// StageCPP is TSC cycles per packet by stage (rx, parse, lookup,
	// process, tx) over the packets lbd's lcores received.
	StageCPP map[string]float64 `json:"stage_cycles_per_packet,omitempty"`
	// SlowJobs counts, per periodic job (commands, expire, publish), its
	// runs of slowIteration or longer in the step (all lcores): the long
	// iterations a job made.
	SlowJobs map[string]uint64 `json:"slow_jobs,omitempty"`
}

// stages in the order of the packet path.
var stages = []string{"rx", "parse", "lookup", "process", "tx"}

// slowIteration is where the report starts counting long iterations.
const slowIteration = 16384 // ns

func (m *StepMetrics) evidence(a, b *lbctlJSON) {
	if b.Runtime == nil || len(b.Runtime.BucketBoundsNanos) == 0 {
		return // an lbd without loop accounting
	}
	bounds := b.Runtime.BucketBoundsNanos
	m.BoundsNs = bounds
	if a.Runtime != nil {
		m.GCCycles = b.Runtime.GCCycles - a.Runtime.GCCycles
		m.GCPauseMs = round1(1e4*(b.Runtime.GCPauseSeconds-a.Runtime.GCPauseSeconds)) / 10
		d := diff(b.Runtime.GCPauses, a.Runtime.GCPauses)
		m.GCPauseMaxUs = topBound(d, bounds, 0)
	}
	m.LoopIterations = make([]uint64, len(bounds))
	lifeMax := 0.0
	var pkts float64
	stageCyc := map[string]float64{}
	for i, l := range b.Lcores {
		var prev []uint64
		var prevStage map[string]float64
		var prevPkts uint64
		if i < len(a.Lcores) {
			prev, prevStage, prevPkts = a.Lcores[i].LoopIterations, a.Lcores[i].StageCycles, a.Lcores[i].RxPackets
		}
		for j, n := range diff(l.LoopIterations, prev) {
			if j < len(m.LoopIterations) {
				m.LoopIterations[j] += n
			}
		}
		lifeMax = max(lifeMax, l.LoopMaxMicros)
		if i < len(a.Lcores) {
			m.RunQueueWaitMs += 1e3 * (l.RunQueueWait - a.Lcores[i].RunQueueWait)
			m.Preemptions += l.Preemptions - a.Lcores[i].Preemptions
		}
		for _, s := range stages {
			stageCyc[s] += l.StageCycles[s] - prevStage[s]
		}
		for _, j := range l.Jobs {
			n := j.SlowRuns
			if i < len(a.Lcores) {
				for _, pj := range a.Lcores[i].Jobs {
					if pj.Name == j.Name {
						n -= pj.SlowRuns
					}
				}
			}
			if n > 0 {
				if m.SlowJobs == nil {
					m.SlowJobs = map[string]uint64{}
				}
				m.SlowJobs[j.Name] += n
			}
		}
		pkts += float64(l.RxPackets - prevPkts)
	}
	m.LoopMaxUs = topBound(m.LoopIterations, bounds, lifeMax)
	m.RunQueueWaitMs = round1(m.RunQueueWaitMs)
	if pkts > 0 {
		m.StageCPP = map[string]float64{}
		for _, s := range stages {
			m.StageCPP[s] = round1(stageCyc[s] / pkts)
		}
	}
}

// diff is b - a per bucket (a may be shorter: zeros).
func diff(b, a []uint64) []uint64 {
	d := slices.Clone(b)
	for i := range d {
		if i < len(a) {
			d[i] -= a[i]
		}
	}
	return d
}

// topBound is the upper bound in µs of the highest non-empty bucket, or
// open (µs) when it is the last, unbounded one; 0 when all are empty.
func topBound(counts []uint64, bounds []int64, open float64) float64 {
	for i := len(counts) - 1; i >= 0; i-- {
		if counts[i] == 0 {
			continue
		}
		if i < len(bounds) && bounds[i] > 0 {
			return float64(bounds[i]) / 1e3
		}
		return open
	}
	return 0
}

// slowIterations counts the iterations in buckets at or above
// slowIteration.
func (e Evidence) slowIterations() uint64 {
	var n uint64
	for i, c := range e.LoopIterations {
		if i > 0 && i-1 < len(e.BoundsNs) && e.BoundsNs[i-1] >= slowIteration {
			n += c
		}
	}
	return n
}

// ownCycles is lbd's own work per packet by its stage accounting: parse,
// lookup and process, without the driver's RX and TX that any DPDK
// forwarder (testpmd) pays too.
func (e Evidence) ownCycles() float64 {
	return e.StageCPP["parse"] + e.StageCPP["lookup"] + e.StageCPP["process"]
}

func usBound(v float64) string {
	if v == 0 {
		return "-"
	}
	if v >= 1000 {
		return fmt.Sprintf("≤%.1f ms", v/1000)
	}
	return fmt.Sprintf("≤%.1f µs", v)
}

// evidenceSection writes, per lbd case and step, where the time went:
// the garbage collector, the longest loop iterations, the stages.
func evidenceSection(b *bytes.Buffer, res Results) {
	p := func(f string, a ...any) { fmt.Fprintf(b, f, a...) }
	p("\n## Tail and cost evidence (issue #11)\n\nPer step, from lbd's counters before and after it: the Go garbage collector's cycles and their stop-the-world time (runtime/metrics), the longest GC pause and the longest poll loop iteration of any worker (upper bounds of their histogram buckets: powers of two from 512 ns), iterations of %d µs or more and how many of them a periodic job of the worker made by itself (its runs that long: commands, expire, publish), the time the OS kept the workers' threads runnable but off their CPU (schedstat run-queue wait) and how often it preempted them, and TSC cycles per packet by stage of the bursts. A packet waits for about one loop iteration, so long iterations are the workers' share of the tail; a GC pause stops the workers too, and so does the OS running something else on their CPU.\n\n", slowIteration/1000)
	for _, c := range res.Cases {
		if c.Spec == nil || len(c.Metrics) == 0 || c.Metrics[0].BoundsNs == nil {
			continue
		}
		p("### %s\n\n| offered | p99 µs | p99.9 µs | GC cycles | GC pause ms | longest GC pause | longest iteration | iterations ≥%d µs | of them jobs | CPU wait ms | preempted | rx | parse | lookup | process | tx | own work |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", c.Name, slowIteration/1000)
		for i, s := range c.steps {
			if i >= len(c.Metrics) {
				break
			}
			m := c.Metrics[i]
			off := "max"
			if s.Offered > 0 {
				off = si(s.Offered)
			}
			st := func(k string) string { return dash(m.StageCPP[k], "%.0f") }
			p("| %s | %.1f | %.1f | %d | %.1f | %s | %s | %d | %s | %.1f | %d | %s | %s | %s | %s | %s | %s |\n", off, s.OneWay.P99, s.OneWay.P999,
				m.GCCycles, m.GCPauseMs, usBound(m.GCPauseMaxUs), usBound(m.LoopMaxUs), m.slowIterations(), slowJobsText(m.SlowJobs), m.RunQueueWaitMs, m.Preemptions,
				st("rx"), st("parse"), st("lookup"), st("process"), st("tx"), dash(m.ownCycles(), "%.0f"))
		}
		p("\n")
	}
}

// slowJobsText lists a step's slow job runs ("expire 3, publish 1"), or
// "0" when no job ran that long.
func slowJobsText(n map[string]uint64) string {
	if len(n) == 0 {
		return "0"
	}
	names := slices.Sorted(maps.Keys(n))
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}
