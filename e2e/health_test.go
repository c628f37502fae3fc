package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// mgmtAddr is the LB host's own address on the servers' segment: health
// probes leave from the host's network stack, as on a real deployment with
// a management interface, not through the DPDK ports.
const mgmtAddr = "198.51.100.250/24"

// addMgmtLink gives the LB namespace's kernel a link to the servers' bridge.
func addMgmtLink(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
	t.Helper()
	lb, sw := tp.IfName("mgm"), tp.IfName("mgs")
	for _, err := range []error{
		tp.Veth(nat.LBNS, lb, nat.SwitchNS, sw),
		tp.NoIPv6(nat.LBNS, lb),
		tp.Addr(nat.LBNS, lb, mgmtAddr),
		tp.Up(nat.LBNS, lb),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tp.Exec(nat.SwitchNS, "ip", "link", "set", sw, "master", nat.Bridge, "up"); err != nil {
		t.Fatal(err)
	}
}

// serverHealth reads a real server's health column from lbctl's JSON.
func serverHealth(t *testing.T, e *natEnv, addr string) (string, string) {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if rs := findServer(findService(resp, e.nat.VIP.String(), 80), addr, 8080); rs != nil {
		return rs.Health, rs.HealthReason
	}
	t.Fatalf("no server %s", addr)
	return "", ""
}

// waitProbed waits until a probe of every server of the service proto
// vip:port passed. A server starts up before any probe, so only then does
// its health say what the probes found: lbd's first probes may go before
// ARP has answered and fail (on a loaded machine, both of a server's
// first two, which takes it down).
func waitProbed(t *testing.T, e *natEnv, proto string, port int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		svc := findSvc(resp, proto, e.nat.VIP.String(), port)
		if svc == nil {
			t.Fatalf("lbctl lists no %s service on port %d", proto, port)
		}
		probed := 0
		for _, rs := range svc.Servers {
			if rs.Probe != nil && rs.Probe.PassedTotal > 0 {
				probed++
			}
		}
		if probed == len(svc.Servers) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s, a probe passed for %d of the %d servers of %s port %d", probed, len(svc.Servers), proto, port)
		}
	}
}

func waitHealth(t *testing.T, e *natEnv, addr, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, reason := serverHealth(t, e, addr)
		if h == want {
			return reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %q (%s), want %q", addr, h, reason, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestHealthCheckFailover: a real server whose service stops answering is
// taken out of scheduling (clients never see it), and put back when it
// recovers.
func TestHealthCheckFailover(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: tcp, interval: 200ms, timeout: 150ms, rise: 2, fall: 2}"
		},
	})
	e.warmUp(t)
	rs1 := e.nat.Servers[0]
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")

	// rs1's service dies: after two failed probes it is out.
	killServe(t, rs1.NS)
	reason := waitHealth(t, e, rs1.Addr.Addr().String(), "down")
	if !strings.Contains(reason, "refused") {
		t.Errorf("down reason %q, want a refused connection", reason)
	}
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs2" {
			t.Fatalf("with rs1 down, request %d: %q %s", r.I, r.Server(), r.Err)
		}
	}
	out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if !strings.Contains(out, "down (") {
		t.Errorf("lbctl -L -n does not show the server down:\n%s", out)
	}

	// It comes back after two passed probes and takes connections again.
	if err := harness.StartHTTP(e.topo, []topo.Host{rs1}, e.nshelper, ":8080", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	got := map[string]int{}
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("after recovery, request %d: %s", r.I, r.Err)
		}
		got[r.Server()]++
	}
	if got["rs1"] == 0 {
		t.Fatalf("rs1 got no connection after recovering: %v", got)
	}
	body := e.scrapeMetrics(t)
	if v, ok := metric(body, "dplb_health_state_changes_total", map[string]string{"service": "tcp/192.0.2.100:80", "server": rs1.Addr.Addr().String() + ":8080", "to": "down"}); !ok || v < 1 {
		t.Errorf("metrics: state changes to down = %v (found %v), want at least 1", v, ok)
	}
	e.stopLBD(t)
}

// killServe kills the HTTP server nshelper runs in one namespace (pkill
// would see every namespace's: they share the PID namespace).
func killServe(t *testing.T, ns string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "serve") && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("no server to kill in %s", ns)
	}
}

// load keeps a client sending requests until stop is closed and records
// when each batch was sent and how it went.
type loadSample struct {
	at, end time.Time // when the batch started and finished
	results []harness.Result
}

func runLoad(t *testing.T, e *natEnv, stop <-chan struct{}) <-chan []loadSample {
	done := make(chan []loadSample, 1)
	go func() {
		var samples []loadSample
		for {
			select {
			case <-stop:
				done <- samples
				return
			default:
			}
			at := time.Now()
			res, err := harness.Get(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, e.url, 5, 2*time.Second)
			if err != nil {
				done <- samples
				return
			}
			samples = append(samples, loadSample{at, time.Now(), res})
		}
	}()
	return done
}

// failuresAfter counts failed requests in batches sent after t0, and the
// answers per server.
func failuresAfter(samples []loadSample, t0 time.Time) (failed int, by map[string]int) {
	by = map[string]int{}
	for _, s := range samples {
		if s.at.Before(t0) {
			continue
		}
		for _, r := range s.results {
			if r.Err != "" {
				failed++
			} else {
				by[r.Server()]++
			}
		}
	}
	return failed, by
}

// TestHealthUnderLoad: with a client sending requests all along, rs1's
// application starts answering 500, then recovers, then its process dies
// and comes back. After fall x interval no request reaches the sick
// server (only those during detection may fail, and are counted); after
// rise x interval it takes requests again.
func TestHealthUnderLoad(t *testing.T) {
	const interval, rise, fall = 200 * time.Millisecond, 2, 2
	e := startNATWith(t, natOptions{
		setup: addMgmtLink,
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: http, path: /, expect_status: \"200-399\", interval: 200ms, timeout: 150ms, rise: 2, fall: 2}"
		},
	})
	e.warmUp(t)
	rs1 := e.nat.Servers[0]
	failFile := filepath.Join(t.TempDir(), "sick")
	killServe(t, rs1.NS)
	var out harness.Buffer
	if _, err := e.topo.Start(rs1.NS, &out, e.nshelper, "serve", "-listen", ":8080", "-name", "rs1", "-fail-file", failFile); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")

	detect := time.Duration(fall)*interval + 600*time.Millisecond // plus a probe timeout and a snapshot
	recover := time.Duration(rise)*interval + 600*time.Millisecond
	stop := make(chan struct{})
	load := runLoad(t, e, stop)
	time.Sleep(time.Second)

	sick := time.Now()
	if err := os.WriteFile(failFile, nil, 0o644); err != nil { // rs1 answers 500
		t.Fatal(err)
	}
	waitHealth(t, e, rs1.Addr.Addr().String(), "down")
	time.Sleep(detect + time.Second)
	healed := time.Now()
	os.Remove(failFile)
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	time.Sleep(recover + time.Second)
	died := time.Now()
	killServe(t, rs1.NS)
	waitHealth(t, e, rs1.Addr.Addr().String(), "down")
	time.Sleep(detect + time.Second)
	revived := time.Now()
	if _, err := e.topo.Start(rs1.NS, &out, e.nshelper, "serve", "-listen", ":8080", "-name", "rs1", "-fail-file", failFile); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	time.Sleep(recover + time.Second)
	close(stop)
	samples := <-load

	window := func(from, to time.Time) (failed int, by map[string]int) {
		var in []loadSample
		for _, s := range samples { // batches wholly inside the window
			if !s.at.Before(from) && s.end.Before(to) {
				in = append(in, s)
			}
		}
		return failuresAfter(in, from)
	}
	for _, ph := range []struct {
		name     string
		from, to time.Time
		wantRS1  bool
	}{
		{"rs1 answering 500, after detection", sick.Add(detect), healed, false},
		{"rs1 healed, after rise", healed.Add(recover), died, true},
		{"rs1 dead, after detection", died.Add(detect), revived, false},
		{"rs1 back, after rise", revived.Add(recover + 500*time.Millisecond), time.Now(), true},
	} {
		failed, by := window(ph.from, ph.to)
		t.Logf("%s: %d failed, answers %v", ph.name, failed, by)
		if failed != 0 {
			t.Errorf("%s: %d requests failed", ph.name, failed)
		}
		if got := by["rs1"] > 0; got != ph.wantRS1 {
			t.Errorf("%s: rs1 answered %d requests", ph.name, by["rs1"])
		}
		if by["rs2"] == 0 {
			t.Errorf("%s: no request was answered", ph.name)
		}
	}
	during, _ := window(sick, sick.Add(detect))
	during2, _ := window(died, died.Add(detect))
	t.Logf("requests failed while the failures were being detected: %d (500s) and %d (dead)", during, during2)
	e.stopLBD(t)
}

// TestHealthThroughLBD: with no management link (the servers are
// reachable only through lbd's DPDK ports), TCP checks with via: lbd are
// SYNs lbd sends itself: a dead server is taken out and brought back.
func TestHealthThroughLBD(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Services[0].Health = "{type: tcp, via: lbd, interval: 300ms, timeout: 250ms, rise: 2, fall: 2}"
	}})
	e.warmUp(t)
	rs1 := e.nat.Servers[0]
	waitProbed(t, e, "tcp", 80)
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	time.Sleep(time.Second) // a few probes: it stays up
	if h, reason := serverHealth(t, e, rs1.Addr.Addr().String()); h != "up" {
		t.Fatalf("a live server is %s (%s)", h, reason)
	}
	killServe(t, rs1.NS)
	if reason := waitHealth(t, e, rs1.Addr.Addr().String(), "down"); !strings.Contains(reason, "through lbd") {
		t.Errorf("down reason %q", reason)
	}
	for _, r := range e.get(t, e.url, 10, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs2" {
			t.Fatalf("with rs1 down, request %d: %q %s", r.I, r.Server(), r.Err)
		}
	}
	if err := harness.StartHTTP(e.topo, []topo.Host{rs1}, e.nshelper, ":8080", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	body := e.scrapeMetrics(t)
	if v, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": "0", "counter": "probes_sent"}); !ok || v < 5 {
		t.Errorf("probes sent %v (%v)", v, ok)
	}
	e.stopLBD(t)
}

// TestHTTPHealthThroughLBD: with no management link, an HTTP check with
// via: lbd is a connection lbd opens itself from its port's address: the
// request goes out, the answer's status line is read. A server answering
// 500 is taken out, and put back when it answers 200 again; a dead one is
// taken out with the refused connect. lbd has two lcores: the answers
// reach both (each probe's port steers them), and whichever gets one
// reports it.
func TestHTTPHealthThroughLBD(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		twoWorkers(c) // the answers reach either lcore, which reports them
		c.Services[0].Health = "{type: http, via: lbd, path: /, expect_status: \"200-399\", interval: 300ms, timeout: 250ms, rise: 2, fall: 2}"
	}})
	e.warmUp(t)
	rs1 := e.nat.Servers[0]
	addr := rs1.Addr.Addr().String()
	failFile := serveFailing(t, e, rs1)
	waitProbed(t, e, "tcp", 80)
	waitHealth(t, e, addr, "up")
	time.Sleep(time.Second) // a few probes: it stays up
	if h, reason := serverHealth(t, e, addr); h != "up" {
		t.Fatalf("a server answering 200 is %s (%s)", h, reason)
	}
	if err := os.WriteFile(failFile, nil, 0o644); err != nil { // rs1 answers 500
		t.Fatal(err)
	}
	if reason := waitHealth(t, e, addr, "down"); !strings.Contains(reason, "HTTP status 500") || !strings.Contains(reason, "through lbd") {
		t.Errorf("down reason %q, want HTTP status 500 through lbd", reason)
	}
	for _, r := range e.get(t, e.url, 10, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs2" {
			t.Fatalf("with rs1 answering 500, request %d: %q %s", r.I, r.Server(), r.Err)
		}
	}
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, addr, "up")
	killServe(t, rs1.NS)
	if reason := waitHealth(t, e, addr, "down"); !strings.Contains(reason, "refused (through lbd)") {
		t.Errorf("down reason of a dead server %q", reason)
	}
	body := e.scrapeMetrics(t)
	if v, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": "0", "counter": "probes_sent"}); !ok || v < 10 {
		t.Errorf("probes sent %v (%v)", v, ok)
	}
	if v, ok := metric(body, "dplb_probe_answers_rejected_total", nil); ok && v != 0 {
		t.Errorf("%v genuine answers rejected", v)
	}
	for _, lc := range []string{"0", "1"} {
		if v, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": lc, "counter": "probe_answers"}); !ok || v == 0 {
			t.Errorf("lcore %s took no probe answer (%v, %v)", lc, v, ok)
		}
	}
	e.stopLBD(t)
}

// serveFailing restarts h's web server on 8080 to answer 500 while the
// file it returns exists (on the paths more names with -fail-path, or
// all).
func serveFailing(t *testing.T, e *natEnv, h topo.Host, more ...string) string {
	t.Helper()
	failFile := filepath.Join(t.TempDir(), "sick")
	killServe(t, h.NS)
	var out harness.Buffer
	args := append([]string{e.nshelper, "serve", "-listen", ":8080", "-name", h.Name, "-fail-file", failFile}, more...)
	if _, err := e.topo.Start(h.NS, &out, args...); err != nil {
		t.Fatal(err)
	}
	return failFile
}

// TestHTTPHealthThroughLBDExtraURLs: an HTTP check through lbd with
// extra_urls opens one connection for each path. rs1 answers 500 on
// /ready only while a file exists: it goes down, the reason naming
// /ready, and comes back when the page heals.
func TestHTTPHealthThroughLBDExtraURLs(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Services[0].Health = "{type: http, via: lbd, path: /, extra_urls: [{path: /ready}], interval: 300ms, timeout: 250ms, rise: 1, fall: 2}"
	}})
	e.warmUp(t)
	rs1 := e.nat.Servers[0]
	addr := rs1.Addr.Addr().String()
	failFile := serveFailing(t, e, rs1, "-fail-path", "/ready")
	waitProbed(t, e, "tcp", 80)
	waitHealth(t, e, addr, "up")
	if err := os.WriteFile(failFile, nil, 0o644); err != nil { // /ready answers 500, / still 200
		t.Fatal(err)
	}
	if reason := waitHealth(t, e, addr, "down"); reason != "/ready: HTTP status 500, want 200-399 (through lbd)" {
		t.Errorf("down reason %q, want /ready's status through lbd", reason)
	}
	if got := servedBy(t, e, "rs1's /ready sick", 10); got["rs2"] != 10 {
		t.Fatalf("rs1's /ready sick: %v, want every request on rs2", got)
	}
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, addr, "up")
	e.stopLBD(t)
}

// TestHealthAlsoThroughLBD: with no management link, a tcp check through
// lbd whose also check (tcp on 8081) goes through lbd too, as its check
// does: only rs1 listens on 8081, so rs2 goes down, the reason naming
// the also check's refused connect through lbd, and every request goes
// to rs1.
func TestHealthAlsoThroughLBD(t *testing.T) {
	e := startHealthAlso(t, "via: lbd, ", nil)
	checkAlsoDown(t, e, "also tcp: connect: connection refused (through lbd)")
	e.stopLBD(t)
}

// startHealthAlso runs lbd with a tcp check of 8080 (with via, "via:
// lbd, " or "") whose also check is tcp on 8081, where only rs1 listens;
// setup runs before lbd.
func startHealthAlso(t *testing.T, via string, setup func(*testing.T, *topo.Topo, *topo.NAT)) *natEnv {
	t.Helper()
	return startNATWith(t, natOptions{
		listen: map[string]string{"rs1": ":8080,:8081"},
		setup:  setup,
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: tcp, " + via + "also: [{type: tcp, port: 8081, timeout: 150ms}], interval: 400ms, timeout: 150ms, rise: 1, fall: 2}"
		},
	})
}

// checkAlsoDown checks that startHealthAlso's rs2 goes down for reason,
// its also check's, that rs1 stays up, and that every request goes to
// rs1.
func checkAlsoDown(t *testing.T, e *natEnv, reason string) {
	t.Helper()
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	e.warmUp(t)
	if got := waitHealth(t, e, rs2.Addr.Addr().String(), "down"); got != reason {
		t.Errorf("rs2 down for %q, want %q (its also check's)", got, reason)
	}
	if h, why := serverHealth(t, e, rs1.Addr.Addr().String()); h != "up" {
		t.Errorf("rs1: %q (%s), want up", h, why)
	}
	if got := servedBy(t, e, "rs2 down", 20); got["rs1"] != 20 {
		t.Fatalf("rs2 down: %v, want every request on rs1", got)
	}
}

// TestUDPHealthThroughLBD: with no management link, a UDP check with
// via: lbd is a datagram lbd sends from its port's address: the server's
// reply (naming the address it came from: lbd's port) passes it, the port
// unreachable of a dead server takes it out, and it comes back with the
// server.
func TestUDPHealthThroughLBD(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		twoWorkers(c)
		lan := strings.Split(c.LANAddr, "/")[0]
		udp := harness.Service{Protocol: "udp", VIP: c.Services[0].VIP, Port: 53, Scheduler: "rr",
			Health: fmt.Sprintf("{type: udp, via: lbd, send: ping, expect: \"%s:\", interval: 300ms, timeout: 250ms, rise: 2, fall: 2}", lan)}
		for _, s := range c.Services[0].Servers {
			udp.Servers = append(udp.Servers, harness.Server{Address: s.Address, Port: 5353, Weight: 1})
		}
		c.Services = append(c.Services, udp)
	}})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, ":5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	rs1 := e.nat.Servers[0]
	addr := rs1.Addr.Addr().String()
	udpHealth := func(want string) string {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
			if err != nil {
				t.Fatal(err)
			}
			h, reason := "", ""
			svc := findSvc(resp, "udp", e.nat.VIP.String(), 53)
			if svc == nil {
				t.Fatal("lbctl lists no UDP service on port 53")
			}
			if rs := findServer(svc, addr, 5353); rs != nil {
				h, reason = rs.Health, rs.HealthReason
			}
			if h == want {
				return reason
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s:5353 stayed %q (%s), want %q", addr, h, reason, want)
			}
		}
	}
	waitProbed(t, e, "udp", 53)
	udpHealth("up")
	killServe(t, rs1.NS) // udpserve too
	if reason := udpHealth("down"); reason != "port unreachable (through lbd)" {
		t.Errorf("down reason %q", reason)
	}
	if _, err := harness.StartUDP(e.topo, []topo.Host{rs1}, e.nshelper, ":5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	udpHealth("up")
	res, err := harness.UDPGet(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, e.nat.VIP.String()+":53", "", 20, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for _, r := range res {
		if r.Err == "" {
			by[r.Server()]++
		}
	}
	if by["rs1"] == 0 || by["rs2"] == 0 {
		t.Errorf("UDP answers by server %v, want both", by)
	}
	e.stopLBD(t)
}

// TestICMPHealthThroughLBD: with no management link, an ICMP check with
// via: lbd is an echo request lbd sends from its port's address: a server
// that stops answering echo is taken out, and put back when it answers
// again.
func TestICMPHealthThroughLBD(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Services[0].Health = "{type: icmp, via: lbd, interval: 300ms, timeout: 250ms, rise: 2, fall: 2}"
	}})
	rs1 := e.nat.Servers[0]
	addr := rs1.Addr.Addr().String()
	echo := func(ignore string) {
		t.Helper()
		if out, err := exec.Command("ip", "netns", "exec", rs1.NS, "sysctl", "-qw", "net.ipv4.icmp_echo_ignore_all="+ignore).CombinedOutput(); err != nil {
			t.Fatalf("sysctl: %v %s", err, out)
		}
	}
	waitProbed(t, e, "tcp", 80)
	waitHealth(t, e, addr, "up")
	echo("1")
	if reason := waitHealth(t, e, addr, "down"); reason != "no echo reply within 250ms (through lbd)" {
		t.Errorf("down reason %q", reason)
	}
	echo("0")
	waitHealth(t, e, addr, "up")
	e.stopLBD(t)
}

// TestHealthQuorum: keepalived's quorum. Two servers of weight 1 and
// quorum 2, a sorry server (a second HTTP server on rs1, port 8081):
// while both pass their checks they share the requests; when rs2's
// service dies the servers left weigh 1, the quorum is lost, and the
// sorry server takes every request (rs1, still up, gets none), as
// keepalived puts the sorry server in their place; rs2 back, the quorum
// is gained and the servers take the requests again. The metric says so.
func TestHealthQuorum(t *testing.T) {
	var sorryAddr string
	e := startNATWith(t, natOptions{
		setup: addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: tcp, interval: 200ms, timeout: 150ms, rise: 2, fall: 2}"
			c.Services[0].Quorum = 2
			sorryAddr = c.Services[0].Servers[0].Address + ":8081"
			c.Services[0].SorryServer = sorryAddr
		},
	})
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	sorry := rs1
	sorry.Name = "sorry"
	if err := harness.StartHTTP(e.topo, []topo.Host{sorry}, e.nshelper, ":8081", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	e.warmUp(t)
	waitHealth(t, e, rs1.Addr.Addr().String(), "up")
	waitHealth(t, e, rs2.Addr.Addr().String(), "up")
	quorum := func() float64 {
		t.Helper()
		v, ok := metric(e.scrapeMetrics(t), "dplb_service_quorum_up", map[string]string{"protocol": "TCP", "vip": e.nat.VIP.String(), "port": "80"})
		if !ok {
			t.Fatal("metrics: no dplb_service_quorum_up for the service")
		}
		return v
	}
	served := func(when string) map[string]int {
		t.Helper()
		got := map[string]int{}
		for _, r := range e.get(t, e.url, 20, 5*time.Second) {
			if r.Err != "" {
				t.Fatalf("%s, request %d: %s", when, r.I, r.Err)
			}
			got[r.Server()]++
		}
		return got
	}
	if got := served("both servers up"); got["rs1"] == 0 || got["rs2"] == 0 || got["sorry"] != 0 {
		t.Fatalf("both servers up: %v, want rs1 and rs2", got)
	}
	if q := quorum(); q != 1 {
		t.Errorf("both servers up: dplb_service_quorum_up %v", q)
	}

	// rs2's service dies: rs1 alone weighs 1 < 2.
	killServe(t, rs2.NS)
	waitHealth(t, e, rs2.Addr.Addr().String(), "down")
	if got := served("quorum lost"); got["sorry"] != 20 {
		t.Fatalf("quorum lost: %v, want every request on the sorry server", got)
	}
	if q := quorum(); q != 0 {
		t.Errorf("quorum lost: dplb_service_quorum_up %v", q)
	}
	out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if !strings.Contains(out, "-> "+sorryAddr) {
		t.Errorf("quorum lost: lbctl -L -n does not list the sorry server %s:\n%s", sorryAddr, out)
	}

	// rs2 back: the quorum is gained, the sorry server steps down.
	if err := harness.StartHTTP(e.topo, []topo.Host{rs2}, e.nshelper, ":8080", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs2.Addr.Addr().String(), "up")
	if got := served("quorum gained"); got["sorry"] != 0 || got["rs1"] == 0 || got["rs2"] == 0 {
		t.Fatalf("quorum gained: %v, want rs1 and rs2 again", got)
	}
	if q := quorum(); q != 1 {
		t.Errorf("quorum gained: dplb_service_quorum_up %v", q)
	}
	e.stopLBD(t)
}

// TestHealthStartDown: with start_down (keepalived's alpha) a server is
// down from lbd's start until its check passes. rs2 serves on another
// port than the one checked and requested, and its check fails only
// every 2 s (fall 3): without start_down it would take requests, and
// refuse them, for its first 4 s. With it every request from the first
// goes to rs1; rs2 serving the right port comes up and takes its share.
func TestHealthStartDown(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs2": ":8081"},
		setup:  addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: tcp, interval: 2s, timeout: 1s, rise: 1, fall: 3, start_down: true}"
		},
	})
	rs2 := e.nat.Servers[1]
	e.warmUp(t) // until rs1's first probe passed, no server is up
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs1" {
			t.Fatalf("rs2 not yet checked, request %d: %q %s: want every request on rs1", r.I, r.Server(), r.Err)
		}
	}
	if h, reason := serverHealth(t, e, rs2.Addr.Addr().String()); h != "down" {
		t.Errorf("rs2, never passed: health %q (%s), want down", h, reason)
	}
	if err := harness.StartHTTP(e.topo, []topo.Host{rs2}, e.nshelper, ":8080", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs2.Addr.Addr().String(), "up")
	got := map[string]int{}
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("both up, request %d: %s", r.I, r.Err)
		}
		got[r.Server()]++
	}
	if got["rs1"] == 0 || got["rs2"] == 0 {
		t.Fatalf("both up: %v, want both", got)
	}
	e.stopLBD(t)
}

// TestHealthDNS: keepalived's DNS_CHECK as a dns check from the host.
// A UDP service on port 53: rs1 runs a DNS server, rs2 a UDP server
// whose replies are not DNS: rs1 is up, rs2 down saying why; a DNS
// server on rs2 in its place brings it up.
func TestHealthDNS(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			addCheckedService(c, "udp", 53, "{type: dns, dns_name: www.example.com, dns_type: A, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}")
		},
	})
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	if err := harness.StartDNS(e.topo, []topo.Host{rs1}, e.nshelper, ":53", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.StartUDP(e.topo, []topo.Host{rs2}, e.nshelper, ":53", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	reason := waitSvcHealth(t, e, "udp", 53, rs2, "down")
	if !strings.HasPrefix(reason, "reply is not DNS") {
		t.Errorf("rs2 down for %q, want a reply that is not DNS", reason)
	}
	if h, reason := svcHealth(t, e, "udp", 53, rs1); h != "up" {
		t.Errorf("rs1, a DNS server: %q (%s), want up", h, reason)
	}
	killServe(t, rs2.NS) // its HTTP and UDP servers
	if err := harness.StartDNS(e.topo, []topo.Host{rs2}, e.nshelper, ":53", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSvcHealth(t, e, "udp", 53, rs2, "up")
	e.stopLBD(t)
}

// addCheckedService adds to c a service proto/port on the first one's VIP,
// with its servers at port and the health check given as YAML flow.
func addCheckedService(c *harness.Config, proto string, port int, health string) {
	svc := harness.Service{Protocol: proto, VIP: c.Services[0].VIP, Port: port, Scheduler: "rr", Health: health}
	for _, s := range c.Services[0].Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: s.Address, Port: port, Weight: 1})
	}
	c.Services = append(c.Services, svc)
}

// svcHealth is the health and its reason of server rs (at port) of the
// service proto VIP:port.
func svcHealth(t *testing.T, e *natEnv, proto string, port uint16, rs topo.Host) (string, string) {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if r := findServer(findSvc(resp, proto, e.nat.VIP.String(), int(port)), rs.Addr.Addr().String(), port); r != nil {
		return r.Health, r.HealthReason
	}
	t.Fatalf("no server %s of %s/%d", rs.Name, proto, port)
	return "", ""
}

// waitSvcHealth waits up to 10 s for svcHealth to be want and returns
// its reason.
func waitSvcHealth(t *testing.T, e *natEnv, proto string, port uint16, rs topo.Host, want string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, reason := svcHealth(t, e, proto, port, rs)
		if h == want {
			return reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed %q (%s), want %q", rs.Name, h, reason, want)
		}
	}
}

// TestHealthSMTP: keepalived's SMTP_CHECK as an smtp check from the host.
// A TCP service on port 25: rs1's SMTP server greets with 220 and is up;
// rs2's greets with 554 (no service) and is down, the reason quoting the
// greeting; an SMTP server that serves in its place brings it up.
func TestHealthSMTP(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			addCheckedService(c, "tcp", 25, "{type: smtp, helo_name: lb.example.com, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}")
		},
	})
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	if err := harness.StartSMTP(e.topo, []topo.Host{rs1}, e.nshelper, ":25", 220, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := harness.StartSMTP(e.topo, []topo.Host{rs2}, e.nshelper, ":25", 554, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if reason := waitSvcHealth(t, e, "tcp", 25, rs2, "down"); reason != "SMTP greeting 554 rs2 ESMTP, want 220" {
		t.Errorf("rs2 down for %q, want its 554 greeting", reason)
	}
	waitSvcHealth(t, e, "tcp", 25, rs1, "up")
	if h, reason := svcHealth(t, e, "tcp", 25, rs1); h != "up" || reason != "" {
		t.Errorf("rs1, an SMTP server: %q (%s), want up", h, reason)
	}
	killServe(t, rs2.NS)
	if err := harness.StartSMTP(e.topo, []topo.Host{rs2}, e.nshelper, ":25", 220, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitSvcHealth(t, e, "tcp", 25, rs2, "up")
	e.stopLBD(t)
}

// TestHealthExitWeight: keepalived's misc_dynamic as an exec check with
// weight_from_exit. The command exits with the status in a file per
// server. rs1 exiting 2 (weight 0) takes no new connection while rs2 at
// 0 (the configured weight) takes them all; rs1 at 5 (weight 3) and rs2
// at 3 (weight 1) share them 3 to 1; rs1 exiting 1 goes down.
func TestHealthExitWeight(t *testing.T) {
	dir := t.TempDir()
	status := func(addr, s string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, addr), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var rs1, rs2 string
	e := startNATWith(t, natOptions{
		configure: func(c *harness.Config) {
			rs1, rs2 = c.Services[0].Servers[0].Address, c.Services[0].Servers[1].Address
			status(rs1, "2")
			status(rs2, "0")
			c.Services[0].Scheduler = "wrr"
			c.Services[0].Health = fmt.Sprintf("{type: exec, command: [/bin/sh, -c, 'exit $(cat %s/$DPLB_RS_ADDR)'], weight_from_exit: true, interval: 200ms, timeout: 150ms, rise: 1, fall: 1}", dir)
		},
	})
	weight := func(addr string) (int, int) {
		t.Helper()
		resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		rs := findServer(findService(resp, e.nat.VIP.String(), 80), addr, 8080)
		if rs == nil {
			t.Fatalf("no server %s", addr)
		}
		exitWeight := -1
		if rs.Probe != nil && rs.Probe.ExitWeight != nil {
			exitWeight = *rs.Probe.ExitWeight
		}
		return rs.Weight, exitWeight
	}
	waitWeight := func(addr string, want, wantExit int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			w, x := weight(addr)
			if w == want && x == wantExit {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: weight %d, exit weight %d; want %d and %d", addr, w, x, want, wantExit)
			}
		}
	}
	served := func(when string, n int) map[string]int { t.Helper(); return servedBy(t, e, when, n) }
	e.warmUp(t)
	waitWeight(rs1, 0, 0)
	waitWeight(rs2, 1, -1) // exit 0: the configured weight
	if got := served("rs1 at weight 0", 20); got["rs2"] != 20 {
		t.Fatalf("rs1 at weight 0: %v, want every request on rs2", got)
	}

	status(rs1, "5")
	status(rs2, "3")
	waitWeight(rs1, 3, 3)
	waitWeight(rs2, 1, 1)
	// Each lcore schedules on its own, so the shares are 3 to 1 give or
	// take a turn of each lcore's wrr.
	if got := served("rs1 at 3, rs2 at 1", 40); got["rs2"] == 0 || got["rs1"] < 2*got["rs2"] {
		t.Fatalf("rs1 at 3, rs2 at 1: %v, want about 30 and 10 (wrr)", got)
	}

	status(rs1, "1")
	waitHealth(t, e, rs1, "down")
	if got := served("rs1 down", 20); got["rs2"] != 20 {
		t.Fatalf("rs1 down: %v, want every request on rs2", got)
	}
	e.stopLBD(t)
}

// servedBy sends n requests to e's VIP and counts them by the server that
// answered; when says what the test is at in a failure.
func servedBy(t *testing.T, e *natEnv, when string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range e.get(t, e.url, n, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("%s, request %d: %s", when, r.I, r.Err)
		}
		got[r.Server()]++
	}
	return got
}

// TestHealthFile: file checks, keepalived's FILE_CHECK. rs1's file is a
// drain switch (file_weight 0): a 1 written to it takes rs1 out, removing
// it brings rs1 back. rs2's number times file_weight 2 is added to its
// weight: 2 makes it 1 + 4, -1 makes it 0 (quiescent).
func TestHealthFile(t *testing.T) {
	dir := t.TempDir()
	drain, load := filepath.Join(dir, "rs1.drain"), filepath.Join(dir, "rs2.load")
	write := func(file, s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var rs1, rs2 string
	e := startNATWith(t, natOptions{
		configure: func(c *harness.Config) {
			s := &c.Services[0]
			rs1, rs2 = s.Servers[0].Address, s.Servers[1].Address
			s.Scheduler = "wrr"
			s.Health = fmt.Sprintf("{type: file, file: %s, interval: 200ms, timeout: 100ms, rise: 1, fall: 1}", drain)
			s.Servers[1].Health = fmt.Sprintf("{file: %s, file_weight: 2}", load)
		},
	})
	waitWeight := func(addr string, want, wantDelta int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
			if err != nil {
				t.Fatal(err)
			}
			rs := findServer(findService(resp, e.nat.VIP.String(), 80), addr, 8080)
			if rs == nil {
				t.Fatalf("no server %s", addr)
			}
			if rs.Weight == want && rs.Probe != nil && rs.Probe.WeightDelta == wantDelta {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: weight %d, probe %+v; want weight %d, delta %d", addr, rs.Weight, rs.Probe, want, wantDelta)
			}
		}
	}
	served := func(when string, n int) map[string]int { t.Helper(); return servedBy(t, e, when, n) }
	e.warmUp(t)
	waitWeight(rs1, 1, 0)
	waitWeight(rs2, 1, 0)
	if got := served("no files", 20); got["rs1"] == 0 || got["rs2"] == 0 {
		t.Fatalf("no files: %v, want requests on both", got)
	}

	write(drain, "1\n")
	if reason := waitHealth(t, e, rs1, "down"); reason != "file "+drain+" reads 1" {
		t.Errorf("rs1 down: reason %q, want the file's number", reason)
	}
	if got := served("rs1 drained", 20); got["rs2"] != 20 {
		t.Fatalf("rs1 drained: %v, want every request on rs2", got)
	}
	if err := os.Remove(drain); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs1, "up")

	write(load, "2")
	waitWeight(rs2, 5, 4)
	// Each lcore schedules on its own, so the shares are 5 to 1 give or
	// take a turn of each lcore's wrr.
	if got := served("rs2 at 1 + 2*2", 36); got["rs1"] == 0 || got["rs2"] < 3*got["rs1"] {
		t.Fatalf("rs1 at 1, rs2 at 5: %v, want about 6 and 30 (wrr)", got)
	}
	write(load, "-1")
	waitWeight(rs2, 0, -2)
	if got := served("rs2 at 1 - 2: quiescent", 20); got["rs1"] != 20 {
		t.Fatalf("rs2 quiescent: %v, want every request on rs1", got)
	}
	e.stopLBD(t)
}

// TestHealthHTTPExtraURLs: keepalived's url blocks after the first as
// extra_urls. Both servers answer / (the check's path); /ready must
// contain "rs1", which only rs1's answers do: rs2 goes down, the reason
// naming /ready, and every request goes to rs1.
func TestHealthHTTPExtraURLs(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: addMgmtLink, // before lbd: its first probes must find the servers
		configure: func(c *harness.Config) {
			c.Services[0].Health = "{type: http, path: /, extra_urls: [{path: /ready, expect_body: rs1}], interval: 200ms, timeout: 150ms, rise: 1, fall: 2}"
		},
	})
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	e.warmUp(t)
	if reason := waitHealth(t, e, rs2.Addr.Addr().String(), "down"); reason != `/ready: body does not contain "rs1"` {
		t.Errorf("rs2 down for %q, want its /ready answer", reason)
	}
	if h, reason := serverHealth(t, e, rs1.Addr.Addr().String()); h != "up" {
		t.Errorf("rs1: %q (%s), want up", h, reason)
	}
	for _, r := range e.get(t, e.url, 20, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs1" {
			t.Fatalf("rs2 down, request %d: %q %s: want every request on rs1", r.I, r.Server(), r.Err)
		}
	}
	e.stopLBD(t)
}

// TestHealthAlso: keepalived's several checkers of a real server as
// also checks. The check is tcp on 8080, its also check tcp on 8081,
// where only rs1 listens: rs2 goes down, the reason naming the also
// check, and every request goes to rs1; rs2 listening on 8081 too comes
// back up.
func TestHealthAlso(t *testing.T) {
	e := startHealthAlso(t, "", addMgmtLink) // the link before lbd: its first probes must find the servers
	checkAlsoDown(t, e, "also tcp: connect: connection refused")
	rs2 := e.nat.Servers[1]
	killServe(t, rs2.NS)
	if err := harness.StartHTTP(e.topo, []topo.Host{rs2}, e.nshelper, ":8080,:8081", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, e, rs2.Addr.Addr().String(), "up")
	e.stopLBD(t)
}
