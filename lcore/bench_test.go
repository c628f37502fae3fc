package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// BenchmarkNATPacket measures the per-packet work of the worker (parse,
// connection lookup, state update, DNAT with incremental checksums, route,
// neighbour, TX queueing) on a packet of an established connection, and
// reports it as a ratio to a reference measured in the same run: restoring
// the 54-byte frame, which every iteration also does. No RX/TX burst is
// included (those are one cgo call per 32 packets).
func BenchmarkNATPacket(b *testing.B) {
	r := newRig(b, defaultNeigh())
	w := r.w
	syn := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	r.inject(0, syn)
	w.poll()
	r.sent(1)
	frame := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, "")
	m, err := mbuf.Alloc(r.pool)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Free()
	data, _ := m.Append(len(frame))

	// Reference: the frame copy alone.
	start := time.Now()
	for i := 0; i < b.N; i++ {
		copy(data, frame)
	}
	ref := time.Since(start)

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(data, frame)
		w.handle(m, 0)
		w.tx[1].n = 0 // keep the mbuf: it is not sent, only queued
		w.tx[1].bytes = 0
	}
	b.StopTimer()
	if b.N > 0 && ref > 0 {
		b.ReportMetric(float64(b.Elapsed())/float64(ref), "x-copy")
	}
	if w.cnt.own[DropNoConn]+w.cnt.own[DropNotSYN] != 0 {
		b.Fatal("the benchmark packet was dropped")
	}
}
