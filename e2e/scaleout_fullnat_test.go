package e2e

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// FullNAT in a scale-out, as DPVS clusters run it: three active lbd
// behind the router's ECMP, each with a local address of its own on the
// servers' segment, mh with mh-port and sloppy_tcp, connection sync
// between all three. A flow the router moves to another director keeps
// its connection there (synced, with the first director's local
// endpoint): that director sends the client's packets on from the first
// one's local address and port, in the server's numbering, and the
// server's answers, to that address, still reach the first director,
// which sends them to the client. So lbctl drain of node a, which moves
// its flows to nodes b and c while it keeps forwarding its servers'
// answers, and undrain, which moves some back, break no stream.

const scaleFNATStreams = 150

func TestScaleOutFullNAT(t *testing.T) {
	e := newScaleEnvWith(t, false, false, true)
	a, b, c := e.nodes[0], e.nodes[1], e.nodes[2]
	e.waitRoute(t, "at start", a, b, c)
	addr := net.JoinHostPort(e.net.VIP.String(), strconv.Itoa(scaleFNATPort))
	fleet := startFleet(t, e.ctx, e.net.Client.NS, addr, scaleFNATStreams, scaleInterval)
	keepStreamingAfter(t, fleet, "streams started", time.Now())
	spread := map[string]uint64{}
	for _, n := range e.nodes {
		spread[n.Name] = e.conns(t, n, scaleFNATPort)
	}
	t.Logf("the %d FullNAT streams were scheduled by %v", scaleFNATStreams, spread)
	if spread["a"] == 0 {
		t.Fatal("node a scheduled none of the streams: its drain would move nothing")
	}
	// Every director holds every stream's connection (its own, and the
	// others' by sync) before the drain relies on it.
	for _, n := range []*scaleNode{b, c} {
		held := uint64(0)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if held = e.activeConns(t, n, scaleFNATPort); held >= scaleFNATStreams {
				break
			}
		}
		if held < scaleFNATStreams {
			t.Fatalf("node %s holds %d FullNAT connections, want the %d streams'", n.Name, held, scaleFNATStreams)
		}
	}

	drained := time.Now()
	e.lbctlOn(t, a, "drain")
	e.waitRoute(t, "node a drained", b, c)
	keepStreamingAfter(t, fleet, "node a drained", drained)
	if by := e.newFlows(t, "node a drained", 30); by["a"] != 0 {
		t.Errorf("node a, drained, scheduled %d new connections", by["a"])
	}
	undrained := time.Now()
	e.lbctlOn(t, a, "undrain")
	e.waitRoute(t, "node a undrained", a, b, c)
	keepStreamingAfter(t, fleet, "node a undrained", undrained)

	fleet.finish()
	ty, longest := fleet.verdict(20 * time.Second)
	t.Logf("FullNAT streams: %s (longest gap %v)", ty.summary(), longest.Round(time.Millisecond))
	stalled := ty.byKind["stall"]
	if broken := ty.broken() - stalled; broken > 0 {
		t.Errorf("%d of %d FullNAT streams broke across node a's drain and undrain", broken, scaleFNATStreams)
	}
	if stalled > scaleFNATStreams/100 {
		t.Errorf("%d of %d FullNAT streams went silent for 20 s, want at most 1%%", stalled, scaleFNATStreams)
	}
	for _, n := range e.nodes {
		d := e.drops(t, n)
		t.Logf("node %s drops: %s", n.Name, nonZero(d))
		if d["not_syn"] > 0 {
			t.Errorf("node %s dropped %.0f packets of flows it had no entry for (not_syn)", n.Name, d["not_syn"])
		}
	}
	for _, n := range e.nodes {
		if err := n.lbd.Stop(scaleGrace + 20*time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}
