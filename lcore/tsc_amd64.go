package lcore

// readTSC reads the CPU's time-stamp counter (RDTSC, some 25 cycles and
// no system call): the stage accounting takes several readings per burst.
// The TSC rate is DPDK's rte_get_tsc_hz (the control plane converts).
//
//go:noescape
func readTSC() uint64
