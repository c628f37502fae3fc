package memiftest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
)

// sock is the memif control socket of the port pair, unique per run.
var sock = filepath.Join(os.TempDir(), fmt.Sprintf("dplb-memiftest-%d.sock", os.Getpid()))

func TestMain(m *testing.M) {
	// net_memif0 plays lbd (server: it maps the peer's memory), net_memif1
	// the peer (lbgen, testpmd) that comes and goes.
	code := dpdktest.Run(m,
		"--vdev", "net_memif0,role=server,socket-abstract=no,socket="+sock,
		"--vdev", "net_memif1,role=client,socket-abstract=no,socket="+sock,
		"--log-level", "pmd.net.memif:error")
	os.Remove(sock)
	os.Exit(code)
}

func port(t *testing.T, name string, mp *mempool.Mempool) ethdev.Port {
	t.Helper()
	p, err := ethdev.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Configure(ethdev.Config{RxQueues: 1, TxQueues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.RxQueueSetup(0, 512, -1, mp); err != nil {
		t.Fatal(err)
	}
	if err := p.TxQueueSetup(0, 512, -1, 0); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitLink(t *testing.T, p ethdev.Port, up bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := p.Link()
		if err == nil && l.Up == up {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d: link up=%v not reached in 10 s (%v, %v)", p, up, l, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPeerDisconnectWhilePolling is the end of a perf case, many times
// over: a thread polls the server port without pause (as a worker does)
// while the peer sends a few bursts, disconnects and connects again. The
// driver unmaps the peer's memory on its interrupt thread at every
// disconnect; without the burst guard a poll in progress at that moment
// faults (SIGSEGV in rte_eth_rx_burst) and takes the test binary with it.
func TestPeerDisconnectWhilePolling(t *testing.T) {
	dpdktest.Skip(t)
	mp, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: "memiftest", N: 4095, Cache: 0, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Free()
	srv, peer := port(t, "net_memif0", mp), port(t, "net_memif1", mp)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop() // not closed: -count runs the test again on the same ports
	if err := peer.Start(); err != nil {
		t.Fatal(err)
	}
	defer peer.Stop()
	waitLink(t, srv, true)

	var stop atomic.Bool
	var received atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		arr := mbuf.NewArray(32)
		defer arr.Free()
		pkts := arr.Pkt
		for !stop.Load() {
			if n := srv.RxBurst(0, pkts); n > 0 {
				received.Add(uint64(n))
				mbuf.FreeBulk(pkts[:n])
			}
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()

	cycles := 150
	if testing.Short() {
		cycles = 30
	}
	unmaps := ethdev.GuardedUnmaps()
	out := mbuf.NewArray(32)
	defer out.Free()
	for c := 0; c < cycles; c++ {
		before := received.Load()
		// Send until the poller has seen some, so every disconnect comes
		// while traffic flows.
		for deadline := time.Now().Add(10 * time.Second); received.Load() == before; {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: the server port received nothing in 10 s", c)
			}
			send(t, peer, mp, out.Pkt)
		}
		for range 4 {
			send(t, peer, mp, out.Pkt)
		}
		if err := peer.Stop(); err != nil {
			t.Fatal(err)
		}
		waitLink(t, srv, false)
		if err := peer.Start(); err != nil {
			t.Fatal(err)
		}
		waitLink(t, srv, true)
	}
	if got := ethdev.GuardedUnmaps() - unmaps; got < uint64(cycles) {
		t.Fatalf("%d disconnects, %d guarded unmappings on the interrupt thread: the munmap interposition is not in effect", cycles, got)
	}
	t.Logf("%d disconnects under polling, %d packets received", cycles, received.Load())
}

// send transmits one burst of 64-byte frames from the peer.
func send(t *testing.T, p ethdev.Port, mp *mempool.Mempool, pkts []*mbuf.Mbuf) {
	t.Helper()
	for i := range pkts {
		m, err := mbuf.Alloc(mp)
		if err != nil {
			mbuf.FreeBulk(pkts[:i])
			time.Sleep(time.Millisecond) // the pool is in flight: let the poller free some
			return
		}
		b, _ := m.Append(64)
		for j := range b {
			b[j] = byte(i + j)
		}
		pkts[i] = m
	}
	p.TxBurstOrFree(0, pkts)
}
