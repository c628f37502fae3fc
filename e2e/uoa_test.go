package e2e

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// TestFullNATUOA: two FullNAT UDP services with DPVS's UDP option of
// address, watched on the servers' interfaces as a server's uoa module
// reads it (nshelper uoa, from AF_PACKET copies).
//   - ipo (VIP:53): every query from a new client port opens a connection
//     whose first datagram carries the client's address and port as an
//     IPv4 option; the servers' kernels take it as usual, so every query
//     is answered, the server seeing a local address. A query that fills
//     the 1500-byte MTU has no room for it: it comes in an empty datagram
//     of its own (UDP length 8) just ahead.
//   - opp (VIP:54): four queries from one client port. The first three
//     carry it in DPVS's option protocol header (IP protocol 248), which
//     a server without the uoa module drops; the fourth is a plain
//     datagram and is answered.
func TestFullNATUOA(t *testing.T) {
	var watch map[string]*harness.Buffer
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			noDefaultRoute(t, tp, nat.Servers)
			watch = watchUOA(t, tp, nat.Servers)
		},
		configure: func(c *harness.Config) {
			for i, mode := range []string{"ipo", "opp"} {
				udp := harness.Service{Protocol: "udp", VIP: c.Services[0].VIP, Port: 53 + i, Scheduler: "rr", UOA: mode}
				for _, s := range c.Services[0].Servers {
					udp.Servers = append(udp.Servers, harness.Server{Address: s.Address, Port: 5353, Weight: 1})
				}
				toFullNAT(&udp, false)
				udp.LocalAddresses = fullNATLocal[i : i+1] // a local address serves one service
				c.Services = append(c.Services, udp)
			}
		},
	})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, ":5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	vip := e.nat.VIP.String()
	// ipo. The first queries may be lost while lbd resolves the servers'
	// MACs: ask until both answered.
	seen := map[string]int{}
	for deadline := time.Now().Add(15 * time.Second); seen["rs1"] == 0 || seen["rs2"] == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("ipo: answers %v, want both servers", seen)
		}
		res, err := harness.UDPGet(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, vip+":53", "", 6, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // the watchers' last lines
		for _, r := range res {
			if r.Err != "" {
				continue
			}
			if host, _, _ := net.SplitHostPort(r.SeenClient()); host != fullNATLocal[0] {
				t.Fatalf("ipo query %d: the server saw %s, want a local address", r.I, r.SeenClient())
			}
			if want := "uoa " + r.Local + " from " + r.SeenClient() + " mode ipo"; !strings.Contains(watch[r.Server()].String(), want) {
				t.Fatalf("ipo query %d: %s saw no %q:\n%s", r.I, r.Server(), want, watch[r.Server()].String())
			}
			seen[r.Server()]++
		}
	}

	// A datagram with no room: the option comes alone, ahead of it.
	res, err := harness.UDPGetSized(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, vip+":53", "", 1, 1472, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	alone := "uoa " + res[0].Local + " from " + fullNATLocal[0] // then :lport
	found := false
	for _, w := range watch {
		for _, line := range strings.Split(w.String(), "\n") {
			found = found || strings.HasPrefix(line, alone+":") && strings.HasSuffix(line, " mode ipo len 8")
		}
	}
	if !found {
		t.Fatalf("no empty datagram carrying %q ahead of a 1472-byte query:\nrs1:\n%s\nrs2:\n%s", alone, watch["rs1"], watch["rs2"])
	}

	// opp, from one client port: one connection.
	checkOPPConnection(t, e, watch, vip+":54", e.nat.Client.Addr.Addr().String())
	body := e.scrapeMetrics(t)
	if n := lcoreSum(body, "dplb_lcore_events_total", "counter", "uoa_options"); n < float64(seen["rs1"]+seen["rs2"]+3) {
		t.Errorf("dplb_lcore_events_total{counter=\"uoa_options\"} is %v, want one per ipo query answered and 3 (opp)", n)
	}
	if n := lcoreSum(body, "dplb_lcore_events_total", "counter", "uoa_alone"); n != 1 {
		t.Errorf("dplb_lcore_events_total{counter=\"uoa_alone\"} is %v, want 1 (the 1472-byte query's)", n)
	}
	e.stopLBD(t)
}

// watchUOA starts nshelper's uoa watcher for port 5353 on each server.
func watchUOA(t *testing.T, tp *topo.Topo, servers []topo.Host) map[string]*harness.Buffer {
	t.Helper()
	_, _, nshelper := binaries(t)
	watch := map[string]*harness.Buffer{}
	for _, h := range servers {
		out, err := harness.StartUOAWatch(tp, h, nshelper, 5353, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		watch[h.Name] = out
	}
	return watch
}

// checkOPPConnection sends four queries from the client's port 41054 to
// addr, a uoa: opp service: the first three carry the option in DPVS's
// option protocol header (the server's watcher sees each, naming the
// client, client's address) and go unanswered by a server without the
// uoa module; the fourth goes plain and is answered.
func checkOPPConnection(t *testing.T, e *natEnv, watch map[string]*harness.Buffer, addr, client string) {
	t.Helper()
	res, err := harness.UDPGetFromPort(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, addr, 41054, 4, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res[:3] {
		if r.Err == "" {
			t.Fatalf("opp query %d answered (%q): the server took an option protocol datagram", r.I, r.Body)
		}
	}
	last := res[3]
	if last.Err != "" {
		t.Fatalf("opp query 3: %s, want an answer (the connection's fourth datagram goes plain)", last.Err)
	}
	time.Sleep(200 * time.Millisecond)
	from := netip.AddrPortFrom(netip.MustParseAddr(client), 41054).String()
	if n := strings.Count(watch[last.Server()].String(), "uoa "+from+" from "+last.SeenClient()+" mode opp"); n != 3 {
		t.Fatalf("%s saw %d option protocol datagrams from %s, want 3:\n%s", last.Server(), n, from, watch[last.Server()].String())
	}
}
