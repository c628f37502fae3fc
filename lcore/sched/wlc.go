package sched

// weightedLeastConn is IPVS's wlc (net/netfilter/ipvs/ip_vs_wlc.c): the
// available dest with the least overhead/weight, overhead being
// active*256 + inactive, compared by cross multiplication
// (loh * dw > doh * lw moves the choice); ties go to the first.
type weightedLeastConn struct{ pool }

func newWeightedLeastConn(dests []Dest, _ Options) (Scheduler, error) {
	return &weightedLeastConn{newPool(dests)}, nil
}

func (w *weightedLeastConn) Schedule(_ *Flow, c Counts) int {
	return w.leastWeighted(c, overhead)
}
