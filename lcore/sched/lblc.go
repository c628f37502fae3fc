package sched

// lblc is IPVS's locality-based least-connection scheduler
// (net/netfilter/ipvs/ip_vs_lblc.c), for cache clusters: a table maps each
// destination address to the server last chosen for it; that server is used
// again unless it is unavailable or overloaded (active > weight while
// another is under half its weight), and then wlc picks a server over all
// and the entry is remapped. Entries unused for LBLCExpiration are dropped.
// The table is per instance, so per lcore.
//
// Deviation: IPVS's cached path ignores the -x/-y thresholds; here an
// entry whose server is over its upper threshold is remapped too.
type lblc struct {
	pool
	table []lblcEntry
	rover uint32
}

type lblcEntry struct {
	lastuse int64
	addr    uint32
	dest    int32 // index into dests; -1 = free
}

func newLBLC(dests []Dest, _ Options) (Scheduler, error) {
	l := &lblc{pool: newPool(dests), table: make([]lblcEntry, LocalityTableSize)}
	for i := range l.table {
		l.table[i].dest = -1
	}
	return l, nil
}

func (l *lblc) Schedule(f *Flow, c Counts) int {
	if f == nil {
		return -1
	}
	now := f.Now
	l.sweep(now)
	slot := l.find(f.DstIP, now)
	if slot >= 0 {
		e := &l.table[slot]
		e.lastuse = now
		d := int(e.dest)
		if l.available(d, c) && !l.localityOverloaded(d, c) {
			return d
		}
	}
	d := l.leastWeighted(c, overhead)
	if d < 0 {
		return -1
	}
	if slot < 0 {
		slot = l.victim(f.DstIP)
		l.table[slot].addr = f.DstIP
	}
	l.table[slot].dest = int32(d)
	l.table[slot].lastuse = now
	return d
}

// find returns the slot holding addr, or -1; an expired entry it meets is
// freed.
func (l *lblc) find(addr uint32, now int64) int {
	h := hash32(addr, localityBits)
	for k := uint32(0); k < localityProbe; k++ {
		i := (h + k) & localityMask
		e := &l.table[i]
		if e.dest < 0 || e.addr != addr {
			continue
		}
		if expired(now, e.lastuse, LBLCExpiration) {
			e.dest = -1
			return -1
		}
		return int(i)
	}
	return -1
}

// victim returns the slot for a new entry of addr: the first free one of
// its window, else the least recently used.
func (l *lblc) victim(addr uint32) int {
	h := hash32(addr, localityBits)
	best := -1
	for k := uint32(0); k < localityProbe; k++ {
		i := int((h + k) & localityMask)
		if l.table[i].dest < 0 {
			return i
		}
		if best < 0 || l.table[i].lastuse < l.table[best].lastuse {
			best = i
		}
	}
	return best
}

func (l *lblc) sweep(now int64) {
	for k := 0; k < localitySweep; k++ {
		e := &l.table[l.rover]
		l.rover = (l.rover + 1) & localityMask
		if e.dest >= 0 && expired(now, e.lastuse, LBLCExpiration) {
			e.dest = -1
		}
	}
}
