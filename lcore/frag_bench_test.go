package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
)

// BenchmarkFragmentNAT measures the fragment path of an established VS/NAT
// connection: each iteration takes a datagram's first fragment (key made,
// decision remembered) and its last one (forwarded along, key forgotten),
// as a ratio to restoring the two frames alone (x-copy).
func BenchmarkFragmentNAT(b *testing.B) {
	r := newRig(b, defaultNeigh())
	w := r.w
	frames := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 44000, vip, 53, 1600, 1), 1500)
	for _, f := range frames {
		r.inject(0, f)
	}
	w.poll()
	r.sent(1)
	var ms [2]*mbuf.Mbuf
	for i := range ms {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			b.Fatal(err)
		}
		defer m.Free()
		m.Append(len(frames[i]))
		ms[i] = m
	}
	restore := func() {
		for i, m := range ms {
			m.SetLen(len(frames[i]))
			copy(m.Data(), frames[i])
		}
	}
	start := time.Now()
	for i := 0; i < b.N; i++ {
		restore()
	}
	ref := time.Since(start)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		restore()
		w.handle(ms[0], 0)
		w.handle(ms[1], 0)
		w.tx[1].n, w.tx[1].bytes = 0, 0 // queued, not sent: the mbufs stay ours
	}
	b.StopTimer()
	if b.N > 0 && ref > 0 {
		b.ReportMetric(float64(b.Elapsed())/float64(ref), "x-copy")
	}
	if w.cnt.own[Fragments] < uint64(2*b.N) {
		b.Fatalf("%d fragments forwarded of %d", w.cnt.own[Fragments], 2*b.N)
	}
}
