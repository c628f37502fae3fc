package sched

import (
	"fmt"
	"math"
)

// LBLCRSetSize is the most servers an lblcr set holds for one address (IPVS
// does not bound it).
const LBLCRSetSize = 8

// lblcr is IPVS's locality-based least-connection with replication
// (net/netfilter/ipvs/ip_vs_lblcr.c): each destination address maps to a set
// of servers. For a known address, the least loaded (wlc) available member
// is chosen; if the set has more than one member and has not changed for
// LBLCRExpiration, its most loaded member is dropped (after the choice, as
// IPVS does, so the choice may be the dropped one); if no member is usable
// or the chosen one is overloaded (active > weight while another is under
// half its weight), wlc picks from all servers and the pick joins the set.
// Entries unused for LBLCRExpiration are dropped. Per instance, so per
// lcore.
//
// Deviations: members are visited newest first as IPVS's list_add does, so
// ties go to the newest; a full set (LBLCRSetSize) makes room by replacing
// its most loaded member; the thresholds count in the overload test as in
// lblc.
type lblcr struct {
	pool
	table []lblcrEntry
	rover uint32
}

type lblcrEntry struct {
	lastuse int64
	lastmod int64 // last change of the set
	addr    uint32
	n       uint8 // members; 0 = free slot
	set     [LBLCRSetSize]uint16
}

func newLBLCR(dests []Dest, _ Options) (Scheduler, error) {
	if len(dests) > math.MaxUint16+1 {
		return nil, fmt.Errorf("lblcr: %d real servers, at most %d", len(dests), math.MaxUint16+1)
	}
	return &lblcr{pool: newPool(dests), table: make([]lblcrEntry, LocalityTableSize)}, nil
}

func (l *lblcr) Schedule(f *Flow, c Counts) int {
	if f == nil {
		return -1
	}
	now := f.Now
	l.sweep(now)
	if slot := l.find(f.DstIP, now); slot >= 0 {
		e := &l.table[slot]
		e.lastuse = now
		d := l.setMin(e, c)
		if e.n > 1 && now-e.lastmod > int64(LBLCRExpiration) {
			if m := l.setMax(e, c); m >= 0 {
				e.erase(m)
				e.lastmod = now
			}
		}
		if d >= 0 && !l.localityOverloaded(d, c) {
			return d
		}
		d = l.leastWeighted(c, overhead)
		if d < 0 {
			return -1
		}
		l.insert(e, d, c, now)
		return d
	}
	d := l.leastWeighted(c, overhead)
	if d < 0 {
		return -1
	}
	e := &l.table[l.victim(f.DstIP)]
	*e = lblcrEntry{lastuse: now, lastmod: now, addr: f.DstIP, n: 1}
	e.set[0] = uint16(d)
	return d
}

// setMin is ip_vs_dest_set_min: the available member with the least
// overhead/weight, newest first, ties to the first seen; -1 if none.
func (l *lblcr) setMin(e *lblcrEntry, c Counts) int {
	least := -1
	var loh, lw uint64
	for k := int(e.n) - 1; k >= 0; k-- {
		i := int(e.set[k])
		a, in, ok := l.state(i, c)
		if !ok {
			continue
		}
		doh, dw := overhead(a, in), weight(&l.dests[i])
		if least < 0 || mulGreater(loh, dw, doh, lw) {
			least, loh, lw = i, doh, dw
		}
	}
	return least
}

// setMax is ip_vs_dest_set_max: the member with a positive weight and the
// most overhead/weight, newest first, ties to the first seen; -1 if none.
func (l *lblcr) setMax(e *lblcrEntry, c Counts) int {
	most := -1
	var moh, mw uint64
	for k := int(e.n) - 1; k >= 0; k-- {
		d := &l.dests[e.set[k]]
		if d.Weight <= 0 {
			continue
		}
		doh, dw := overheadOf(c, d.ID), weight(d)
		if most < 0 || mulGreater(doh, mw, moh, dw) {
			most, moh, mw = int(e.set[k]), doh, dw
		}
	}
	return most
}

// insert is ip_vs_dest_set_insert with check: a new member joins (and the
// set is modified now); a full set first drops its most loaded member, or
// its oldest when none has a weight.
func (l *lblcr) insert(e *lblcrEntry, d int, c Counts, now int64) {
	for k := 0; k < int(e.n); k++ {
		if int(e.set[k]) == d {
			return
		}
	}
	if int(e.n) == LBLCRSetSize {
		if m := l.setMax(e, c); m >= 0 {
			e.erase(m)
		} else {
			e.erase(int(e.set[0]))
		}
	}
	e.set[e.n] = uint16(d)
	e.n++
	e.lastmod = now
}

func (e *lblcrEntry) erase(d int) {
	for k := 0; k < int(e.n); k++ {
		if int(e.set[k]) == d {
			copy(e.set[k:e.n], e.set[k+1:e.n])
			e.n--
			return
		}
	}
}

func (l *lblcr) find(addr uint32, now int64) int {
	h := hash32(addr, localityBits)
	for k := uint32(0); k < localityProbe; k++ {
		i := (h + k) & localityMask
		e := &l.table[i]
		if e.n == 0 || e.addr != addr {
			continue
		}
		if expired(now, e.lastuse, LBLCRExpiration) {
			e.n = 0
			return -1
		}
		return int(i)
	}
	return -1
}

func (l *lblcr) victim(addr uint32) int {
	h := hash32(addr, localityBits)
	best := -1
	for k := uint32(0); k < localityProbe; k++ {
		i := int((h + k) & localityMask)
		if l.table[i].n == 0 {
			return i
		}
		if best < 0 || l.table[i].lastuse < l.table[best].lastuse {
			best = i
		}
	}
	return best
}

func (l *lblcr) sweep(now int64) {
	for k := 0; k < localitySweep; k++ {
		e := &l.table[l.rover]
		l.rover = (l.rover + 1) & localityMask
		if e.n > 0 && expired(now, e.lastuse, LBLCRExpiration) {
			e.n = 0
		}
	}
}
