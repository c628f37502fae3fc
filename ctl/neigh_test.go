package ctl

import (
	"reflect"
	"sort"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

func sortedReqs(r []arpRequest) []arpRequest {
	sort.Slice(r, func(i, j int) bool { return r[i].ip < r[j].ip })
	return r
}

func TestNeighbourLifecycle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	n := newNeighTable(30*time.Second, 300*time.Second)
	n.setWanted(map[uint32]int{11: 1, 12: 1})
	mac := hdr.MAC{2, 0, 0, 0, 0, 11}

	// Wanted addresses are asked for at once, then at most once a second.
	reqs, changed := n.tick(t0)
	if want := []arpRequest{{1, 11}, {1, 12}}; !reflect.DeepEqual(sortedReqs(reqs), want) || changed {
		t.Fatalf("first tick: %v %v", reqs, changed)
	}
	if reqs, _ := n.tick(t0.Add(500 * time.Millisecond)); len(reqs) != 0 {
		t.Fatalf("asked again within a second: %v", reqs)
	}
	if reqs, _ := n.tick(t0.Add(time.Second)); len(reqs) != 2 {
		t.Fatalf("no retry after a second: %v", reqs)
	}
	// An answer makes an entry; the same answer again changes nothing.
	if !n.learn(11, mac, 1, t0.Add(2*time.Second)) {
		t.Fatal("new entry not reported as a change")
	}
	if n.learn(11, mac, 1, t0.Add(3*time.Second)) {
		t.Fatal("a confirmation reported as a change")
	}
	if got := n.macs(); !reflect.DeepEqual(got, map[uint32]hdr.MAC{11: mac}) {
		t.Fatalf("macs %v", got)
	}
	// A moved MAC is a change.
	mac2 := hdr.MAC{2, 0, 0, 0, 1, 11}
	if !n.learn(11, mac2, 1, t0.Add(4*time.Second)) {
		t.Fatal("a new MAC not reported as a change")
	}
	// Past reachable time the entry is re-resolved but still used.
	reqs, changed = n.tick(t0.Add(40 * time.Second))
	found := false
	for _, r := range reqs {
		found = found || r.ip == 11
	}
	if !found || changed || len(n.macs()) != 1 {
		t.Fatalf("refresh: %v %v", reqs, changed)
	}
	// Past stale time without an answer it is removed.
	if _, changed = n.tick(t0.Add(305 * time.Second)); !changed || len(n.macs()) != 0 {
		t.Fatal("stale entry kept")
	}
}

func TestNeighbourMisses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	n := newNeighTable(30*time.Second, 300*time.Second)
	n.miss(7, 0, t0)
	n.miss(7, 0, t0) // reported by every dropped packet: asked for once
	if reqs, _ := n.tick(t0); !reflect.DeepEqual(reqs, []arpRequest{{0, 7}}) {
		t.Fatalf("miss not resolved: %v", reqs)
	}
	if reqs, _ := n.tick(t0.Add(time.Second)); len(reqs) != 1 {
		t.Fatalf("miss not retried: %v", reqs)
	}
	// Nobody answers: forgotten after a few seconds.
	if reqs, _ := n.tick(t0.Add(6 * time.Second)); len(reqs) != 0 || len(n.misses) != 0 {
		t.Fatalf("unanswered miss kept: %v", reqs)
	}
	// A miss for a known address is ignored.
	n.learn(8, hdr.MAC{1}, 0, t0)
	n.miss(8, 0, t0)
	if len(n.misses) != 0 {
		t.Fatal("miss recorded for a resolved address")
	}
}

// TestAddressConflictsAreLoggedNotLearnt: a host claiming one of our
// addresses (reported by the lcores, which count every one) is logged at
// most once a minute per address, and never enters the neighbour table.
func TestAddressConflictsAreLoggedNotLearnt(t *testing.T) {
	c, f := newTestController(t)
	core, logs := observer.New(zap.WarnLevel)
	c.log = zap.New(core)
	vip, evil := ip4(203, 0, 113, 100), hdr.MAC{2, 0, 0, 0, 0, 0x66}
	now := time.Now()
	conflict := lcore.Event{Kind: lcore.EvAddressConflict, Port: 0, IP: vip, MAC: evil}
	f.events = []lcore.Event{conflict, conflict, conflict, {Kind: lcore.EvAddressConflict, Port: 1, IP: ip4(198, 51, 100, 1), MAC: evil}}
	c.step(now)
	if n := logs.FilterMessageSnippet("address conflict").Len(); n != 2 {
		t.Fatalf("%d conflict lines, want one per address", n)
	}
	if _, ok := c.neigh.entries[vip]; ok || len(f.published) != 0 {
		t.Fatal("a conflict changed the neighbour table")
	}
	f.events = []lcore.Event{conflict}
	c.step(now.Add(30 * time.Second))
	f.events = []lcore.Event{conflict}
	c.step(now.Add(61 * time.Second))
	if n := logs.FilterMessageSnippet("address conflict").Len(); n != 3 {
		t.Fatalf("%d conflict lines after a minute, want 3", n)
	}
}
