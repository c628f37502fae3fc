package ethdev

/*
#cgo LDFLAGS: -Wl,--export-dynamic
#include <stdint.h>
extern uint64_t dplb_guard_waits;
*/
import "C"

import "sync/atomic"

// The burst guard (burstguard.c, cgo/dplb.h) keeps a driver from unmapping
// a queue's memory under a burst in progress. DPDK 22.11's memif PMD
// handles a peer's disconnect on EAL's interrupt thread: it clears the
// port's "connected" flag and then munmaps the regions holding the rings
// and buffers. A poller that read the flag just before, and is still
// inside rte_eth_rx_burst (or tx) when the unmapping comes, faults: lbd
// died that way with SIGSEGV at the end of some perf cases, when lbgen
// exited. The driver offers no link-state event to hook, and its flag
// and link state change in the same call as the unmapping, so no check
// by the poller can close the window.
//
// So every burst call marks its thread as inside a burst, and the
// executable interposes munmap (exported with --export-dynamic, which the
// drivers DPDK loads bind to before libc): on the interrupt thread it
// waits until each burst in progress has left, then unmaps. Bursts after
// that see the cleared flag and return nothing. The cost is two atomic
// operations per burst call, none per packet and no extra cgo call.

// GuardedUnmaps is how many times the interrupt thread unmapped memory
// through the guard (each a driver releasing memory, as memif does on a
// peer's disconnect). Zero after a disconnect would mean the interposition
// is not in effect.
func GuardedUnmaps() uint64 {
	return atomic.LoadUint64((*uint64)(&C.dplb_guard_waits))
}
