package ethdev

/*
#cgo LDFLAGS: -lrte_net_ring -lrte_bus_vdev
#include "dplb.h"
#include <rte_eth_ring.h>
#include <rte_bus_vdev.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/dplb/dplb/dpdk/internal/rteerr"
	"github.com/dplb/dplb/dpdk/ring"
)

// FromRings creates a net_ring port whose RX queue i reads rx[i] and TX queue
// i writes tx[i]. Tests use it to inject packets into a dataplane and read
// what it sends, with no kernel in between.
func FromRings(name string, rx, tx []*ring.Ring, socket int) (Port, error) {
	runtime.LockOSThread() // rte_errno is per thread: read it on the one that failed
	defer runtime.UnlockOSThread()
	if len(rx) == 0 || len(tx) == 0 {
		return 0, fmt.Errorf("port %q: need at least one RX and one TX ring", name)
	}
	crx := (**C.struct_rte_ring)(C.calloc(C.size_t(len(rx)), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(crx))
	ctx := (**C.struct_rte_ring)(C.calloc(C.size_t(len(tx)), C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(ctx))
	for i, r := range rx {
		unsafe.Slice(crx, len(rx))[i] = (*C.struct_rte_ring)(r.Pointer())
	}
	for i, r := range tx {
		unsafe.Slice(ctx, len(tx))[i] = (*C.struct_rte_ring)(r.Pointer())
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	id := C.rte_eth_from_rings(cname, crx, C.uint(len(rx)), ctx, C.uint(len(tx)), C.uint(socketOrAny(socket)))
	if id < 0 {
		return 0, fmt.Errorf("port %q: %w", name, rteerr.FromErrno("rte_eth_from_rings", int(C.dplb_errno())))
	}
	return Port(id), nil
}

// CreateVdev probes a virtual device at run time, as --vdev does at init
// (e.g. CreateVdev("net_null1", "")).
func CreateVdev(name, args string) error {
	cname, cargs := C.CString(name), C.CString(args)
	defer C.free(unsafe.Pointer(cname))
	defer C.free(unsafe.Pointer(cargs))
	return rteerr.FromRet("rte_vdev_init("+name+")", int(C.rte_vdev_init(cname, cargs)))
}

// RemoveVdev removes a virtual device created by CreateVdev (close its port first).
func RemoveVdev(name string) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	return rteerr.FromRet("rte_vdev_uninit("+name+")", int(C.rte_vdev_uninit(cname)))
}
