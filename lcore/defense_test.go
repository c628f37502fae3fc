package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestSYNFloodThroughWorker: ten times the table's capacity in spoofed
// SYNs through a worker with lbd's default defense leaves an established
// connection working, lets a real client in during the flood, and keeps
// the per-server gauges equal to what the table holds.
func TestSYNFloodThroughWorker(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	if err := w.table.SetDefense(conn.Defense{
		DropEntryPercent: 90, SecurePercent: 75, IdleAfter: time.Minute,
		SecureSYN: 10 * time.Second, SecureUDP: 10 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	step := func() { // one poll, a millisecond later; what went out is discarded
		w.now += int64(time.Millisecond)
		w.poll()
		r.drain(0)
		r.drain(1)
	}

	// An established connection: SYN, SYN-ACK, ACK.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	step()
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	step()
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""))
	step()

	spoofed := ip4(203, 0, 113, 200)
	flood := 10 * w.table.Cap()
	for i := 0; i < flood; i++ {
		src := spoofed + uint32(i>>14)
		r.inject(0, tcpFrame(clientMAC, wanMAC, src, uint16(1024+i&0x3fff), vip, 80, hdr.TCPFlagSYN, ""))
		if i%32 == 31 {
			step()
		}
		if i%1024 == 0 { // the established connection keeps talking
			r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, "data"))
			step()
		}
		if i == flood/2 { // a real client connects in the middle of it
			r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, ""))
			w.now += int64(time.Millisecond)
			w.poll()
			r.drain(0)
			if out := r.sent(1); len(out) != 1 {
				t.Fatalf("the real client's SYN during the flood: %d frames forwarded (table %d/%d, drops table_full %d)",
					len(out), w.table.Len(), w.table.Cap(), w.cnt.own[DropTableFull])
			}
		}
	}
	step()
	if w.cnt.own[DropTableFull] != 0 {
		t.Errorf("%d SYNs dropped with the table full", w.cnt.own[DropTableFull])
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, "after"))
	w.now += int64(time.Millisecond)
	w.poll()
	r.drain(0)
	if out := r.sent(1); len(out) != 1 {
		t.Fatal("the established connection stopped working after the flood")
	}
	w.runPublish(0)
	st := w.Stats()
	if st[Evictions] == 0 || st[ShortTimeouts] == 0 {
		t.Errorf("evictions %d, short timeouts %d: the defense did not show in the counters", st[Evictions], st[ShortTimeouts])
	}
	var gauges uint64
	for id := uint32(0); id < 8; id++ {
		gauges += w.cnt.dest[id][DestActive] + w.cnt.dest[id][DestInactive]
	}
	if gauges != uint64(w.table.Len()) {
		t.Errorf("active+inactive gauges sum to %d, the table holds %d", gauges, w.table.Len())
	}
}

// TestDefensePathDoesNotAllocate: new connections through a worker whose
// table is above both thresholds (each one evicts, each gets a short
// timeout) make no heap allocation.
func TestDefensePathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	if err := w.table.SetDefense(conn.Defense{
		DropEntryPercent: 50, SecurePercent: 50, IdleAfter: time.Minute,
		SecureSYN: time.Second, SecureUDP: time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	spoofed := ip4(203, 0, 113, 200)
	for i := 0; i < w.table.Cap(); i++ {
		r.inject(0, tcpFrame(clientMAC, wanMAC, spoofed, uint16(1024+i), vip, 80, hdr.TCPFlagSYN, ""))
		if i%32 == 31 {
			w.poll()
			r.drain(1)
		}
	}
	w.poll()
	r.drain(1)
	frames := make([]*mbuf.Mbuf, 0, 200)
	for i := 0; i < 200; i++ {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Append(54)
		copy(b, tcpFrame(clientMAC, wanMAC, spoofed+1, uint16(20000+i), vip, 80, hdr.TCPFlagSYN, ""))
		frames = append(frames, m)
	}
	before := w.table.Evictions()
	i := 0
	objs, out := ring.NewObjs(1), ring.NewObjs(8)
	defer ring.FreeObjs(objs)
	defer ring.FreeObjs(out)
	allocs := testing.AllocsPerRun(100, func() {
		objs[0] = frames[i].Pointer()
		i++
		r.rx[0].SPEnqueueBurst(objs)
		w.poll()
		n := r.tx[1].SCDequeueBurst(out)
		for _, p := range out[:n] {
			mbuf.FromPointer(p).Free()
		}
	})
	for _, m := range frames[i:] {
		m.Free()
	}
	if allocs != 0 {
		t.Fatalf("a new connection under pressure allocates %.1f times per burst", allocs)
	}
	if w.table.Evictions()-before < 50 || w.table.ShortTimeouts() == 0 {
		t.Fatalf("%d evictions, %d short timeouts: the defense was not on", w.table.Evictions()-before, w.table.ShortTimeouts())
	}
}
