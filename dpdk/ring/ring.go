// Package ring binds DPDK's lock-free rings (struct rte_ring): fixed-size
// FIFOs of pointers with single- or multi-producer/consumer bursts.
package ring

/*
#include "dplb.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/dplb/dplb/dpdk/internal/rteerr"
)

// Ring is a DPDK ring.
type Ring C.struct_rte_ring

func (r *Ring) c() *C.struct_rte_ring { return (*C.struct_rte_ring)(r) }

// Flags choose the ring's default synchronisation.
type Flags uint

const (
	// SingleProducer makes the default enqueue single-producer (RING_F_SP_ENQ).
	SingleProducer Flags = C.RING_F_SP_ENQ
	// SingleConsumer makes the default dequeue single-consumer (RING_F_SC_DEQ).
	SingleConsumer Flags = C.RING_F_SC_DEQ
	// ExactSize makes count usable slots exactly (RING_F_EXACT_SZ), instead of
	// count-1 with count a power of two.
	ExactSize Flags = C.RING_F_EXACT_SZ
)

// Create makes a ring of count slots (a power of two unless ExactSize).
func Create(name string, count uint, socket int, flags Flags) (*Ring, error) {
	runtime.LockOSThread() // rte_errno is per thread: read it on the one that failed
	defer runtime.UnlockOSThread()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	r := C.rte_ring_create(cname, C.uint(count), C.int(socket), C.uint(flags))
	if r == nil {
		return nil, fmt.Errorf("ring %q (%d slots): %w", name, count,
			rteerr.FromErrno("rte_ring_create", int(C.dplb_errno())))
	}
	return (*Ring)(r), nil
}

// Free releases the ring (not the objects left in it).
func (r *Ring) Free() { C.rte_ring_free(r.c()) }

// Name is the ring's name.
func (r *Ring) Name() string { return C.GoString(&r.name[0]) }

// Count is the number of objects in the ring.
func (r *Ring) Count() int { return int(C.dplb_ring_count(r.c())) }

// FreeCount is the number of free slots.
func (r *Ring) FreeCount() int { return int(C.dplb_ring_free_count(r.c())) }

// Objs is a burst array of object pointers; keep it in C memory (NewObjs)
// so cgo does not scan it on every call.
type Objs []unsafe.Pointer

// NewObjs allocates a burst array of n pointers in C memory; free it with FreeObjs.
func NewObjs(n int) Objs {
	return unsafe.Slice((*unsafe.Pointer)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))), n)
}

// FreeObjs releases an array from NewObjs.
func FreeObjs(o Objs) {
	if len(o) > 0 {
		C.free(unsafe.Pointer(&o[0]))
	}
}

func ptr(o Objs) *unsafe.Pointer {
	if len(o) == 0 {
		return nil
	}
	return &o[0]
}

// SPEnqueueBurst enqueues as many of objs as fit, single producer; returns how many.
func (r *Ring) SPEnqueueBurst(objs Objs) int {
	return int(C.dplb_ring_sp_enqueue_burst(r.c(), ptr(objs), C.uint(len(objs))))
}

// MPEnqueueBurst enqueues as many of objs as fit, multi-producer safe.
func (r *Ring) MPEnqueueBurst(objs Objs) int {
	return int(C.dplb_ring_mp_enqueue_burst(r.c(), ptr(objs), C.uint(len(objs))))
}

// SCDequeueBurst dequeues up to len(objs) objects, single consumer.
func (r *Ring) SCDequeueBurst(objs Objs) int {
	return int(C.dplb_ring_sc_dequeue_burst(r.c(), ptr(objs), C.uint(len(objs))))
}

// MCDequeueBurst dequeues up to len(objs) objects, multi-consumer safe.
func (r *Ring) MCDequeueBurst(objs Objs) int {
	return int(C.dplb_ring_mc_dequeue_burst(r.c(), ptr(objs), C.uint(len(objs))))
}

// Pointer is the ring as a C pointer, for other bindings (ethdev.FromRings).
func (r *Ring) Pointer() unsafe.Pointer { return unsafe.Pointer(r) }
