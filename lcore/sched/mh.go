package sched

import (
	"fmt"
	"math/bits"
	"sort"
)

// DefaultMHTableSize is mh's Maglev table size when Options leave it 0.
const DefaultMHTableSize = 65537

// mhTabBits is IPVS's IP_VS_MH_TAB_BITS: weights/gcd are shifted right so
// that the largest fits in this many bits, keeping turns small.
const mhTabBits = 6

// The two hsiphash keys of ip_vs_mh.c generate_hash_secret: fixed, so the
// table is the same on every machine and every lcore.
const (
	mhKey1 = 2654435761
	mhKey2 = 2654446892
)

// maglev is IPVS's mh, Maglev hashing (net/netfilter/ipvs/ip_vs_mh.c, after
// Eisenbud et al., NSDI 2016 §3.4): a lookup table of M (prime) entries
// built once in the factory; a flow goes to
// table[hsiphash(source port + source address) % M], the port counting only
// with FlagPort (mh-port). An unavailable or overloaded dest gives no
// server, unless FlagFallback (mh-fallback): then IPVS's probe, rehashing
// with offsets ihash, ihash+1, ... around the table.
type maglev struct {
	pool
	table    []int32
	fallback bool
	port     bool
}

func newMaglev(dests []Dest, o Options) (Scheduler, error) {
	m := o.MHTableSize
	if m == 0 {
		m = DefaultMHTableSize
	}
	if m < 2 || !isPrime(m) {
		return nil, fmt.Errorf("mh table size %d is not a prime", m)
	}
	if len(dests) > m {
		return nil, fmt.Errorf("mh table size %d is smaller than the %d real servers", m, len(dests))
	}
	return &maglev{
		pool:     newPool(dests),
		table:    maglevTable(dests, m),
		fallback: o.Flags&FlagFallback != 0,
		port:     o.Flags&FlagPort != 0,
	}, nil
}

func (g *maglev) Schedule(f *Flow, c Counts) int {
	if f == nil || len(g.table) == 0 {
		return -1
	}
	key := f.SrcIP
	if g.port {
		key += uint32(f.SrcPort)
	}
	m := uint32(len(g.table))
	h := hsiphash32(key, mhKey1) % m
	d := g.table[h]
	if d < 0 {
		return -1
	}
	if g.available(int(d), c) {
		return int(d)
	}
	if !g.fallback {
		return -1
	}
	for off := uint32(0); off < m; off++ {
		roff := (off + h) % m
		d = g.table[hsiphash32(roff+key, mhKey1)%m]
		if g.available(int(d), c) {
			return int(d)
		}
	}
	return -1
}

// maglevTable builds the Maglev lookup table of size m (a prime >= 2) as
// ip_vs_mh_permutate and ip_vs_mh_populate do, over the dests sorted by
// (address, port, ID) so that the input order does not matter. Each dest
// with a positive weight gets offset = h1 % m and skip = h2 % (m-1) + 1,
// h1, h2 being hsiphash of (port + address) with the two fixed keys, and
// turns = (weight/gcd) >> shift (at least 1); rounds go over the dests, each
// taking its next `turns` free preferred slots, until the table is full.
// Entries are indices into dests; all -1 when no weight is positive. It
// is a pure function: no globals, same input, same table.
func maglevTable(dests []Dest, m int) []int32 {
	table := make([]int32, m)
	for i := range table {
		table[i] = -1
	}
	if m < 2 {
		return table
	}
	order := make([]int, 0, len(dests))
	g, maxW := 0, 0
	for i := range dests {
		w := int(dests[i].Weight)
		if w <= 0 {
			continue // IPVS: a dest with weight 0 gets no turns
		}
		order = append(order, i)
		g = gcd(w, g)
		if w > maxW {
			maxW = w
		}
	}
	if len(order) == 0 {
		return table
	}
	sort.Slice(order, func(a, b int) bool {
		da, db := &dests[order[a]], &dests[order[b]]
		if da.Addr != db.Addr {
			return da.Addr < db.Addr
		}
		if da.Port != db.Port {
			return da.Port < db.Port
		}
		return da.ID < db.ID
	})
	shift := bits.Len(uint(maxW/g)) - mhTabBits
	if shift < 0 {
		shift = 0
	}
	type setup struct{ perm, skip, turns int }
	ds := make([]setup, len(order))
	for k, i := range order {
		key := uint32(dests[i].Port) + dests[i].Addr
		off := int(hsiphash32(key, mhKey1) % uint32(m))
		ds[k] = setup{
			perm:  off,
			skip:  int(hsiphash32(key, mhKey2)%uint32(m-1)) + 1,
			turns: max((int(dests[i].Weight)/g)>>shift, 1),
		}
	}
	filled := make([]bool, m)
	for n := 0; ; {
		for k := range ds {
			for t := 0; t < ds[k].turns; t++ {
				c := ds[k].perm
				for filled[c] {
					ds[k].perm += ds[k].skip
					if ds[k].perm >= m {
						ds[k].perm -= m
					}
					c = ds[k].perm
				}
				filled[c] = true
				table[c] = int32(order[k])
				if n++; n == m {
					return table
				}
			}
		}
	}
}

// hsiphash32 is the kernel's hsiphash of one u32 on 64-bit machines
// (lib/siphash.c hsiphash_1u32), as ip_vs_mh_hashkey calls it with the key
// {k, k}.
func hsiphash32(v uint32, k uint64) uint32 { return hsiphash1u32(v, k, k) }

// hsiphash1u32 is hsiphash_1u32 for BITS_PER_LONG == 64: SipHash-1-3 over
// the 4 bytes of v (little-endian), truncated to 32 bits.
func hsiphash1u32(v uint32, k0, k1 uint64) uint32 {
	v0 := uint64(0x736f6d6570736575) ^ k0
	v1 := uint64(0x646f72616e646f6d) ^ k1
	v2 := uint64(0x6c7967656e657261) ^ k0
	v3 := uint64(0x7465646279746573) ^ k1
	b := uint64(4)<<56 | uint64(v)
	v3 ^= b
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0 ^= b
	v2 ^= 0xff
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	v0, v1, v2, v3 = sipRound(v0, v1, v2, v3)
	return uint32(v0 ^ v1 ^ v2 ^ v3)
}

func sipRound(v0, v1, v2, v3 uint64) (uint64, uint64, uint64, uint64) {
	v0 += v1
	v1 = bits.RotateLeft64(v1, 13)
	v1 ^= v0
	v0 = bits.RotateLeft64(v0, 32)
	v2 += v3
	v3 = bits.RotateLeft64(v3, 16)
	v3 ^= v2
	v0 += v3
	v3 = bits.RotateLeft64(v3, 21)
	v3 ^= v0
	v2 += v1
	v1 = bits.RotateLeft64(v1, 17)
	v1 ^= v2
	v2 = bits.RotateLeft64(v2, 32)
	return v0, v1, v2, v3
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
