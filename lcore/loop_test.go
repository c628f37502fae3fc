package lcore

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// TestSnapshotSwitch checks that a worker picks up a new snapshot and
// acknowledges it, and that existing connections keep their server.
func TestSnapshotSwitch(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	// New snapshot: rs1 removed from the service.
	old := w.snap
	dests := []sched.Dest{{ID: 1, Addr: rs2, Port: 8000, Weight: 1}}
	rr, _ := sched.New("rr", dests, sched.Options{})
	svcs := append([]Service(nil), old.Services...)
	svcs[0] = Service{Key: svcs[0].Key, Scheduler: "rr", Dests: dests, Scheds: []sched.Scheduler{rr}}
	next := NewSnapshot(2, old.Ports, svcs, old.Neigh, old.Timeouts)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	w.runCommands(0)
	if w.AckedGen() != 2 {
		t.Fatalf("acked %d, want 2", w.AckedGen())
	}
	// The existing connection still reaches rs1; a new one goes to rs2.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""))
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("sent %d", len(out))
	}
	if _, ip, _ := checkTCP(t, out[0]); ip.Dst() != rs1 {
		t.Fatalf("existing connection moved to %x", ip.Dst())
	}
	if _, ip, _ := checkTCP(t, out[1]); ip.Dst() != rs2 {
		t.Fatalf("new connection went to %x", ip.Dst())
	}
}

func TestExpiry(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	if w.table.Len() != 1 || w.cnt.dest[0][DestInactive] != 1 {
		t.Fatal("connection not created")
	}
	// Before the SYN timeout: still there. After: gone, gauges back to 0.
	w.table.Expire(w.now+int64(59*time.Second), w.table.Cap(), w.expire)
	if w.table.Len() != 1 {
		t.Fatal("expired before its timeout")
	}
	w.table.Expire(w.now+int64(61*time.Second), w.table.Cap(), w.expire)
	if w.table.Len() != 0 || w.cnt.dest[0][DestInactive] != 0 || w.cnt.dest[0][DestActive] != 0 {
		t.Fatalf("after expiry: len %d gauges %v", w.table.Len(), w.cnt.dest[0])
	}
}

// TestPacketPathDoesNotAllocate drives whole bursts (RX, NAT of a new
// connection, TX) through the worker and counts Go heap allocations.
func TestPacketPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vip, 80, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the packet path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections were made", r.w.cnt.own[NewConns])
	}
}

// allocsPerBurst runs 100 polls of one packet each, frame(i) arriving on
// port in, and frees what port out sends: the Go heap allocations per
// burst. The mbufs are made beforehand (allocating them is a cgo call).
func (r *rig) allocsPerBurst(in, out int, frame func(i int) []byte) float64 {
	r.t.Helper()
	var frames []*mbuf.Mbuf
	for i := 0; i < 200; i++ {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			r.t.Fatal(err)
		}
		f := frame(i)
		b, _ := m.Append(len(f))
		copy(b, f)
		frames = append(frames, m)
	}
	objs, sent := ring.NewObjs(1), ring.NewObjs(8)
	defer ring.FreeObjs(objs)
	defer ring.FreeObjs(sent)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		objs[0] = frames[i].Pointer()
		i++
		r.rx[in].SPEnqueueBurst(objs)
		r.w.poll()
		n := r.tx[out].SCDequeueBurst(sent)
		for _, p := range sent[:n] {
			mbuf.FromPointer(p).Free()
		}
	})
	for _, m := range frames[i:] {
		m.Free()
	}
	return allocs
}

// TestStartStop runs the real poll loop on its own thread and checks that
// stopping frees everything.
func TestStartStop(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.cfg.IdleSleep = 10 * time.Microsecond
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, uint16(30000+i), vip, 80, hdr.TCPFlagSYN, ""))
	}
	deadline := time.Now().Add(5 * time.Second)
	for w.Stats()[NewConns] < 50 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	if st := w.Stats(); st[NewConns] != 50 || st[TxPackets] != 50 {
		t.Fatalf("new %d tx %d, want 50", st[NewConns], st[TxPackets])
	}
	if st := w.Stats(); st[BusyNanos] == 0 || st[LoopNanos] <= st[BusyNanos] {
		t.Fatalf("cycle accounting: busy %d ns of %d ns", st[BusyNanos], st[LoopNanos])
	}
	if got := len(r.sent(1)); got != 50 {
		t.Fatalf("lan ring holds %d, want 50", got)
	}
	if r.pool.InUse() != 0 {
		t.Fatalf("in use after stop: %d", r.pool.InUse())
	}
	var ran bool
	for _, j := range w.JobStats() {
		ran = ran || (j.Name == "publish" && j.Runs > 0)
	}
	if !ran {
		t.Fatal("the publish job never ran")
	}
}

// persistentService is VIP:443 persistent for 300 s per client address
// over rs1 and rs2 (rr).
func persistentService() Service {
	d := []sched.Dest{{ID: 7, Addr: rs1, Port: 443, Weight: 1}, {ID: 8, Addr: rs2, Port: 443, Weight: 1}}
	s, _ := sched.New("rr", d, sched.Options{})
	return Service{Key: ServiceKey{VIP: vip, Port: 443, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: d,
		Scheds: []sched.Scheduler{s}, Persistence: int64(300 * time.Second), PersistMask: 0xFFFFFFFF}
}

// TestHoldRX: a held worker reads nothing from its ports (the packet
// waits in the port's ring) and still runs its commands; released, it
// forwards what waited.
func TestHoldRX(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.HoldRX(true)
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	if got := w.poll(); got != 0 {
		t.Fatalf("a held worker received %d packets", got)
	}
	if out := r.sent(1); len(out) != 0 {
		t.Fatalf("a held worker forwarded %d packets", len(out))
	}
	next := w.snap.WithNeighbours(w.snap.Gen+1, w.snap.Neigh)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	w.runCommands(0)
	if w.AckedGen() != next.Gen {
		t.Fatalf("a held worker did not take its snapshot: acked %d, want %d", w.AckedGen(), next.Gen)
	}
	w.HoldRX(false)
	if got := w.poll(); got != 1 {
		t.Fatalf("released, the worker received %d packets, want the 1 that waited", got)
	}
	if out := r.sent(1); len(out) != 1 {
		t.Fatalf("released, the worker forwarded %d packets, want 1", len(out))
	}
}

// TestSlowJobRunsCounted: a job run of SlowJob or longer is counted as
// slow (the perf report's "of them jobs"); quick runs are not.
func TestSlowJobRunsCounted(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	var slowRuns, quickRuns atomic.Int32
	w.jobs = append(w.jobs,
		&job{name: "slow", period: int64(time.Millisecond), run: func(int64) {
			time.Sleep(2 * SlowJob)
			slowRuns.Add(1)
		}},
		&job{name: "quick", period: int64(time.Millisecond), run: func(int64) { quickRuns.Add(1) }})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for (slowRuns.Load() < 3 || quickRuns.Load() < 3) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	w.Stop()
	got := map[string]JobStat{}
	for _, j := range w.JobStats() {
		got[j.Name] = j
	}
	if s := got["slow"]; s.Runs < 3 || s.Slow != s.Runs {
		t.Fatalf("slow job: %d runs, %d counted slow", s.Runs, s.Slow)
	}
	if q := got["quick"]; q.Runs < 3 || q.Slow > q.Runs/2 {
		t.Fatalf("quick job: %d runs, %d counted slow", q.Runs, q.Slow)
	}
}
