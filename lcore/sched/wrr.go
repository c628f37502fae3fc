package sched

// weightedRoundRobin is IPVS's interleaved wrr, a line-by-line port of
// ip_vs_wrr_schedule (net/netfilter/ipvs/ip_vs_wrr.c). With
// di = gcd of the positive weights and mw = max weight - (di - 1), passes are
// made with the current weight cw = mw, mw-di, ..., each selecting in list
// order the dests whose weight >= cw; the last pass is cw <= di. So weights
// 4,3,2 give A A B A B C A B C per cycle of 9.
type weightedRoundRobin struct {
	pool
	cl int // last chosen dest; -1 is the list head
	cw int // current weight
	mw int // max weight - (di - 1)
	di int // gcd of the positive weights
}

func newWeightedRoundRobin(dests []Dest, _ Options) (Scheduler, error) {
	w := &weightedRoundRobin{pool: newPool(dests), cl: -1}
	g, maxW := 0, 0
	for i := range w.dests {
		wt := int(w.dests[i].Weight)
		if wt > 0 {
			if g > 0 {
				g = gcd(wt, g)
			} else {
				g = wt
			}
		}
		if wt > maxW {
			maxW = wt
		}
	}
	if g == 0 {
		g = 1
	}
	w.di = g
	w.mw = maxW - (g - 1)
	w.cw = w.mw
	return w, nil
}

func (w *weightedRoundRobin) Schedule(_ *Flow, c Counts) int {
	if w.mw == 0 {
		return -1 // no dest with a positive weight
	}
	n := len(w.dests)
	dest := w.cl
	last := dest
	stop := -2 // none
	lastPass, restarted := false, false
	for {
		for dest++; dest < n; dest++ {
			// IPVS: !(flags & OVERLOAD) && weight >= cw
			over := w.overloaded(dest, &w.dests[dest], c)
			if !over && int(w.dests[dest].Weight) >= w.cw {
				w.cl = dest
				return dest
			}
			if dest == stop {
				w.cl = dest
				return -1 // all overloaded
			}
		}
		dest = -1 // back at the head
		w.cw -= w.di
		if w.cw <= 0 {
			w.cw = w.mw
			// Stop if the last pass was already tried from the first
			// dest, or the only traversal started from the head.
			if lastPass || last == -1 {
				w.cl = dest
				return -1
			}
			restarted = true
		}
		lastPass = w.cw <= w.di
		if lastPass && restarted && last != -1 {
			// The first traversal was for weight >= 1 but only for the
			// dests after last: now do the ones up to last.
			stop = last
		}
	}
}
