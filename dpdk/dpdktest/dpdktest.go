// Package dpdktest starts a real EAL for a test binary: no hugepages, no PCI,
// a file prefix of its own, and the virtual devices the tests ask for.
package dpdktest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/dplb/dplb/dpdk/eal"
)

// Main initialises the EAL with the given extra arguments (e.g. "--vdev",
// "net_null0"), runs the tests and cleans up. Without root the tests that
// need DPDK are skipped (Available reports false).
func Main(m *testing.M, extra ...string) {
	os.Exit(run(m, extra))
}

// Run is Main without the exit: it returns the tests' exit code, so the
// caller can remove what it made for the EAL (memif sockets) first.
func Run(m *testing.M, extra ...string) int {
	return run(m, extra)
}

var available bool

// Available reports whether the EAL is up in this test binary.
func Available() bool { return available }

// Skip skips a test when the EAL is not available.
func Skip(t testing.TB) {
	t.Helper()
	if !available {
		t.Skip("DPDK needs root: run the tests as root (make test)")
	}
}

func run(m *testing.M, extra []string) int {
	if os.Geteuid() != 0 {
		return m.Run()
	}
	// The thread that runs rte_eal_init becomes the main lcore.
	runtime.LockOSThread()
	prefix := fmt.Sprintf("dplbtest%d", os.Getpid())
	// DPDK leaves its runtime directory behind; a test run must not.
	defer os.RemoveAll(filepath.Join("/var/run/dpdk", prefix))
	args := append([]string{os.Args[0], "--no-huge", "-m", "256", "--no-pci", "-l", "0",
		"--file-prefix", prefix, "--log-level", "lib.eal:error",
		"--no-telemetry"}, extra...)
	if err := eal.Init(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	available = true
	code := m.Run()
	if err := eal.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return code
}
