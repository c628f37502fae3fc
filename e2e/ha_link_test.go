package e2e

import (
	"strings"
	"testing"
	"time"
)

// linkStreams is TestFailoverOnLinkDown's count of echo streams.
const linkStreams = 100

// TestFailoverOnLinkDown: an active/backup VS/NAT pair on TAP ports.
// The master's server-facing link dies while its machine, lbd and
// keepalived live on: lbctl --ha-check (keepalived's check script) fails,
// keepalived puts the master in FAULT, and the backup takes over the
// role and the synced connections: the streams go on. When the link comes
// back, node a's check passes again and its higher priority takes the
// role back (it has received node b's connections meanwhile, as a
// backup): the streams go on again.
func TestFailoverOnLinkDown(t *testing.T) {
	e := newHAEnvOn(t, false, false, false, true)
	a, b := e.nodes[0], e.nodes[1]
	e.checkMaster(t, "at start", a)
	fleet := e.startStreams(t, linkStreams, b)

	cut := time.Now()
	if _, err := e.topo.Exec(a.NS, "ip", "link", "set", "dtap1", "down"); err != nil {
		t.Fatal(err)
	}
	takeover, err := e.waitARP(b, 15*time.Second)
	if err != nil {
		t.Fatalf("after node a's server link went down: %v", err)
	}
	takeover = time.Since(cut)
	t.Logf("node a's server link down: node b alone answers ARP for the VIP %v later", takeover.Round(time.Millisecond))
	// Two failed checks a second apart, and VRRP's election.
	if takeover > haTakeover+2*haCheck {
		t.Errorf("node b took over %v after node a's link went down, want at most %v", takeover.Round(time.Millisecond), haTakeover+2*haCheck)
	}
	e.checkMaster(t, "after node a's link went down", b)
	if s := a.ka.State(); s != "FAULT" {
		t.Errorf("node a's keepalived is in state %q with its server link down, want FAULT", s)
	}
	if !strings.Contains(a.lbd.Log.String(), "port link down") {
		t.Error("node a's lbd did not log its link going down")
	}
	e.keepStreaming(t, fleet, "after node a's server link went down", cut, takeover)
	t.Logf("node b's drops after the takeover: %s", e.drops(b))

	// The link comes back: node a's check passes twice, it leaves FAULT
	// and its priority takes the role back.
	back := time.Now()
	if _, err := e.topo.Exec(a.NS, "ip", "link", "set", "dtap1", "up"); err != nil {
		t.Fatal(err)
	}
	failback, err := e.waitARP(a, 15*time.Second)
	if err != nil {
		t.Fatalf("after node a's link came back: %v", err)
	}
	failback = time.Since(back)
	t.Logf("node a's link back: node a alone answers ARP for the VIP %v later", failback.Round(time.Millisecond))
	e.checkMaster(t, "after node a's link came back", a)
	e.keepStreaming(t, fleet, "after node a took the role back", back, failback)
	t.Logf("node a's drops after taking the role back: %s", e.drops(a))

	maxStall := 2*max(takeover, failback) + 1500*time.Millisecond
	e.endStreams(t, fleet, maxStall, "the link's loss and return")
	for _, n := range []*haNode{a, b} {
		if err := n.lbd.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
		if err := n.ka.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}
