package conn

import "unsafe"

// prefetch asks the CPU to bring addr's cache line in without waiting for
// it (PREFETCHT0): the misses of a burst's lookups overlap.
//
//go:noescape
func prefetch(addr unsafe.Pointer)
