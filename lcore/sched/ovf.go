package sched

// overflow is IPVS's ovf, weighted overflow (net/netfilter/ipvs/ip_vs_ovf.c):
// the available dest with the highest weight among those whose active
// connections do not exceed their weight (IPVS skips active > weight, so a
// dest of weight w takes connections while it has up to w active); ties go
// to the first. Past that, connections overflow to the next by weight.
type overflow struct{ pool }

func newOverflow(dests []Dest, _ Options) (Scheduler, error) {
	return &overflow{newPool(dests)}, nil
}

func (o *overflow) Schedule(_ *Flow, c Counts) int {
	best := -1
	var hw int32
	for i := range o.dests {
		d := &o.dests[i]
		a, _, ok := o.state(i, c)
		if !ok || int64(a) > int64(d.Weight) {
			continue
		}
		if best < 0 || d.Weight > hw {
			best, hw = i, d.Weight
		}
	}
	return best
}
