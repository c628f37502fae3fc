package sched

// failover is IPVS's fo, weighted failover (net/netfilter/ipvs/ip_vs_fo.c):
// the available dest with the highest weight; ties go to the first, so all
// new connections go to one server until it is quiesced or overloaded.
type failover struct{ pool }

func newFailover(dests []Dest, _ Options) (Scheduler, error) {
	return &failover{newPool(dests)}, nil
}

func (f *failover) Schedule(_ *Flow, c Counts) int {
	best := -1
	var hw int32
	for i := range f.dests {
		if f.dests[i].Weight > hw && f.available(i, c) {
			best, hw = i, f.dests[i].Weight
		}
	}
	return best
}
