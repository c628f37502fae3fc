// Package e2e holds the end-to-end tests: a real lbd in a network
// namespace between a client namespace and real-server namespaces.
//
// The tests need root, iproute2 and ethtool (make test installs them). They
// run with --no-huge, so no hugepages are needed. DPLB_E2E_LBD=<path> uses
// that lbd binary instead of building cmd/lbd.
package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// bins holds the binaries built once per test binary.
var bins struct {
	once                 sync.Once
	dir                  string
	lbd, lbctl, nshelper string
	err                  error // why the tests fail, if they do
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	os.Exit(code)
}

// binaries skips the test unless it can run, and returns the paths of
// lbd, lbctl and nshelper.
func binaries(t *testing.T) (lbd, lbctl, nshelper string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test: needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "ethtool", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("end-to-end test: %s not found (run scripts/setup.sh)", tool)
		}
	}
	bins.once.Do(func() {
		root, err := harness.RepoRoot()
		if err != nil {
			bins.err = err
			return
		}
		if bins.dir, err = os.MkdirTemp("", "dplb-e2e-bin-"); err != nil {
			bins.err = err
			return
		}
		bins.lbd = filepath.Join(bins.dir, "lbd")
		bins.lbctl = filepath.Join(bins.dir, "lbctl")
		bins.nshelper = filepath.Join(bins.dir, "nshelper")
		if prebuilt := os.Getenv("DPLB_E2E_LBD"); prebuilt != "" {
			bins.lbd = prebuilt
		} else if err := harness.Build(root, "./cmd/lbd", bins.lbd); err != nil {
			bins.err = err
			return
		}
		if err := harness.Build(root, "./cmd/lbctl", bins.lbctl); err != nil {
			bins.err = err
			return
		}
		bins.err = harness.Build(root, "./e2e/nshelper", bins.nshelper)
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.lbd, bins.lbctl, bins.nshelper
}

// natEnv is a running lbd in a VS/NAT topology with two real servers.
type natEnv struct {
	ctx      context.Context
	topo     *topo.Topo
	nat      *topo.NAT
	cfg      harness.Config
	lbd      *topo.Proc
	log      *harness.Buffer // lbd's stderr
	lbctl    string
	nshelper string
	url      string // the VIP's port 80
	cfgPath  string // lbd's configuration file
	lbdPath  string
}

func startNAT(t *testing.T) *natEnv { return startNATWith(t, natOptions{}) }

// natOptions vary the VS/NAT environment.
type natOptions struct {
	listen    map[string]string                       // real server name -> nshelper listen addresses (default ":8080")
	setup     func(*testing.T, *topo.Topo, *topo.NAT) // adds to the topology before lbd starts
	configure func(*harness.Config)                   // edits lbd's configuration before it starts
	beforeUse func(*testing.T, *natEnv)               // runs once lbd is up, before the readiness check
	serveArgs []string                                // more arguments for the servers' "nshelper serve"
}

func startNATWith(t *testing.T, o natOptions) *natEnv {
	t.Helper()
	lbdPath, lbctl, nshelper := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir() // removed after the teardown below

	tp := topo.New(t)
	t.Cleanup(tp.Teardown)
	nat, err := topo.BuildNAT(tp, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	if err := harness.StartServersWith(tp, nat, nshelper, o.listen, 10*time.Second, o.serveArgs...); err != nil {
		t.Fatal(err)
	}
	if o.setup != nil {
		o.setup(t, tp, nat)
	}

	cfg := harness.NATConfig(nat, tp.Suffix(), dir)
	cfg.LogFormat = "json"
	if o.configure != nil {
		o.configure(&cfg)
	}
	cfgPath, err := harness.WriteConfig(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", cfg.FilePrefix)) })

	e := &natEnv{ctx: ctx, topo: tp, nat: nat, cfg: cfg, log: &harness.Buffer{},
		lbctl: lbctl, nshelper: nshelper, url: "http://" + nat.VIP.String() + "/"}
	e.cfgPath, e.lbdPath = cfgPath, lbdPath
	e.lbd, err = tp.Start(nat.LBNS, e.log, lbdPath, "-c", cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("lbd configuration:\n%s", cfg.YAML())
			t.Logf("lbd log (last 80 lines):\n%s", harness.Tail(e.log.String(), 80))
		}
	})
	if o.beforeUse != nil {
		o.beforeUse(t, e)
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if err := harness.WaitReady(rctx, e.lbd, lbctl, cfg.Socket); err != nil {
		t.Fatal(err)
	}
	return e
}

// get runs n requests to url from the client namespace.
func (e *natEnv) get(t *testing.T, url string, n int, timeout time.Duration) []harness.Result {
	t.Helper()
	res, err := harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, url, n, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// twoWorkers gives the NAT topology's lbd two worker lcores and each
// port two queue pairs, one per worker (RSS spreads the flows).
func twoWorkers(c *harness.Config) {
	c.Workers = []int{0, 1}
	c.Ports = []harness.Port{
		harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
		harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
	}
	for i := range c.Ports {
		c.Ports[i].Device += ",qpairs=2"
	}
}

// warmUp sends single requests to the VIP until two in a row succeed (ARP
// on both sides resolved), at most 10. It returns every result; the
// failures among them are allowed.
func (e *natEnv) warmUp(t *testing.T) []harness.Result {
	t.Helper()
	return e.warmUpURL(t, e.url)
}

// warmUpURL is warmUp for url (another VIP or port, an IPv6 VIP).
func (e *natEnv) warmUpURL(t *testing.T, url string) []harness.Result {
	t.Helper()
	var all []harness.Result
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		r := e.get(t, url, 1, 3*time.Second)[0]
		all = append(all, r)
		if r.Err == "" {
			ok++
		} else {
			ok = 0
			t.Logf("warm-up request %d failed (allowed): %s", i, r.Err)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive requests to %s succeeded in %d tries", url, len(all))
	}
	return all
}

// stopLBD sends SIGTERM and requires exit status 0 within 10s and the
// mempool line with in_use 0.
func (e *natEnv) stopLBD(t *testing.T) {
	t.Helper()
	if err := e.lbd.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM lbd: %v", err)
	}
	if !e.lbd.Wait(10 * time.Second) {
		t.Fatal("lbd did not exit within 10s of SIGTERM")
	}
	if code := e.lbd.ExitCode(); code != 0 {
		t.Fatalf("lbd exit status %d (%v), want 0", code, e.lbd.Err())
	}
	inUse, line, ok := harness.MempoolInUse(e.log.String())
	switch {
	case !ok && line == "":
		t.Errorf(`lbd did not log "mempool in use at exit"`)
	case !ok:
		t.Errorf("no in_use field in %q", line)
	case inUse != 0:
		t.Errorf("lbd leaked mbufs: in_use=%d in %q", inUse, line)
	default:
		t.Logf("lbd exited 0: %s", strings.TrimSpace(line))
	}
}

func findService(resp api.Response, vip string, port uint16) *api.Service {
	for i := range resp.Services {
		s := &resp.Services[i]
		if strings.EqualFold(s.Protocol, "tcp") && s.VIP == vip && s.Port == port {
			return s
		}
	}
	return nil
}

func findServer(svc *api.Service, addr string, port uint16) *api.RealServer {
	for i := range svc.Servers {
		if svc.Servers[i].Address == addr && svc.Servers[i].Port == port {
			return &svc.Servers[i]
		}
	}
	return nil
}

func TestNATRoundRobin(t *testing.T) {
	e := startNAT(t)
	vip := e.nat.VIP.String()
	client := e.nat.Client.Addr.Addr().String()

	warm := e.warmUp(t)
	const n = 200
	res := e.get(t, e.url, n, 5*time.Second)

	// All counted requests succeed, on connections to the VIP, and the
	// servers see the client's own address and port (NAT keeps them).
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
		if r.Remote != net.JoinHostPort(vip, "80") {
			t.Errorf("request %d: connection's remote address %s, want %s:80", r.I, r.Remote, vip)
		}
		host, _, err := net.SplitHostPort(r.SeenClient())
		if err != nil || host != client {
			t.Errorf("request %d: server %s saw client %q, want %s:<port>", r.I, r.Server(), r.SeenClient(), client)
		} else if r.SeenClient() != r.Local {
			t.Errorf("request %d: server saw client %s, but the client's end is %s (NAT changed the port)", r.I, r.SeenClient(), r.Local)
		}
	}
	if failures > 0 {
		t.Fatalf("%d of %d requests failed", failures, n)
	}
	t.Logf("answers per server (of %d): %v", n, perServer)
	for _, h := range e.nat.Servers {
		if got, want := perServer[h.Name], n/len(e.nat.Servers); got < want-2 || got > want+2 {
			t.Errorf("%s answered %d of %d requests, want %d±2 (round robin)", h.Name, got, n, want)
		}
	}
	if len(perServer) != len(e.nat.Servers) {
		t.Errorf("answers came from %v, want only %d real servers", perServer, len(e.nat.Servers))
	}

	// lbd counted every connection that was answered, warm-up included.
	// A failed warm-up may or may not have created an entry.
	expected := map[string]uint64{}
	failedWarm := uint64(0)
	for _, r := range append(append([]harness.Result{}, warm...), res...) {
		if r.Err == "" {
			expected[r.Server()]++
		} else {
			failedWarm++
		}
	}
	var resp api.Response
	var problems []string
	deadline := time.Now().Add(5 * time.Second) // counters may reach the control plane late
	for {
		var err error
		resp, err = harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		problems = checkStats(resp, e, expected, failedWarm)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}

	for _, args := range [][]string{{"-L", "-n"}, {"-L", "-n", "--stats"}} {
		out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, args...)
		if err != nil {
			t.Error(err)
		}
		t.Logf("lbctl %s:\n%s", strings.Join(args, " "), out)
	}
	if resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket); err != nil {
		t.Error(err)
	} else {
		e.checkMetrics(t, resp)
	}
	// lbctl -L -n -c lists every connection, each to one of the servers.
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2+200 {
		t.Errorf("lbctl -L -n -c lists %d lines, want the 200 connections:\n%s", len(lines), harness.Tail(out, 5))
	}
	for _, l := range lines[2:] {
		f := strings.Fields(l)
		if len(f) != 6 || f[4] != "192.0.2.100:80" || !strings.HasPrefix(f[3], "192.0.2.2:") || !strings.HasPrefix(f[5], "198.51.100.1") {
			t.Errorf("odd connection line %q", l)
			break
		}
	}
	e.stopLBD(t)
}

// checkStats compares lbctl's JSON with the answers the client got.
func checkStats(resp api.Response, e *natEnv, expected map[string]uint64, slack uint64) []string {
	var p []string
	vip := e.nat.VIP.String()
	svc := findService(resp, vip, 80)
	if svc == nil {
		return []string{fmt.Sprintf("lbctl lists no TCP %s:80: %+v", vip, resp.Services)}
	}
	var sum uint64
	for _, h := range e.nat.Servers {
		addr := h.Addr.Addr().String()
		rs := findServer(svc, addr, 8080)
		if rs == nil {
			p = append(p, fmt.Sprintf("lbctl lists no real server %s:8080 under %s:80", addr, vip))
			continue
		}
		sum += rs.Stats.Conns
		want := expected[h.Name]
		if rs.Stats.Conns < want || rs.Stats.Conns > want+slack {
			if slack == 0 {
				p = append(p, fmt.Sprintf("%s: Stats.Conns=%d, want %d (responses from it)", h.Name, rs.Stats.Conns, want))
			} else {
				p = append(p, fmt.Sprintf("%s: Stats.Conns=%d, want %d..%d (responses from it, plus failed warm-ups)", h.Name, rs.Stats.Conns, want, want+slack))
			}
		}
		if rs.ActiveConns+rs.InactiveConns != rs.Stats.Conns {
			p = append(p, fmt.Sprintf("%s: ActiveConns %d + InactiveConns %d != Conns %d (nothing should have expired yet)",
				h.Name, rs.ActiveConns, rs.InactiveConns, rs.Stats.Conns))
		}
		if rs.Forward != "Masq" {
			p = append(p, fmt.Sprintf("%s: Forward=%q, want Masq", h.Name, rs.Forward))
		}
		if rs.Stats.InPkts == 0 || rs.Stats.OutPkts == 0 {
			p = append(p, fmt.Sprintf("%s: InPkts=%d OutPkts=%d, want both > 0", h.Name, rs.Stats.InPkts, rs.Stats.OutPkts))
		}
	}
	if svc.Stats.Conns != sum {
		p = append(p, fmt.Sprintf("service Stats.Conns=%d, want the sum over its servers %d", svc.Stats.Conns, sum))
	}
	return p
}

// scrapeMetrics reads lbd's Prometheus endpoint from inside the LB namespace.
func (e *natEnv) scrapeMetrics(t *testing.T) string {
	t.Helper()
	url := "http://" + e.cfg.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.topo, e.nat.LBNS, e.nshelper, url, 1, 3*time.Second)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	if res[0].Err != "" {
		t.Fatalf("metrics: %s: %s", url, res[0].Err)
	}
	return res[0].Body
}

// metric finds one sample in a Prometheus text exposition by name and
// labels (all of them, in any order).
func metric(body, name string, labels map[string]string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		series, value := line[:sp], line[sp+1:]
		got := map[string]string{}
		if i := strings.IndexByte(series, '{'); i >= 0 {
			if series[:i] != name {
				continue
			}
			for _, kv := range strings.Split(strings.TrimSuffix(series[i+1:], "}"), ",") {
				k, v, _ := strings.Cut(kv, "=")
				got[k] = strings.Trim(v, `"`)
			}
		} else if series != name {
			continue
		}
		match := len(got) == len(labels)
		for k, v := range labels {
			match = match && got[k] == v
		}
		if match {
			var f float64
			if _, err := fmt.Sscan(value, &f); err == nil {
				return f, true
			}
		}
	}
	return 0, false
}

// checkMetrics asserts that /metrics agrees with lbctl's numbers and that
// the per-port and per-lcore counters moved.
func (e *natEnv) checkMetrics(t *testing.T, resp api.Response) {
	t.Helper()
	body := e.scrapeMetrics(t)
	svc := findService(resp, e.nat.VIP.String(), 80)
	if svc == nil {
		t.Fatal("lbctl lists no service to compare /metrics with")
	}
	for _, rs := range svc.Servers {
		labels := map[string]string{"protocol": "TCP", "vip": svc.VIP, "port": "80", "server": fmt.Sprintf("%s:%d", rs.Address, rs.Port)}
		if v, ok := metric(body, "dplb_real_server_connections_total", labels); !ok || uint64(v) != rs.Stats.Conns {
			t.Errorf("/metrics real server %s connections = %v (found %v), lbctl says %d", labels["server"], v, ok, rs.Stats.Conns)
		}
	}
	for _, port := range []string{"wan", "lan"} {
		for _, dir := range []string{"rx", "tx"} {
			if v, ok := metric(body, "dplb_port_packets_total", map[string]string{"port": port, "dir": dir}); !ok || v == 0 {
				t.Errorf("/metrics port %s %s packets = %v (found %v), want > 0", port, dir, v, ok)
			}
		}
	}
	for _, c := range []string{"rx_packets", "tx_packets", "new_conns", "arp_replies"} {
		if v, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": "0", "counter": c}); !ok || v == 0 {
			t.Errorf("/metrics lcore 0 %s = %v (found %v), want > 0", c, v, ok)
		}
	}
	if _, ok := metric(body, "dplb_lcore_drops_total", map[string]string{"lcore": "0", "reason": "no_service"}); !ok {
		t.Error("/metrics has no drop counter for reason no_service")
	}
	if v, ok := metric(body, "dplb_lcore_connection_capacity", map[string]string{"lcore": "0"}); !ok || v < 1024 {
		t.Errorf("/metrics connection capacity %v (found %v)", v, ok)
	}
	for _, ring := range []string{"commands", "events"} {
		if _, ok := metric(body, "dplb_lcore_ring_used", map[string]string{"lcore": "0", "ring": ring}); !ok {
			t.Errorf("/metrics has no occupancy of the %s ring", ring)
		}
	}
	if v, ok := metric(body, "dplb_mempool_in_use", nil); !ok || v < 0 {
		t.Error("/metrics has no mempool occupancy")
	}
}

func TestNATRefusesOtherPort(t *testing.T) {
	e := startNAT(t)
	e.warmUp(t)

	other := "http://" + e.nat.VIP.String() + ":81/"
	r := e.get(t, other, 1, 3*time.Second)[0]
	if r.Err == "" {
		t.Errorf("%s answered %q, want the connection to fail (no such service)", other, r.Body)
	} else {
		t.Logf("%s failed as it should: %s", other, r.Err)
	}

	for _, r := range e.get(t, e.url, 5, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("%s after the refused port: request %d failed: %s", e.url, r.I, r.Err)
		}
	}
	// The client retransmits its SYN, so at least one was dropped and counted.
	body := e.scrapeMetrics(t)
	if v, ok := metric(body, "dplb_lcore_drops_total", map[string]string{"lcore": "0", "reason": "no_service"}); !ok || v < 1 {
		t.Errorf("drops for no_service = %v (found %v), want >= 1", v, ok)
	}
	e.stopLBD(t)
}
