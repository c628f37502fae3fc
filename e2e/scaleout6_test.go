package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestScaleOutIPv6: three directors announce an IPv6 VIP beside the
// IPv4 one, as a /128 in MP-BGP over their IPv4 sessions, each with its
// port's IPv6 address as next hop. The router (bird) learns three paths
// and spreads the client's IPv6 requests over them (each schedules some,
// VS/DR to the servers);
// a drained director's /128 is withdrawn with its /32, and comes back on
// undrain.
func TestScaleOutIPv6(t *testing.T) {
	waitBound(t)
	e := newScaleEnvOn(t, false, true)
	a, b, c := e.nodes[0], e.nodes[1], e.nodes[2]
	e.waitRoute(t, "at start", a, b, c)
	e.waitRoute6(t, "at start (IPv6)", a, b, c)
	if out := e.lbctlOn(t, a, "-L", "--bgp"); !strings.Contains(out, scaleVIP6+"/128") || !strings.Contains(out, scaleNode6(a)) {
		t.Errorf("node a: lbctl -L --bgp does not show the IPv6 VIP announced with its IPv6 next hop:\n%s", out)
	}

	url := fmt.Sprintf("http://[%s]:%d/", scaleVIP6, scaleHTTP6Port)
	get := func(when string) {
		t.Helper()
		res, err := harness.Get(e.ctx, e.tp, e.net.Client.NS, e.helper, url, 30, 3*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		by := map[string]int{}
		for _, r := range res {
			if r.Err != "" || r.Status != 200 {
				t.Errorf("%s: a request to %s: status %d %s", when, url, r.Status, r.Err)
				continue
			}
			by[r.Server()]++
		}
		t.Logf("%s: 30 IPv6 requests answered by %v", when, by)
		if len(by) < 2 {
			t.Errorf("%s: the IPv6 requests reached %v, want both servers", when, by)
		}
	}
	get("three directors")
	for _, n := range e.nodes {
		if got := e.conns(t, n, scaleHTTP6Port); got == 0 {
			t.Errorf("node %s scheduled none of the IPv6 requests: ECMP does not spread them over it", n.Name)
		}
	}

	e.lbctlOn(t, a, "drain")
	e.waitRoute6(t, "node a drained (IPv6)", b, c)
	e.waitRoute(t, "node a drained", b, c)
	get("node a drained")
	e.lbctlOn(t, a, "undrain")
	e.waitRoute6(t, "node a undrained (IPv6)", a, b, c)
	for _, n := range e.nodes {
		if err := n.lbd.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}
