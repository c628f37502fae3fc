package sched

import "slices"

// Preview returns the dest index s would choose for f now, as Schedule
// would, without changing s: it schedules on a copy of s's state (the
// cursors, the current weight, the overload flags, the random source, the
// locality tables), so the next real Schedule, given the same flow and
// counts, chooses the same. It is for explaining a decision (lbctl trace),
// not for the packet path: it allocates. ok is false for a scheduler it
// does not know how to copy.
func Preview(s Scheduler, f *Flow, c Counts) (idx int, ok bool) {
	switch v := s.(type) {
	case *roundRobin:
		cp := *v
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *weightedRoundRobin:
		cp := *v
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *leastConn:
		return (&leastConn{v.pool.copy()}).Schedule(f, c), true
	case *weightedLeastConn:
		return (&weightedLeastConn{v.pool.copy()}).Schedule(f, c), true
	case *shortestExpectedDelay:
		return (&shortestExpectedDelay{v.pool.copy()}).Schedule(f, c), true
	case *neverQueue:
		return (&neverQueue{v.pool.copy()}).Schedule(f, c), true
	case *failover:
		return (&failover{v.pool.copy()}).Schedule(f, c), true
	case *overflow:
		return (&overflow{v.pool.copy()}).Schedule(f, c), true
	case *powerOfTwo:
		cp := *v // the random source is a value: the copy draws what the next pick will
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *destHashing:
		cp := *v // the buckets are an array: copied
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *sourceHashing:
		cp := *v
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *maglev:
		cp := *v // the lookup table is never written after the factory: shared
		cp.pool = v.pool.copy()
		return cp.Schedule(f, c), true
	case *lblc:
		cp := *v
		cp.pool = v.pool.copy()
		cp.table = slices.Clone(v.table)
		return cp.Schedule(f, c), true
	case *lblcr:
		cp := *v
		cp.pool = v.pool.copy()
		cp.table = slices.Clone(v.table)
		return cp.Schedule(f, c), true
	}
	return -1, false
}

// copy is the pool with overload flags of its own; the dests are never
// written after the factory and stay shared.
func (p *pool) copy() pool {
	return pool{dests: p.dests, thresholds: thresholds{over: slices.Clone(p.over)}}
}
