package lcore

// serviceIndex finds an IPv4 service by its packed key
// (ServiceKey.packed): open addressing with linear probing in a table at
// most half full, built once per snapshot and only read after. Every SYN
// looks its service up, some twice; this costs about half a Go map's
// lookup (BenchmarkServiceIndex's x-map), usually one cache line.
type serviceIndex struct {
	cells []serviceCell // power-of-two length, never full
	shift uint8         // 64 - log2(len(cells))
}

type serviceCell struct {
	key uint64
	ref int32 // service index + 1; 0: empty
}

// newServiceIndex is an empty index with room for n services.
func newServiceIndex(n int) serviceIndex {
	size, bits := 4, uint8(2)
	for size < 2*n {
		size, bits = size*2, bits+1
	}
	return serviceIndex{cells: make([]serviceCell, size), shift: 64 - bits}
}

func (x *serviceIndex) home(key uint64) uint64 { return (key * 0x9E3779B97F4A7C15) >> x.shift }

// add indexes key as service i (a key added again: the last i).
func (x *serviceIndex) add(key uint64, i int32) {
	mask := uint64(len(x.cells) - 1)
	for j := x.home(key); ; j = (j + 1) & mask {
		c := &x.cells[j]
		if c.ref == 0 {
			*c = serviceCell{key: key, ref: i + 1}
			return
		}
		if c.key == key {
			c.ref = i + 1
			return
		}
	}
}

// get returns the service with key.
func (x *serviceIndex) get(key uint64) (int32, bool) {
	if len(x.cells) == 0 { // the zero index: a Snapshot not made by NewSnapshot
		return 0, false
	}
	mask := uint64(len(x.cells) - 1)
	for j := x.home(key); ; j = (j + 1) & mask {
		c := &x.cells[j]
		if c.ref == 0 {
			return 0, false
		}
		if c.key == key {
			return c.ref - 1, true
		}
	}
}
