package e2e

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// bigRound6 sends n datagrams of fragSize bytes to [v6VIP]:port from the
// client, after a warm-up until two in a row are answered (neighbour
// discovery everywhere); every answer must be fragSize bytes with the
// padding intact, come from the VIP and name the client as the server saw
// it. It returns the answers per server.
func bigRound6(t *testing.T, e *natEnv, port, n int) map[string]int {
	t.Helper()
	vipPort := net.JoinHostPort(v6VIP, strconv.Itoa(port))
	send := func(n int) []harness.Result {
		t.Helper()
		res, err := harness.UDPGetSized(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, vipPort, "", n, fragSize, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		if r := send(1)[0]; r.Err == "" {
			ok++
		} else {
			ok = 0
			t.Logf("warm-up %d failed (allowed): %s", i, r.Err)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive %d-byte datagrams to %s were answered", fragSize, vipPort)
	}
	per := map[string]int{}
	for _, r := range send(n) {
		remote, err := netip.ParseAddrPort(r.Remote)
		switch {
		case r.Err != "":
			t.Errorf("datagram %d: %s", r.I, r.Err)
		case err != nil || remote.Addr().String() != v6VIP || int(remote.Port()) != port:
			t.Errorf("datagram %d: answered from %s, want %s", r.I, r.Remote, vipPort)
		case r.SeenClient() != r.Local:
			t.Errorf("datagram %d: server %s saw client %q, the client's end is %s", r.I, r.Server(), r.SeenClient(), r.Local)
		default:
			per[r.Server()]++
		}
	}
	t.Logf("answers per server: %v", per)
	return per
}

// checkFragments6 is checkFragments on a natEnv's metrics, IPv6's
// reasons included.
func checkFragments6(t *testing.T, body string) {
	t.Helper()
	fw := lcoreSum(body, "dplb_lcore_events_total", "counter", "fragments")
	if fw == 0 {
		t.Error("dplb_lcore_events_total{counter=\"fragments\"} is 0: no fragment went through lbd")
	}
	for _, why := range []string{"fragment", "bad_fragment", "fragment_oversize", "fragment_table_full", "fragment_held_full",
		"fragment_timeout", "fragment_orphan", "bad_ipv6", "ipv6_ext_header", "ipv6_unserved", "multi_segment", "no_conn"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v packets dropped as %s", v, why)
		}
	}
	t.Logf("fragments forwarded: %v", fw)
}

// TestFragments6NAT: 4 KiB UDP datagrams over IPv6 from a client on a
// 1500-byte MTU through NAT66 on two lcores, both ways: the client's
// kernel cuts each query into fragments (fragment headers), lbd forwards
// each to the real server (the first with the datagram's checksum
// rewritten, the others in their addresses), the server's kernel
// reassembles it and fragments its 4 KiB answer, which lbd sends back
// from the VIP; the client's kernel reassembles them. Every answer is
// checked byte for byte. lbd's ports are DPDK TAP ports bridged to the
// topology (af_packet would hand lbd reassembled datagrams).
func TestFragments6NAT(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: withIPv6,
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			c.Ports = []harness.Port{
				harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
				harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
			}
			tapPorts(c)
			c.Ports[0].Address6, c.Ports[1].Address6 = v6WAN+"/64", v6LAN+"/64"
			udp := harness.Service{Protocol: "udp", VIP: v6VIP, Port: 53, Scheduler: "rr"}
			for i := range 2 {
				udp.Servers = append(udp.Servers, harness.Server{Address: v6Server(i), Port: 5353, Weight: 1})
			}
			c.Services = append(c.Services, udp)
		},
	})
	// Once lbd is up: the tap PMD sets its interfaces' MACs while ports
	// start, which would undo BridgeTap's.
	for i, ifc := range []string{e.nat.WANIf, e.nat.LANIf} {
		n := strconv.Itoa(i)
		if err := harness.BridgeTap(e.topo, e.nat.LBNS, "brtap"+n, "dtap"+n, ifc, "02:00:00:00:7a:0"+n, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "[::]:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // what lbd dropped, when the test fails
		if t.Failed() {
			for _, l := range strings.Split(e.scrapeMetrics(t), "\n") {
				if strings.HasPrefix(l, "dplb_lcore_drops_total") && !strings.HasSuffix(l, " 0") {
					t.Log(l)
				}
			}
		}
	})
	per := bigRound6(t, e, 53, 40)
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	checkFragments6(t, e.scrapeMetrics(t))
	e.stopLBD(t)
}
