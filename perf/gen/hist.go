package gen

import "math/bits"

// Hist is a log-linear latency histogram in nanoseconds: exact below 64 ns,
// then 32 buckets per power of two (at most 3% relative error), up to 2^32
// ns. It is a plain array: recording never allocates.
type Hist struct {
	n      uint64
	sum    uint64
	max    uint32
	bucket [histBuckets]uint64
}

const (
	histSubBits = 5
	histBuckets = (32-histSubBits-1)<<histSubBits + 64 // 896
)

func histIndex(v uint32) int {
	e := bits.Len32(v) - (histSubBits + 1)
	if e < 0 {
		e = 0
	}
	return e<<histSubBits + int(v>>uint(e))
}

// histValue is the middle of bucket i.
func histValue(i int) uint64 {
	e := i>>histSubBits - 1
	if e < 0 {
		return uint64(i)
	}
	lo := uint64(i-e<<histSubBits) << uint(e)
	return lo + (uint64(1)<<uint(e))/2
}

// Record adds one latency.
func (h *Hist) Record(ns uint32) {
	h.n++
	h.sum += uint64(ns)
	if ns > h.max {
		h.max = ns
	}
	h.bucket[histIndex(ns)]++
}

// Count is the number of latencies recorded.
func (h *Hist) Count() uint64 { return h.n }

// Reset forgets everything.
func (h *Hist) Reset() { *h = Hist{} }

// Quantile returns the q-quantile (0 < q <= 1) in nanoseconds, 0 when empty.
func (h *Hist) Quantile(q float64) uint64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	if rank < 1 {
		rank = 1
	}
	if rank >= h.n {
		return uint64(h.max)
	}
	var c uint64
	for i, b := range h.bucket {
		c += b
		if c >= rank {
			v := histValue(i)
			if v > uint64(h.max) {
				v = uint64(h.max)
			}
			return v
		}
	}
	return uint64(h.max)
}

// Mean is the average latency in nanoseconds.
func (h *Hist) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

// Max is the largest latency recorded.
func (h *Hist) Max() uint64 { return uint64(h.max) }
