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
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
)

// Restart and upgrade without loss: 200 long-lived TCP streams through
// VS/NAT, 100 through VS/DR and 100 through VS/FullNAT behind the SYN
// proxy (local ports and sequence deltas handed over), real Linux TCP at
// both ends, through lbd on two workers. Halfway, lbd is upgraded in place (lbctl upgrade, to
// the same binary) or stopped and started again with restart.state_file
// (on three workers: steerentry.go in lcore).
// Every stream must deliver its last byte, intact, with no reset and no
// stall past the stall limit; the listing's counters must go on from
// where they were; new connections after the restart must balance
// normally; both lbd runs must return every mbuf.

const (
	restartNAT, restartDR, restartFNAT = 200, 100, 100
	natStreamPort                      = 9000
	drStreamPort                       = 9001
	fnatStreamPort                     = 9002
	// restartLocal is the FullNAT service's local address, on the
	// shared segment.
	restartLocal = "198.51.100.60"
)

// restartGroups are the IPv4 restart tests' streams.
var restartGroups = []streamGroup{{"nat", natStreamPort, restartNAT}, {"dr", drStreamPort, restartDR}, {"fullnat", fnatStreamPort, restartFNAT}}

// streamGroup is one service's share of restartUnderLoad's streams: n
// streams to e.vip:port, named method in the logs.
type streamGroup struct {
	method string
	port   int
	n      int
}

// TestUpgradeKeepsConnections: lbctl upgrade under load. First an upgrade
// to a binary that fails -check, which lbd must refuse and survive.
func TestUpgradeKeepsConnections(t *testing.T) {
	waitBound(t)
	e, cfg := startRestartEnv(t, "")
	e.refusedUpgrade(t)
	e.restartUnderLoad(t, restartGroups, func() { e.upgrade(t, cfg) })
}

// upgrade runs lbctl upgrade to the same binary and checks that the new
// lbd runs in the old one's process, on the same control socket.
func (e *lbEnv) upgrade(t *testing.T, cfg harness.Config) {
	t.Helper()
	lbdPath, _, _ := binaries(t)
	before, err := os.Stat(cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.lbctl, "--socket", cfg.Socket, "upgrade", "--binary", lbdPath).CombinedOutput()
	if err != nil {
		t.Fatalf("lbctl upgrade: %v: %s", err, out)
	}
	t.Logf("lbctl upgrade:\n%s", strings.TrimSpace(string(out)))
	if !strings.Contains(string(out), "lbd upgraded") {
		t.Errorf("lbctl upgrade did not report the new lbd: %s", out)
	}
	select {
	case <-e.lbd.Proc.Done():
		t.Fatalf("lbd's process exited (%v): the new binary did not run in its place", e.lbd.Proc.Err())
	default: // the same pid runs the new lbd
	}
	// The new lbd serves the socket the old one listened on (its
	// file is the same): a client never found it missing.
	if after, err := os.Stat(cfg.Socket); err != nil || !os.SameFile(before, after) {
		t.Errorf("the control socket after the upgrade is not the one lbd listened on before (%v)", err)
	}
}

// TestRestartWithStateFileKeepsConnections: SIGTERM, then a new lbd,
// with restart.state_file. The first lbd starts over a corrupt state
// file, which it must refuse (and remove) and start empty.
func TestRestartWithStateFileKeepsConnections(t *testing.T) {
	waitBound(t)
	state := filepath.Join(t.TempDir(), "handover")
	if err := os.WriteFile(state, []byte("DPLBHAND but not a handover"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, cfg := startRestartEnv(t, state)
	if !strings.Contains(e.lbd.Log.String(), "handover refused") {
		t.Errorf("lbd did not log that it refused the corrupt state file")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the corrupt state file is still there (%v)", err)
	}
	e.restartUnderLoad(t, restartGroups, func() {
		if err := e.lbd.Stop(20 * time.Second); err != nil {
			t.Fatalf("stopping the first lbd: %v", err)
		}
		if _, err := os.Stat(state); err != nil {
			t.Fatalf("the stopping lbd wrote no state file: %v", err)
		}
		old := e.lbd
		// The new lbd runs three workers where the first ran two: each
		// connection goes to the worker that owns its client now, and a
		// FullNAT one whose local port another worker owns now is reached
		// through that worker's steering entry.
		next := cfg
		next.Workers = []int{0, 1, 1}
		e.startLBD(t, next, filepath.Dir(cfg.Socket))
		if e.lbd == old {
			t.Fatal("no new lbd")
		}
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("the new lbd left the state file in place (%v): it could be installed twice", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for counterSum(e.scrape(t), "steered") == 0 && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
		if n := counterSum(e.scrape(t), "steered"); n == 0 {
			t.Errorf("no server packet went through a steering entry after the restart on three workers")
		} else {
			t.Logf("%.0f server packets steered to their connection's worker", n)
		}
	})
}

// startRestartEnv builds VS/DR's topology (the client behind a router,
// lbd and two servers on one segment; the servers route replies from
// their own address through lbd for VS/NAT, from the VIP through the
// router for VS/DR) and starts lbd on two workers with a VS/NAT and a
// VS/DR service.
func startRestartEnv(t *testing.T, stateFile string) (*lbEnv, harness.Config) {
	e, dir := newEnv(t)
	l := buildNATAndDR(t, e, natStreamPort, drStreamPort, fnatStreamPort)
	port := harness.AFPacketPort(0, harness.LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both")
	port.Device += ",qpairs=2"
	cfg := harness.BaseConfig(e.topo.Suffix(), dir, port)
	cfg.Workers = []int{0, 1}
	cfg.ConnTableSize = 65536
	cfg.StateFile = stateFile
	rs1, rs2 := l.Servers[0].Addr.Addr().String(), l.Servers[1].Addr.Addr().String()
	cfg.Services = []harness.Service{
		{VIP: e.vip, Port: natStreamPort, Scheduler: "rr", Servers: []harness.Server{
			{Address: rs1, Port: natStreamPort, Weight: 1, Forward: "nat"}, {Address: rs2, Port: natStreamPort, Weight: 1, Forward: "nat"}}},
		{VIP: e.vip, Port: drStreamPort, Scheduler: "rr", Servers: []harness.Server{
			{Address: rs1, Port: drStreamPort, Weight: 1, Forward: "dr"}, {Address: rs2, Port: drStreamPort, Weight: 1, Forward: "dr"}}},
		{VIP: e.vip, Port: fnatStreamPort, Scheduler: "rr", LocalAddresses: []string{restartLocal}, SynProxy: true, Servers: []harness.Server{
			{Address: rs1, Port: fnatStreamPort, Weight: 1, Forward: "fullnat"}, {Address: rs2, Port: fnatStreamPort, Weight: 1, Forward: "fullnat"}}},
	}
	e.startLBD(t, cfg, dir)
	return e, cfg
}

// refusedUpgrade: an upgrade to a binary that fails -check, and one to
// no file, are refused with the reason; lbd keeps running, unchanged.
func (e *lbEnv) refusedUpgrade(t *testing.T) {
	t.Helper()
	before := e.list(t)
	for bin, want := range map[string]string{"/bin/false": "-check", "/nonexistent/lbd": "no such file"} {
		out, err := exec.CommandContext(e.ctx, e.lbctl, "--socket", e.lbd.Config.Socket, "upgrade", "--binary", bin).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "keeps running") {
			t.Errorf("upgrade to %s: %v: %q; want a refusal saying %q and that lbd keeps running", bin, err, out, want)
		}
	}
	after := e.list(t)
	if !after.Info.Started.Equal(before.Info.Started) {
		t.Errorf("a refused upgrade restarted lbd (started %v, then %v)", before.Info.Started, after.Info.Started)
	}
}

func (e *lbEnv) list(t *testing.T) api.Response {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.lbd.Config.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Info == nil {
		t.Fatal("lbctl -L lists no Info")
	}
	return resp
}

// restartUnderLoad establishes the streams of groups, lets them run,
// calls restart (which must leave a new lbd answering), and checks the
// streams, the counters and the balance of new connections (to the first
// group's service, which must be round robin over two servers).
func (e *lbEnv) restartUnderLoad(t *testing.T, groups []streamGroup, restart func()) {
	t.Helper()
	addr := func(g streamGroup) string { return net.JoinHostPort(e.vip, fmt.Sprint(g.port)) }
	results := map[string]*tally{}
	total := 0
	for _, g := range groups {
		e.warmStreams(t, addr(g))
		results[g.method] = &tally{}
		total += g.n
	}

	// About 30 s per stream: a chunk every 200 ms. The stall limit bounds
	// the restart's gap and TCP's retransmission backoff after it.
	spec := streamSpec{total: 150 << 10, chunk: 1 << 10, interval: 200 * time.Millisecond, stall: 25 * time.Second}
	var silenceMu sync.Mutex
	var longest silence // the longest silence of any stream
	var longestWho string
	var wg, dials sync.WaitGroup
	var dialFailed []string
	var dialMu sync.Mutex
	for i := range total {
		g, k := groups[0], i
		for j := 0; k >= groups[j].n; j++ {
			k -= groups[j].n
			g = groups[j+1]
		}
		method, addr := g.method, addr(g)
		dials.Go(func() {
			c, r := dialStream(e.ctx, e.client.NS, addr, spec, 10*time.Second)
			if c == nil {
				dialMu.Lock()
				dialFailed = append(dialFailed, fmt.Sprintf("%s stream %d: %v", method, i, r))
				dialMu.Unlock()
				return
			}
			wg.Go(func() {
				r, quiet := readStreamTimed(c, r, spec)
				results[method].add(r)
				silenceMu.Lock()
				if quiet.d > longest.d {
					longest, longestWho = quiet, fmt.Sprintf("%s stream %d (%s)", method, i, r.local)
				}
				silenceMu.Unlock()
			})
		})
		if i%50 == 49 {
			dials.Wait()
		}
	}
	dials.Wait()
	if len(dialFailed) > 0 {
		t.Fatalf("%d streams never connected (before the restart): %v", len(dialFailed), dialFailed[:min(5, len(dialFailed))])
	}
	time.Sleep(3 * time.Second) // every stream past its first chunks
	before := e.list(t)

	t0 := time.Now()
	restart()
	gap := time.Since(t0)
	after := e.list(t)
	t.Logf("restart took %v (request to a new lbd answering); handover: %s", gap.Round(time.Millisecond), after.Info.Handover)
	if !after.Info.Started.After(before.Info.Started) {
		t.Errorf("lbd did not restart: started %v, then %v", before.Info.Started, after.Info.Started)
	}
	// "upgrade: 312 of 312 connections and templates installed (...)"
	var installed, handed int
	_, report, _ := strings.Cut(after.Info.Handover, ": ")
	if _, err := fmt.Sscanf(report, "%d of %d", &installed, &handed); err != nil || installed < total {
		t.Errorf("the new lbd installed %d handed-over connections, want at least the %d streams' (handover: %q)",
			installed, total, after.Info.Handover)
	}
	e.countersCarried(t, groups, before, after)

	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()
	select {
	case <-streamsDone:
	case <-time.After(90 * time.Second):
		t.Fatal("streams still running 90 s after the restart")
	}
	body := e.scrape(t)
	t.Logf("new lbd drops: %s", nonZero(dropsByReason(body)))
	broken := 0
	var perGroup []string
	for _, g := range groups {
		t.Logf("%s streams: %s", g.method, results[g.method].summary())
		broken += results[g.method].broken()
		perGroup = append(perGroup, fmt.Sprintf("%s %d", g.method, results[g.method].broken()))
	}
	// TCP doubles its retransmission timeout with each loss: the first
	// retransmission through can come up to one gap after the gap.
	allowed := (2*gap + 3*time.Second).Round(time.Millisecond)
	// Where the silence sat against the restart tells a lost handover
	// (it starts in the gap) from a starved client or server (anywhere).
	t.Logf("longest silence of a stream: %v, %s, from %v after the restart began (restart gap %v, allowed %v)",
		longest.d.Round(time.Millisecond), longestWho, longest.from.Sub(t0).Round(time.Millisecond), gap.Round(time.Millisecond), allowed)
	if longest.d > allowed {
		t.Errorf("%s was silent for %v from %v after the restart began, across a restart gap of %v (allowed %v)",
			longestWho, longest.d.Round(time.Millisecond), longest.from.Sub(t0).Round(time.Millisecond), gap.Round(time.Millisecond), allowed)
	}
	if broken != 0 {
		t.Errorf("%d of %d established streams broke across the restart (%s)", broken, total, strings.Join(perGroup, ", "))
	}
	e.newConnsBalance(t, groups[0].port)
	e.stop(t)
}

// countersCarried: every real server's counters after the restart are
// at least what they were before it (they go on, not from zero), and its
// handed-over connections are listed as active. Those gauges are the
// workers' own, counted as they install the handover and read by the
// controller's next refresh, which a listing taken the instant the new
// lbd answers may precede (on a loaded machine it did): the listing is
// taken again, for up to 5 s, until every server lists some.
func (e *lbEnv) countersCarried(t *testing.T, groups []streamGroup, before, after api.Response) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		listed := true
		for _, g := range groups {
			if a := findSvc(after, "tcp", e.vip, g.port); a != nil {
				for _, ra := range a.Servers {
					listed = listed && ra.ActiveConns > 0
				}
			}
		}
		if listed {
			break
		}
		after = e.list(t)
	}
	for _, g := range groups {
		port := g.port
		b, a := findSvc(before, "tcp", e.vip, port), findSvc(after, "tcp", e.vip, port)
		if b == nil || a == nil {
			t.Fatalf("service %d missing from a listing", port)
		}
		for i, rs := range b.Servers {
			ra := a.Servers[i]
			if rs.Stats.Conns == 0 || ra.Stats.Conns < rs.Stats.Conns || ra.Stats.InPkts < rs.Stats.InPkts || ra.Stats.InBytes < rs.Stats.InBytes {
				t.Errorf("service %d, %s: counters %+v before the restart, %+v after: not carried over", port, rs.Address, rs.Stats, ra.Stats)
			}
			if ra.ActiveConns == 0 {
				t.Errorf("service %d, %s: no active connection listed after the restart (%d before)", port, rs.Address, rs.ActiveConns)
			}
		}
	}
}

// newConnsBalance: 40 new connections after the restart to e.vip:port
// reach both servers, 20 each (round robin per lcore), and all succeed.
func (e *lbEnv) newConnsBalance(t *testing.T, port int) {
	t.Helper()
	addr := net.JoinHostPort(e.vip, fmt.Sprint(port))
	const n = 40
	before := e.list(t)
	small := streamSpec{total: 1000, chunk: 1000, stall: 5 * time.Second}
	failed := 0
	for range n {
		c, r := dialStream(e.ctx, e.client.NS, addr, small, 5*time.Second)
		if c != nil {
			r = readStream(c, r, small)
		}
		if r.kind != "" {
			failed++
			t.Logf("new connection: %v", r)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d new connections after the restart failed", failed, n)
	}
	var got []uint64
	e.pollStats(t, func(after api.Response) []string {
		got = got[:0]
		b, a := findSvc(before, "tcp", e.vip, port), findSvc(after, "tcp", e.vip, port)
		var problems []string
		for i := range b.Servers {
			d := a.Servers[i].Stats.Conns - b.Servers[i].Stats.Conns
			got = append(got, d)
			if d < n/2-2 || d > n/2+2 {
				problems = append(problems, fmt.Sprintf("%s took %d of %d new connections, want %d±2", b.Servers[i].Address, d, n, n/2))
			}
		}
		return problems
	})
	t.Logf("new connections per server after the restart: %v", got)
}

// readStreamTimed is readStream that also measures the longest silence
// between two reads of the stream.
func readStreamTimed(c net.Conn, r streamResult, s streamSpec) (streamResult, silence) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	var longest silence
	last := time.Now()
	quiet := func() {
		if d := time.Since(last); d > longest.d {
			longest = silence{d: d, from: last}
		}
	}
	for r.got < s.total {
		c.SetReadDeadline(time.Now().Add(s.stall))
		n, err := c.Read(buf)
		if n > 0 {
			quiet()
			last = time.Now()
		}
		for i := range n {
			if buf[i] != streamByte(r.got+int64(i)) {
				r.got += int64(i)
				r.kind, r.err = "corrupt", fmt.Errorf("byte %d is %d, want %d", r.got, buf[i], streamByte(r.got))
				return r, longest
			}
		}
		r.got += int64(n)
		if err != nil && r.got < s.total {
			r.kind, r.err = classify(err), err
			quiet()
			return r, longest
		}
	}
	return r, longest
}

// silence is a stream's longest time without data, and when it began.
type silence struct {
	d    time.Duration
	from time.Time
}
