package conn

import "unsafe"

// Batched lookups. A lookup in a table far larger than the caches costs
// two memory misses in a row (the index cell, then the entry) plus, with
// 4 KiB pages, TLB misses. One at a time, a burst of 32 packets waits for
// 64 of them back to back. The lcore instead hashes every key of a burst
// and prefetches its index cell, then (the cells arriving meanwhile) reads
// the cells and prefetches the entries they name, and only then looks the
// packets up in order: the misses of a burst overlap (VPP's and DPVS's
// pipelining). The lookups themselves stay the ordinary ones, so a packet
// sees the connections the packets before it in the burst made or ended.

// Hash is the index hash of a packet's 5-tuple, as Lookup computes it.
func (t *Table) Hash(proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) uint32 {
	return hashKey(&t.seed, proto, srcIP, srcPort, dstIP, dstPort)
}

// PrefetchCell starts fetching the index cell where the probe for hash h
// begins.
func (t *Table) PrefetchCell(h uint32) {
	prefetch(unsafe.Pointer(&t.slots[h&t.mask]))
}

// cellsPerLine is how many index cells share a 64-byte cache line.
const cellsPerLine = 64 / int(unsafe.Sizeof(slot{}))

// PrefetchEntry reads the index cells of hash h's probe run (call it once
// PrefetchCell's line has had time to arrive) and starts fetching the
// first entry whose cell carries h. It looks no further than a cache
// line's worth of cells: longer runs are rare at the index's load.
func (t *Table) PrefetchEntry(h uint32) {
	i := h & t.mask
	for range cellsPerLine {
		s := t.slots[i]
		if s.empty() {
			return
		}
		if s.hash == h {
			prefetch(unsafe.Pointer(&t.entries[s.id()]))
			return
		}
		i = (i + 1) & t.mask
	}
}
