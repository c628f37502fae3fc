package e2e

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// Scale-out: three active lbd directors announce the VIP over BGP to a
// bird2 router, which spreads the client's flows over them with ECMP
// (an L4 multipath hash). VS/DR with mh (mh-port: the test has one
// client address) and sloppy_tcp, and connection sync between all three
// (each runs the master and the backup sync modes, unicast to the
// others on the management link), so a flow ECMP moves to another
// director keeps its real server.
//
// Under long-lived echo streams: every director carries new flows; lbctl
// drain withdraws node a's route (the router keeps two paths) and the
// streams go on; undrain announces it again; with every server of node a
// at weight 0 it has no live server and withdraws, weight 1 announces
// again; kill -9 of node b removes its route (the session dies with it)
// and the streams go on; node b starts again, pulls the others' tables
// and announces, the router moves about a third of new flows (node b's
// share) and the streams go on; SIGTERM of node c withdraws its route while c still forwards
// (bgp.shutdown_grace), then c exits cleanly, saying it leaves (node a or
// b takes its FullNAT local address over); the streams go on through
// nodes a and b. No stream to a live real server may break (at most 1%
// may go silent on a loaded machine) and no director may drop a moved
// flow's packets.
//
// Beside them, until node b is back, FullNAT streams as DPVS clusters
// run them (scaleFNATStreams, scaleout_fullnat_test.go): each director
// has a local address of its own on the servers' segment, and a flow the
// router moves keeps its connection, from the first director's local
// endpoint, through the director it moved to; when node b dies, node a
// or c takes its local address over; the taker upgrades (lbctl upgrade)
// and, knowing b dead from its handover, the address is taken over again;
// it goes back to b when b returns.

const (
	scaleStreams   = 500
	scaleInterval  = 400 * time.Millisecond // each stream writes haChunk bytes this often: 1250 writes a second in all
	scaleEchoPort  = 9000
	scaleHTTPPort  = 80
	scaleGrace     = 4 * time.Second
	scaleRouteWait = 15 * time.Second
)

func TestScaleOutBGP(t *testing.T) {
	waitBound(t)
	e := newScaleEnvWith(t, false, false, true)
	a, b, c := e.nodes[0], e.nodes[1], e.nodes[2]
	e.waitRoute(t, "at start", a, b, c)
	if out := e.lbctlOn(t, a, "-L", "--bgp"); !strings.Contains(out, "established") || !strings.Contains(out, "Announced: "+e.prefix.String()) {
		t.Errorf("node a: lbctl -L --bgp does not show an established session announcing %s:\n%s", e.prefix, out)
	}
	if m := e.metric(t, a, "dplb_bgp_session_up{"); !strings.HasSuffix(m, " 1") {
		t.Errorf("node a: %q, want the session up", m)
	}

	// Every director takes new flows.
	by := e.newFlows(t, "three directors", 60)
	for _, n := range e.nodes {
		if by[n.Name] == 0 {
			t.Errorf("node %s scheduled none of 60 new connections: ECMP does not spread over it", n.Name)
		}
	}
	fleet := e.startStreams(t, scaleStreams)
	spread := map[string]uint64{}
	for _, n := range e.nodes {
		spread[n.Name] = e.conns(t, n, scaleEchoPort)
	}
	t.Logf("the %d streams were scheduled by %v", scaleStreams, spread)
	fnat := e.startFullNATStreams(t)

	// Drain node a: its route goes, the streams it carried move to b and c.
	drained := time.Now()
	if out := e.lbctlOn(t, a, "drain"); !strings.Contains(out, "drained") {
		t.Errorf("lbctl drain printed:\n%s", out)
	}
	e.waitRoute(t, "node a drained", b, c)
	if m := e.metric(t, a, "dplb_bgp_draining "); m != "dplb_bgp_draining 1" {
		t.Errorf("node a drained: %q", m)
	}
	keepStreamingAfter(t, fleet, "node a drained", drained)
	keepStreamingAfter(t, fnat, "node a drained (FullNAT)", drained)
	if by := e.newFlows(t, "node a drained", 30); by["a"] != 0 {
		t.Errorf("node a, drained, scheduled %d new connections", by["a"])
	}
	undrained := time.Now()
	e.lbctlOn(t, a, "undrain")
	e.waitRoute(t, "node a undrained", a, b, c)
	keepStreamingAfter(t, fnat, "node a undrained (FullNAT)", undrained)
	if n := e.conns(t, b, scaleFNATPort); n == 0 {
		t.Fatal("node b scheduled none of the FullNAT streams: its death would test no takeover")
	}

	// Node a's servers all at weight 0: it has no live server for the
	// VIP and withdraws it; weight 1 again announces it.
	weights := func(w int) {
		for _, port := range [][2]int{{scaleHTTPPort, scaleHTTPPort}, {scaleEchoPort, scaleEchoPort}, {scaleFNATPort, scaleEchoPort}} {
			method := "-g"
			if port[0] == scaleFNATPort {
				method = "--fullnat"
			}
			for _, rs := range e.net.Servers {
				e.lbctlOn(t, a, "-e", "-t", net.JoinHostPort(e.net.VIP.String(), strconv.Itoa(port[0])),
					"-r", net.JoinHostPort(rs.Addr.Addr().String(), strconv.Itoa(port[1])), method, "-w", strconv.Itoa(w))
			}
		}
	}
	weights(0)
	e.waitRoute(t, "node a without a live server", b, c)
	if out := e.lbctlOn(t, a, "-L", "--bgp"); !strings.Contains(out, "Withheld: "+e.prefix.String()+" (no live server)") {
		t.Errorf("node a without a live server: lbctl -L --bgp says:\n%s", out)
	}
	weights(1)
	e.waitRoute(t, "node a's servers back", a, b, c)

	// Kill node b: its session dies with it, the router drops its path.
	killed := time.Now()
	if err := b.lbd.Proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, "node b killed", a, c)
	keepStreamingAfter(t, fleet, "node b killed", killed)
	// Its FullNAT streams' answers go to its local address: node a or c
	// takes it over once b's hellos have been missing for
	// sync.peer_dead_after (3 s), and the servers' retransmissions then
	// get through.
	taker := e.checkTakeover(t, "dead", b, a, c)
	keepStreamingAfter(t, fnat, "node b killed (FullNAT)", killed.Add(6*time.Second))
	// The taker upgrades: its next lbd knows node b from the handover.
	upgraded := time.Now()
	e.upgradeTaker(t, taker, b, a, c)
	keepStreamingAfter(t, fnat, "the taker upgraded (FullNAT)", upgraded.Add(6*time.Second))

	// Node b comes back: it pulls the others' tables (sync), then
	// announces; the router rehashes onto it and the streams go on.
	without := e.routerChoices(t)
	back := time.Now()
	e.startLBD(t, b)
	e.waitRoute(t, "node b back", a, b, c)
	e.logRehash(t, without, e.routerChoices(t))
	keepStreamingAfter(t, fleet, "node b back", back)
	// Its hellos again: its local address goes back to it.
	e.checkGivenBack(t, a, c)
	keepStreamingAfter(t, fnat, "node b back (FullNAT)", back)
	finishStreams(t, fnat, "FullNAT streams", "node a's drain and undrain, node b's kill -9 and return", scaleFNATStreams)
	if by := e.newFlows(t, "node b back", 60); by["b"] == 0 {
		t.Errorf("node b, back, scheduled none of 60 new connections")
	}

	dropsC := e.drops(t, c) // before it stops
	// SIGTERM node c: it withdraws first and forwards for the grace.
	stopped := time.Now()
	if err := c.lbd.Proc.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	e.waitRoute(t, "node c stopping", a, b)
	if out, err := harness.LBCtl(e.ctx, e.lbctl, c.lbd.Config.Socket, "-L", "--bgp"); err != nil || !strings.Contains(out, "stopping (withdrawn)") {
		t.Errorf("node c in its grace period: lbctl -L --bgp says %v:\n%s", err, out)
	}
	if exited(c.lbd.Proc) {
		t.Errorf("node c exited before its route was withdrawn")
	}
	if !c.lbd.Proc.Wait(scaleGrace + 20*time.Second) {
		t.Fatalf("node c did not stop")
	}
	if took := time.Since(stopped); took < scaleGrace {
		t.Errorf("node c stopped %v after SIGTERM, before its shutdown_grace %v", took, scaleGrace)
	}
	if code := c.lbd.Proc.ExitCode(); code != 0 {
		t.Errorf("node c exited with %d", code)
	}
	if inUse, line, ok := harness.MempoolInUse(c.lbd.Log.String()); !ok || inUse != 0 {
		t.Errorf("node c: %q", line)
	}
	// Stopping for good it said it leaves: its local address is taken
	// over at once, not after sync.peer_dead_after.
	e.checkTakeover(t, "leaving", c, a, b)
	keepStreamingAfter(t, fleet, "node c stopped", stopped)
	if by := e.newFlows(t, "nodes a and b", 40); by["a"]+by["b"] != 40 || by["a"] == 0 || by["b"] == 0 {
		t.Errorf("nodes a and b scheduled %v of 40 new connections, want all, spread over both", by)
	}

	finishStreams(t, fleet, "streams", "drain, kill -9 and SIGTERM of directors", scaleStreams)
	for name, d := range map[string]map[string]float64{"a": e.drops(t, a), "b": e.drops(t, b), "c": dropsC} {
		t.Logf("node %s drops: %s", name, nonZero(d))
		if d["not_syn"] > 0 {
			t.Errorf("node %s dropped %.0f packets of flows it had no entry for (not_syn)", name, d["not_syn"])
		}
	}
	for _, n := range []*scaleNode{a, b} {
		if err := n.lbd.Stop(scaleGrace + 20*time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}

// finishStreams ends a fleet of n streams: a director that lost a moved
// flow would reset it (the real server answers a segment it does not
// know) or drop its packets (not_syn), so none may break across what the
// test did; a stream silent for 20 s is lost to the machine's load
// (several seconds without a packet through, then TCP's backed-off
// retransmissions): at most 1%.
func finishStreams(t *testing.T, fleet *echoFleet, what, across string, n int) {
	t.Helper()
	fleet.finish()
	ty, longest := fleet.verdict(20 * time.Second)
	t.Logf("%s: %s (longest gap %v)", what, ty.summary(), longest.Round(time.Millisecond))
	stalled := ty.byKind["stall"]
	if broken := ty.broken() - stalled; broken > 0 {
		t.Errorf("%d of %d %s broke across %s", broken, n, what, across)
	}
	if stalled > n/100 {
		t.Errorf("%d of %d %s went silent for 20 s, want at most 1%%", stalled, n, what)
	}
}

// keepStreamingAfter checks that the streams are moving a while after
// the change at since: 99% of them (a loaded machine stalls a few).
// startStreams starts n echo streams to the VIP's echo service and
// checks that they all move; they stop when the test ends.
func (e *scaleEnv) startStreams(t *testing.T, n int) *echoFleet {
	t.Helper()
	vipEcho := net.JoinHostPort(e.net.VIP.String(), strconv.Itoa(scaleEchoPort))
	fleet := startFleet(t, e.ctx, e.net.Client.NS, vipEcho, n, scaleInterval)
	keepStreamingAfter(t, fleet, "streams started", time.Now())
	return fleet
}

func keepStreamingAfter(t *testing.T, f *echoFleet, when string, since time.Time) {
	t.Helper()
	settled := since.Add(3 * time.Second)
	time.Sleep(time.Until(settled) + 2*time.Second) // several of each stream's writes
	moving, ended := f.progressSince(settled)
	t.Logf("%s: %d of %d streams moving, %d ended", when, moving, len(f.streams), ended)
	if float64(moving) < 0.99*float64(len(f.streams)) {
		t.Errorf("%s: only %d of %d streams moving (%d ended), want 99%%", when, moving, len(f.streams), ended)
	}
}
