package sched

// destHashing is IPVS's dh (net/netfilter/ipvs/ip_vs_dh.c): a static table
// of 256 buckets looked up by hash_32(destination address, 8); the dest
// there, if available, else none.
//
// Two deviations from ip_vs_dh.c, both to match sh: the table honours
// weights (IPVS's dh gives each dest one bucket in turn, ignoring weight),
// and FlagFallback probes the other buckets as sh-fallback does (IPVS's dh
// has no flags).
type destHashing struct{ hashTable }

func newDestHashing(dests []Dest, o Options) (Scheduler, error) {
	return &destHashing{newHashTable(dests, o)}, nil
}

func (d *destHashing) Schedule(f *Flow, c Counts) int {
	if f == nil {
		return -1
	}
	return d.lookup(f.DstIP, c)
}
