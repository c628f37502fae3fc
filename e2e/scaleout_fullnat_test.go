package e2e

import (
	"net"
	"strconv"
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
// stream. (Flows through a director that dies break with its local
// addresses: not tested.)

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
