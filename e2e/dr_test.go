package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// lbEnv is a running lbd between a client and real servers, in any of the
// topologies (VS/NAT, VS/DR, VS/TUN).
type lbEnv struct {
	ctx      context.Context
	topo     *topo.Topo
	client   topo.Host
	servers  []topo.Host
	lbNS     string
	vip      string
	lbd      *harness.LBD
	lbctl    string
	nshelper string
	decaps   []*harness.Decap // VS/TUN: one per server
}

// newEnv prepares the context, the binaries and an empty topology that
// is torn down at the end of the test.
func newEnv(t *testing.T) (*lbEnv, string) {
	t.Helper()
	_, lbctl, nshelper := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	tp := topo.New(t)
	t.Cleanup(tp.Teardown)
	return &lbEnv{ctx: ctx, topo: tp, lbctl: lbctl, nshelper: nshelper}, t.TempDir()
}

// buildLVS builds VS/DR's topology (tunnel false) or VS/TUN's with two
// real servers and points e at its client, servers, LB namespace and VIP.
func (e *lbEnv) buildLVS(t *testing.T, tunnel bool) *topo.LVS {
	t.Helper()
	build := topo.BuildDR
	if tunnel {
		build = topo.BuildTUN
	}
	l, err := build(e.topo, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS, e.vip = l.Client, l.Servers, l.LBNS, l.VIP.String()
	return l
}

// startLBD starts lbd with cfg in the LB namespace and waits until it
// answers lbctl. The test is skipped if lbd refuses the configuration
// because the dataplane does not support a feature yet.
func (e *lbEnv) startLBD(t *testing.T, cfg harness.Config, dir string) {
	t.Helper()
	lbdPath, _, _ := binaries(t)
	cfg.LogFormat = "json"
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", cfg.FilePrefix)) })
	lbd, err := harness.StartLBD(e.ctx, e.topo, e.lbNS, lbdPath, e.lbctl, cfg, dir, 30*time.Second)
	if lbd != nil {
		e.lbd = lbd
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("lbd configuration:\n%s", cfg.YAML())
				t.Logf("lbd log (last 80 lines):\n%s", harness.Tail(lbd.Log.String(), 80))
			}
		})
	}
	if errors.Is(err, harness.ErrNotSupported) {
		t.Skipf("lbd refuses this configuration: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// startLVS builds the VS/DR (tunnel false) or VS/TUN topology with two
// real servers serving proto ("tcp": HTTP, "udp": udpserve) on port,
// starts the decapsulators for TUN, and lbd with one service proto
// VIP:port round robin over both servers.
func startLVS(t *testing.T, tunnel bool, proto string, port int) *lbEnv {
	t.Helper()
	e, dir := newEnv(t)
	l := e.buildLVS(t, tunnel)
	if tunnel {
		for _, h := range l.Servers {
			d, err := harness.StartDecap(e.topo, h, e.nshelper, e.vip, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			e.decaps = append(e.decaps, d)
		}
	}
	e.startServers(t, proto, ":"+strconv.Itoa(port))
	e.startLBD(t, harness.LVSConfig(l, e.topo.Suffix(), dir, proto, port), dir)
	return e
}

func (e *lbEnv) startServers(t *testing.T, proto, listen string) {
	t.Helper()
	var err error
	if proto == "udp" {
		_, err = harness.StartUDP(e.topo, e.servers, e.nshelper, listen, false, 10*time.Second)
	} else {
		err = harness.StartHTTP(e.topo, e.servers, e.nshelper, listen, 10*time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// round sends n requests (proto "tcp": HTTP GETs, "udp": queries) from the
// client to VIP:port after a warm-up of single requests until two in a
// row succeed (ARP resolved everywhere). Every counted request must
// succeed, be answered from VIP:port by a real server that saw the
// client's own address and port, and the servers must share the requests
// evenly (round robin). It returns the connections per server that the
// answers prove, warm-up included, and the number of failed warm-ups
// (each of which may or may not have created one). For TCP that is one
// per answer. For UDP it is one per distinct client address:port: the
// kernel may hand a closed socket's port to a later query, whose datagram
// then belongs to the same UDP connection on the LB.
func (e *lbEnv) round(t *testing.T, proto string, port, n int) (map[string]uint64, uint64) {
	t.Helper()
	vipPort := net.JoinHostPort(e.vip, strconv.Itoa(port))
	send := func(n int, timeout time.Duration) []harness.Result {
		t.Helper()
		var res []harness.Result
		var err error
		if proto == "udp" {
			res, err = harness.UDPGet(e.ctx, e.topo, e.client.NS, e.nshelper, vipPort, "", n, timeout)
		} else {
			res, err = harness.Get(e.ctx, e.topo, e.client.NS, e.nshelper, "http://"+vipPort+"/", n, timeout)
		}
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	answers := map[string]uint64{}
	seen := map[string]bool{} // UDP: client addresses already answered
	count := func(r harness.Result) {
		if proto == "udp" {
			if seen[r.Local] {
				return
			}
			seen[r.Local] = true
		}
		answers[r.Server()]++
	}
	var failedWarm uint64
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		r := send(1, 3*time.Second)[0]
		if r.Err == "" {
			ok++
			count(r)
		} else {
			ok = 0
			failedWarm++
			t.Logf("warm-up %d to %s/%s failed (allowed): %s", i, vipPort, proto, r.Err)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive requests to %s/%s succeeded", vipPort, proto)
	}

	res := send(n, 5*time.Second)
	perServer := map[string]int{}
	failures := 0
	for _, r := range res {
		if r.Err != "" {
			failures++
			if failures <= 5 {
				t.Errorf("request %d failed: %s", r.I, r.Err)
			}
			continue
		}
		perServer[r.Server()]++
		count(r)
		if r.Remote != vipPort {
			t.Errorf("request %d: answered from %s, want %s", r.I, r.Remote, vipPort)
		}
		if r.SeenClient() != r.Local {
			t.Errorf("request %d: server %s saw client %q, the client's end is %s", r.I, r.Server(), r.SeenClient(), r.Local)
		}
	}
	if failures > 0 {
		t.Fatalf("%d of %d %s requests to %s failed", failures, n, proto, vipPort)
	}
	t.Logf("answers per server (of %d): %v", n, perServer)
	for _, h := range e.servers {
		if got, want := perServer[h.Name], n/len(e.servers); got < want-2 || got > want+2 {
			t.Errorf("%s answered %d of %d requests, want %d±2 (round robin)", h.Name, got, n, want)
		}
	}
	if len(perServer) != len(e.servers) {
		t.Errorf("answers came from %v, want only the %d real servers", perServer, len(e.servers))
	}
	return answers, failedWarm
}

// findSvc finds proto VIP:port in lbctl's answer.
func findSvc(resp api.Response, proto, vip string, port int) *api.Service {
	for i := range resp.Services {
		s := &resp.Services[i]
		if strings.EqualFold(s.Protocol, proto) && s.VIP == vip && int(s.Port) == port {
			return s
		}
	}
	return nil
}

// pollStats asks lbctl until check finds no problem or 5 seconds pass
// (counters reach the control plane late), and reports the problems left.
func (e *lbEnv) pollStats(t *testing.T, check func(api.Response) []string) api.Response {
	t.Helper()
	var resp api.Response
	var problems []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		var err error
		if resp, err = harness.LBCtlJSON(e.ctx, e.lbctl, e.lbd.Config.Socket); err != nil {
			t.Fatal(err)
		}
		if problems = check(resp); len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.lbd.Config.Socket, "-L", "-n", "--stats"); err == nil {
		t.Logf("lbctl -L -n --stats:\n%s", out)
	}
	return resp
}

// serverStats checks the service's real servers: forwarded by forward,
// the connections round proved (up to slack more for failed warm-ups),
// packets in, and packets out only if outPkts (NAT: replies pass through
// the LB; DR and TUN: they must not).
func (e *lbEnv) serverStats(resp api.Response, proto string, port, rsPort int, forward string, answers map[string]uint64, slack uint64, outPkts bool) []string {
	svc := findSvc(resp, proto, e.vip, port)
	if svc == nil {
		return []string{fmt.Sprintf("lbctl lists no %s %s:%d: %+v", proto, e.vip, port, resp.Services)}
	}
	var p []string
	var sum uint64
	for _, h := range e.servers {
		addr := h.Addr.Addr().String()
		var rs *api.RealServer
		for i := range svc.Servers {
			if svc.Servers[i].Address == addr && int(svc.Servers[i].Port) == rsPort {
				rs = &svc.Servers[i]
			}
		}
		if rs == nil {
			p = append(p, fmt.Sprintf("lbctl lists no real server %s:%d under %s:%d", addr, rsPort, e.vip, port))
			continue
		}
		sum += rs.Stats.Conns
		if want := answers[h.Name]; rs.Stats.Conns < want || rs.Stats.Conns > want+slack {
			p = append(p, fmt.Sprintf("%s: Stats.Conns=%d, want %d..%d (proved by answers, plus failed warm-ups)", h.Name, rs.Stats.Conns, want, want+slack))
		}
		if rs.Forward != forward {
			p = append(p, fmt.Sprintf("%s: Forward=%q, want %q", h.Name, rs.Forward, forward))
		}
		if rs.Stats.InPkts == 0 {
			p = append(p, fmt.Sprintf("%s: InPkts=0, want > 0", h.Name))
		}
		switch {
		case outPkts && rs.Stats.OutPkts == 0:
			p = append(p, fmt.Sprintf("%s: OutPkts=0, want > 0 (replies pass through the LB)", h.Name))
		case !outPkts && rs.Stats.OutPkts != 0:
			p = append(p, fmt.Sprintf("%s: OutPkts=%d, want 0 (replies must bypass the LB)", h.Name, rs.Stats.OutPkts))
		}
	}
	if svc.Stats.Conns != sum {
		p = append(p, fmt.Sprintf("service Stats.Conns=%d, want the sum over its servers %d", svc.Stats.Conns, sum))
	}
	return p
}

// scrape reads lbd's /metrics from inside the LB namespace.
func (e *lbEnv) scrape(t *testing.T) string {
	t.Helper()
	url := "http://" + e.lbd.Config.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.topo, e.lbNS, e.nshelper, url, 1, 3*time.Second)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	if res[0].Err != "" {
		t.Fatalf("metrics: %s: %s", url, res[0].Err)
	}
	return res[0].Body
}

// oneWay checks that lbd's single port transmitted only what it received
// for the real servers: its TX count is at most the servers' InPkts plus
// a few ARP packets, far below what the replies would add.
func (e *lbEnv) oneWay(t *testing.T, resp api.Response, proto string, port int) {
	t.Helper()
	svc := findSvc(resp, proto, e.vip, port)
	if svc == nil {
		t.Fatalf("lbctl lists no %s %s:%d", proto, e.vip, port)
	}
	var in uint64
	for _, rs := range svc.Servers {
		in += rs.Stats.InPkts
	}
	body := e.scrape(t)
	labels := func(dir string) map[string]string { return map[string]string{"port": harness.LVSPortName, "dir": dir} }
	tx, okTX := metric(body, "dplb_port_packets_total", labels("tx"))
	rx, okRX := metric(body, "dplb_port_packets_total", labels("rx"))
	if !okTX || !okRX {
		t.Fatalf("/metrics has no dplb_port_packets_total for port %s", harness.LVSPortName)
	}
	t.Logf("port %s: rx %v tx %v packets; the servers' InPkts %d", harness.LVSPortName, rx, tx, in)
	const arpSlack = 50
	if uint64(tx) > in+arpSlack {
		t.Errorf("port %s sent %v packets, want at most the %d forwarded to the servers + %d: replies went through the LB", harness.LVSPortName, tx, in, arpSlack)
	}
	if uint64(rx) < in {
		t.Errorf("port %s received %v packets, fewer than the %d forwarded", harness.LVSPortName, rx, in)
	}
}

// stop stops lbd: exit status 0, no mbuf leaked.
func (e *lbEnv) stop(t *testing.T) {
	t.Helper()
	if err := e.lbd.Stop(10 * time.Second); err != nil {
		t.Error(err)
	}
}

// TestDR: 200 HTTP requests through VS/DR. Every request succeeds, both
// servers answer half, and the replies bypass the LB: the servers' OutPkts
// stay 0 and the LB's port sends no more than it forwards.
func TestDR(t *testing.T) {
	e := startLVS(t, false, "tcp", 80)
	answers, failed := e.round(t, "tcp", 80, 200)
	resp := e.pollStats(t, func(r api.Response) []string {
		return e.serverStats(r, "tcp", 80, 80, "Route", answers, failed, false)
	})
	e.oneWay(t, resp, "tcp", 80)
	e.stop(t)
}

// TestDRUDP: 100 UDP queries through VS/DR, each from a new source port.
func TestDRUDP(t *testing.T) {
	e := startLVS(t, false, "udp", 53)
	answers, failed := e.round(t, "udp", 53, 100)
	resp := e.pollStats(t, func(r api.Response) []string {
		return e.serverStats(r, "udp", 53, 53, "Route", answers, failed, false)
	})
	e.oneWay(t, resp, "udp", 53)
	e.stop(t)
}

// TestDROnePacket: a UDP service with one-packet scheduling (ipvsadm
// --ops) behind VS/DR: 40 queries from one client socket (one source
// port, as a resolver's) are each scheduled, so rr spreads them evenly
// over both servers, which answer from the VIP; lbd keeps no connection
// for them and counts each as one. The same queries to the service
// without --ops (lbctl -E --no-ops) all follow the first one's server.
func TestDROnePacket(t *testing.T) {
	e, dir := newEnv(t)
	l := e.buildLVS(t, false)
	e.startServers(t, "udp", ":53")
	cfg := harness.LVSConfig(l, e.topo.Suffix(), dir, "udp", 53)
	cfg.Services[0].OnePacket = true
	e.startLBD(t, cfg, dir)
	addr := net.JoinHostPort(e.vip, "53")

	queries := func(port, n int) map[string]int {
		t.Helper()
		res, err := harness.UDPGetFromPort(e.ctx, e.topo, e.client.NS, e.nshelper, addr, port, n, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range res {
			if r.Err != "" {
				t.Fatalf("query %d from port %d: %s", r.I, port, r.Err)
			}
			if want := addr; r.Remote != want {
				t.Fatalf("query %d answered from %s, want the VIP %s", r.I, r.Remote, want)
			}
			got[r.Server()]++
		}
		return got
	}
	for i := 0; ; i++ { // warm-up: ARP on every side
		res, err := harness.UDPGetFromPort(e.ctx, e.topo, e.client.NS, e.nshelper, addr, 40052, 1, time.Second)
		if err == nil && len(res) == 1 && res[0].Err == "" {
			break
		}
		if i == 10 {
			t.Fatalf("warm-up: no answer (%v %v)", res, err)
		}
	}
	if got := queries(40053, 40); got["rs1"] != 20 || got["rs2"] != 20 {
		t.Fatalf("answers per server %v, want 20 and 20: every datagram scheduled on its own", got)
	}
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.lbd.Config.Socket, "-L", "-n", "-c")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, ":40053") {
		t.Errorf("a one-packet query left a connection:\n%s", out)
	}
	list, err := harness.LBCtl(e.ctx, e.lbctl, e.lbd.Config.Socket, "-L", "-n")
	if err != nil || !strings.Contains(list, "UDP  "+addr+" rr ops") {
		t.Errorf("lbctl -L -n (%v):\n%s", err, list)
	}

	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.lbd.Config.Socket, "-E", "-u", addr, "--no-ops"); err != nil {
		t.Fatalf("lbctl -E --no-ops: %v\n%s", err, out)
	}
	if got := queries(40054, 10); len(got) != 1 {
		t.Fatalf("without ops, one socket's queries went to %v: its connection should keep them on one server", got)
	}
	e.stop(t)
}
