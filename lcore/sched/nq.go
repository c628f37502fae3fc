package sched

// neverQueue is IPVS's nq (net/netfilter/ipvs/ip_vs_nq.c): the first
// available dest with no active connection wins at once; otherwise as sed,
// the least (active+1)/weight, ties to the first.
type neverQueue struct{ pool }

func newNeverQueue(dests []Dest, _ Options) (Scheduler, error) {
	return &neverQueue{newPool(dests)}, nil
}

func (q *neverQueue) Schedule(_ *Flow, c Counts) int {
	least := -1
	var loh, lw uint64
	for i := range q.dests {
		a, _, ok := q.state(i, c)
		if !ok {
			continue
		}
		d := &q.dests[i]
		if a == 0 {
			return i // idle: no queue at all
		}
		doh, dw := uint64(a)+1, weight(d)
		if least < 0 || mulGreater(loh, dw, doh, lw) {
			least, loh, lw = i, doh, dw
		}
	}
	return least
}
