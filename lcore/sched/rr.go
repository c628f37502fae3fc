package sched

// roundRobin is IPVS's rr: servers in turn, skipping quiescent ones
// (weight 0), all weights otherwise equal.
type roundRobin struct {
	dests []Dest
	next  int // where the next search starts
}

func newRoundRobin(dests []Dest, _ Options) (Scheduler, error) { return &roundRobin{dests: dests}, nil }

func (r *roundRobin) Schedule(*Flow, Counts) int {
	n := len(r.dests)
	for i := 0; i < n; i++ {
		idx := r.next + i
		if idx >= n {
			idx -= n
		}
		if r.dests[idx].Weight > 0 {
			r.next = idx + 1
			if r.next == n {
				r.next = 0
			}
			return idx
		}
	}
	return -1
}
