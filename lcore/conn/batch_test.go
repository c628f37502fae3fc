package conn_test

import (
	"runtime"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

// TestLargeTableAndPrefetch: a table big enough for huge-page memory
// (outside the Go heap) keeps its connections across garbage collections;
// the prefetch calls of a burst, on present and absent keys, change
// nothing and do not allocate.
func TestLargeTableAndPrefetch(t *testing.T) {
	tb := newTable(t, 1<<16) // 4 MiB of entries, 8 MiB of index
	ids := map[uint16]uint32{}
	for p := uint16(1000); p < 3000; p++ {
		ids[p] = mustInsert(t, tb, natConn(p, rs1))
	}
	runtime.GC()
	runtime.GC()
	allocs := testing.AllocsPerRun(10, func() {
		for p := uint16(1000); p < 4000; p++ {
			h := tb.Hash(tcp, client, p, vip, 80)
			tb.PrefetchCell(h)
			tb.PrefetchEntry(h)
		}
	})
	if allocs != 0 {
		t.Fatalf("prefetch allocates %.1f times", allocs)
	}
	for p := uint16(1000); p < 3000; p++ {
		id, _, ok := tb.Lookup(tcp, client, p, vip, 80)
		if !ok || id != ids[p] || tb.Get(id).ClientPort != p {
			t.Fatalf("port %d: id %d ok %v, want %d", p, id, ok, ids[p])
		}
	}
	if _, _, ok := tb.Lookup(tcp, client, 3500, vip, 80); ok {
		t.Fatal("found a connection never inserted")
	}
	if tb.Len() != 2000 {
		t.Fatalf("len %d", tb.Len())
	}
}

// TestExpireInBatches: Expire removes due entries a batch at a time; more
// than a batch of them, some kept by the callback, some not due, come out
// exactly as one at a time would.
func TestExpireInBatches(t *testing.T) {
	tb := newTable(t, 1024)
	for p := uint16(1); p <= 100; p++ {
		c := natConn(p, rs1)
		c.Expires = 10
		if p%5 == 0 {
			c.Expires = 1000 // not due
		}
		mustInsert(t, tb, c)
	}
	kept := 0
	removed := tb.Expire(100, tb.Cap(), func(id uint32, c *conn.Conn) {
		if c.ClientPort%3 == 0 {
			c.Expires = 500 // extended by the callback
			kept++
		}
	})
	if removed != 80-kept || tb.Len() != 20+kept {
		t.Fatalf("removed %d (kept %d), %d left", removed, kept, tb.Len())
	}
	for p := uint16(1); p <= 100; p++ {
		_, _, ok := tb.Lookup(tcp, client, p, vip, 80)
		if want := p%5 == 0 || p%3 == 0; ok != want {
			t.Fatalf("port %d present %v, want %v", p, ok, want)
		}
		if _, _, ok := tb.Lookup(tcp, rs1, 8080, client, p); ok != (p%5 == 0 || p%3 == 0) {
			t.Fatalf("port %d: reply key present %v", p, ok)
		}
	}
}
