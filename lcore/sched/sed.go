package sched

// shortestExpectedDelay is IPVS's sed (net/netfilter/ipvs/ip_vs_sed.c): the
// available dest with the least (active+1)/weight, by cross multiplication;
// inactive connections do not count. Ties go to the first.
type shortestExpectedDelay struct{ pool }

func newShortestExpectedDelay(dests []Dest, _ Options) (Scheduler, error) {
	return &shortestExpectedDelay{newPool(dests)}, nil
}

// sedOverhead is ip_vs_sed_dest_overhead: active connections + 1.
func sedOverhead(active, _ uint32) uint64 { return uint64(active) + 1 }

func (s *shortestExpectedDelay) Schedule(_ *Flow, c Counts) int {
	return s.leastWeighted(c, sedOverhead)
}
