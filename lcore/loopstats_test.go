package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/hdr"
)

func TestLoopBuckets(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want int
	}{{0, 0}, {511, 0}, {512, 1}, {1023, 1}, {1024, 2}, {int64(LoopBucketBound(LoopBuckets-2)) - 1, LoopBuckets - 2},
		{int64(LoopBucketBound(LoopBuckets - 2)), LoopBuckets - 1}, {int64(time.Hour), LoopBuckets - 1}} {
		if got := loopBucket(tc.ns); got != tc.want {
			t.Errorf("%d ns: bucket %d, want %d", tc.ns, got, tc.want)
		}
		if b := LoopBucketBound(tc.want); b != 0 && tc.ns >= int64(b) {
			t.Errorf("%d ns filed under bound %v", tc.ns, b)
		}
	}
	seen := map[string]bool{}
	for i := range LoopBuckets {
		n := (LoopIterations0 + Stat(i)).Name()
		if n == "" || seen[n] {
			t.Fatalf("bucket %d named %q", i, n)
		}
		seen[n] = true
	}
	if DropBadEthernet.Name() != "bad_ethernet" || !DropBadEthernet.IsDrop() || (LoopIterations0 + LoopBuckets - 1).IsDrop() {
		t.Fatal("the buckets shifted the drop counters")
	}
}

// TestLoopAccounting: iterations are filed by duration (not those that
// ended in an idle sleep), the longest kept; a busy burst charges every
// stage (every stageSample-th busy poll is read); none of it allocates.
func TestLoopAccounting(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.countIteration(1000, 1000+300, false)
	w.countIteration(2000, 2000+int64(3*time.Millisecond), false)
	w.countIteration(5000, 5000+int64(time.Second), true)
	if w.cnt.own[LoopIterations0] != 1 || w.cnt.own[LoopIterations0+Stat(loopBucket(int64(3*time.Millisecond)))] != 1 {
		t.Fatalf("buckets: %v", w.cnt.own[LoopIterations0:LoopIterations0+LoopBuckets])
	}
	if w.cnt.own[LoopMaxNanos] != uint64(3*time.Millisecond) {
		t.Fatalf("longest %d ns, want 3 ms (a sleep does not count)", w.cnt.own[LoopMaxNanos])
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	for _, s := range []Stat{StageRxCycles, StageParseCycles, StageLookupCycles, StageProcessCycles, StageTxCycles} {
		if w.cnt.own[s] == 0 {
			t.Errorf("%s not charged", s.Name())
		}
	}
	// The next stageSample-1 busy polls are not read; the one after is.
	charged := w.cnt.own[StageProcessCycles]
	for i := range stageSample {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, uint16(40001+i), vip, 80, hdr.TCPFlagSYN, ""))
		w.poll()
		r.sent(1)
		if got := w.cnt.own[StageProcessCycles] != charged; got != (i == stageSample-1) {
			t.Fatalf("busy poll %d after the first: charged %v", i+1, got)
		}
	}
	prev := int64(0)
	if allocs := testing.AllocsPerRun(100, func() {
		w.countIteration(prev, prev+700, false)
		prev += 700
	}); allocs != 0 {
		t.Fatalf("iteration accounting allocates %.1f times", allocs)
	}
}
