package e2e

import (
	"net"
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
// and translates the servers' answers with the synced connections; b,
// started again, pulls the tables, announces its address and says hello,
// and the taker gives the address back.

const scaleFNATStreams = 150

// startFullNATStreams starts the FullNAT streams and waits until every
// director holds every stream's connection (its own, and the others' by
// sync), which a drain relies on.
func (e *scaleEnv) startFullNATStreams(t *testing.T) *echoFleet {
	t.Helper()
	addr := net.JoinHostPort(e.net.VIP.String(), strconv.Itoa(scaleFNATPort))
	fleet := startFleet(t, e.ctx, e.net.Client.NS, addr, scaleFNATStreams, scaleInterval)
	keepStreamingAfter(t, fleet, "FullNAT streams started", time.Now())
	spread := map[string]uint64{}
	for _, n := range e.nodes {
		spread[n.Name] = e.conns(t, n, scaleFNATPort)
	}
	t.Logf("the %d FullNAT streams were scheduled by %v", scaleFNATStreams, spread)
	if spread["a"] == 0 {
		t.Fatal("node a scheduled none of the FullNAT streams: its drain would move nothing")
	}
	for _, n := range e.nodes {
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
	return fleet
}

// checkTakeover waits until exactly one of the live nodes took dead's
// local address over (metrics, and lbctl -L --daemon with dead's state:
// "dead" after its hellos stopped, "leaving" after it said so).
func (e *scaleEnv) checkTakeover(t *testing.T, state string, dead *scaleNode, live ...*scaleNode) {
	t.Helper()
	lip := scaleLIP(dead)
	var takers []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		takers = takers[:0]
		for _, n := range live {
			if m := e.metric(t, n, "dplb_sync_local_addresses_taken_over "); strings.HasSuffix(m, " 1") {
				takers = append(takers, n.Name)
			}
		}
		if len(takers) == 1 {
			break
		}
	}
	if len(takers) != 1 {
		t.Fatalf("node %s dead: nodes %v took its local address %s over, want exactly one", dead.Name, takers, lip)
	}
	for _, n := range live {
		if n.Name != takers[0] {
			continue
		}
		out := e.lbctlOn(t, n, "-L", "--daemon")
		if want := state + ", hello"; !strings.Contains(out, want) || !strings.Contains(out, "(taken over here: "+lip+")") {
			t.Errorf("node %s took %s over, but lbctl -L --daemon says:\n%s", n.Name, lip, out)
		}
	}
	t.Logf("node %s dead: node %s took its local address %s over", dead.Name, takers[0], lip)
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
