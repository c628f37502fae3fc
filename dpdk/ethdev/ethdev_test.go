package ethdev_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/dpdk/ring"
)

func TestMain(m *testing.M) {
	dpdktest.Main(m, "--vdev", "net_null0,size=64", "--vdev", "net_null1")
}

func pool(t *testing.T, name string) *mempool.Mempool {
	t.Helper()
	mp, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: name, N: 2047, Cache: 0, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mp.Free)
	return mp
}

// startedRingPort is a started net_ring port of one queue pair over an
// RX ring of 64 and a TX ring of txSize, all gone when the test ends.
func startedRingPort(t *testing.T, mp *mempool.Mempool, name string, txSize uint) (p ethdev.Port, rx, tx *ring.Ring) {
	t.Helper()
	var err error
	if rx, err = ring.Create(name+"-rx", 64, -1, ring.SingleProducer|ring.SingleConsumer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rx.Free)
	if tx, err = ring.Create(name+"-tx", txSize, -1, ring.SingleProducer|ring.SingleConsumer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tx.Free)
	if p, err = ethdev.FromRings(name, []*ring.Ring{rx}, []*ring.Ring{tx}, -1); err != nil {
		t.Fatal(err)
	}
	setup(t, p, mp, 1, 0) // its cleanup closes the port before the rings go
	return p, rx, tx
}

// setup configures a port with n queue pairs and starts it.
func setup(t *testing.T, p ethdev.Port, mp *mempool.Mempool, n uint16, rss uint64) {
	t.Helper()
	if err := p.Configure(ethdev.Config{RxQueues: n, TxQueues: n, RSSHashFunctions: rss}); err != nil {
		t.Fatal(err)
	}
	for q := uint16(0); q < n; q++ {
		if err := p.RxQueueSetup(q, 256, -1, mp); err != nil {
			t.Fatal(err)
		}
		if err := p.TxQueueSetup(q, 256, -1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
}

func TestNullPortLifecycle(t *testing.T) {
	dpdktest.Skip(t)
	if ethdev.Count() < 2 {
		t.Fatalf("Count = %d, want the two net_null vdevs", ethdev.Count())
	}
	p, err := ethdev.ByName("net_null0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ethdev.ByName("net_nonexistent9"); !errors.Is(err, syscall.ENODEV) {
		t.Fatalf("unknown name: got %v, want ENODEV", err)
	}
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "net_null" || info.MaxRxQueues == 0 || info.FlowTypeRSSOffloads == 0 {
		t.Fatalf("info %+v", info)
	}
	// Capabilities are checked before DPDK sees the request.
	err = p.Configure(ethdev.Config{RxQueues: info.MaxRxQueues + 1, TxQueues: 1})
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("too many queues: %v", err)
	}
	if err := p.Configure(ethdev.Config{RxQueues: 1, TxQueues: 1, TxOffloads: ethdev.TxOffloadTCPCksum}); err == nil ||
		!strings.Contains(err.Error(), "TX offloads") {
		t.Fatalf("unsupported offload: %v", err)
	}

	mp := pool(t, "lifecycle")
	setup(t, p, mp, 2, ethdev.RSSIP|ethdev.RSSTCP|ethdev.RSSUDP)
	if link, err := p.Link(); err != nil || !link.Up {
		t.Fatalf("link %v %v", link, err)
	}
	if _, err := p.MACAddr(); err != nil {
		t.Fatal(err)
	}
	if err := p.SetPromiscuous(true); err != nil || !p.Promiscuous() {
		t.Fatalf("promiscuous on: %v", err)
	}
	// net_null cannot leave promiscuous mode; that must come back as "unsupported".
	if err := p.SetPromiscuous(false); err != nil && !ethdev.IsUnsupported(err) {
		t.Fatalf("promiscuous off: %v", err)
	}
	if err := p.SetMTU(1500); err != nil && !ethdev.IsUnsupported(err) {
		t.Fatalf("SetMTU: %v", err)
	}
	if _, err := p.MTU(); err != nil {
		t.Fatal(err)
	}

	// net_null RX produces packets from the pool; TX frees them.
	arr := mbuf.NewArray(32)
	defer arr.Free()
	received := 0
	for q := uint16(0); q < 2; q++ {
		n := p.RxBurst(q, arr.Pkt)
		if n != 32 {
			t.Fatalf("queue %d: RxBurst = %d, want 32", q, n)
		}
		if arr.Pkt[0].DataLen() != 64 {
			t.Fatalf("net_null packet length %d, want 64", arr.Pkt[0].DataLen())
		}
		received += n
		if mp.InUse() != 32 {
			t.Fatalf("in use after RX: %d", mp.InUse())
		}
		if sent := p.TxBurstOrFree(q, arr.Pkt[:n]); sent != n {
			t.Fatalf("TX took %d of %d", sent, n)
		}
	}
	if mp.InUse() != 0 {
		t.Fatalf("in use after TX: %d", mp.InUse())
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.IPackets != uint64(received) || st.OPackets != uint64(received) {
		t.Fatalf("stats %+v, want %d in and out", st, received)
	}
	xs, err := p.XStats()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range xs {
		if x.Name == "rx_good_packets" {
			found = x.Value == uint64(received)
		}
	}
	if !found {
		t.Fatalf("xstats lack rx_good_packets=%d: %v", received, xs)
	}
	if err := p.ResetStats(); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Stats(); st.IPackets != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}

func TestRingPortCarriesPackets(t *testing.T) {
	dpdktest.Skip(t)
	rx, err := ring.Create("t-rx", 64, -1, ring.SingleProducer|ring.SingleConsumer)
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Free()
	tx, err := ring.Create("t-tx", 64, -1, ring.SingleProducer|ring.SingleConsumer)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Free()
	p, err := ethdev.FromRings("ringport0", []*ring.Ring{rx}, []*ring.Ring{tx}, -1)
	if err != nil {
		t.Fatal(err)
	}
	mp := pool(t, "ringport")
	setup(t, p, mp, 1, 0)

	// Inject three packets into the RX ring; the port hands them to RxBurst.
	injectFrames(t, mp, rx, 'x', 3)
	arr := mbuf.NewArray(8)
	defer arr.Free()
	n := p.RxBurst(0, arr.Pkt)
	if n != 3 || arr.Pkt[2].Data()[1] != 2 {
		t.Fatalf("RxBurst = %d", n)
	}
	if p.TxBurst(0, arr.Pkt[:n]) != 3 || tx.Count() != 3 {
		t.Fatalf("TX ring holds %d", tx.Count())
	}
	out := ring.NewObjs(8)
	defer ring.FreeObjs(out)
	got := tx.SCDequeueBurst(out)
	for i := 0; i < got; i++ {
		m := mbuf.FromPointer(out[i])
		if d := m.Data(); d[0] != 'x' || d[1] != byte(i) {
			t.Errorf("packet %d out of order", i)
		}
		m.Free()
	}
	if mp.InUse() != 0 {
		t.Fatalf("leaked %d mbufs", mp.InUse())
	}
}

func TestVdevHotplug(t *testing.T) {
	dpdktest.Skip(t)
	if err := ethdev.CreateVdev("net_null7", ""); err != nil {
		t.Fatal(err)
	}
	p, err := ethdev.ByName("net_null7")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ethdev.RemoveVdev("net_null7"); err != nil {
		t.Fatal(err)
	}
	if _, err := ethdev.ByName("net_null7"); err == nil {
		t.Fatal("removed vdev still has a port")
	}
}

func TestRSSKey(t *testing.T) {
	dpdktest.Skip(t)
	p, err := ethdev.ByName("net_null1")
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	c := ethdev.Config{RxQueues: 2, TxQueues: 2, RSSHashFunctions: ethdev.RSSIP, RSSKey: make([]byte, info.HashKeySize+1)}
	if err := p.Configure(c); err == nil || !strings.Contains(err.Error(), "RSS key") {
		t.Fatalf("a key of the wrong size: %v", err)
	}
	if info.HashKeySize == 0 {
		return // net_null takes no key: only the refusal is testable
	}
	c.RSSKey = make([]byte, info.HashKeySize)
	for i := range c.RSSKey {
		c.RSSKey[i] = byte(i)
	}
	if err := p.Configure(c); err != nil {
		t.Fatal(err)
	}
}

// TestRxSetPollsEveryQueue: one Poll takes each queue's packets into its
// own part of the array, in order, with the counts per queue; a burst
// limits each queue, not the total.
func TestRxSetPollsEveryQueue(t *testing.T) {
	dpdktest.Skip(t)
	mp := pool(t, "rxset")
	var rings []*ring.Ring
	var set []ethdev.RxQueue
	for i := range 3 {
		p, rx, _ := startedRingPort(t, mp, fmt.Sprintf("rxset%d", i), 64)
		rings = append(rings, rx)
		set = append(set, ethdev.RxQueue{Port: p, Queue: 0})
	}
	s := ethdev.NewRxSet(set, 4)
	defer s.Free()
	if s.Poll() != 0 || s.Count[0]+s.Count[1]+s.Count[2] != 0 {
		t.Fatal("packets from empty queues")
	}
	injectFrames(t, mp, rings[0], 'a', 2)
	injectFrames(t, mp, rings[2], 'c', 6) // more than a burst: 4 now, 2 at the next poll
	if got := s.Poll(); got != 6 || s.Count[0] != 2 || s.Count[1] != 0 || s.Count[2] != 4 {
		t.Fatalf("poll took %d (%v), want 6 (2, 0, 4)", got, s.Count)
	}
	for i, want := range []struct {
		tag byte
		n   int
	}{{'a', 2}, {0, 0}, {'c', 4}} {
		b := s.Burst(i)
		if len(b) != want.n {
			t.Fatalf("queue %d: %d packets, want %d", i, len(b), want.n)
		}
		for j, m := range b {
			if d := m.Data(); d[0] != want.tag || d[1] != byte(j) {
				t.Fatalf("queue %d packet %d: % x", i, j, d[:2])
			}
		}
		mbuf.FreeBulk(b)
	}
	if got := s.Poll(); got != 2 || s.Count[2] != 2 || s.Burst(2)[0].Data()[1] != 4 {
		t.Fatalf("second poll took %d (%v)", got, s.Count)
	}
	mbuf.FreeBulk(s.Burst(2))
	if mp.InUse() != 0 {
		t.Fatalf("leaked %d mbufs", mp.InUse())
	}
}

// TestTxSetSendsEveryQueue: one Send hands each queue's counted packets
// to its port; a queue whose ring is full reports what it took, and the
// caller keeps the rest.
func TestTxSetSendsEveryQueue(t *testing.T) {
	dpdktest.Skip(t)
	mp := pool(t, "txset")
	var txs []*ring.Ring
	var qs []ethdev.TxQueue
	for i, size := range []uint{64, 64, 4} { // the last ring holds 3
		p, _, tx := startedRingPort(t, mp, fmt.Sprintf("txset%d", i), size)
		arr := mbuf.NewArray(8)
		defer arr.Free()
		txs = append(txs, tx)
		qs = append(qs, ethdev.TxQueue{Port: p, Queue: 0, Pkts: arr.Pkt})
	}
	s := ethdev.NewTxSet(qs)
	defer s.Free()
	fill := func(q ethdev.TxQueue, n int) {
		for j := range n {
			m, err := mbuf.Alloc(mp)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := m.Append(60)
			b[0] = byte(j)
			q.Pkts[j] = m
		}
	}
	fill(qs[0], 2)
	fill(qs[2], 5)
	s.SetCount(0, 2)
	s.SetCount(1, 0)
	s.SetCount(2, 5)
	s.Send()
	if s.Sent(0) != 2 || s.Sent(1) != 0 || s.Sent(2) != 3 {
		t.Fatalf("sent %d, %d, %d; want 2, 0, 3", s.Sent(0), s.Sent(1), s.Sent(2))
	}
	if txs[0].Count() != 2 || txs[1].Count() != 0 || txs[2].Count() != 3 {
		t.Fatalf("rings hold %d, %d, %d", txs[0].Count(), txs[1].Count(), txs[2].Count())
	}
	mbuf.FreeBulk(qs[2].Pkts[3:5]) // what the full ring did not take
	out := ring.NewObjs(8)
	defer ring.FreeObjs(out)
	for _, r := range txs {
		n := r.SCDequeueBurst(out)
		for j := range n {
			m := mbuf.FromPointer(out[j])
			if m.Data()[0] != byte(j) {
				t.Errorf("packet %d out of order", j)
			}
			m.Free()
		}
	}
	if mp.InUse() != 0 {
		t.Fatalf("leaked %d mbufs", mp.InUse())
	}
}

// injectFrames puts n 60-byte frames from mp on the RX ring r of a ring
// port, frame i starting with tag, i.
func injectFrames(t *testing.T, mp *mempool.Mempool, r *ring.Ring, tag byte, n int) {
	t.Helper()
	in := ring.NewObjs(n)
	defer ring.FreeObjs(in)
	for i := range in {
		m, err := mbuf.Alloc(mp)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Append(60)
		b[0], b[1] = tag, byte(i)
		in[i] = m.Pointer()
	}
	if r.SPEnqueueBurst(in) != n {
		t.Fatal("inject failed")
	}
}
