// Package mempool binds DPDK's mempool library for packet buffer pools.
package mempool

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

// Mempool is a DPDK memory pool (struct rte_mempool).
type Mempool C.struct_rte_mempool

func (mp *Mempool) c() *C.struct_rte_mempool { return (*C.struct_rte_mempool)(mp) }

// DefaultDataRoom is RTE_MBUF_DEFAULT_BUF_SIZE: a 2048-byte data room plus headroom.
const DefaultDataRoom = uint16(C.RTE_MBUF_DEFAULT_BUF_SIZE)

// PktmbufPool describes a packet buffer pool.
type PktmbufPool struct {
	Name     string // unique in the process (and the file prefix)
	N        uint   // number of mbufs; 2^k-1 is the most memory-efficient
	Cache    uint   // per-lcore cache size, <= 512 (RTE_MEMPOOL_CACHE_MAX_SIZE)
	PrivSize uint16 // application private area per mbuf, multiple of 8
	DataRoom uint16 // data room size incl. headroom; 0 means DefaultDataRoom
	Socket   int    // NUMA socket, or -1 for any
}

// CreatePktmbufPool creates a pool of packet buffers.
func CreatePktmbufPool(p PktmbufPool) (*Mempool, error) {
	runtime.LockOSThread() // rte_errno is per thread: read it on the one that failed
	defer runtime.UnlockOSThread()
	if p.DataRoom == 0 {
		p.DataRoom = DefaultDataRoom
	}
	name := C.CString(p.Name)
	defer C.free(unsafe.Pointer(name))
	mp := C.rte_pktmbuf_pool_create(name, C.uint(p.N), C.uint(p.Cache), C.uint16_t(p.PrivSize),
		C.uint16_t(p.DataRoom), C.int(p.Socket))
	if mp == nil {
		return nil, fmt.Errorf("mempool %q (%d mbufs): %w", p.Name, p.N,
			rteerr.FromErrno("rte_pktmbuf_pool_create", int(C.dplb_errno())))
	}
	return (*Mempool)(mp), nil
}

// Free releases the pool. Every mbuf must have been returned first.
func (mp *Mempool) Free() { C.rte_mempool_free(mp.c()) }

// InUse counts the objects taken out of the pool (held by drivers,
// queues or the application); objects in lcore caches count as free.
func (mp *Mempool) InUse() int { return int(C.rte_mempool_in_use_count(mp.c())) }

// Avail counts the objects that can be allocated.
func (mp *Mempool) Avail() int { return int(C.rte_mempool_avail_count(mp.c())) }

// Size is the pool's capacity.
func (mp *Mempool) Size() int { return int(mp.size) }

// Name is the pool's name.
func (mp *Mempool) Name() string { return C.GoString(&mp.name[0]) }

// Lookup finds a pool by name.
func Lookup(name string) (*Mempool, error) {
	runtime.LockOSThread() // rte_errno is per thread: read it on the one that failed
	defer runtime.UnlockOSThread()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	mp := C.rte_mempool_lookup(cname)
	if mp == nil {
		return nil, rteerr.FromErrno("rte_mempool_lookup("+name+")", int(C.dplb_errno()))
	}
	return (*Mempool)(mp), nil
}
