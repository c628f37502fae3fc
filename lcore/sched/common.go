package sched

import "math/bits"

// pool is what every scheduler embeds: its own copy of the real servers and
// the overload flags of their connection thresholds.
type pool struct {
	dests []Dest
	thresholds
}

func newPool(dests []Dest) pool {
	d := make([]Dest, len(dests))
	copy(d, dests)
	return pool{dests: d, thresholds: thresholds{over: make([]bool, len(dests))}}
}

// available reports whether dest i may take a new connection: a positive
// weight (0 is quiescent) and not overloaded by its thresholds.
func (p *pool) available(i int, c Counts) bool {
	over := p.overloaded(i, &p.dests[i], c)
	return p.dests[i].Weight > 0 && !over
}

// thresholds keeps IPVS's IP_VS_DEST_F_OVERLOAD per dest. IPVS sets the flag
// when a connection is bound and the total (active + inactive) reaches the
// upper threshold, and clears it when one is unbound and the total drops
// below the lower threshold, or below 3/4 of the upper one when no lower is
// set (ip_vs_conn.c ip_vs_bind_dest / ip_vs_unbind_dest). Here the flag is
// brought up to date from Counts whenever a scheduler looks at the dest, so
// the hysteresis is seen as it stands at scheduling time.
type thresholds struct {
	over []bool // per dest index
}

func (t *thresholds) overloaded(i int, d *Dest, c Counts) bool {
	if d.Upper == 0 {
		t.over[i] = false
		return false
	}
	a, in := conns(c, d.ID)
	return t.update(i, d, uint64(a)+uint64(in))
}

// update brings dest i's flag up to date with its total connections.
func (t *thresholds) update(i int, d *Dest, total uint64) bool {
	switch {
	case d.Upper == 0:
		t.over[i] = false
	case total >= uint64(d.Upper):
		t.over[i] = true
	case !t.over[i]:
	case d.Lower != 0:
		if total < uint64(d.Lower) {
			t.over[i] = false
		}
	case total*4 < uint64(d.Upper)*3:
		t.over[i] = false
	}
	return t.over[i]
}

// state reads dest i's counts once and tells whether it is available; a
// quiescent dest is not looked at.
func (p *pool) state(i int, c Counts) (active, inactive uint32, ok bool) {
	d := &p.dests[i]
	if d.Weight <= 0 {
		return 0, 0, false
	}
	active, inactive = conns(c, d.ID)
	return active, inactive, !p.update(i, d, uint64(active)+uint64(inactive))
}

// conns reads a dest's counts; a nil Counts means no connections.
func conns(c Counts, id uint32) (active, inactive uint32) {
	if c == nil {
		return 0, 0
	}
	return c.Active(id), c.Inactive(id)
}

func activeConns(c Counts, id uint32) uint32 {
	if c == nil {
		return 0
	}
	return c.Active(id)
}

// overhead is IPVS's ip_vs_dest_conn_overhead: active connections weigh 256
// times an inactive one (active << 8 + inactive).
func overhead(active, inactive uint32) uint64 {
	return uint64(active)<<8 + uint64(inactive)
}

// overheadOf reads a dest's overhead from Counts.
func overheadOf(c Counts, id uint32) uint64 { return overhead(conns(c, id)) }

// weight is a dest's weight as an unsigned factor (negative counts as 0).
func weight(d *Dest) uint64 {
	if d.Weight <= 0 {
		return 0
	}
	return uint64(d.Weight)
}

// mulGreater reports a*b > c*d without overflow (IPVS compares in __s64;
// 128-bit products keep any uint32 count and int32 weight exact).
func mulGreater(a, b, c, d uint64) bool {
	h1, l1 := bits.Mul64(a, b)
	h2, l2 := bits.Mul64(c, d)
	return h1 > h2 || (h1 == h2 && l1 > l2)
}

// leastWeighted is the loop of IPVS's wlc (ip_vs_wlc.c), parameterised by
// the load function: the first available dest, then any available dest whose
// load/weight is strictly lower (loh * dw > doh * lw), so ties go to the
// first. It returns -1 when no dest is available.
func (p *pool) leastWeighted(c Counts, load func(active, inactive uint32) uint64) int {
	least := -1
	var loh, lw uint64
	for i := range p.dests {
		a, in, ok := p.state(i, c)
		if !ok {
			continue
		}
		doh, dw := load(a, in), weight(&p.dests[i])
		if least < 0 || mulGreater(loh, dw, doh, lw) {
			least, loh, lw = i, doh, dw
		}
	}
	return least
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// hash32 is the kernel's hash_32 (include/linux/hash.h): multiply by
// GOLDEN_RATIO_32 and keep the top bits.
func hash32(v uint32, bits uint) uint32 {
	return (v * 0x61C88647) >> (32 - bits)
}
