// Package eal binds DPDK's Environment Abstraction Layer: process-wide
// initialisation and cleanup, lcore and socket ids, and registration of Go
// threads as DPDK lcores (so mempool caches and per-lcore data work for them).
package eal

/*
#include "dplb.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/dplb/dplb/dpdk/internal/rteerr"
)

// LcoreAny is the lcore id of a thread DPDK does not know.
const LcoreAny = uint(C.LCORE_ID_ANY)

var initMu sync.Mutex // rte_eal_init may run once per process; guards the flag below

var initialised bool

// Init initialises the EAL from an argument list (args[0] is the program
// name, as in argv). It may succeed only once per process. The calling OS
// thread becomes the main lcore (DPDK pins it to the main lcore's CPU), so
// callers lock their goroutine to the thread first (runtime.LockOSThread). Before calling
// into DPDK it checks what most often makes EAL init fail (privileges and
// hugepages) and returns an error that says how to fix it.
func Init(args []string) error {
	initMu.Lock()
	defer initMu.Unlock()
	if initialised {
		return errors.New("eal: already initialised (rte_eal_init runs once per process)")
	}
	if len(args) == 0 {
		return errors.New("eal: empty argument list (want the program name first)")
	}
	if err := Preflight(args, hostState()); err != nil {
		return err
	}
	argv := C.calloc(C.size_t(len(args)+1), C.size_t(unsafe.Sizeof(uintptr(0))))
	cargs := unsafe.Slice((**C.char)(argv), len(args)+1)
	for i, a := range args {
		cargs[i] = C.CString(a)
	}
	runtime.LockOSThread() // rte_errno is per thread: read it on the one that failed
	defer runtime.UnlockOSThread()
	// rte_eal_init keeps pointers into argv, so the strings stay allocated.
	ret := C.rte_eal_init(C.int(len(args)), (**C.char)(argv))
	if ret < 0 {
		errno := int(C.dplb_errno())
		return fmt.Errorf("eal: init with %q: %w%s", strings.Join(args[1:], " "),
			rteerr.FromErrno("rte_eal_init", errno), hint(syscall.Errno(errno)))
	}
	initialised = true
	return nil
}

// Cleanup releases the EAL's resources (hugepage files, devices). Call it
// once, after every port is closed and every pool freed.
func Cleanup() error {
	initMu.Lock()
	defer initMu.Unlock()
	if !initialised {
		return nil
	}
	initialised = false
	return rteerr.FromRet("rte_eal_cleanup", int(C.rte_eal_cleanup()))
}

// LcoreID is the calling thread's lcore id, or LcoreAny.
func LcoreID() uint { return uint(C.rte_lcore_id()) }

// MainLcore is the id of the EAL main lcore.
func MainLcore() uint { return uint(C.rte_get_main_lcore()) }

// LcoreCount is the number of lcores DPDK knows, registered threads included.
func LcoreCount() uint { return uint(C.rte_lcore_count()) }

// SocketID is the NUMA socket of the calling thread (SocketAny when unknown).
func SocketID() int { return int(int32(C.rte_socket_id())) }

// LcoreSocket is the NUMA socket of an lcore.
func LcoreSocket(lcore uint) int { return int(int32(C.rte_lcore_to_socket_id(C.uint(lcore)))) }

// TSCHz is the CPU's time-stamp counter frequency as DPDK measured it, to
// turn time into cycles.
func TSCHz() uint64 { return uint64(C.rte_get_tsc_hz()) }

// SocketAny lets DPDK choose any NUMA socket.
const SocketAny = -1

// RegisterThread makes the calling OS thread a DPDK lcore, so per-lcore
// mempool caches serve it. The caller must hold the thread
// (runtime.LockOSThread) until UnregisterThread.
func RegisterThread() (uint, error) {
	if C.rte_thread_register() != 0 {
		return LcoreAny, rteerr.FromErrno("rte_thread_register", int(C.dplb_errno()))
	}
	return LcoreID(), nil
}

// UnregisterThread releases the lcore id of the calling thread.
func UnregisterThread() { C.rte_thread_unregister() }

// HostState is what Preflight looks at, gathered by hostState (and faked in tests).
type HostState struct {
	UID            int
	HugePagesTotal int  // HugePages_Total from /proc/meminfo
	HugetlbfsMount bool // a hugetlbfs is mounted
}

func hostState() HostState {
	s := HostState{UID: os.Geteuid()}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "HugePages_Total:") {
				fmt.Sscanf(strings.TrimPrefix(line, "HugePages_Total:"), "%d", &s.HugePagesTotal)
			}
		}
	}
	if b, err := os.ReadFile("/proc/mounts"); err == nil {
		s.HugetlbfsMount = strings.Contains(string(b), " hugetlbfs ")
	}
	return s
}

// HugepageFix is the shell recipe printed when hugepages are missing.
const HugepageFix = "echo 512 > /proc/sys/vm/nr_hugepages; mkdir -p /dev/hugepages; " +
	"mountpoint -q /dev/hugepages || mount -t hugetlbfs nodev /dev/hugepages"

// Preflight refuses EAL arguments that cannot work on this host, with the fix.
func Preflight(args []string, s HostState) error {
	noHuge := false
	for _, a := range args {
		if a == "--no-huge" {
			noHuge = true
		}
	}
	if s.UID != 0 {
		return fmt.Errorf("eal: running as uid %d: DPDK needs root (or CAP_SYS_ADMIN, CAP_NET_RAW, CAP_IPC_LOCK) to map memory and open devices; run as root", s.UID)
	}
	if noHuge {
		return nil
	}
	if s.HugePagesTotal == 0 {
		return fmt.Errorf("eal: no hugepages reserved (HugePages_Total is 0); reserve some: %s; or run without hugepages (eal.huge_pages: false, i.e. --no-huge)", HugepageFix)
	}
	if !s.HugetlbfsMount {
		return fmt.Errorf("eal: no hugetlbfs mounted; mount one: mkdir -p /dev/hugepages; mount -t hugetlbfs nodev /dev/hugepages")
	}
	return nil
}

func hint(e syscall.Errno) string {
	switch e {
	case syscall.EACCES, syscall.EPERM:
		return "; DPDK needs root"
	case syscall.ENOMEM:
		return "; not enough memory: reserve more hugepages (" + HugepageFix + ") or lower eal.memory_mb"
	case syscall.EALREADY:
		return "; the EAL was already initialised in this process"
	case syscall.EINVAL:
		return "; check the EAL arguments (lcores, vdev strings, PCI addresses)"
	}
	return ""
}
