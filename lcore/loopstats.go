package lcore

import (
	"fmt"
	"math/bits"
	"time"
)

// Loop accounting: how long each poll loop iteration took, and where the
// time of busy bursts goes. A packet waits in its queue for at most about
// one iteration, so the iteration times bound the dataplane's share of
// the tail latency; a long one names its cause by what else ran then (a
// job, a garbage collection, the OS scheduling something else).

// LoopBuckets is the number of iteration-time buckets: below 512 ns,
// below 1 µs, 2 µs, ... below 33.5 ms, and the rest.
const LoopBuckets = 18

const loopBucketShift = 9 // the first bound, 512 ns, is 1 << 9

// LoopBucketBound is the exclusive upper bound of bucket i; the last has
// none (0).
func LoopBucketBound(i int) time.Duration {
	if i >= LoopBuckets-1 {
		return 0
	}
	return time.Duration(1) << (loopBucketShift + i)
}

func loopBucketName(i int) string {
	if b := LoopBucketBound(i); b > 0 {
		return fmt.Sprintf("loop_iterations_lt_%dns", b.Nanoseconds())
	}
	return fmt.Sprintf("loop_iterations_ge_%dns", LoopBucketBound(i-1).Nanoseconds())
}

// loopBucket is the bucket of an iteration that took ns nanoseconds.
func loopBucket(ns int64) int {
	return min(bits.Len64(uint64(ns)>>loopBucketShift), LoopBuckets-1)
}

// countIteration files the iteration that ran from the previous clock
// reading to now: two shifts and two additions, no clock read of its own
// (the loop reads the clock once per iteration anyway). slept: the
// iteration ended in an idle sleep, which is no delay to any packet.
func (w *Worker) countIteration(prev, now int64, slept bool) {
	if slept || prev == 0 {
		return
	}
	ns := now - prev
	w.cnt.own[LoopIterations0+Stat(loopBucket(ns))]++
	if uint64(ns) > w.cnt.own[LoopMaxNanos] {
		w.cnt.own[LoopMaxNanos] = uint64(ns)
	}
}

// stageSample is how many busy polls the stage accounting takes one
// reading of (the first of each stageSample), charging it stageSample
// times: a TSC read costs tens of nanoseconds in a VM, and six a poll
// were some 3% of a SYN cookie's cycles. The stage counters stay
// cycles summed over all busy polls, estimated.
const stageSample = 4

// stageScale is what the next poll's stage readings count for: 0 (none
// taken) but every stageSample-th busy poll.
func (w *Worker) stageScale() uint64 {
	if w.busyPolls%stageSample != 0 {
		return 0
	}
	return stageSample
}

// stageClock takes the TSC readings of one burst's stages: each mark
// charges the cycles since the previous one to a stage, scale times;
// with scale 0 it reads nothing.
type stageClock struct {
	last, scale uint64
}

func (s *stageClock) start(scale uint64) {
	if s.scale = scale; scale != 0 {
		s.last = readTSC()
	}
}

// resume starts the clock again at the same scale.
func (s *stageClock) resume() { s.start(s.scale) }

func (s *stageClock) mark(c *counters, stage Stat) {
	if s.scale == 0 {
		return
	}
	now := readTSC()
	c.own[stage] += (now - s.last) * s.scale
	s.last = now
}
