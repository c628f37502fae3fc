package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// lip66Addr and lip66UDP are FNAT66's local addresses (the TCP and UDP
// services'), on the servers' IPv6 subnet.
const (
	lip66Addr = "fd00:1::200"
	lip66UDP  = "fd00:1::201"
)

// withIPv6FullNAT is withIPv6 with no route from the servers to the
// client's network: only FullNAT's local address, on their link, brings
// their answers back through lbd.
func withIPv6FullNAT(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
	withIPv6(t, tp, nat)
	for _, h := range nat.Servers {
		v6Setup{t, tp}.do(h.NS, "ip", "-6", "route", "del", "default")
	}
}

// fullNAT66Only replaces the services with [v6VIP]:8066 over TCP and
// [v6VIP]:53 over UDP to the servers' IPv6 addresses (ports 8080 and
// 5353) by fullnat from lip66Addr and lip66UDP, as edit leaves the TCP
// one.
func fullNAT66Only(c *harness.Config, edit func(*harness.Service)) {
	c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
	tcp := harness.Service{VIP: v6VIP, Port: 8066, Scheduler: "rr", LocalAddresses: []string{lip66Addr}}
	udp := harness.Service{Protocol: "udp", VIP: v6VIP, Port: 53, Scheduler: "rr", LocalAddresses: []string{lip66UDP}}
	for i := range 2 {
		tcp.Servers = append(tcp.Servers, harness.Server{Address: v6Server(i), Port: 8080, Weight: 1, Forward: "fullnat"})
		udp.Servers = append(udp.Servers, harness.Server{Address: v6Server(i), Port: 5353, Weight: 1, Forward: "fullnat"})
	}
	edit(&tcp)
	c.Services = []harness.Service{tcp, udp}
}

// TestFullNAT66 runs an IPv6 service to IPv6 servers by FullNAT (DPVS's
// FNAT66) on two workers: the servers have no route to the client, see
// every connection and datagram come from the local address (lbd answers
// their solicitations for it), and their answers reach the client from
// the VIP; both servers take connections; lbctl lists the connections
// with their local endpoint.
func TestFullNAT66(t *testing.T) {
	waitBound(t)
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup:  withIPv6FullNAT,
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			fullNAT66Only(c, func(*harness.Service) {})
		},
	})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "[::]:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	url := "http://[" + v6VIP + "]:8066/"
	e.warmUpURL(t, url)
	perServer := map[string]int{}
	for _, r := range e.get(t, url, 30, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("request %d: status %d %s", r.I, r.Status, r.Err)
		}
		seen, err := netip.ParseAddrPort(r.SeenClient())
		if err != nil || seen.Addr().String() != lip66Addr {
			t.Errorf("request %d: the server saw %q, want the local address %s", r.I, r.SeenClient(), lip66Addr)
		}
		if remote, err := netip.ParseAddrPort(r.Remote); err != nil || remote.Addr().String() != v6VIP || remote.Port() != 8066 {
			t.Errorf("request %d: answered from %s, want [%s]:8066", r.I, r.Remote, v6VIP)
		}
		perServer[r.Server()]++
	}
	if perServer["rs1"] == 0 || perServer["rs2"] == 0 {
		t.Errorf("TCP spread %v, want both servers", perServer)
	}
	res, err := harness.UDPGet(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, "["+v6VIP+"]:53", "", 20, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	udp := map[string]int{}
	for _, r := range res {
		if r.Err != "" {
			t.Fatalf("UDP query %d: %s", r.I, r.Err)
		}
		if ap, err := netip.ParseAddrPort(r.Remote); err != nil || ap.Addr().String() != v6VIP || ap.Port() != 53 {
			t.Errorf("UDP answer %d from %s, want [%s]:53", r.I, r.Remote, v6VIP)
		}
		udp[r.Server()]++
	}
	if udp["rs1"] == 0 || udp["rs2"] == 0 {
		t.Errorf("UDP spread %v, want both servers", udp)
	}
	// lbctl -c names each connection's local endpoint; no lcore ran out
	// of local ports.
	conns, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if err != nil || !strings.Contains(conns, " from ["+lip66Addr+"]:") {
		t.Errorf("lbctl -c lists no connection from %s: %v\n%s", lip66Addr, err, conns)
	}
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range resp.Lcores {
		if n := l.DropsByReason["no_local_port"]; n != 0 {
			t.Errorf("lcore %d: %d no_local_port drops", l.ID, n)
		}
	}
	e.stopLBD(t)
}

// TestFullNAT66ProxyV2: behind the SYN proxy, FNAT66 servers that read
// PROXY v2 report the client's own IPv6 address and port, though every
// connection comes to them from the local address (the proxy opens it
// over IPv6 from the local endpoint once the client proved its cookie).
func TestFullNAT66ProxyV2(t *testing.T) {
	waitBound(t)
	e := startNATWith(t, natOptions{
		listen:    map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		serveArgs: []string{"-proxy-protocol"},
		setup:     withIPv6FullNAT,
		configure: func(c *harness.Config) {
			fullNAT66Only(c, func(s *harness.Service) { s.ProxyProtocol, s.SynProxy = true, true })
		},
	})
	url := "http://[" + v6VIP + "]:8066/"
	e.warmUpURL(t, url)
	for _, r := range e.get(t, url, 10, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("request %d: status %d %s", r.I, r.Status, r.Err)
		}
		seen, err := netip.ParseAddrPort(r.SeenClient())
		local, lerr := netip.ParseAddrPort(r.Local)
		if err != nil || lerr != nil || seen.Addr().String() != v6Client || seen.Port() != local.Port() {
			t.Fatalf("request %d: the server saw %q, the client was %s", r.I, r.SeenClient(), r.Local)
		}
	}
	if valid := counterSum(e.scrapeMetrics(t), "syn_cookies_valid"); valid < 10 {
		t.Errorf("%v connections opened by a proven cookie, want the 10 requests' at least", valid)
	}
	e.stopLBD(t)
}

// TestFullNAT66TOA: FNAT66 servers with toa see each connection come from
// the local address, and the segment completing its handshake carries
// DPVS's 20-byte TCP option address naming the IPv6 client's address and
// port (watched on the servers' interfaces, over IPv6).
func TestFullNAT66TOA(t *testing.T) {
	waitBound(t)
	var watch map[string]*harness.Buffer
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6FullNAT(t, tp, nat)
			watch = watchTOA(t, tp, nat.Servers)
		},
		configure: func(c *harness.Config) { fullNAT66Only(c, func(s *harness.Service) { s.TOA = true }) },
	})
	url := "http://[" + v6VIP + "]:8066/"
	e.warmUpURL(t, url)
	checkTOA(t, e.get(t, url, 10, 5*time.Second), watch)
	e.stopLBD(t)
}

// TestFullNAT66UOA: an FNAT66 UDP service with uoa (opp): the first three
// datagrams of a connection reach its server with DPVS's option protocol
// header after the IPv6 header, naming the IPv6 client's address and
// port (watched on the servers' interfaces), and go unanswered by a
// server without the uoa module, whose kernel does not know protocol
// 248; the fourth is a plain datagram and is answered.
func TestFullNAT66UOA(t *testing.T) {
	waitBound(t)
	var watch map[string]*harness.Buffer
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6FullNAT(t, tp, nat)
			watch = watchUOA(t, tp, nat.Servers)
		},
		configure: func(c *harness.Config) {
			fullNAT66Only(c, func(*harness.Service) {})
			c.Services[1].UOA = "opp"
		},
	})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "[::]:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	addr := "[" + v6VIP + "]:53"
	// Each new client port's fourth datagram is the first answered: ask
	// from new ports until one is (lbd may still resolve the servers).
	for port, deadline := 41000, time.Now().Add(15*time.Second); ; port++ {
		res, err := harness.UDPGetFromPort(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, addr, port, 4, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res[3].Err == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fourth datagram answered: %s", res[3].Err)
		}
	}
	checkOPPConnection(t, e, watch, addr, v6Client)
	e.stopLBD(t)
}
