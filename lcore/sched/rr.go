package sched

// roundRobin is IPVS's rr (net/netfilter/ipvs/ip_vs_rr.c): servers in turn,
// skipping quiescent (weight 0) and overloaded ones, all weights otherwise
// equal. The cursor is per instance, so per lcore.
type roundRobin struct {
	pool
	next int // where the next search starts
}

func newRoundRobin(dests []Dest, _ Options) (Scheduler, error) {
	return &roundRobin{pool: newPool(dests)}, nil
}

func (r *roundRobin) Schedule(_ *Flow, c Counts) int {
	n := len(r.dests)
	for i := 0; i < n; i++ {
		idx := r.next + i
		if idx >= n {
			idx -= n
		}
		if r.available(idx, c) {
			r.next = idx + 1
			if r.next == n {
				r.next = 0
			}
			return idx
		}
	}
	return -1
}
