package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// scaleFNAT6Streams is how many FNAT66 streams TestScaleOutIPv6 runs.
const scaleFNAT6Streams = 60

// TestScaleOutIPv6: three directors announce an IPv6 VIP beside the
// IPv4 one, as a /128 in MP-BGP over their IPv4 sessions, each with its
// port's IPv6 address as next hop. The router (bird) learns three paths
// and spreads the client's IPv6 requests over them (each schedules some,
// VS/DR to the servers);
// a drained director's /128 is withdrawn with its /32, and comes back on
// undrain. Beside them, FNAT66 streams (FullNAT to the servers' IPv6
// addresses, each director from an IPv6 local address of its own,
// scaleLIP6) go on across the drain and undrain (the others hold the
// moved flows' connections, sync kind 9), and across kill -9 of a
// director that scheduled some: one of the others takes its IPv6 local
// address over (hellos kind 10; it answers solicitations for it and
// sends an unsolicited NA), so the servers' answers to it still reach a
// director, also across the taker's upgrade (its next lbd knows the
// dead director and its IPv6 local address from the handover and from
// the live peer's bulk dump); started again, it gets the address back.
func TestScaleOutIPv6(t *testing.T) {
	waitBound(t)
	e := newScaleEnvWith(t, false, true, true)
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

	fnat := e.startStreamsHeld(t, "FNAT66", scaleVIP6, scaleFNAT6Port, scaleFNAT6Streams)

	drained := time.Now()
	e.lbctlOn(t, a, "drain")
	e.waitRoute6(t, "node a drained (IPv6)", b, c)
	e.waitRoute(t, "node a drained", b, c)
	get("node a drained")
	keepStreamingAfter(t, fnat, "node a drained (FNAT66)", drained)
	e.lbctlOn(t, a, "undrain")
	e.waitRoute6(t, "node a undrained (IPv6)", a, b, c)

	// Kill a director that scheduled FNAT66 streams: the servers answer
	// them at its IPv6 local address.
	dead, live := b, []*scaleNode{a, c}
	if e.conns(t, b, scaleFNAT6Port) == 0 {
		dead, live = c, []*scaleNode{a, b}
	}
	if e.conns(t, dead, scaleFNAT6Port) == 0 {
		t.Fatal("nodes b and c scheduled none of the FNAT66 streams: a death would test no takeover")
	}
	killed := time.Now()
	if err := dead.lbd.Proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.waitRoute6(t, "node "+dead.Name+" killed (IPv6)", live...)
	taker := e.checkTakeoverOf(t, "dead", scaleLIP6(dead), dead, live...)
	keepStreamingAfter(t, fnat, "node "+dead.Name+" killed (FNAT66)", killed.Add(6*time.Second))
	// The taker upgrades: its next lbd knows the dead director and its
	// IPv6 local address (the handover's version 8, the live peer's
	// kind 11), and the address is taken over again.
	upgraded := time.Now()
	e.upgradeTakerOf(t, scaleLIP6(dead), taker, dead, live...)
	keepStreamingAfter(t, fnat, "the taker upgraded (FNAT66)", upgraded.Add(6*time.Second))

	back := time.Now()
	e.startLBD(t, dead)
	e.waitRoute6(t, "node "+dead.Name+" back (IPv6)", a, b, c)
	e.checkGivenBack(t, live...)
	keepStreamingAfter(t, fnat, "node "+dead.Name+" back (FNAT66)", back)
	finishStreams(t, fnat, "FNAT66 streams", "a drain and undrain, a director's kill -9 and return", scaleFNAT6Streams)
	for _, n := range e.nodes {
		if err := n.lbd.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}
