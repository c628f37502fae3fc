package conn_test

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

// benchCaps are a cache-resident table with 1k connections, to show the
// CPU cost, 1M connections in a 2M-entry table (the perf run's), and 10M
// in a 16M-entry one (about 1.5 GB with its index), where DRAM and TLB
// misses dominate. The scale target compares live=1M and live=10M
// with live=1k.
var benchCaps = []struct {
	name      string
	cap, live int
}{{"live=1k", 1 << 11, 1 << 10}, {"live=1M", 1 << 21, 1 << 20}, {"live=10M", 1 << 24, 10_000_000}}

// forEachCap runs fn on a table of each size filled as benchCaps says.
func forEachCap(b *testing.B, fn func(b *testing.B, tb *conn.Table, live int)) {
	for _, bc := range benchCaps {
		b.Run(bc.name, func(b *testing.B) {
			fn(b, benchTable(b, bc.cap, bc.live), bc.live)
		})
	}
}

// benchConn spreads connections over 2^16 client addresses and many ports,
// like real traffic to one VIP: conn.SpreadConn, which the perf run's
// lookups use too.
func benchConn(i int) conn.Conn { return conn.SpreadConn(i) }

// benchConnIn returns benchConn(i) in memory the caches hold, as an
// lcore finds a key in the packet it has just received. Keys read from a
// live-sized array instead would add a DRAM and TLB miss of the
// benchmark's own to every lookup at 1M and 10M (a 10M array is 640 MB).
//
//go:noinline
func benchConnIn(i int) *conn.Conn {
	benchKey = benchConn(i)
	return &benchKey
}

var benchKey conn.Conn

// benchTable is conn.FillSpread's table (entries never due:
// BenchmarkExpireScan sweeps live entries).
func benchTable(b *testing.B, capacity, live int) *conn.Table {
	b.Helper()
	tb, err := conn.FillSpread(capacity, live, 7)
	if err != nil {
		b.Fatal(err)
	}
	return tb
}

func BenchmarkLookupHit(b *testing.B) {
	forEachCap(b, func(b *testing.B, tb *conn.Table, live int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := benchConnIn(i)
			// Alternate directions, as NAT traffic does.
			var ok bool
			var id uint32
			if i&1 == 0 {
				id, _, ok = tb.Lookup(c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort)
			} else {
				id, _, ok = tb.Lookup(c.Proto, c.RIP, c.RPort, c.ClientIP, c.ClientPort)
			}
			if !ok {
				b.Fatal("miss")
			}
			// A large stride defeats the prefetcher, like random traffic;
			// id>>31 (always 0) makes the next key wait for this lookup,
			// as an lcore finishes a packet before it starts the next.
			i = (i + 7919 + int(id>>31)) % live
		}
	})
}

// BenchmarkLookupBurst looks keys up 32 at a time as an lcore does a
// burst: conn.LookupSpreadBursts, the code the perf run times for issue
// #11's scale target, on the table FillSpread makes. ns/key is per key.
func BenchmarkLookupBurst(b *testing.B) {
	for _, bc := range benchCaps {
		b.Run(bc.name, func(b *testing.B) {
			tb, err := conn.FillSpread(bc.cap, bc.live, 7)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			next, keys := 0, 0
			for b.Loop() {
				var n int
				var ok bool
				if next, n, ok = tb.LookupSpreadBursts(bc.live, 1, next); !ok {
					b.Fatal("miss")
				}
				keys += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
		})
	}
}

// BenchmarkLookupFloor is BenchmarkLookupBurst's memory alone: per key,
// one random index cell and one random live entry prefetched and read,
// 32 keys at a time, no entry waiting for its cell
// (conn.TouchSpreadBursts). A lookup reaches those two lines and cannot
// be faster: what the machine's memory costs at each size, whatever the
// table does.
func BenchmarkLookupFloor(b *testing.B) {
	for _, bc := range benchCaps {
		b.Run(bc.name, func(b *testing.B) {
			tb := benchTable(b, bc.cap, bc.live)
			keys, seed := 0, uint64(1)
			for b.Loop() {
				n, sum := tb.TouchSpreadBursts(bc.live, 1, seed)
				keys, seed = keys+n, seed+sum|1
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
		})
	}
}

func BenchmarkLookupMiss(b *testing.B) {
	forEachCap(b, func(b *testing.B, tb *conn.Table, live int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := benchConn(live + i) // never inserted
			if _, _, ok := tb.Lookup(c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort); ok {
				b.Fatal("hit")
			}
			i = (i + 7919) % live
		}
	})
}

func BenchmarkInsertDelete(b *testing.B) {
	forEachCap(b, func(b *testing.B, tb *conn.Table, live int) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c := benchConn(live + i)
			id, err := tb.Insert(&c)
			if err != nil {
				b.Fatal(err)
			}
			tb.Delete(id)
			i = (i + 7919) % live
		}
	})
}

func BenchmarkExpireScan(b *testing.B) {
	forEachCap(b, func(b *testing.B, tb *conn.Table, _ int) {
		onExpire := func(uint32, *conn.Conn) {}
		b.ReportAllocs()
		for b.Loop() {
			tb.Expire(0, 256, onExpire) // nothing due: the cost of one sweep tick
		}
	})
}

func BenchmarkNextTCPState(b *testing.B) {
	b.ReportAllocs()
	s := conn.StateNone
	flags := [...]uint8{syn, synAck, ack, finAck, ack}
	dirs := [...]conn.Dir{conn.Original, conn.Reply, conn.Original, conn.Reply, conn.Original}
	i := 0
	for b.Loop() {
		s = conn.NextTCPState(s, dirs[i], flags[i], false)
		i++
		if i == len(flags) {
			i, s = 0, conn.StateNone
		}
	}
}

// BenchmarkChurn is the table's share of a new connection at scale: with
// live connections in the table (4M: the new-connection target),
// each op inserts a new two-way (VS/NAT) connection and deletes the
// oldest, as expiry does while connections keep arriving.
func BenchmarkChurn(b *testing.B) {
	for _, bc := range []struct {
		name      string
		cap, live int
	}{{"live=1k", 1 << 11, 1 << 10}, {"live=4M", 1 << 23, 4 << 20}} {
		b.Run(bc.name, func(b *testing.B) {
			tb := benchTable(b, bc.cap, bc.live)
			ids := make([]uint32, bc.live) // a ring of the live ids, oldest first
			for i := range ids {
				c := benchConn(i)
				id, _, _ := tb.Lookup(c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort)
				ids[i] = id
			}
			b.ReportAllocs()
			next, oldest := bc.live, 0
			for b.Loop() {
				c := benchConn(next)
				c.ClientIP ^= 0x00800000 // beyond benchTable's addresses: never a duplicate
				tb.Delete(ids[oldest])
				id, err := tb.Insert(&c)
				if err != nil {
					b.Fatal(err)
				}
				ids[oldest] = id
				oldest = (oldest + 1) % bc.live
				next++
			}
		})
	}
}

// BenchmarkExpireDue is the expiry sweep while connections keep
// expiring (new connections with short timeouts, the perf run's -new
// cases), in a table of 4M live ones (refilled between rounds, untimed).
// In "all" every entry the sweep examines is due, in id order; in
// "quarter" a random quarter is, scattered as a churning table's are
// (the free list hands out ids in no order). Each op is one sweep call of
// 1024 entries; ns/conn is per removal.
func BenchmarkExpireDue(b *testing.B) {
	const live, budget = 4 << 20, 1024
	for _, bc := range []struct {
		name string
		due  func(id uint32) bool
	}{
		{"all", func(uint32) bool { return true }},
		{"quarter", func(id uint32) bool { return (id*0x9e3779b9)>>30 == 0 }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tb := benchTable(b, 8<<20, live)
			tb.Range(func(id uint32, _ *conn.Conn) bool {
				if bc.due(id) {
					tb.SetExpires(id, 0)
				}
				return true
			})
			var removed int
			refill := 0
			b.ReportAllocs()
			for b.Loop() {
				n := tb.Expire(1, budget, nil)
				removed += n
				if tb.Len() < live-live/8 {
					b.StopTimer()
					for tb.Len() < live { // into the ids just freed: due again
						c := benchConn(live + refill)
						c.ClientIP ^= 0x00800000
						refill++
						if _, err := tb.Insert(&c); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
			}
			if removed == 0 {
				b.Fatal("the sweep removed nothing")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(removed), "ns/conn")
		})
	}
}
