package feedback

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/dplb/dplb/conf"
)

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noLeaks fails if a goroutine of the package is still running.
func noLeaks(t *testing.T) {
	t.Helper()
	waitFor(t, 2*time.Second, "the poller's goroutines to end", func() bool {
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		return !strings.Contains(string(buf[:n]), "ctl/feedback.(*Poller)")
	})
}

// counter counts onChange calls.
type counter struct{ n atomic.Int64 }

func (c *counter) inc()       { c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

// start runs p in the background; the returned func closes it and checks
// Run's result.
func start(t *testing.T, p *Poller) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Run(context.Background()) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
		noLeaks(t)
	})
}

// loadServer is an HTTP server whose /load answer the test sets.
type loadServer struct {
	*httptest.Server
	mu     sync.Mutex
	answer func(w http.ResponseWriter, r *http.Request)
	hits   atomic.Int64
}

func newLoadServer(t *testing.T) *loadServer {
	s := &loadServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		if r.URL.Path != "/load" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		a := s.answer
		s.mu.Unlock()
		a(w, r)
	}))
	t.Cleanup(s.Close)
	s.say("0")
	return s
}

// say makes /load answer body with 200.
func (s *loadServer) say(body string) {
	s.set(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })
}

func (s *loadServer) set(f func(w http.ResponseWriter, r *http.Request)) {
	s.mu.Lock()
	s.answer = f
	s.mu.Unlock()
}

func (s *loadServer) addr() netip.AddrPort {
	return netip.MustParseAddrPort(strings.TrimPrefix(s.URL, "http://"))
}

func httpTarget(addr netip.AddrPort, edit func(*conf.Feedback)) Target {
	c := conf.DefaultFeedback()
	c.Type, c.Interval, c.Timeout, c.Smoothing = conf.FeedbackHTTP, 40*time.Millisecond, 30*time.Millisecond, 0
	if edit != nil {
		edit(&c)
	}
	return Target{Service: "tcp/192.0.2.100:80", Addr: addr, VIP: netip.MustParseAddrPort("192.0.2.100:80"), Config: c}
}

// waitPolls waits until k has been polled n more times than now.
func waitPolls(t *testing.T, p *Poller, k Key, n uint64) {
	t.Helper()
	st, _ := p.Status(k)
	from := st.Polls
	waitFor(t, 3*time.Second, fmt.Sprintf("%d more polls", n), func() bool {
		st, _ := p.Status(k)
		return st.Polls >= from+n
	})
}

func TestPollerFollowsHTTPLoad(t *testing.T) {
	srv := newLoadServer(t)
	var changes counter
	p := New(zaptest.NewLogger(t), changes.inc)
	tgt := httpTarget(srv.addr(), nil)
	k := tgt.Key()
	if got := p.Weight(k, 100); got != 100 {
		t.Errorf("Weight before Update = %d, want the configured 100", got)
	}
	srv.say("20")
	p.Update([]Target{tgt})
	start(t, p)

	waitFor(t, 3*time.Second, "weight 80", func() bool { return p.Weight(k, 100) == 80 })
	waitFor(t, time.Second, "onChange", func() bool { return changes.get() >= 1 })
	if got := p.Weight(k, 10); got != 8 {
		t.Errorf("Weight(configured 10) = %d, want 8 (the share applies to the configured weight passed)", got)
	}

	srv.say("60\n")
	waitFor(t, 3*time.Second, "weight 40", func() bool { return p.Weight(k, 100) == 40 })
	waitFor(t, time.Second, "onChange", func() bool { return changes.get() >= 2 })

	// Noise within the band (60 +- 8, wanted 32..48 against 40 +- 10):
	// no change, no onChange.
	before := changes.get()
	srv.set(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "%.1f", 52+rand.Float64()*16) })
	for range 15 {
		waitPolls(t, p, k, 1)
		if got := p.Weight(k, 100); got != 40 {
			t.Fatalf("noise within the band moved the weight to %d", got)
		}
	}
	if got := changes.get(); got != before {
		t.Errorf("onChange called %d times under noise within the band", got-before)
	}

	srv.say("100")
	waitFor(t, 3*time.Second, "weight 10 (the floor)", func() bool { return p.Weight(k, 100) == 10 })
	srv.say("0")
	waitFor(t, 3*time.Second, "weight 100 again", func() bool { return p.Weight(k, 100) == 100 })
	st, ok := p.Status(k)
	if !ok || st.Failed != 0 || st.LastErr != "" || st.State.Last != 0 {
		t.Errorf("Status = %+v, %v", st, ok)
	}
}

func TestPollerKeepsWeightOnBadAnswers(t *testing.T) {
	srv := newLoadServer(t)
	p := New(zaptest.NewLogger(t), nil)
	tgt := httpTarget(srv.addr(), nil)
	k := tgt.Key()
	srv.say("50")
	p.Update([]Target{tgt})
	start(t, p)
	waitFor(t, 3*time.Second, "weight 50", func() bool { return p.Weight(k, 100) == 50 })

	bad := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		reason string
	}{
		{"not a number", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "busy") },
			`"busy" is not a number (want the load in percent, e.g. 37.5)`},
		{"out of range", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "250") }, "250 is out of range 0..100"},
		{"error status", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "5", http.StatusServiceUnavailable) },
			"HTTP status 503, want 2xx"},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(2 * time.Second):
			}
			fmt.Fprint(w, "0")
		}, "timeout after 30ms"},
	}
	for _, b := range bad {
		srv.set(b.answer)
		waitPolls(t, p, k, 3)
		st, _ := p.Status(k)
		if st.LastErr != b.reason || st.Failures < 2 {
			t.Errorf("%s: last error %q (%d failures), want %q", b.name, st.LastErr, st.Failures, b.reason)
		}
		if got := p.Weight(k, 100); got != 50 {
			t.Errorf("%s: weight %d, want 50 kept", b.name, got)
		}
	}
	srv.say("10")
	waitFor(t, 3*time.Second, "weight 90", func() bool { return p.Weight(k, 100) == 90 })
	if st, _ := p.Status(k); st.Failures != 0 || st.Failed < 8 {
		t.Errorf("after recovery: %+v", st)
	}
}

func TestPollHTTPErrors(t *testing.T) {
	// One poll at a time, each judged on its answer: a timeout long
	// enough that a loaded machine (or -race) cannot turn one into a
	// timeout instead.
	patientTarget := func(addr netip.AddrPort, edit func(*conf.Feedback)) Target {
		tg := httpTarget(addr, edit)
		tg.Config.Timeout = 5 * time.Second
		return tg
	}
	srv := newLoadServer(t)
	ctx := context.Background()

	srv.say(strings.Repeat(" ", 2000) + "5")
	if _, err := Poll(ctx, patientTarget(srv.addr(), nil)); err == nil || err.Error() != "body longer than 1024 bytes, want one number" {
		t.Errorf("long body: %v", err)
	}
	srv.say("5")
	if _, err := Poll(ctx, patientTarget(srv.addr(), func(c *conf.Feedback) { c.Path = "/other" })); err == nil || err.Error() != "HTTP status 404, want 2xx" {
		t.Errorf("other path: %v", err)
	}
	// The port of the configuration replaces the server's.
	tgt := patientTarget(netip.AddrPortFrom(srv.addr().Addr(), 1), func(c *conf.Feedback) { c.Port = int(srv.addr().Port()) })
	if l, err := Poll(ctx, tgt); err != nil || l != 5 {
		t.Errorf("port from the config: %g, %v", l, err)
	}
	// Bound to a source address.
	tgt = patientTarget(srv.addr(), func(c *conf.Feedback) { c.Source = "127.0.0.1" })
	if l, err := Poll(ctx, tgt); err != nil || l != 5 {
		t.Errorf("with source: %g, %v", l, err)
	}
	tgt = patientTarget(srv.addr(), func(c *conf.Feedback) { c.Source = "192.0.2.77" })
	if _, err := Poll(ctx, tgt); err == nil || !strings.Contains(err.Error(), "assign requested address") {
		t.Errorf("with a source the host lacks: %v", err)
	}
	// Nothing listening.
	srv.Close()
	if _, err := Poll(ctx, patientTarget(srv.addr(), nil)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed server: %v", err)
	}
	// Type none polls nothing.
	if _, err := Poll(ctx, Target{Addr: srv.addr()}); err == nil || err.Error() != `feedback type "none" polls nothing` {
		t.Errorf("type none: %v", err)
	}
}

// loadScript writes a command that prints the contents of its .load file
// (or fails, or hangs), recording its environment in its .env file.
func loadScript(t *testing.T) (path string, set func(string)) {
	dir := t.TempDir()
	path = filepath.Join(dir, "load.sh")
	script := `#!/bin/sh
echo "$DPLB_RS_ADDR $DPLB_RS_PORT $DPLB_VIP $DPLB_VPORT $1" > "$0.env"
case "$(cat "$0.load")" in
fail) echo "starting" >&2; echo "no load for you" >&2; exit 3 ;;
hang) sleep 30 & echo $! > "$0.pid"; wait ;;
*) cat "$0.load" ;;
esac
`
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	set = func(s string) {
		if err := os.WriteFile(path+".load.tmp", []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".load.tmp", path+".load"); err != nil {
			t.Fatal(err)
		}
	}
	set("0")
	return path, set
}

func execTarget(path string) Target {
	c := conf.DefaultFeedback()
	c.Type, c.Command = conf.FeedbackExec, []string{path, "arg1"}
	c.Interval, c.Timeout, c.Smoothing = 300*time.Millisecond, 250*time.Millisecond, 0
	c.Port = 9100
	return Target{Service: "tcp/192.0.2.100:80", Addr: netip.MustParseAddrPort("198.51.100.11:8080"),
		VIP: netip.MustParseAddrPort("192.0.2.100:80"), Config: c}
}

func TestPollExec(t *testing.T) {
	path, set := loadScript(t)
	ctx := context.Background()
	tgt := execTarget(path)

	set("42.5\n")
	if l, err := Poll(ctx, tgt); err != nil || l != 42.5 {
		t.Fatalf("Poll() = %g, %v", l, err)
	}
	env, _ := os.ReadFile(path + ".env")
	if got, want := strings.TrimSpace(string(env)), "198.51.100.11 9100 192.0.2.100 80 arg1"; got != want {
		t.Errorf("environment and args %q, want %q", got, want)
	}
	for _, tt := range []struct{ load, want string }{
		{"lots", `"lots" is not a number (want the load in percent, e.g. 37.5)`},
		{"101", "101 is out of range 0..100"},
		{"fail", "exit status 3: no load for you"},
	} {
		set(tt.load)
		if _, err := Poll(ctx, tgt); err == nil || err.Error() != tt.want {
			t.Errorf("load %q: %v, want %s", tt.load, err, tt.want)
		}
	}

	// A hanging command is killed with its process group.
	set("hang")
	began := time.Now()
	if _, err := Poll(ctx, tgt); err == nil || err.Error() != "timeout after 250ms" {
		t.Errorf("hang: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("hang: Poll took %s", d)
	}
	pidText, err := os.ReadFile(path + ".pid")
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(pidText), &pid)
	waitFor(t, 2*time.Second, "the command's child to die", func() bool {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return true
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		return err != nil || strings.Contains(string(stat), ") Z ")
	})

	tgt.Config.Command = []string{filepath.Join(t.TempDir(), "missing")}
	if _, err := Poll(ctx, tgt); err == nil || !strings.HasPrefix(err.Error(), "exec: ") {
		t.Errorf("missing command: %v", err)
	}
}

func TestPollerExec(t *testing.T) {
	path, set := loadScript(t)
	var changes counter
	p := New(zaptest.NewLogger(t), changes.inc)
	tgt := execTarget(path)
	k := tgt.Key()
	set("75")
	p.Update([]Target{tgt})
	start(t, p)
	waitFor(t, 5*time.Second, "weight 25", func() bool { return p.Weight(k, 100) == 25 })
	set("fail")
	waitPolls(t, p, k, 2)
	if got := p.Weight(k, 100); got != 25 {
		t.Errorf("weight after failed polls %d, want 25 kept", got)
	}
	set("30")
	waitFor(t, 5*time.Second, "weight 70", func() bool { return p.Weight(k, 100) == 70 })
	// onChange runs after the weight changed: wait for it.
	waitFor(t, time.Second, "a second onChange", func() bool { return changes.get() >= 2 })
}

// fakeProber answers loads the test sets per server.
type fakeProber struct {
	mu    sync.Mutex
	loads map[netip.AddrPort]float64
	calls map[netip.AddrPort]int
}

func newFake() *fakeProber {
	return &fakeProber{loads: map[netip.AddrPort]float64{}, calls: map[netip.AddrPort]int{}}
}

func (f *fakeProber) set(a netip.AddrPort, l float64) {
	f.mu.Lock()
	f.loads[a] = l
	f.mu.Unlock()
}

func (f *fakeProber) probe(ctx context.Context, t Target) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[t.Addr]++
	l, ok := f.loads[t.Addr]
	if !ok {
		return 0, fmt.Errorf("no load for %s", t.Addr)
	}
	return l, nil
}

func (f *fakeProber) count(a netip.AddrPort) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[a]
}

func TestPollerUpdate(t *testing.T) {
	fake := newFake()
	var changes counter
	p := New(zaptest.NewLogger(t), changes.inc, WithProber(fake.probe))
	a := netip.MustParseAddrPort("198.51.100.11:80")
	b := netip.MustParseAddrPort("198.51.100.12:80")
	c := netip.MustParseAddrPort("198.51.100.13:80")
	fast := func(f *conf.Feedback) { f.Interval, f.Timeout = 10*time.Millisecond, 5*time.Millisecond }
	ta, tb, tc := httpTarget(a, fast), httpTarget(b, fast), httpTarget(c, fast)
	tc.Config.Type = conf.FeedbackNone
	fake.set(a, 50)
	fake.set(b, 20)
	fake.set(c, 90)
	p.Update([]Target{ta, tb, tc}) // before Run: started by Run
	start(t, p)
	waitFor(t, 3*time.Second, "both weights", func() bool {
		return p.Weight(ta.Key(), 100) == 50 && p.Weight(tb.Key(), 100) == 80
	})
	if got := p.Weight(tc.Key(), 100); got != 100 || fake.count(c) != 0 {
		t.Errorf("type none: weight %d, %d polls; want 100, none", got, fake.count(c))
	}
	if got := len(p.States()); got != 2 {
		t.Errorf("States() has %d entries, want 2", got)
	}

	// A changed configuration keeps the state and applies its bounds at once.
	n := changes.get()
	ta2 := ta
	ta2.Config.MaxWeightPercent = 40
	p.Update([]Target{ta2, tb})
	if got := p.Weight(ta.Key(), 100); got != 40 {
		t.Errorf("after lowering the ceiling: weight %d, want 40", got)
	}
	waitFor(t, time.Second, "onChange for the new bounds", func() bool { return changes.get() > n })

	// A removed target is back to its configured weight, with an onChange.
	n = changes.get()
	p.Update([]Target{tb})
	if got := p.Weight(ta.Key(), 100); got != 100 {
		t.Errorf("removed target: weight %d, want 100", got)
	}
	waitFor(t, time.Second, "onChange for the removal", func() bool { return changes.get() > n })
	polls := fake.count(a)
	time.Sleep(50 * time.Millisecond)
	if fake.count(a) > polls+1 {
		t.Errorf("removed target still polled")
	}

	// A new target starts with no data.
	d := netip.MustParseAddrPort("198.51.100.14:80")
	td := httpTarget(d, fast)
	p.Update([]Target{tb, td}) // d has no load: every poll fails
	waitFor(t, 3*time.Second, "polls of d", func() bool { return fake.count(d) >= 3 })
	if got := p.Weight(td.Key(), 7); got != 7 {
		t.Errorf("never answered: weight %d, want the configured 7", got)
	}
	if st, _ := p.Status(td.Key()); st.LastErr != "no load for 198.51.100.14:80" || st.State.Samples != 0 {
		t.Errorf("Status(d) = %+v", st)
	}
}

func TestPollerRunClose(t *testing.T) {
	p := New(nil, nil)
	p.Close()
	if err := p.Run(context.Background()); err != ErrRunning {
		t.Errorf("Run after Close = %v, want ErrRunning", err)
	}

	fake := newFake()
	p = New(nil, func() {}, WithProber(fake.probe))
	a := netip.MustParseAddrPort("198.51.100.11:80")
	fake.set(a, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	p.Update([]Target{httpTarget(a, func(f *conf.Feedback) { f.Interval, f.Timeout = 10*time.Millisecond, 5*time.Millisecond })})
	waitFor(t, 3*time.Second, "polls", func() bool { return fake.count(a) >= 2 })
	if err := p.Run(ctx); err != ErrRunning {
		t.Errorf("second Run = %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	p.Close() // after Run ended: no-op
	noLeaks(t)
	n := fake.count(a)
	p.Update([]Target{httpTarget(b(), nil)}) // after Run: not started
	time.Sleep(30 * time.Millisecond)
	if fake.count(a) != n {
		t.Errorf("polled after Run returned")
	}
}

func b() netip.AddrPort { return netip.MustParseAddrPort("198.51.100.12:80") }

func TestTargets(t *testing.T) {
	fb := conf.DefaultFeedback()
	fb.Type = conf.FeedbackHTTP
	svcs := []conf.Service{
		{Protocol: "tcp", VIP: "192.0.2.100", Port: 80, Feedback: fb, Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 8080}, {Address: "198.51.100.12", Port: 80},
		}},
		{Protocol: "udp", VIP: "192.0.2.100", Port: 53, Servers: []conf.RealServer{{Address: "198.51.100.11", Port: 53}}},
	}
	got := Targets(svcs)
	if len(got) != 2 {
		t.Fatalf("Targets() = %+v, want 2", got)
	}
	want := Target{Service: "tcp/192.0.2.100:80", Addr: netip.MustParseAddrPort("198.51.100.11:8080"),
		VIP: netip.MustParseAddrPort("192.0.2.100:80"), Config: fb}
	if !got[0].equal(want) || got[1].Addr.String() != "198.51.100.12:80" {
		t.Errorf("Targets() = %+v", got)
	}
	if k := got[0].Key(); k.String() != "tcp/192.0.2.100:80 198.51.100.11:8080" {
		t.Errorf("Key() = %s", k)
	}
}
