// Package spsc is a bounded lock-free single-producer single-consumer queue
// of Go values. The control plane and the lcores talk through it: Go values
// (snapshot pointers included) cannot travel through DPDK rings, which live
// in C memory the garbage collector does not see.
package spsc

import (
	"errors"
	"sync/atomic"
)

// cacheLine keeps the producer's and the consumer's indices apart, so the
// two cores do not bounce one cache line between them.
const cacheLine = 64

// Ring is a bounded FIFO for exactly one producer goroutine and one consumer
// goroutine. Push and Pop never block and never allocate.
type Ring[T any] struct {
	buf  []T
	mask uint64
	_    [cacheLine]byte
	head atomic.Uint64 // next slot to read; written by the consumer only
	_    [cacheLine - 8]byte
	tail atomic.Uint64 // next slot to write; written by the producer only
	_    [cacheLine - 8]byte
}

// New makes a ring of size slots, a power of two.
func New[T any](size int) (*Ring[T], error) {
	if size <= 0 || size&(size-1) != 0 {
		return nil, errors.New("spsc: size must be a positive power of two")
	}
	return &Ring[T]{buf: make([]T, size), mask: uint64(size - 1)}, nil
}

// Push appends v; it returns false when the ring is full (the caller counts
// the drop: an lcore never waits).
func (r *Ring[T]) Push(v T) bool {
	t := r.tail.Load()
	if t-r.head.Load() == uint64(len(r.buf)) {
		return false
	}
	r.buf[t&r.mask] = v
	r.tail.Store(t + 1) // publishes the slot to the consumer
	return true
}

// Pop takes the oldest value; ok is false when the ring is empty.
func (r *Ring[T]) Pop() (v T, ok bool) {
	h := r.head.Load()
	if h == r.tail.Load() {
		return v, false
	}
	var zero T
	v = r.buf[h&r.mask]
	r.buf[h&r.mask] = zero // drop the reference so the GC can free it
	r.head.Store(h + 1)
	return v, true
}

// Len is the number of queued values (approximate while both sides run).
func (r *Ring[T]) Len() int { return int(r.tail.Load() - r.head.Load()) }

// Cap is the ring's capacity.
func (r *Ring[T]) Cap() int { return len(r.buf) }
