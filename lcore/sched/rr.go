package sched

// roundRobin is IPVS's rr (net/netfilter/ipvs/ip_vs_rr.c): servers in turn,
// skipping quiescent (weight 0) and overloaded ones, all weights otherwise
// equal. The cursor is per instance, so per lcore.
type roundRobin struct {
	pool
	next int // where the next search starts
	// plain: every dest has a weight and no connection thresholds, so
	// each is always available and the turn needs no search (the dests
	// never change after the factory).
	plain bool
}

func newRoundRobin(dests []Dest, _ Options) (Scheduler, error) {
	r := &roundRobin{pool: newPool(dests), plain: len(dests) > 0}
	for _, d := range dests {
		r.plain = r.plain && d.Weight > 0 && d.Upper == 0
	}
	return r, nil
}

func (r *roundRobin) Schedule(_ *Flow, c Counts) int {
	n := len(r.dests)
	if r.plain {
		idx := r.next
		if r.next++; r.next == n {
			r.next = 0
		}
		return idx
	}
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

// Ahead is the pick k picks from now, known without a search when every
// dest is always available (plain).
func (r *roundRobin) Ahead(k int) (int, bool) {
	if !r.plain || k < 0 {
		return -1, false
	}
	return (r.next + k) % len(r.dests), true
}
