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

// benchFrame runs the worker's per-packet path on one pre-built mbuf,
// restoring the frame before each run, and reports the ratio to the
// restore alone (x-copy).
func benchFrame(b *testing.B, r *rig, frame []byte, in int, after func(*mbuf.Mbuf)) {
	w := r.w
	m, err := mbuf.Alloc(r.pool)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Free()
	m.Append(len(frame))
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m.SetLen(len(frame))
		copy(m.Data(), frame)
	}
	ref := time.Since(start)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.SetLen(len(frame))
		copy(m.Data(), frame)
		w.handle(m, in)
		after(m)
		for p := range w.tx {
			w.tx[p].n, w.tx[p].bytes = 0, 0 // queued, not sent: the mbuf stays ours
		}
	}
	b.StopTimer()
	if ref > 0 {
		b.ReportMetric(float64(b.Elapsed())/float64(ref), "x-copy")
	}
}

// BenchmarkNATNewConnection: a SYN that schedules (rr), creates a
// connection and is DNATed; the connection is deleted again after each
// run so the table never fills.
func BenchmarkNATNewConnection(b *testing.B) {
	r := newRig(b, defaultNeigh())
	w := r.w
	frame := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	benchFrame(b, r, frame, 0, func(*mbuf.Mbuf) {
		if id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 80); ok {
			w.table.Delete(id)
		}
	})
	if w.cnt.own[NewConns] < uint64(b.N) {
		b.Fatalf("%d connections for %d runs", w.cnt.own[NewConns], b.N)
	}
}

// BenchmarkDRPacket: a packet of an existing VS/DR connection.
func BenchmarkDRPacket(b *testing.B) {
	r := newRig(b, defaultNeigh())
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	r.sent(1)
	benchFrame(b, r, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagACK, ""), 0, func(*mbuf.Mbuf) {})
}

// BenchmarkTUNPacket: a packet of an existing VS/TUN connection (the outer
// header is prepended; the next run puts the frame back in place).
func BenchmarkTUNPacket(b *testing.B) {
	r := newRig(b, defaultNeigh())
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	r.sent(1)
	benchFrame(b, r, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagACK, ""), 0, func(m *mbuf.Mbuf) {
		m.Adj(ipipHeaderLen)
	})
}

// BenchmarkHandoff: deciding a packet's owner and queueing it for another
// lcore (the bulk enqueue is one cgo call per burst, not measured here).
func BenchmarkHandoff(b *testing.B) {
	r := newMultiRig(b, false)
	w := r.w[0]
	var port uint16 = 40000
	for Owner(clientIP, port, 2) != 1 {
		port++
	}
	frame := tcpFrame(clientMAC, wanMAC, clientIP, port, vip, 80, hdr.TCPFlagACK, "")
	m, _ := mbuf.Alloc(r.pool)
	defer m.Free()
	m.Append(len(frame))
	copy(m.Data(), frame)
	d := &w.descs[0]
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		parse(d, m, 0)
		e := w.process(d, true)
		if e.kind != exitHandOff {
			b.Fatal("not handed off")
		}
		w.leave(m, 0, e)
		w.hout[1].n = 0
	}
}

// handle parses and processes one packet as the benchmarks drive it.
func (w *Worker) handle(m *mbuf.Mbuf, in int) {
	parse(&w.descs[0], m, in)
	w.checkDstMAC(&w.descs[0])
	w.run(w.descs[:1], false)
}

// BenchmarkNATPacketSynced is BenchmarkNATPacket's packet with connection
// sync on (threshold 3, period 50): the per-packet sync check, and a
// record on the sync ring every 50th packet (drained now and then, as the
// sync sender would). Compare its x-copy with BenchmarkNATPacket's.
func BenchmarkNATPacketSynced(b *testing.B) {
	r := newRig(b, defaultNeigh())
	w := r.w
	w.snap = w.snap.WithHA(w.snap.Gen+1, SyncParams{On: true, Threshold: 3, Period: 50}, false)
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(0)
	r.drain(1)
	benchFrame(b, r, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""), 0, func(*mbuf.Mbuf) {
		if w.syncOut.Len() > syncRingSize/2 {
			for _, ok := w.syncOut.Pop(); ok; _, ok = w.syncOut.Pop() {
			}
		}
	})
	if w.cnt.own[SyncRecords] == 0 || w.cnt.own[SyncRingFull] != 0 {
		b.Fatalf("sync_records %d sync_ring_full %d", w.cnt.own[SyncRecords], w.cnt.own[SyncRingFull])
	}
}
