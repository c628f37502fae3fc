package ctl

import (
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/sched"
)

// withServer is the test configuration's services with the web service's
// servers replaced by one at port.
func withServer(t *testing.T, c *Controller, port int) ([]conf.Service, conf.Timeouts) {
	t.Helper()
	svcs, to := c.Services()
	svcs[0].Servers = []conf.RealServer{{Address: "198.51.100.11", Port: port, Weight: 1, Forward: "nat"}}
	return svcs, to
}

// TestDestIDsAreReused: a (service, server) pair that is gone, and whose
// connections are gone, frees its id for another pair, so more pairs than
// lcore.MaxDests can exist over time; the workers publish the counters of
// the pairs that are configured or draining, not of every id ever made.
func TestDestIDsAreReused(t *testing.T) {
	c, f := newTestController(t)
	for i := 0; i < lcore.MaxDests+1000; i++ {
		svcs, to := withServer(t, c, 1+i%60000)
		if err := c.Apply(svcs, to); err != nil {
			t.Fatalf("pair %d: %v", i, err)
		}
	}
	snap := c.Snapshot()
	// The 3 configured pairs, and the one removed by the last Apply (its
	// connections are not known to be gone before the next update).
	if n := len(snap.Counted); n > 4 {
		t.Fatalf("the workers publish %d ids' counters for 3 configured servers", n)
	}
	for _, s := range snap.Services {
		for _, d := range s.Dests {
			if d.ID >= 8 {
				t.Errorf("dest id %d: ids are not reused", d.ID)
			}
		}
	}
	if len(f.published) != lcore.MaxDests+1000 {
		t.Fatalf("%d snapshots published", len(f.published))
	}
}

// TestDrainingIDsWaitForTheirConnections: a removed server's id is not
// given to another pair while connections (or persistence templates)
// still use it, its counters stay published meanwhile, and the pair that
// reuses it starts from zero (the snapshot asks the workers to reset it).
func TestDrainingIDsWaitForTheirConnections(t *testing.T) {
	c, f := newTestController(t)
	old := c.Snapshot().Services[0].Dests[0] // 198.51.100.11:80
	f.dest[old.ID] = lcore.DestStats{lcore.DestConns: 9, lcore.DestActive: 1}
	svcs, to := c.Services()
	svcs[0].Servers = svcs[0].Servers[1:]
	if err := c.Apply(svcs, to); err != nil {
		t.Fatal(err)
	}
	add := func(port int) sched.Dest {
		t.Helper()
		svcs, to := c.Services()
		svcs[0].Servers = append(svcs[0].Servers, conf.RealServer{Address: "198.51.100.13", Port: port, Weight: 1, Forward: "nat"})
		if err := c.Apply(svcs, to); err != nil {
			t.Fatal(err)
		}
		d := c.Snapshot().Services[0].Dests
		return d[len(d)-1]
	}
	counted := func(id uint32) bool {
		for _, x := range c.Snapshot().Counted {
			if x == id {
				return true
			}
		}
		return false
	}
	if d := add(81); d.ID == old.ID {
		t.Fatal("an id was reused while a connection still uses it")
	}
	if !counted(old.ID) {
		t.Fatal("a draining server's counters are no longer published")
	}
	f.dest[old.ID] = lcore.DestStats{lcore.DestConns: 9} // its last connection ended
	d := add(82)
	if d.ID != old.ID {
		t.Fatalf("new pair got id %d, want the freed %d", d.ID, old.ID)
	}
	reset := false
	for _, id := range c.Snapshot().ResetDests {
		reset = reset || id == d.ID
	}
	if !reset {
		t.Fatalf("the reused id %d is not reset (ResetDests %v)", d.ID, c.Snapshot().ResetDests)
	}
	// A neighbour change reaches the workers as a copy of the snapshot,
	// which must not reset the id again.
	if again := c.Snapshot().WithNeighbours(99, nil); len(again.ResetDests) != 0 {
		t.Fatalf("a neighbour snapshot resets %v again", again.ResetDests)
	}
}

// TestSchedulerStateSurvivesRepublish: a republish (health, feedback,
// slow start) keeps the scheduler instances, and so the rr cursors, of
// the services whose servers did not change; a service whose servers
// changed gets new ones.
func TestSchedulerStateSurvivesRepublish(t *testing.T) {
	c, _ := newTestController(t)
	var flow sched.Flow
	web := c.Snapshot().Services[0]
	if got := web.Scheds[0].Schedule(&flow, noConns{}); got != 0 {
		t.Fatalf("first pick %d", got)
	}
	c.FeedbackChanged() // a republish; nothing changed
	after := c.Snapshot().Services[0]
	if after.Scheds[0] != web.Scheds[0] || after.Scheds[1] != web.Scheds[1] {
		t.Fatal("a republish replaced the scheduler instances of an unchanged service")
	}
	if got := after.Scheds[0].Schedule(&flow, noConns{}); got != 1 {
		t.Fatalf("the rr cursor went back: pick %d after a republish, want 1", got)
	}
	// A weight edit changes the service: new instances, the other service
	// keeps its own.
	ftp := c.Snapshot().Services[1]
	svcs, to := c.Services()
	svcs[0].Servers[1].Weight = 5
	if err := c.Apply(svcs, to); err != nil {
		t.Fatal(err)
	}
	s := c.Snapshot()
	if s.Services[0].Scheds[0] == web.Scheds[0] {
		t.Error("a changed service kept its scheduler (and its old weights)")
	}
	if s.Services[1].Scheds[0] != ftp.Scheds[0] {
		t.Error("an unchanged service lost its scheduler state on another's edit")
	}
}

type noConns struct{}

func (noConns) Active(uint32) uint32   { return 0 }
func (noConns) Inactive(uint32) uint32 { return 0 }
