package sched

// leastConn is IPVS's lc (net/netfilter/ipvs/ip_vs_lc.c): the available dest
// with the least overhead (active*256 + inactive); ties go to the first.
// Weights only matter as 0 = quiescent. Counts are the lcore's own.
type leastConn struct{ pool }

func newLeastConn(dests []Dest, _ Options) (Scheduler, error) {
	return &leastConn{newPool(dests)}, nil
}

func (l *leastConn) Schedule(_ *Flow, c Counts) int {
	least := -1
	var loh uint64
	for i := range l.dests {
		a, in, ok := l.state(i, c)
		if !ok {
			continue
		}
		doh := overhead(a, in)
		if least < 0 || doh < loh {
			least, loh = i, doh
		}
	}
	return least
}
