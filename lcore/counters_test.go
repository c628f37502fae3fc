package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// TestSwitchPublishesAndResets: a worker publishes its counters when it
// takes a snapshot, before acknowledging it (the control plane frees an
// id only on gauges read after that); it zeroes the counters of the ids
// the snapshot hands to new pairs; it keeps publishing a removed server
// the snapshot still counts (draining) and stops for one it does not.
func TestSwitchPublishesAndResets(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	if w.cnt.dest[0][DestInactive] != 1 || w.DestStats(0)[DestInactive] != 0 {
		t.Fatal("want a connection to rs1 (id 0), not published yet")
	}
	// rs1 removed from the service; still counted (draining).
	old := w.snap
	dests := []sched.Dest{{ID: 1, Addr: rs2, Port: 8000, Weight: 1}}
	rr, _ := sched.New("rr", dests, sched.Options{})
	svcs := append([]Service(nil), old.Services...)
	svcs[0] = Service{Key: svcs[0].Key, Scheduler: "rr", Dests: dests, Scheds: []sched.Scheduler{rr}}
	switchTo := func(s *Snapshot) {
		t.Helper()
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: s})
		w.runCommands(0)
		if w.AckedGen() != s.Gen {
			t.Fatalf("acked %d, want %d", w.AckedGen(), s.Gen)
		}
	}
	draining := NewSnapshot(2, old.Ports, svcs, old.Neigh, old.Timeouts)
	draining.Counted = append(draining.Counted, 0)
	switchTo(draining)
	if got := w.DestStats(0); got[DestInactive] != 1 || got[DestConns] != 1 {
		t.Fatalf("published at the switch: %v, want the connection", got)
	}
	// The connection ends; the next publish shows it.
	w.table.Expire(w.now+int64(61e9), w.table.Cap(), w.expire)
	w.runPublish(0)
	if got := w.DestStats(0); got[DestInactive] != 0 || got[DestConns] != 1 {
		t.Fatalf("after expiry: %v", got)
	}
	// Id 0 reused by a new pair: its counters restart from zero.
	reuse := NewSnapshot(3, old.Ports, svcs, old.Neigh, old.Timeouts)
	reuse.Counted = append(reuse.Counted, 0)
	reuse.ResetDests = []uint32{0}
	switchTo(reuse)
	if got := w.DestStats(0); got != (DestStats{}) {
		t.Fatalf("a reused id's counters: %v, want zeros", got)
	}
	// Not counted any more: no longer published.
	w.cnt.dest[0][DestConns] = 5
	switchTo(NewSnapshot(4, old.Ports, svcs, old.Neigh, old.Timeouts))
	if got := w.DestStats(0)[DestConns]; got != 0 {
		t.Fatalf("an id the snapshot does not count was published (%d)", got)
	}
}

// BenchmarkPublish is the publish job's cost by the number of real servers
// it publishes: the live ones (and those draining), however many ids were
// ever made. "every-id" is what it cost when the job walked every id up
// to the highest ever made (ids were never reused): 16,384 ids after
// enough churn, whatever is configured.
func BenchmarkPublish(b *testing.B) {
	for _, tc := range []struct {
		name string
		ids  int
	}{{"live=16", 16}, {"live=256", 256}, {"live=4096", 4096}, {"every-id=16384", MaxDests}} {
		b.Run(tc.name, func(b *testing.B) {
			c := newCounters()
			ids := make([]uint32, tc.ids)
			for i := range ids {
				ids[i] = uint32(i * (MaxDests / tc.ids)) // spread like reused ids
			}
			b.ReportAllocs()
			for b.Loop() {
				c.publish(ids)
			}
		})
	}
}
