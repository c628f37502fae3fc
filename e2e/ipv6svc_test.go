package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// IPv6 addresses of the NAT topology's server link (unique local).
const (
	v6VIP  = "2001:db8:2::10" // on the client's link: the client solicits it
	v6LAN  = "fd00:1::1"
	v6Mgmt = "fd00:1::250" // the LB host's own address for health probes

	lip64Addr = "198.51.100.200" // NAT64's local address, on the servers' IPv4 subnet
	v6Sorry   = "fd00:1::99"     // a second address of rs2: the [VIP]:81 service's sorry server
)

func v6Server(i int) string { return "fd00:1::1" + string(rune('1'+i)) }

// withIPv6 gives the NAT topology IPv6: the client on lbd's wan link, the
// servers on its lan link with lbd as their default router, and the LB
// namespace's kernel a management link to the servers' bridge (health
// probes leave from the host, as in TestHealthCheckFailover). DAD is off:
// the addresses are usable at once.
func withIPv6(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
	t.Helper()
	six := v6Setup{t, tp}
	do, v6 := six.do, six.addr
	v6(nat.Client.NS, nat.Client.If, v6Client+"/64")
	for i, h := range nat.Servers {
		v6(h.NS, h.If, v6Server(i)+"/64")
		do(h.NS, "ip", "-6", "route", "add", "default", "via", v6LAN, "dev", h.If)
	}
	// The bridge floods the solicited-node groups to lbd's port (lbd
	// sends no MLD reports for the addresses it answers for).
	do(nat.SwitchNS, "ip", "link", "set", nat.Bridge, "type", "bridge", "mcast_snooping", "0")
	lb, sw := tp.IfName("mgm"), tp.IfName("mgs")
	if err := tp.Veth(nat.LBNS, lb, nat.SwitchNS, sw); err != nil {
		t.Fatal(err)
	}
	v6(nat.LBNS, lb, v6Mgmt+"/64")
	do(nat.LBNS, "ip", "link", "set", lb, "up")
	do(nat.SwitchNS, "ip", "link", "set", sw, "master", nat.Bridge, "up")
}

// TestIPv6NAT66 runs IPv6 services through VS/NAT (NAT66) on two
// workers: HTTP over TCP to [VIP]:80 and UDP queries to [VIP]:53, both
// round robin over two real servers with IPv6 addresses. The client
// finds the VIP by neighbour discovery (lbd answers for it), lbd finds the
// servers by solicitation; both servers take connections; the servers see
// the client's own address; a server whose service stops is taken out by
// its TCP health check (from the host, over IPv6) and put back when it
// returns; lbctl lists the service ipvsadm's way. A third service on the
// same VIP reaches the servers' IPv4 addresses by NAT64. A fourth,
// [VIP]:81, has rs1 alone, checked through lbd (IPv6 probes from lbd's
// own port), and a sorry server (another address of rs2, resolved by lbd
// only for it) that stands in while rs1 is down. A fifth, [VIP]:82, has
// both servers under an HTTP check through lbd.
func TestIPv6NAT66(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			rs2 := nat.Servers[1]
			v6Setup{t, tp}.addr(rs2.NS, rs2.If, v6Sorry+"/64")
		},
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
			tcp := harness.Service{VIP: v6VIP, Port: 80, Scheduler: "rr",
				Health: "{type: tcp, interval: 200ms, timeout: 150ms, rise: 2, fall: 2}"}
			udp := harness.Service{Protocol: "udp", VIP: v6VIP, Port: 53, Scheduler: "rr"}
			for i := range 2 {
				tcp.Servers = append(tcp.Servers, harness.Server{Address: v6Server(i), Port: 8080, Weight: 1})
				udp.Servers = append(udp.Servers, harness.Server{Address: v6Server(i), Port: 5353, Weight: 1})
			}
			// NAT64: the same VIP's port 8064 to the servers' IPv4
			// addresses, from a local address of the servers' subnet.
			nat64 := harness.Service{VIP: v6VIP, Port: 8064, Scheduler: "rr", LocalAddresses: []string{lip64Addr}}
			for _, h := range c.Services[0].Servers {
				nat64.Servers = append(nat64.Servers, harness.Server{Address: h.Address, Port: 8080, Weight: 1, Forward: "fullnat"})
			}
			// Checked through lbd: SYNs from its lan port's IPv6 address.
			sorry := harness.Service{VIP: v6VIP, Port: 81, Scheduler: "rr",
				Health:  "{type: tcp, via: lbd, interval: 200ms, timeout: 150ms, rise: 2, fall: 2}",
				Servers: tcp.Servers[:1], SorryServer: "[" + v6Sorry + "]:8080"}
			// HTTP checked through lbd: a request over IPv6 from its port.
			httpCheck := harness.Service{VIP: v6VIP, Port: 82, Scheduler: "rr",
				Health:  "{type: http, via: lbd, path: /, interval: 200ms, timeout: 150ms, rise: 2, fall: 2}",
				Servers: tcp.Servers}
			c.Services = append(c.Services, tcp, udp, nat64, sorry, httpCheck)
		},
	})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "[::]:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	pingV6(t, e, v6VIP) // lbd answers echo to a VIP as IPVS's host does
	url := "http://[" + v6VIP + "]/"
	e.warmUpURL(t, url)
	got := map[string]int{}
	for _, r := range e.get(t, url, 40, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("request %d: status %d %s", r.I, r.Status, r.Err)
		}
		if !strings.Contains(r.Body, v6Client) {
			t.Errorf("request %d: the server did not see the client's address %s: %q", r.I, v6Client, r.Body)
		}
		got[r.Server()]++
	}
	if got["rs1"] == 0 || got["rs2"] == 0 {
		t.Errorf("TCP spread %v, want both servers", got)
	}

	res, err := harness.UDPGet(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, "["+v6VIP+"]:53", "", 40, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	udp := map[string]int{}
	for _, r := range res {
		if r.Err != "" {
			t.Errorf("UDP query %d: %s", r.I, r.Err)
			continue
		}
		if ap, err := netip.ParseAddrPort(r.Remote); err != nil || ap.Addr().String() != v6VIP || ap.Port() != 53 {
			t.Errorf("UDP answer %d from %s, want [%s]:53", r.I, r.Remote, v6VIP)
		}
		udp[r.Server()]++
	}
	if udp["rs1"] == 0 || udp["rs2"] == 0 {
		t.Errorf("UDP spread %v, want both servers", udp)
	}

	// NAT64: the IPv4 servers see the local address, the client gets
	// the answers from [VIP]:8064.
	nat64 := map[string]int{}
	for _, r := range e.get(t, "http://["+v6VIP+"]:8064/", 20, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("NAT64 request %d: status %d %s", r.I, r.Status, r.Err)
		}
		if !strings.Contains(r.Body, lip64Addr+":") {
			t.Errorf("NAT64 request %d: the server did not see the local address %s: %q", r.I, lip64Addr, r.Body)
		}
		nat64[r.Server()]++
	}
	if nat64["rs1"] == 0 || nat64["rs2"] == 0 {
		t.Errorf("NAT64 spread %v, want both servers", nat64)
	}
	// A blocklist over IPv6 (lbctl, DPVS's --add-blklst): the client's
	// /64 gets no new NAT64 connection, and again once it is removed.
	svc64 := "[" + v6VIP + "]:8064"
	client64 := netip.PrefixFrom(netip.MustParseAddr(v6Client), 64).Masked().String()
	if _, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "--add-blklst", "-t", svc64, "-k", client64); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.get(t, "http://"+svc64+"/", 2, time.Second) {
		if r.Err == "" {
			t.Fatalf("request %d from a blocked IPv6 client was answered by %s", r.I, r.Server())
		}
	}
	if n := e.drops(t, "client_blocked"); n == 0 {
		t.Error("no client_blocked drop counted for the IPv6 client")
	}
	if _, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "--del-blklst", "-t", svc64, "-k", client64); err != nil {
		t.Fatal(err)
	}
	for _, r := range e.get(t, "http://"+svc64+"/", 4, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("once unblocked, NAT64 request %d: status %d %s", r.I, r.Status, r.Err)
		}
	}

	list, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TCP  [" + v6VIP + "]:80 rr", "UDP  [" + v6VIP + "]:53 rr", "-> [" + v6Server(0) + "]:8080"} {
		if !strings.Contains(list, want) {
			t.Errorf("lbctl -L -n lacks %q:\n%s", want, list)
		}
	}
	tr, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "trace", "-t", "["+v6VIP+"]:80", "--client", "["+v6Client+"]:40000")
	if err != nil || !strings.Contains(tr, "[fd00:1::1") {
		t.Errorf("lbctl trace of an IPv6 flow names no server: %v\n%s", err, tr)
	}
	conns, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if !strings.Contains(conns, "["+v6Client+"]") {
		t.Errorf("lbctl -L -n -c lists no IPv6 connection of the client:\n%s", conns)
	}

	// rs1's HTTP server dies: its health check takes it out, every request
	// goes to rs2; back, it takes connections again.
	rs1 := e.nat.Servers[0]
	waitHealth6(t, e, 80, v6Server(0), "up")
	// [VIP]:82's check reads rs1's HTTP answers through lbd.
	waitHealth6(t, e, 82, v6Server(0), "up")
	killServe(t, rs1.NS) // the UDP server too: its command line says udpserve
	waitHealth6(t, e, 80, v6Server(0), "down")
	waitHealth6(t, e, 82, v6Server(0), "down")
	if reason := healthReason6(t, e, 82, v6Server(0)); !strings.Contains(reason, "through lbd") {
		t.Errorf("[VIP]:82's HTTP check of rs1 failed with %q, want a probe through lbd", reason)
	}
	if h := server6(t, e, 82, v6Server(1)); h == nil || h.Health != "up" {
		t.Errorf("[VIP]:82's HTTP check through lbd of the live rs2: %+v", h)
	}
	for _, r := range e.get(t, url, 20, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs2" {
			t.Fatalf("with rs1 down, request %d: %q %s", r.I, r.Server(), r.Err)
		}
	}
	// [VIP]:81 has no server left: its sorry server (rs2's second
	// address, by NAT66) takes the connections.
	url81 := "http://[" + v6VIP + "]:81/"
	waitSorry6(t, e, 81, true)
	if reason := healthReason6(t, e, 81, v6Server(0)); !strings.Contains(reason, "through lbd") {
		t.Errorf("[VIP]:81's check of rs1 failed with %q, want a probe through lbd", reason)
	}
	for _, r := range e.get(t, url81, 10, 5*time.Second) {
		if r.Err != "" || r.Status != 200 || r.Server() != "rs2" {
			t.Fatalf("with rs1 down, request %d to [VIP]:81: %q status %d %s, want the sorry server on rs2", r.I, r.Server(), r.Status, r.Err)
		}
		if !strings.Contains(r.Body, v6Client) {
			t.Errorf("request %d to [VIP]:81: the sorry server did not see the client's address %s: %q", r.I, v6Client, r.Body)
		}
	}
	if list, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-t", "["+v6VIP+"]:81"); err != nil ||
		!strings.Contains(list, "-> ["+v6Sorry+"]:8080") {
		t.Errorf("lbctl lists no sorry server [%s]:8080 for [VIP]:81: %v\n%s", v6Sorry, err, list)
	}
	if err := harness.StartHTTP(e.topo, []topo.Host{rs1}, e.nshelper, "[::]:8080", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth6(t, e, 80, v6Server(0), "up")
	waitHealth6(t, e, 82, v6Server(0), "up")
	back := map[string]int{}
	for _, r := range e.get(t, url, 20, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("after recovery, request %d: %s", r.I, r.Err)
		}
		back[r.Server()]++
	}
	if back["rs1"] == 0 {
		t.Errorf("rs1 got no connection after recovering: %v", back)
	}
	waitSorry6(t, e, 81, false) // rs1 back: the sorry server steps down
	for _, r := range e.get(t, url81, 5, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs1" {
			t.Fatalf("after recovery, request %d to [VIP]:81: %q %s, want rs1", r.I, r.Server(), r.Err)
		}
	}
	body := e.scrapeMetrics(t)
	service, server := "tcp/["+v6VIP+"]:80", "["+v6Server(0)+"]:8080"
	if v, ok := metric(body, "dplb_health_state_changes_total", map[string]string{"service": service, "server": server, "to": "down"}); !ok || v < 1 {
		t.Errorf("metrics: state changes of %s %s to down = %v (found %v), want at least 1", service, server, v, ok)
	}
	e.stopLBD(t)
}

// waitHealth6 waits for an IPv6 server of the [VIP]:port service to
// reach a health state.
func waitHealth6(t *testing.T, e *natEnv, port uint16, addr, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, reason := "", ""
		if rs := server6(t, e, port, addr); rs != nil {
			h, reason = rs.Health, rs.HealthReason
		}
		if h == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %q (%s), want %q", addr, h, reason, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitSorry6 waits until the [VIP]:port service's sorry server stands in
// (or, with standing false, does not), as lbctl lists it.
func waitSorry6(t *testing.T, e *natEnv, port uint16, standing bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		rs := server6(t, e, port, v6Sorry)
		if got := rs != nil && rs.Health == "sorry"; got == standing {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("[%s]:%d: the sorry server standing in is not %v: %+v", v6VIP, port, standing, rs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// healthReason6 is the reason lbctl gives for the [VIP]:port service's
// server addr:8080's health.
func healthReason6(t *testing.T, e *natEnv, port uint16, addr string) string {
	t.Helper()
	if rs := server6(t, e, port, addr); rs != nil {
		return rs.HealthReason
	}
	return ""
}

// server6 is server addr:8080 of the [VIP]:port service as lbctl lists
// it, nil when it is not listed.
func server6(t *testing.T, e *natEnv, port uint16, addr string) *api.RealServer {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if svc := findService(resp, v6VIP, port); svc != nil {
		return findServer(svc, addr, 8080)
	}
	return nil
}

// TestNAT64ProxyV2: an IPv6 service whose IPv4 servers (NAT64) read PROXY
// v2: every connection's first bytes name the IPv6 client, so the
// servers, which see only the local address, report the client's own
// address and port.
func TestNAT64ProxyV2(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen:    map[string]string{"rs1": "0.0.0.0:8080", "rs2": "0.0.0.0:8080"},
		serveArgs: []string{"-proxy-protocol"},
		setup:     withIPv6,
		configure: func(c *harness.Config) { nat64Only(c, func(s *harness.Service) { s.ProxyProtocol = true }) },
	})
	url := e.warmUpNAT64(t)
	perServer := map[string]int{}
	for _, r := range e.get(t, url, 20, 5*time.Second) {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("request %d: status %d %s", r.I, r.Status, r.Err)
		}
		seen, err := netip.ParseAddrPort(r.SeenClient())
		local, lerr := netip.ParseAddrPort(r.Local)
		if err != nil || lerr != nil || seen.Addr().String() != v6Client || seen.Port() != local.Port() {
			t.Fatalf("request %d: the server saw %q, the client was %s", r.I, r.SeenClient(), r.Local)
		}
		perServer[r.Server()]++
	}
	if perServer["rs1"] == 0 || perServer["rs2"] == 0 {
		t.Errorf("answers per server %v: want both", perServer)
	}
	e.stopLBD(t)
}

// TestNAT64TOA: an IPv6 service's NAT64 servers with toa see each
// connection come from the local address, and the segment completing its
// handshake carries DPVS's 20-byte TCP option address naming the IPv6
// client's address and port (watched on the servers' interfaces).
func TestNAT64TOA(t *testing.T) {
	var watch map[string]*harness.Buffer
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "0.0.0.0:8080", "rs2": "0.0.0.0:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			watch = watchTOA(t, tp, nat.Servers)
		},
		configure: func(c *harness.Config) { nat64Only(c, func(s *harness.Service) { s.TOA = true }) },
	})
	checkTOA(t, e.get(t, e.warmUpNAT64(t), 10, 5*time.Second), watch)
	e.stopLBD(t)
}

// nat64Only replaces the services with the NAT64 one, [v6VIP]:8064 to
// the servers' port 8080 by fullnat from lip64Addr, as edit leaves it.
func nat64Only(c *harness.Config, edit func(*harness.Service)) {
	c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
	nat64 := harness.Service{VIP: v6VIP, Port: 8064, Scheduler: "rr", LocalAddresses: []string{lip64Addr}}
	for _, h := range c.Services[0].Servers {
		nat64.Servers = append(nat64.Servers, harness.Server{Address: h.Address, Port: 8080, Weight: 1, Forward: "fullnat"})
	}
	edit(&nat64)
	c.Services = []harness.Service{nat64}
}

// warmUpNAT64 waits for the NAT64 service to answer (its first request
// may wait for neighbour discovery) and returns its URL.
func (e *natEnv) warmUpNAT64(t *testing.T) string {
	t.Helper()
	url := "http://[" + v6VIP + "]:8064/"
	for i := 0; i < 10; i++ {
		if r := e.get(t, url, 1, 3*time.Second)[0]; r.Err == "" {
			break
		}
	}
	return url
}
