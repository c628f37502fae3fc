package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestScaleOutLinkDown: three directors announcing the VIP over BGP, on
// TAP ports. Node c's dataplane link goes down while its BGP session (on
// the management link) lives on: it withdraws the VIP ("port link down"),
// the router forwards over a and b alone, and the streams c carried go
// on through them (mh and sloppy_tcp pick the same server, sync has the
// state). The link comes back: c announces again and takes new flows.
func TestScaleOutLinkDown(t *testing.T) {
	waitBound(t)
	e := newScaleEnvOn(t, true, false)
	a, b, c := e.nodes[0], e.nodes[1], e.nodes[2]
	e.waitRoute(t, "at start", a, b, c)
	const streams = 150
	fleet := e.startStreams(t, streams)
	if n := e.conns(t, c, scaleEchoPort); n == 0 {
		t.Errorf("node c scheduled none of the %d streams: ECMP does not spread over it", streams)
	}

	cut := time.Now()
	if _, err := e.tp.Exec(c.NS, "ip", "link", "set", "dtap0", "down"); err != nil {
		t.Fatal(err)
	}
	if took := e.waitRoute(t, "node c's link down", a, b); took > 3*time.Second {
		t.Errorf("the router still reached node c %v after its link went down, want at most 3 s", took.Round(time.Millisecond))
	}
	if out := e.lbctlOn(t, c, "-L", "--bgp"); !strings.Contains(out, "Withheld: "+e.prefix.String()+" (port link down)") {
		t.Errorf("node c with its link down: lbctl -L --bgp says:\n%s", out)
	}
	keepStreamingAfter(t, fleet, "node c's link down", cut)

	back := time.Now()
	if _, err := e.tp.Exec(c.NS, "ip", "link", "set", "dtap0", "up"); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, "node c's link back", a, b, c)
	keepStreamingAfter(t, fleet, "node c's link back", back)
	if by := e.newFlows(t, "node c's link back", 60); by["c"] == 0 {
		t.Errorf("node c, its link back, scheduled none of 60 new connections")
	}

	fleet.finish()
	ty, longest := fleet.verdict(20 * time.Second)
	t.Logf("streams: %s (longest gap %v)", ty.summary(), longest.Round(time.Millisecond))
	if broken := ty.broken() - ty.byKind["stall"]; broken > 0 {
		t.Errorf("%d of %d streams broke across node c's link going down and up", broken, streams)
	}
	if stalled := ty.byKind["stall"]; float64(stalled) > 0.01*streams {
		t.Errorf("%d of %d streams stalled for 20 s", stalled, streams)
	}
	for _, n := range e.nodes {
		if err := n.lbd.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}
