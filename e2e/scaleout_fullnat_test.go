package e2e

import (
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FullNAT in a scale-out (TestScaleOutBGP), as DPVS clusters run it:
// three active lbd behind the router's ECMP, each with a local address of
// its own on the servers' segment (scaleLIP), mh with mh-port and
// sloppy_tcp, connection sync between all three. A flow the router moves
// to another director keeps its connection there (synced, with the first
// director's local endpoint): that director sends the client's packets on
// from the first one's local address and port, in the server's
// numbering, and the server's answers, to that address, still reach the
// first director, which sends them to the client. So lbctl drain of node
// a, which moves its flows to nodes b and c while it keeps forwarding
// its servers' answers, and undrain, which moves some back, break no
// stream. Nor does kill -9 of node b: its hellos stop, and one of the
// others takes its local address over (answers ARP for it, announces it)
// and translates the servers' answers with the synced connections; the
// taker upgraded hands b's hellos to its next lbd, so b's address stays
// taken over; b,
// started again, pulls the tables, announces its address and says hello,
// and the taker gives the address back.

const scaleFNATStreams = 150

// startFullNATStreams starts the FullNAT streams and waits until every
// director holds every stream's connection (its own, and the others' by
// sync), which a drain relies on.
func (e *scaleEnv) startFullNATStreams(t *testing.T) *echoFleet {
	t.Helper()
	return e.startStreamsHeld(t, "FullNAT", e.net.VIP.String(), scaleFNATPort, scaleFNATStreams)
}

// startStreamsHeld starts n streams (what) to vip:port, checks that node
// a scheduled some, and waits until every director holds all of them.
func (e *scaleEnv) startStreamsHeld(t *testing.T, what, vip string, port, n int) *echoFleet {
	t.Helper()
	fleet := startFleet(t, e.ctx, e.net.Client.NS, net.JoinHostPort(vip, strconv.Itoa(port)), n, scaleInterval)
	keepStreamingAfter(t, fleet, what+" streams started", time.Now())
	spread := map[string]uint64{}
	for _, nd := range e.nodes {
		spread[nd.Name] = e.conns(t, nd, port)
	}
	t.Logf("the %d %s streams were scheduled by %v", n, what, spread)
	if spread["a"] == 0 {
		t.Fatalf("node a scheduled none of the %s streams: its drain would move nothing", what)
	}
	for _, nd := range e.nodes {
		held := uint64(0)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if held = e.activeConns(t, nd, port); held >= uint64(n) {
				break
			}
		}
		if held < uint64(n) {
			t.Fatalf("node %s holds %d %s connections, want the %d streams'", nd.Name, held, what, n)
		}
	}
	return fleet
}

// checkTakeover waits until exactly one of the live nodes took dead's
// local address over (lbctl -L --daemon lists dead in state, "dead"
// after its hellos stopped or "leaving" after it said so, with its
// address taken over there; its metric counts it), and returns it.
func (e *scaleEnv) checkTakeover(t *testing.T, state string, dead *scaleNode, live ...*scaleNode) *scaleNode {
	t.Helper()
	return e.checkTakeoverOf(t, state, scaleLIP(dead), dead, live...)
}

// checkTakeoverOf is checkTakeover for dead's local address lip.
func (e *scaleEnv) checkTakeoverOf(t *testing.T, state, lip string, dead *scaleNode, live ...*scaleNode) *scaleNode {
	t.Helper()
	// The same single taker for 1.5 s: a director that comes back (an
	// upgrade) changes the ranks, and the address moves once more.
	var takers []*scaleNode
	listings := map[string]string{}
	stable, last := time.Time{}, ""
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		takers = takers[:0]
		for _, n := range live {
			listings[n.Name] = e.lbctlOn(t, n, "-L", "--daemon")
			if slices.Contains(takenOverHere(listings[n.Name]), lip) {
				takers = append(takers, n)
			}
		}
		now := ""
		if len(takers) == 1 {
			now = takers[0].Name
		}
		if now != last {
			stable, last = time.Now(), now
		}
		if now != "" && time.Since(stable) >= 1500*time.Millisecond {
			break
		}
	}
	if len(takers) != 1 {
		t.Fatalf("node %s %s: %d nodes took its local address %s over, want exactly one; lbctl -L --daemon says %q", dead.Name, state, len(takers), lip, listings)
	}
	n := takers[0]
	if !strings.Contains(listings[n.Name], ": "+state+", hello") {
		t.Errorf("node %s took %s over, but lbctl -L --daemon does not list its peer %s:\n%s", n.Name, lip, state, listings[n.Name])
	}
	if m := e.metric(t, n, "dplb_sync_local_addresses_taken_over "); strings.HasSuffix(m, " 0") {
		t.Errorf("node %s took %s over, but its metric says %q", n.Name, lip, m)
	}
	t.Logf("node %s %s: node %s took its local address %s over", dead.Name, state, n.Name, lip)
	return n
}

// takenOverHere are the local addresses lbctl -L --daemon's listing says
// were taken over here, of every peer.
func takenOverHere(listing string) []string {
	var out []string
	for _, line := range strings.Split(listing, "\n") {
		if _, rest, ok := strings.Cut(line, "(taken over here: "); ok {
			list, _, _ := strings.Cut(rest, ")")
			out = append(out, strings.Split(list, ",")...)
		}
	}
	return out
}

// upgradeTaker upgrades node n, which took dead's local address over
// (lbctl upgrade: the same binary execs in place with its handover):
// the next lbd knows dead from the handover, as dead (it never hears
// from it), and exactly one live node takes the address over again.
func (e *scaleEnv) upgradeTaker(t *testing.T, n, dead *scaleNode, live ...*scaleNode) {
	t.Helper()
	e.upgradeTakerOf(t, scaleLIP(dead), n, dead, live...)
}

// upgradeTakerOf is upgradeTaker for dead's local address lip.
func (e *scaleEnv) upgradeTakerOf(t *testing.T, lip string, n, dead *scaleNode, live ...*scaleNode) {
	t.Helper()
	out, err := exec.CommandContext(e.ctx, e.lbctl, "--socket", n.lbd.Config.Socket, "upgrade", "--binary", e.lbdPath).CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: lbctl upgrade: %v: %s", n.Name, err, out)
	}
	if daemons := e.lbctlOn(t, n, "-L", "--daemon"); !strings.Contains(daemons, ": dead, hello") || !strings.Contains(daemons, lip) {
		t.Errorf("node %s upgraded does not know node %s dead, with %s, from its handover; lbctl -L --daemon says:\n%s", n.Name, dead.Name, lip, daemons)
	}
	e.checkTakeoverOf(t, "dead", lip, dead, live...)
}

// checkGivenBack waits until none of nodes holds a peer's local address.
func (e *scaleEnv) checkGivenBack(t *testing.T, nodes ...*scaleNode) {
	t.Helper()
	for _, n := range nodes {
		m := ""
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			if m = e.metric(t, n, "dplb_sync_local_addresses_taken_over "); strings.HasSuffix(m, " 0") {
				break
			}
		}
		if !strings.HasSuffix(m, " 0") {
			t.Errorf("node %s still holds a peer's local address: %q", n.Name, m)
		}
	}
}
