package e2e

import (
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// decapCounts checks that every server's decapsulator received at least
// perConn IPIP packets per connection its answers proved, with none malformed
// and none lost on the way to the TUN device.
func (e *lbEnv) decapCounts(t *testing.T, answers map[string]uint64, perConn uint64) {
	t.Helper()
	for _, d := range e.decaps {
		s, err := d.Stats(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s decap: %+v", d.Host.Name, s)
		if want := answers[d.Host.Name] * perConn; s.Decap < want || s.Decap == 0 {
			t.Errorf("%s: the decapsulator wrote %d packets, want at least %d (%d connections)", d.Host.Name, s.Decap, want, answers[d.Host.Name])
		}
		if s.Bad != 0 || s.Errors != 0 || s.Frames != s.Decap {
			t.Errorf("%s: decap counters %+v: malformed or unwritten IPIP packets", d.Host.Name, s)
		}
	}
}

// TestTUN: 200 HTTP requests through VS/TUN to servers beyond the router.
// Every request succeeds, both servers answer half, the packets reach them
// in IPIP (their decapsulators count at least SYN, ACK and request per
// connection) and the replies bypass the LB.
func TestTUN(t *testing.T) {
	e := startLVS(t, true, "tcp", 80)
	answers, failed := e.round(t, "tcp", 80, 200)
	resp := e.pollStats(t, func(r api.Response) []string {
		return e.serverStats(r, "tcp", 80, 80, "Tunnel", answers, failed, false)
	})
	e.oneWay(t, resp, "tcp", 80)
	e.decapCounts(t, answers, 3)
	e.stop(t)
}

// TestTUNUDP: 100 UDP queries through VS/TUN, each from a new source port.
func TestTUNUDP(t *testing.T) {
	e := startLVS(t, true, "udp", 53)
	answers, failed := e.round(t, "udp", 53, 100)
	resp := e.pollStats(t, func(r api.Response) []string {
		return e.serverStats(r, "udp", 53, 53, "Tunnel", answers, failed, false)
	})
	e.oneWay(t, resp, "udp", 53)
	e.decapCounts(t, answers, 1)
	e.stop(t)
}
