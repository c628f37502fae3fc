package connsync

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/lcore"
)

// fakeController stands in for lbd's controller in this package's tests:
// it hands out queued records as the workers' sync rings would and keeps
// what it is asked to install. The real controller is in the e2e tests.
type fakeController struct {
	mu        sync.Mutex
	pending   []lcore.SyncConn
	installed []lcore.SyncConn
	table     []lcore.SyncConn
	params    lcore.SyncParams
	lips      []netip.Addr  // LocalAddrs
	gate      chan struct{} // non-nil: InstallSynced waits for it to close
	installs  atomic.Int64
}

func (f *fakeController) queue(recs ...lcore.SyncConn) {
	f.mu.Lock()
	f.pending = append(f.pending, recs...)
	f.mu.Unlock()
}

func (f *fakeController) SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	buf = append(buf, f.pending...)
	f.pending = f.pending[:0]
	return buf
}

func (f *fakeController) InstallSynced(recs []lcore.SyncConn) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.installs.Add(1)
	f.mu.Lock()
	f.installed = append(f.installed, recs...)
	f.mu.Unlock()
}

func (f *fakeController) SyncTable() ([]lcore.SyncConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]lcore.SyncConn(nil), f.table...), nil
}

func (f *fakeController) SetSyncParams(p lcore.SyncParams) {
	f.mu.Lock()
	f.params = p
	f.mu.Unlock()
}

func (f *fakeController) LocalAddrs() []netip.Addr {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]netip.Addr(nil), f.lips...)
}

func (f *fakeController) installedSet() map[lcore.SyncConn]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[lcore.SyncConn]bool, len(f.installed))
	for _, r := range f.installed {
		m[r] = true
	}
	return m
}

// eventually polls cond until it holds; the bound is generous (a shared,
// slow machine) and only ends a test that would hang.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// nsPair makes two network namespaces joined by a veth named sync0 on
// both sides, 192.0.2.1/24 in the first and 192.0.2.2/24 in the second,
// and removes them when the test ends.
func nsPair(t *testing.T) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	id := fmt.Sprintf("dplbsync%d-%d", os.Getpid(), nsSeq.Add(1))
	a, b = id+"a", id+"b"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", a).Run()
		exec.Command("ip", "netns", "del", b).Run()
	})
	run("netns", "add", a)
	run("netns", "add", b)
	run("link", "add", "sync0", "netns", a, "type", "veth", "peer", "sync0", "netns", b)
	for i, ns := range []string{a, b} {
		run("-n", ns, "addr", "add", fmt.Sprintf("192.0.2.%d/24", i+1), "dev", "sync0")
		run("-n", ns, "link", "set", "sync0", "up")
		run("-n", ns, "link", "set", "lo", "up")
	}
	// A datagram sent before the veth has its carrier is lost, and sync
	// sends a record once: wait until both ends are up.
	for _, ns := range []string{a, b} {
		eventually(t, "sync0 up in "+ns, func() bool {
			out, _ := exec.Command("ip", "-n", ns, "link", "show", "sync0").CombinedOutput()
			return strings.Contains(string(out), "state UP")
		})
	}
	return a, b
}

var nsSeq atomic.Int64

// inNS runs fn on a thread moved into namespace ns: sockets fn opens
// stay in ns for good, whichever thread later uses them.
func inNS(t *testing.T, ns string, fn func() error) error {
	t.Helper()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer self.Close()
	target, err := os.Open("/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	ferr := fn()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// This thread stays in ns; leaving it locked makes the runtime
		// end it with the goroutine.
		t.Fatalf("back to the test's namespace: %v", err)
	}
	runtime.UnlockOSThread()
	return ferr
}

func statsOf(d *Daemon, name string) PeerStats {
	for _, s := range d.Stats() {
		if s.Peer == name {
			return s
		}
	}
	return PeerStats{Dropped: map[string]uint64{}}
}
