package sched

import (
	"math/bits"
	"math/rand/v2"
)

// powerOfTwo is IPVS's twos, power of two choices
// (net/netfilter/ipvs/ip_vs_twos.c): draw two random numbers r1, r2 in
// [0, total weight] (inclusive, as IPVS), walk the available dests
// subtracting each weight, choose1/choose2 are the first where r1/r2 drop to
// <= 0; return choice2 if overhead2/weight2 < overhead1/weight1, else
// choice1. The random source is a per-instance xorshift64*, seeded at
// random in the factory (tests reseed it), so lcores draw independently.
type powerOfTwo struct {
	pool
	rng uint64
}

func newPowerOfTwo(dests []Dest, _ Options) (Scheduler, error) {
	p := &powerOfTwo{pool: newPool(dests)}
	p.seed(rand.Uint64())
	return p, nil
}

func (p *powerOfTwo) seed(s uint64) {
	if s == 0 {
		s = 0x9E3779B97F4A7C15 // xorshift must not start at 0
	}
	p.rng = s
}

// below returns a pseudo-random number in [0, n).
func (p *powerOfTwo) below(n uint64) uint64 {
	x := p.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	p.rng = x
	hi, _ := bits.Mul64(x*0x2545F4914F6CDD1D, n)
	return hi
}

func (p *powerOfTwo) Schedule(_ *Flow, c Counts) int {
	var total uint64
	for i := range p.dests {
		if p.available(i, c) {
			total += weight(&p.dests[i])
		}
	}
	if total == 0 {
		return -1
	}
	r1 := int64(p.below(total + 1))
	r2 := int64(p.below(total + 1))
	c1, c2 := -1, -1
	for i := range p.dests {
		// The flags were brought up to date by the first loop.
		if p.over[i] || p.dests[i].Weight <= 0 {
			continue
		}
		w := int64(p.dests[i].Weight)
		r1 -= w
		r2 -= w
		if r1 <= 0 && c1 < 0 {
			c1 = i
		}
		if r2 <= 0 && c2 < 0 {
			c2 = i
		}
		if c1 >= 0 && c2 >= 0 {
			break
		}
	}
	d1, d2 := &p.dests[c1], &p.dests[c2]
	if mulGreater(weight(d2), overheadOf(c, d1.ID), weight(d1), overheadOf(c, d2.ID)) {
		return c2
	}
	return c1
}
