package lcore

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestSteadyTrafficCausesNoGC is a perf step in miniature: the real poll
// loop on its own thread forwards established VS/NAT flows for a while
// (a generator goroutine recycles what the worker sends back into its RX
// ring), while a controller goroutine publishes a new snapshot every few
// milliseconds, waits for the worker's acknowledgement and reads its
// counters, as the control plane's publication and metrics scrapes do.
// The Go heap's allocation counters (runtime/metrics) are read before
// and after: the step must allocate nothing, so it can never bring the
// heap to its next collection, however long it lasts. Allocation is
// counted, never time. Building snapshots is the controller's own work
// (on a configuration change), done here before the step.
func TestSteadyTrafficCausesNoGC(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.cfg.IdleSleep = 10 * time.Microsecond
	const flows = 64
	frames := make([][]byte, flows)
	for i := range frames {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vip, 80, hdr.TCPFlagSYN, ""))
		frames[i] = tcpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vip, 80, hdr.TCPFlagACK, "")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); w.Stats()[NewConns] < flows; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d connections opened", w.Stats()[NewConns], flows)
		}
		time.Sleep(time.Millisecond)
	}
	r.drain(1) // the SYNs

	step := 2 * time.Second
	if testing.Short() {
		step = 500 * time.Millisecond
	}
	const publishEvery = 2 * time.Millisecond
	snaps := make([]*Snapshot, int(step/publishEvery)+1)
	for i := range snaps {
		snaps[i] = w.snap.WithNeighbours(w.snap.Gen+1+uint64(i), w.snap.Neigh)
	}
	// The generator's mbufs, in flight before the step starts.
	objs := ring.NewObjs(32)
	defer ring.FreeObjs(objs)
	for i := range 128 {
		r.inject(0, frames[i%flows])
	}

	samples := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/gc/heap/allocs:objects"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	read := func() [5]uint64 {
		metrics.Read(samples)
		var v [5]uint64
		for i := range samples {
			v[i] = samples[i].Value.Uint64()
		}
		return v
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var published, scrapes int
	var scraped uint64
	wg.Add(2)
	go func() { // the generator: what the worker sent goes round again
		defer wg.Done()
		k := 0
		for !stop.Load() {
			n := r.tx[1].SCDequeueBurst(objs)
			if n == 0 {
				runtime.Gosched()
				continue
			}
			for _, p := range objs[:n] {
				m := mbuf.FromPointer(p)
				copy(m.Data(), frames[k%flows])
				m.SetOlFlags(0)
				k++
			}
			if q := r.rx[0].SPEnqueueBurst(objs[:n]); q < n {
				for _, p := range objs[q:n] {
					mbuf.FromPointer(p).Free()
				}
			}
		}
	}()
	go func() { // the controller: publish, wait for the acknowledgement, scrape
		defer wg.Done()
		for _, s := range snaps {
			if stop.Load() {
				return
			}
			if !w.Commands().Push(Command{Kind: CmdSnapshot, Snap: s}) {
				continue
			}
			for w.AckedGen() < s.Gen && !stop.Load() {
				time.Sleep(50 * time.Microsecond)
			}
			published++
			st := w.Stats()
			ds := w.DestStats(0)
			scraped += st[TxPackets] + ds[DestConns]
			scrapes++
			time.Sleep(publishEvery)
		}
	}()

	runtime.GC() // start from a settled heap
	before, sentBefore := read(), w.Stats()[TxPackets]
	time.Sleep(step)
	after, sentAfter := read(), w.Stats()[TxPackets]
	stop.Store(true)
	wg.Wait()
	w.Stop()
	stopped = true
	r.drain(0)
	r.drain(1)
	// What the worker had not taken yet (a slow worker, under -race).
	for n := r.rx[0].SCDequeueBurst(objs); n > 0; n = r.rx[0].SCDequeueBurst(objs) {
		for _, p := range objs[:n] {
			mbuf.FromPointer(p).Free()
		}
	}

	forwarded := sentAfter - sentBefore
	objects, bytes := after[1]-before[1], after[2]-before[2]
	headroom := before[3] - before[4] // what the heap may grow before its next collection
	t.Logf("step %v: %d packets forwarded, %d snapshots published, %d scrapes; heap allocations %d objects / %d bytes (headroom to the next collection %d bytes); GC cycles %d",
		step, forwarded, published, scrapes, objects, bytes, headroom, after[0]-before[0])
	if forwarded < 1000 || published < 10 {
		t.Fatalf("the step proves nothing: %d packets forwarded, %d snapshots published", forwarded, published)
	}
	// A handful of objects is the runtime's own (a timer, a goroutine's
	// stack growth); the path allocating anything per packet or per
	// publication would show thousands.
	if objects > 16 || bytes >= headroom {
		t.Fatalf("%d objects, %d bytes allocated during the step (%d packets, %d publications): the steady path allocates", objects, bytes, forwarded, published)
	}
}
