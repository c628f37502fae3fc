package conn

import "unsafe"

// Lookup scale: how much a lookup costs among many connections against
// few, the way an lcore looks up a burst. BenchmarkLookupBurst and the
// perf run (perf/cmd/perfrun, issue #11's scale target) time this same
// code, so the benchmark and the report measure one thing.

// Addresses of SpreadConn: a VIP and real servers of the documentation
// ranges.
const (
	spreadVIP = 0xC0000201 // 192.0.2.1
	spreadRS  = 0x0A000000 // 10.0.0.0/24
)

// SpreadConn is the i-th of a set of established TCP connections to one
// VIP, spread over 2^16 client addresses and many ports like real
// traffic, over 256 real servers.
func SpreadConn(i int) Conn {
	return Conn{
		Proto: 6, ClientIP: 0x64400000 + uint32(i>>4), ClientPort: uint16(1024 + i&0x0f*3000),
		VIP: spreadVIP, VPort: 80, RIP: spreadRS + uint32(i&0xff), RPort: 8080,
		State: StateEstablished,
	}
}

// FillSpread makes a table of capacity entries holding SpreadConn(0) to
// SpreadConn(live-1), none of them ever due.
func FillSpread(capacity, live int, seed uint64) (*Table, error) {
	t, err := NewWithSeed(capacity, seed)
	if err != nil {
		return nil, err
	}
	for i := range live {
		c := SpreadConn(i)
		c.Expires = 1 << 62
		if _, err := t.Insert(&c); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// spreadBurst is the burst an lcore looks up at once.
const spreadBurst = 32

// LookupSpreadBursts looks up bursts of spreadBurst of the live
// connections FillSpread entered, as an lcore looks up a burst
// (lcore/prefetch.go): every key hashed and its index cell prefetched,
// then the entries those cells name prefetched, then the lookups with
// the hashes made. The keys are made in a small array, in the cache, as
// an lcore reads them from the packets it has just received; they step
// through the live ones by 7919 from next, each burst waiting for the
// last as an lcore finishes a burst before the next. It returns where to
// go on from and the keys looked up, or ok false if one was missing.
func (t *Table) LookupSpreadBursts(live, bursts, next int) (at, keys int, ok bool) {
	var hs [spreadBurst]uint32
	var batch [spreadBurst]Conn
	last := uint32(0)
	for range bursts {
		for j := range batch {
			batch[j] = SpreadConn(next)
			next = (next + 7919 + int(last>>31)) % live // last>>31 is 0: the dependency is the point
		}
		for j := range batch {
			c := &batch[j]
			hs[j] = t.Hash(c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort)
			t.PrefetchCell(hs[j])
		}
		for j := range batch {
			t.PrefetchEntry(hs[j])
		}
		for j := range batch {
			c := &batch[j]
			id, _, found := t.LookupHashed(hs[j], c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort)
			if !found {
				return next, 0, false
			}
			last |= id
		}
	}
	return next, bursts * spreadBurst, true
}

// TouchSpreadBursts is the memory's share of LookupSpreadBursts: for
// each of bursts x spreadBurst keys it prefetches one random index cell
// and one random live entry (of the first live, where FillSpread put
// them), as a burst's lookups prefetch theirs, then reads them all: no
// hash, no compare, and no entry waiting for its cell. A lookup reaches
// those two lines for each key and cannot do it faster, so the time per
// key is a lower bound of a lookup's at this table size on this machine
// (loads without the prefetches keep fewer lines in flight here: 3x
// slower among 10M). It returns the keys touched and a sum of what it
// read, for the caller to keep so that the reads stay.
func (t *Table) TouchSpreadBursts(live, bursts int, seed uint64) (keys int, sum uint64) {
	var cells, ents [spreadBurst]uint32
	x := seed | 1
	nCells, nEntries := uint64(len(t.slots)), uint64(min(live, len(t.entries)))
	for range bursts {
		for j := range spreadBurst {
			// x's top half scaled to a length: no division.
			x = x*6364136223846793005 + 1442695040888963407
			cells[j] = uint32((x >> 32) * nCells >> 32)
			prefetch(unsafe.Pointer(&t.slots[cells[j]]))
			x = x*6364136223846793005 + 1442695040888963407
			ents[j] = uint32((x >> 32) * nEntries >> 32)
			prefetch(unsafe.Pointer(&t.entries[ents[j]]))
		}
		var acc uint64
		for j := range spreadBurst {
			acc += uint64(t.slots[cells[j]].ref) + uint64(t.entries[ents[j]].ClientPort)
		}
		sum += acc
		x += sum >> 63 // 0, but the next burst waits for this one, as a lookup's does
	}
	return bursts * spreadBurst, sum
}
