package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// fullNATLocal are the local addresses of the FullNAT tests, on the real
// servers' segment (lbd answers ARP for them there).
var fullNATLocal = []string{"198.51.100.50", "198.51.100.51"}

// startFullNAT runs lbd on two workers (two-queue af_packet ports: the
// kernel spreads flows by its own hash, so lbd's steering does the work)
// with VIP:80 forwarded by FullNAT to every real server, whose default
// route is removed: they reach only their own segment, the local
// addresses included, never the client. The servers parse PROXY v2 when
// proxy is set.
func startFullNAT(t *testing.T, proxy bool) *natEnv {
	o := natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) { noDefaultRoute(t, tp, nat.Servers) },
		configure: func(c *harness.Config) {
			twoWorkers(c)
			toFullNAT(&c.Services[0], proxy)
		},
	}
	if proxy {
		o.serveArgs = []string{"-proxy-protocol"}
	}
	return startNATWith(t, o)
}

// noDefaultRoute removes the hosts' default routes: they reach only their
// own segment.
func noDefaultRoute(t *testing.T, tp *topo.Topo, hosts []topo.Host) {
	t.Helper()
	for _, h := range hosts {
		if _, err := tp.Exec(h.NS, "ip", "route", "del", "default"); err != nil {
			t.Fatalf("%s: %v", h.NS, err)
		}
	}
}

// toFullNAT makes a service forward by FullNAT to all its servers from
// fullNATLocal, with the PROXY v2 header or not.
func toFullNAT(s *harness.Service, proxy bool) {
	s.LocalAddresses, s.ProxyProtocol = fullNATLocal, proxy
	for i := range s.Servers {
		s.Servers[i].Forward = "fullnat"
	}
}

// TestFullNATProxyV2TwoWorkers: 200 connections through VS/FullNAT on two
// workers; every one is answered, the servers (no route to the client)
// report the client's own address and port from the PROXY v2 header,
// both workers own connections, and replies to a local port reach the
// worker that owns it.
func TestFullNATProxyV2TwoWorkers(t *testing.T) {
	e := startFullNAT(t, true)
	for _, h := range e.nat.Servers {
		if out, _ := e.topo.Exec(h.NS, "ip", "route", "show", "default"); strings.TrimSpace(out) != "" {
			t.Fatalf("%s still has a default route: %s", h.Name, out)
		}
	}
	e.warmUp(t)
	client := e.nat.Client.Addr.Addr().String()
	perServer := map[string]int{}
	for _, r := range e.get(t, e.url, 200, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
		seen, err := net.ResolveTCPAddr("tcp4", r.SeenClient())
		if err != nil {
			t.Fatalf("request %d: body %q", r.I, r.Body)
		}
		local, _ := net.ResolveTCPAddr("tcp4", r.Local)
		if seen.IP.String() != client || local == nil || seen.Port != local.Port {
			t.Fatalf("request %d: the server saw %s, the client was %s", r.I, r.SeenClient(), r.Local)
		}
		perServer[r.Server()]++
	}
	if perServer["rs1"] == 0 || perServer["rs2"] == 0 {
		t.Errorf("answers per server %v: want both", perServer)
	}
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Lcores) != 2 {
		t.Fatalf("lbctl lists %d lcores, want 2", len(resp.Lcores))
	}
	var handed uint64
	for _, l := range resp.Lcores {
		if l.Connections == 0 {
			t.Errorf("lcore %d owns no connection: %+v", l.ID, l)
		}
		if n := l.DropsByReason["no_local_port"]; n != 0 {
			t.Errorf("lcore %d: %d no_local_port drops", l.ID, n)
		}
		handed += l.HandedOff
	}
	if handed == 0 {
		t.Error("no packet was handed to its owner: the test did not exercise reply steering")
	}
	conns, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if !strings.Contains(conns, " from "+fullNATLocal[0]+":") || !strings.Contains(conns, " from "+fullNATLocal[1]+":") {
		t.Errorf("lbctl -L -n -c does not show connections from both local addresses:\n%s", harness.Tail(conns, 10))
	}
	out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if !strings.Contains(out, "FullNat") {
		t.Errorf("lbctl -L -n does not name the method FullNat:\n%s", out)
	}
	t.Logf("lbctl -L -n:\n%s", out)

	// The pool by lbctl: a removed local address drains while the
	// connections just made (in TIME_WAIT here) still hold its ports.
	vip := e.nat.VIP.String() + ":80"
	if _, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "--add-laddr", "-t", vip, "-z", "10.9.9.9"); err == nil ||
		!strings.Contains(err.Error(), "-z: 10.9.9.9 is not on any server-facing port's subnet") {
		t.Errorf("--add-laddr of an address off the servers' subnets: %v", err)
	}
	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "--del-laddr", "-t", vip, "-z", fullNATLocal[1]); err != nil {
		t.Fatalf("--del-laddr: %v: %s", err, out)
	}
	got, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "--get-laddr", "-t", vip)
	t.Logf("lbctl --get-laddr after --del-laddr %s:\n%s", fullNATLocal[1], got)
	if !strings.Contains(got, fullNATLocal[0]+"\n") || !strings.Contains(got, fullNATLocal[1]+" (draining)") {
		t.Errorf("--get-laddr does not show %s in use and %s draining:\n%s", fullNATLocal[0], fullNATLocal[1], got)
	}
	for _, r := range e.get(t, e.url, 10, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("request after --del-laddr: %s", r.Err)
		}
	}
	conns, _ = harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if !strings.Contains(conns, " from "+fullNATLocal[0]+":") {
		t.Errorf("no connection from %s after the other was removed:\n%s", fullNATLocal[0], harness.Tail(conns, 10))
	}
	e.stopLBD(t)
}

// TestFullNATPlain: without the PROXY header the servers see a local
// address as their peer, and still answer through lbd.
func TestFullNATPlain(t *testing.T) {
	e := startFullNAT(t, false)
	e.warmUp(t)
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
		host, _, _ := net.SplitHostPort(r.SeenClient())
		if host != fullNATLocal[0] && host != fullNATLocal[1] {
			t.Fatalf("request %d: the server saw %s, want a local address", r.I, r.SeenClient())
		}
	}
	e.stopLBD(t)
}

// TestFullNATTOA: with toa, every connection the servers take through
// FullNAT comes from a local address, and the segment completing its
// handshake there carries DPVS's TCP option address naming the client's
// address and port, as a server's toa kernel module reads it (watched on
// the servers' interfaces by nshelper toa, from an AF_PACKET copy): the
// client's ACK, or behind the SYN proxy the ACK lbd completes the
// server's handshake with.
func TestFullNATTOA(t *testing.T) {
	for _, synproxy := range []bool{false, true} {
		name := "plain"
		if synproxy {
			name = "synproxy"
		}
		t.Run(name, func(t *testing.T) { fullNATTOA(t, synproxy) })
	}
}

func fullNATTOA(t *testing.T, synproxy bool) {
	var watch map[string]*harness.Buffer
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			noDefaultRoute(t, tp, nat.Servers)
			watch = watchTOA(t, tp, nat.Servers)
		},
		configure: func(c *harness.Config) {
			twoWorkers(c)
			toFullNAT(&c.Services[0], false)
			c.Services[0].TOA, c.Services[0].SynProxy = true, synproxy
		},
	})
	e.warmUp(t)
	results := e.get(t, e.url, 10, 5*time.Second)
	for _, r := range results {
		if host, _, _ := net.SplitHostPort(r.SeenClient()); host != fullNATLocal[0] && host != fullNATLocal[1] {
			t.Fatalf("request %d: the server saw %s, want a local address", r.I, r.SeenClient())
		}
	}
	checkTOA(t, results, watch)
	body := e.scrapeMetrics(t)
	if n := lcoreSum(body, "dplb_lcore_events_total", "counter", "toa_options"); n < float64(len(results)) {
		t.Errorf("dplb_lcore_events_total{counter=\"toa_options\"} is %v, want at least one per connection (%d)", n, len(results))
	}
	e.stopLBD(t)
}

// watchTOA starts "nshelper toa" on each server's interface for port
// 8080 and returns their outputs by server name.
func watchTOA(t *testing.T, tp *topo.Topo, servers []topo.Host) map[string]*harness.Buffer {
	t.Helper()
	_, _, nshelper := binaries(t)
	watch := map[string]*harness.Buffer{}
	for _, h := range servers {
		out, err := harness.StartTOAWatch(tp, h, nshelper, 8080, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		watch[h.Name] = out
	}
	return watch
}

// checkTOA checks that each request succeeded and that the server that
// answered it saw its handshake completed by a bare ACK from the address
// it answered (the local one) carrying the option address of the
// request's client.
func checkTOA(t *testing.T, results []harness.Result, watch map[string]*harness.Buffer) {
	t.Helper()
	time.Sleep(200 * time.Millisecond) // the watchers' last lines
	for _, r := range results {
		if r.Err != "" || r.Status != 200 {
			t.Fatalf("request %d: status %d %s", r.I, r.Status, r.Err)
		}
		out := watch[r.Server()]
		if out == nil {
			t.Fatalf("request %d answered by %q", r.I, r.Server())
		}
		if want := "toa " + r.Local + " from " + r.SeenClient() + " flags 0x10"; !strings.Contains(out.String(), want) {
			t.Errorf("request %d: %s saw no handshake ACK with %q:\n%s", r.I, r.Server(), want, out.String())
		}
	}
}
