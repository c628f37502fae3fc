package eal

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestPreflight(t *testing.T) {
	root := HostState{UID: 0, HugePagesTotal: 512, HugetlbfsMount: true}
	for _, tc := range []struct {
		name    string
		args    []string
		state   HostState
		wantErr string
	}{
		{"root with hugepages", []string{"lbd"}, root, ""},
		{"not root", []string{"lbd"}, HostState{UID: 1000, HugePagesTotal: 512, HugetlbfsMount: true}, "needs root"},
		{"no hugepages", []string{"lbd"}, HostState{UID: 0, HugetlbfsMount: true}, "echo 512 > /proc/sys/vm/nr_hugepages"},
		{"no hugetlbfs", []string{"lbd"}, HostState{UID: 0, HugePagesTotal: 8}, "mount -t hugetlbfs"},
		{"no-huge needs no hugepages", []string{"lbd", "--no-huge"}, HostState{UID: 0}, ""},
		{"no-huge still needs root", []string{"lbd", "--no-huge"}, HostState{UID: 5}, "needs root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Preflight(tc.args, tc.state)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestInit runs the real EAL once (no hugepages, no PCI) and checks the
// lcore and socket ids and thread registration.
func TestInit(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("DPDK needs root")
	}
	// The thread that runs Init becomes the main lcore; hold it so that the
	// goroutine below runs on another thread.
	lockThread()
	defer unlockThread()
	if err := Init(nil); err == nil {
		t.Fatal("Init(nil) succeeded")
	}
	args := []string{"eal.test", "--no-huge", "-m", "64", "--no-pci", "-l", "0", "--file-prefix", "dplb-eal-test", "--log-level", "lib.eal:error"}
	if err := Init(args); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := Cleanup(); err != nil {
			t.Error(err)
		}
		os.RemoveAll("/var/run/dpdk/dplb-eal-test")
	}()
	if err := Init(args); err == nil || !strings.Contains(err.Error(), "already initialised") {
		t.Fatalf("second Init: got %v", err)
	}
	if hz := TSCHz(); hz < 100e6 || hz > 10e9 {
		t.Errorf("TSCHz = %d, not a plausible CPU clock", hz)
	}
	if MainLcore() != 0 {
		t.Errorf("MainLcore = %d, want 0", MainLcore())
	}
	if LcoreCount() != 1 {
		t.Errorf("LcoreCount = %d, want 1", LcoreCount())
	}
	if s := LcoreSocket(0); s != 0 {
		t.Errorf("LcoreSocket(0) = %d, want 0", s)
	}
	done := make(chan error)
	go func() {
		// A fresh OS thread: unknown to DPDK until registered.
		lockThread()
		defer unlockThread()
		if id := LcoreID(); id != LcoreAny {
			done <- errors.New("unregistered thread has an lcore id")
			return
		}
		id, err := RegisterThread()
		if err != nil {
			done <- err
			return
		}
		if id == LcoreAny || id == 0 || LcoreID() != id || LcoreCount() != 2 {
			done <- errors.New("registration did not give the thread its own lcore id")
			return
		}
		UnregisterThread()
		if LcoreID() != LcoreAny || LcoreCount() != 1 {
			done <- errors.New("unregistration did not release the lcore id")
			return
		}
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
