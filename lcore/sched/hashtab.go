package sched

// HashTableSize is the bucket count of dh's and sh's static tables, IPVS's
// IP_VS_DH_TAB_SIZE and IP_VS_SH_TAB_SIZE (1 << 8).
const HashTableSize = 1 << hashTableBits

const hashTableBits = 8

// hashTable is the static 256-bucket table of dh and sh, filled as
// ip_vs_sh_reassign (net/netfilter/ipvs/ip_vs_sh.c) fills it: walking the
// dests in order, each takes as many consecutive buckets as its weight
// (at least one, so a quiescent dest keeps one bucket that answers "none"),
// round and round until the 256 buckets are full.
type hashTable struct {
	pool
	buckets  [HashTableSize]int32 // dest index; -1 when there are no dests
	fallback bool
}

func newHashTable(dests []Dest, o Options) hashTable {
	t := hashTable{pool: newPool(dests), fallback: o.Flags&FlagFallback != 0}
	p, count := 0, 0
	for i := range t.buckets {
		if len(dests) == 0 {
			t.buckets[i] = -1
			continue
		}
		t.buckets[i] = int32(p)
		count++
		if count >= int(t.dests[p].Weight) {
			p, count = p+1, 0
			if p == len(dests) {
				p = 0
			}
		}
	}
	return t
}

// lookup is ip_vs_sh_get / ip_vs_sh_get_fallback: the bucket of
// hash_32(key, 8) if its dest is available; with the fallback flag, else
// the first available dest of the buckets (offset + hash_32(key)) for
// roffset = ihash, ihash+1, ... around the table, as IPVS probes them.
func (t *hashTable) lookup(key uint32, c Counts) int {
	h := hash32(key, hashTableBits)
	d := t.buckets[h]
	if d < 0 {
		return -1
	}
	if t.available(int(d), c) {
		return int(d)
	}
	if !t.fallback {
		return -1
	}
	for off := uint32(0); off < HashTableSize; off++ {
		roff := (off + h) % HashTableSize
		d = t.buckets[(roff+h)%HashTableSize]
		if t.available(int(d), c) {
			return int(d)
		}
	}
	return -1
}
