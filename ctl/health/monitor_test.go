package health_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
)

// fastCheck probes every millisecond.
func fastCheck(rise, fall int) conf.HealthCheck {
	return conf.HealthCheck{Type: "tcp", Interval: time.Millisecond, Timeout: time.Second, Rise: rise, Fall: fall}
}

func fakeTarget(i int, c conf.HealthCheck) health.Target {
	return health.Target{
		Service: "tcp/192.0.2.100:80",
		Addr:    netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(10 + i)}), 80),
		VIP:     vip,
		Check:   c,
	}
}

// recorder collects changes.
type recorder struct {
	mu      sync.Mutex
	changes []health.Change
}

func (r *recorder) add(c health.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

func (r *recorder) get() []health.Change {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]health.Change(nil), r.changes...)
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// start runs m in the background and returns a function that closes it
// and checks that Run returned nil.
func start(t *testing.T, m *health.Monitor) {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- m.Run(context.Background()) }()
	t.Cleanup(func() {
		m.Close()
		if err := <-errc; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
}

// step is one expected change: after probe number Probe (1-based) the
// target went Up (or down) for Reason.
type step struct {
	Probe  int
	Up     bool
	Reason string
}

func TestRiseFall(t *testing.T) {
	const T, F = true, false
	tests := []struct {
		name       string
		rise, fall int
		results    []bool
		want       []step
	}{
		{"healthy", 2, 3, []bool{T, T, T, T}, nil},
		{"down after fall failures", 2, 3, []bool{F, F, F}, []step{{3, F, "fail 3"}}},
		{"a pass resets the failures", 2, 3, []bool{F, F, T, F, F, T, F, F, F}, []step{{9, F, "fail 9"}}},
		{"never reaches fall", 2, 3, []bool{F, T, F, F, T, F, F, T}, nil},
		{"back after rise passes", 2, 3, []bool{F, F, F, T, F, T, T, T}, []step{{3, F, "fail 3"}, {7, T, "2 consecutive probes passed"}}},
		{"flapping below rise stays down", 3, 1, []bool{F, T, T, F, T, T, F, T, T, T}, []step{{1, F, "fail 1"}, {10, T, "3 consecutive probes passed"}}},
		{"rise 1 fall 1", 1, 1, []bool{F, T, F, T}, []step{{1, F, "fail 1"}, {2, T, "1 consecutive probes passed"}, {3, F, "fail 3"}, {4, T, "1 consecutive probes passed"}}},
		{"down stays down", 2, 2, []bool{F, F, F, F, F, F}, []step{{2, F, "fail 2"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			exhausted := make(chan struct{})
			check := func(ctx context.Context, _ health.Target) (bool, string) {
				i := int(n.Add(1))
				if i > len(tt.results) {
					if i == len(tt.results)+1 {
						close(exhausted)
					}
					<-ctx.Done()
					return false, "stopped"
				}
				if tt.results[i-1] {
					return true, ""
				}
				return false, fmt.Sprintf("fail %d", i)
			}
			var rec recorder
			m := health.New(zap.NewNop(), rec.add, health.WithChecker(health.Plain(check)))
			tg := fakeTarget(0, fastCheck(tt.rise, tt.fall))
			m.Update([]health.Target{tg})
			start(t, m)
			<-exhausted
			waitFor(t, "the changes", func() bool { return len(rec.get()) >= len(tt.want) })
			time.Sleep(20 * time.Millisecond) // let any extra change show
			var got []step
			for _, c := range rec.get() {
				got = append(got, step{Up: c.Up, Reason: c.Reason})
				if c.Target.Key() != tg.Key() || c.At.IsZero() {
					t.Errorf("change %+v: wrong target or time", c)
				}
			}
			var want []step
			for _, s := range tt.want {
				want = append(want, step{Up: s.Up, Reason: s.Reason})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("changes = %+v, want %+v", got, want)
			}
			st, ok := m.State(tg.Key())
			if !ok {
				t.Fatal("State() not found")
			}
			// The final state agrees with the last change.
			wantUp := len(tt.want) == 0 || tt.want[len(tt.want)-1].Up
			if st.Up != wantUp || st.Passed+st.Failed != uint64(len(tt.results)) {
				t.Errorf("state %+v, want up %v after %d probes", st, wantUp, len(tt.results))
			}
			var ups, downs uint64
			for _, s := range tt.want {
				if s.Up {
					ups++
				} else {
					downs++
				}
			}
			if st.WentUp != ups || st.WentDown != downs {
				t.Errorf("WentUp, WentDown = %d, %d, want %d, %d", st.WentUp, st.WentDown, ups, downs)
			}
		})
	}
}

// scripted is a fake checker whose result per server address can be set
// while it runs, and which counts calls per address.
type scripted struct {
	mu    sync.Mutex
	fail  map[netip.AddrPort]bool
	calls map[netip.AddrPort]int
	seen  map[netip.AddrPort]conf.HealthCheck
}

func newScripted() *scripted {
	return &scripted{fail: map[netip.AddrPort]bool{}, calls: map[netip.AddrPort]int{}, seen: map[netip.AddrPort]conf.HealthCheck{}}
}

func (s *scripted) check(_ context.Context, t health.Target) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[t.Addr]++
	s.seen[t.Addr] = t.Check
	if s.fail[t.Addr] {
		return false, "scripted failure"
	}
	return true, ""
}

func (s *scripted) set(a netip.AddrPort, fail bool) {
	s.mu.Lock()
	s.fail[a] = fail
	s.mu.Unlock()
}

func (s *scripted) count(a netip.AddrPort) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[a]
}

func (s *scripted) lastCheck(a netip.AddrPort) conf.HealthCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[a]
}

func TestUpdate(t *testing.T) {
	sc := newScripted()
	var rec recorder
	m := health.New(zap.NewNop(), rec.add, health.WithChecker(health.Plain(sc.check)))
	a, b, c := fakeTarget(1, fastCheck(2, 3)), fakeTarget(2, fastCheck(2, 3)), fakeTarget(3, fastCheck(2, 3))
	none := fakeTarget(4, conf.HealthCheck{Type: "none"})

	// Before Run: recorded, up, not probed.
	m.Update([]health.Target{a, b, none})
	if st := m.States(); len(st) != 2 || !st[0].Up || !st[1].Up || st[0].Target.Addr != a.Addr || st[1].Target.Addr != b.Addr {
		t.Fatalf("States() before Run = %+v, want a and b up", st)
	}
	if _, ok := m.State(none.Key()); ok {
		t.Errorf("a target of type none is watched")
	}
	sc.set(b.Addr, true)
	start(t, m)
	waitFor(t, "b down", func() bool { st, _ := m.State(b.Key()); return !st.Up })
	waitFor(t, "b failing further", func() bool { st, _ := m.State(b.Key()); return st.Failures >= 6 })

	// The same targets again: nothing restarts (b's failure count goes on).
	m.Update([]health.Target{a, b, none})
	if st, _ := m.State(b.Key()); st.Up || st.Failures < 6 || st.LastReason != "scripted failure" || st.LastFailure.IsZero() {
		t.Errorf("b after an identical Update = %+v, want down with its failures kept", st)
	}

	// b's check changes: it restarts, still down, its counts from zero.
	b2 := b
	b2.Check.Path = "/other"
	b2.Check.Timeout = 500 * time.Millisecond
	// a is removed, c added.
	m.Update([]health.Target{b2, c})
	st, _ := m.State(b.Key())
	if st.Up || st.Failures != 0 || st.Successes != 0 || st.WentDown != 1 || st.Target.Check.Path != "/other" {
		t.Errorf("b after a changed check = %+v, want down with counts reset", st)
	}
	if _, ok := m.State(a.Key()); ok {
		t.Errorf("a is still watched after its removal")
	}
	calls := sc.count(a.Addr)
	waitFor(t, "c probed", func() bool { return sc.count(c.Addr) > 5 })
	if n := sc.count(a.Addr); n > calls+1 {
		t.Errorf("a probed %d more times after its removal", n-calls)
	}
	waitFor(t, "b probed with its new check", func() bool { return sc.lastCheck(b.Addr).Path == "/other" })

	// b recovers after rise passes of the new check.
	sc.set(b.Addr, false)
	waitFor(t, "b up", func() bool { st, _ := m.State(b.Key()); return st.Up })
	st, _ = m.State(b.Key())
	if st.UpSince.IsZero() || st.LastChange.IsZero() || st.WentUp != 1 {
		t.Errorf("b after recovery = %+v", st)
	}
	waitFor(t, "b's changes", func() bool { return len(rec.get()) == 2 })
	ch := rec.get()
	if ch[0].Up || ch[0].Target.Addr != b.Addr || ch[0].Reason != "scripted failure" ||
		!ch[1].Up || ch[1].Target.Addr != b.Addr || ch[1].Reason != "2 consecutive probes passed" {
		t.Errorf("changes = %+v", ch)
	}

	// Everything removed.
	m.Update(nil)
	if st := m.States(); len(st) != 0 {
		t.Errorf("States() after Update(nil) = %+v", st)
	}
}

func TestChangesAreSerial(t *testing.T) {
	// Many targets flapping at every probe: onChange never runs twice at
	// once, and each target alternates down, up, down...
	var inFlight, maxInFlight atomic.Int32
	var mu sync.Mutex
	last := map[health.Key]bool{}
	var bad atomic.Int32
	var count atomic.Int32
	onChange := func(c health.Change) {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		prev, seen := last[c.Target.Key()]
		if !seen {
			prev = true
		}
		if prev == c.Up {
			bad.Add(1)
		}
		last[c.Target.Key()] = c.Up
		mu.Unlock()
		time.Sleep(100 * time.Microsecond)
		count.Add(1)
		inFlight.Add(-1)
	}
	var flip sync.Map
	check := func(_ context.Context, t health.Target) (bool, string) {
		v, _ := flip.LoadOrStore(t.Addr, new(atomic.Bool))
		b := v.(*atomic.Bool)
		ok := b.Load()
		b.Store(!ok)
		return ok, "flap"
	}
	m := health.New(zap.NewNop(), onChange, health.WithChecker(health.Plain(check)))
	var targets []health.Target
	for i := range 20 {
		targets = append(targets, fakeTarget(i, fastCheck(1, 1)))
	}
	m.Update(targets)
	start(t, m)
	waitFor(t, "many changes", func() bool { return count.Load() >= 200 })
	m.Close()
	if n := maxInFlight.Load(); n != 1 {
		t.Errorf("onChange ran %d times at once", n)
	}
	if n := bad.Load(); n != 0 {
		t.Errorf("%d changes repeated the previous state of their target", n)
	}
}

func TestMonitorStopsCleanly(t *testing.T) {
	// A hanging web server, a live one and a checker stuck in a probe:
	// Close returns promptly and leaves no goroutine behind.
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	before := runtime.NumGoroutine()

	m := health.New(zap.NewNop(), nil)
	slow := conf.HealthCheck{Type: "http", Interval: 10 * time.Second, Timeout: 9 * time.Second}
	m.Update([]health.Target{
		target(serverAddr(srv.URL), slow),
		target("127.0.0.1:1", conf.HealthCheck{Type: "exec", Command: []string{"/bin/sleep", "30"}, Interval: 10 * time.Second, Timeout: 9 * time.Second}),
		target("127.0.0.1:2", conf.HealthCheck{Type: "icmp", Interval: 5 * time.Millisecond, Timeout: 2 * time.Millisecond}),
	})
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background()) }()
	time.Sleep(1200 * time.Millisecond) // the first probes are under way
	if err := m.Run(context.Background()); !errors.Is(err, health.ErrRunning) {
		t.Errorf("a second Run() = %v, want ErrRunning", err)
	}
	start := time.Now()
	m.Close()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("Close() took %s", took)
	}
	m.Close() // again: a no-op
	if err := m.Run(context.Background()); !errors.Is(err, health.ErrRunning) {
		t.Errorf("Run() after Close = %v, want ErrRunning", err)
	}
	m.Update(nil) // after Run: allowed, starts nothing
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestRunStopsWithContext(t *testing.T) {
	before := runtime.NumGoroutine()
	sc := newScripted()
	m := health.New(nil, nil, health.WithChecker(health.Plain(sc.check)))
	m.Update([]health.Target{fakeTarget(1, fastCheck(1, 1))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "probes", func() bool { return sc.count(fakeTarget(1, conf.HealthCheck{}).Addr) > 3 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v", err)
	}
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

func TestMonitorRealHTTP(t *testing.T) {
	// A real server whose health endpoint starts failing and recovers.
	var status atomic.Int32
	status.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	var rec recorder
	m := health.New(zap.NewNop(), rec.add)
	tg := target(serverAddr(srv.URL), conf.HealthCheck{Type: "http", Path: "/healthz", Interval: 20 * time.Millisecond, Timeout: 15 * time.Millisecond, Rise: 2, Fall: 2})
	m.Update([]health.Target{tg})
	start(t, m)
	waitFor(t, "probes", func() bool { st, _ := m.State(tg.Key()); return st.Passed >= 2 })
	status.Store(500)
	waitFor(t, "down", func() bool { return len(rec.get()) == 1 })
	status.Store(200)
	waitFor(t, "up", func() bool { return len(rec.get()) == 2 })
	ch := rec.get()
	if ch[0].Up || ch[0].Reason != "HTTP status 500, want 200-399" || !ch[1].Up {
		t.Errorf("changes = %+v", ch)
	}

	// The collector reports it.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(health.NewCollector(m)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range mt.GetLabel() {
				if l.GetName() != "service" && l.GetName() != "server" {
					name += "/" + l.GetValue()
				}
				if l.GetName() == "server" && l.GetValue() != tg.Addr.String() || l.GetName() == "service" && l.GetValue() != tg.Service {
					t.Errorf("label %s=%s", l.GetName(), l.GetValue())
				}
			}
			switch {
			case mt.GetGauge() != nil:
				got[name] = mt.GetGauge().GetValue()
			case mt.GetCounter() != nil:
				got[name] = mt.GetCounter().GetValue()
			}
		}
	}
	st, _ := m.State(tg.Key())
	if got["dplb_real_server_up"] != 1 || got["dplb_health_state_changes_total/down"] != 1 ||
		got["dplb_health_state_changes_total/up"] != 1 || got["dplb_health_checks_total/failed"] < 2 ||
		got["dplb_health_checks_total/passed"] < 4 || len(got) != 5 || st.Failed < 2 {
		t.Errorf("metrics = %v", got)
	}
}

// TestStartDown: with start_down (keepalived's alpha) a target starts
// down, saying why, and comes up after rise passed probes; one whose
// probes fail stays down with no change to report.
func TestStartDown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pass   bool
		wantUp bool
	}{{"probes pass", true, true}, {"probes fail", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int32
			check := func(ctx context.Context, _ health.Target) (bool, string) {
				n.Add(1)
				if tc.pass {
					return true, ""
				}
				return false, "refused"
			}
			var rec recorder
			m := health.New(zap.NewNop(), rec.add, health.WithChecker(health.Plain(check)))
			c := fastCheck(2, 3)
			c.StartDown = true
			tg := fakeTarget(0, c)
			m.Update([]health.Target{tg})
			if st, _ := m.State(tg.Key()); st.Up || st.LastReason != health.StartDownReason {
				t.Fatalf("before any probe: up %v, reason %q; want down, %q", st.Up, st.LastReason, health.StartDownReason)
			}
			start(t, m)
			waitFor(t, "five probes", func() bool { return n.Load() >= 5 })
			time.Sleep(20 * time.Millisecond)
			var want []health.Change
			if tc.wantUp {
				want = []health.Change{{Target: tg, Up: true, Reason: "2 consecutive probes passed"}}
			}
			got := rec.get()
			for i := range got {
				got[i].At = time.Time{}
				got[i].Target.Check = c
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("changes %+v, want %+v", got, want)
			}
			if st, _ := m.State(tg.Key()); st.Up != tc.wantUp {
				t.Errorf("state up %v, want %v", st.Up, tc.wantUp)
			}
		})
	}
}

// TestRetryInterval: with retry_interval (keepalived's delay_before_retry)
// a failed probe of a server still up is followed by the next one after
// retry_interval, not the interval; once the server is down, probes come
// at the interval again.
func TestRetryInterval(t *testing.T) {
	var mu sync.Mutex
	var starts []time.Time
	check := func(ctx context.Context, _ health.Target) (bool, string) {
		mu.Lock()
		starts = append(starts, time.Now())
		mu.Unlock()
		return false, "refused"
	}
	var rec recorder
	m := health.New(zap.NewNop(), rec.add, health.WithChecker(health.Plain(check)))
	c := conf.HealthCheck{Type: "tcp", Interval: 500 * time.Millisecond, Timeout: 100 * time.Millisecond, Rise: 1, Fall: 3,
		RetryInterval: 10 * time.Millisecond}
	m.Update([]health.Target{fakeTarget(0, c)})
	start(t, m)
	waitFor(t, "four probes", func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 4 })
	mu.Lock()
	gaps := []time.Duration{starts[1].Sub(starts[0]), starts[2].Sub(starts[1]), starts[3].Sub(starts[2])}
	mu.Unlock()
	if gaps[0] > 250*time.Millisecond || gaps[1] > 250*time.Millisecond {
		t.Errorf("after failures of a server still up, probes came %v and %v apart, want about the 10ms retry_interval", gaps[0], gaps[1])
	}
	if gaps[2] < 400*time.Millisecond {
		t.Errorf("after the server went down, the next probe came %v later, want the 500ms interval", gaps[2])
	}
	if ch := rec.get(); len(ch) != 1 || ch[0].Up {
		t.Errorf("changes %+v, want one: down", ch)
	}
}

// TestExitWeight: a weight_from_exit check's weights reach the state, and
// a change is queued when one moves on a server that stays up; exit 0
// keeps the last weight, and a check that stops setting weights forgets it.
func TestExitWeight(t *testing.T) {
	results := []health.Result{
		{OK: true, Weight: 5},  // up already: a weight change
		{OK: true, Weight: -1}, // exit 0: the weight stays 5
		{OK: true, Weight: 5},  // the same weight: nothing
		{OK: true, Weight: 8},  // a weight change
		{Reason: "exit status 1", Weight: -1},
		{Reason: "exit status 1", Weight: -1}, // down (fall 2)
		{OK: true, Weight: 3},                 // up (rise 1), at weight 3
	}
	var mu sync.Mutex
	probes := 0
	check := func(ctx context.Context, _ health.Target) health.Result {
		mu.Lock()
		defer mu.Unlock()
		r := results[min(probes, len(results)-1)]
		probes++
		return r
	}
	var rec recorder
	m := health.New(zap.NewNop(), rec.add, health.WithChecker(check))
	c := conf.HealthCheck{Type: "exec", Command: []string{"/bin/true"}, WeightFromExit: true,
		Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, Rise: 1, Fall: 2}
	tg := fakeTarget(0, c)
	m.Update([]health.Target{tg})
	if st, _ := m.State(tg.Key()); st.ExitWeight != -1 {
		t.Fatalf("a new target's exit weight is %d, want -1 (none)", st.ExitWeight)
	}
	start(t, m)
	waitFor(t, "every result probed", func() bool { mu.Lock(); defer mu.Unlock(); return probes > len(results) })
	type change struct {
		up, weighted bool
		weight       int
	}
	var got []change
	for _, ch := range rec.get() {
		got = append(got, change{ch.Up, ch.Weighted, ch.Weight})
	}
	want := []change{{true, true, 5}, {true, true, 8}, {false, false, 0}, {true, false, 0}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes %+v, want %+v", got, want)
	}
	if st, _ := m.State(tg.Key()); !st.Up || st.ExitWeight != 3 {
		t.Errorf("state up %v exit weight %d, want up at 3", st.Up, st.ExitWeight)
	}

	c.Interval = 200 * time.Millisecond // a changed check that still sets weights keeps it
	tg = fakeTarget(0, c)
	m.Update([]health.Target{tg})
	if st, _ := m.State(tg.Key()); st.ExitWeight != 3 {
		t.Errorf("after a change of interval, exit weight %d, want 3 kept", st.ExitWeight)
	}
	c.WeightFromExit = false
	tg = fakeTarget(0, c)
	m.Update([]health.Target{tg})
	if st, _ := m.State(tg.Key()); st.ExitWeight != -1 {
		t.Errorf("without weight_from_exit, exit weight %d, want -1 (the configured weight)", st.ExitWeight)
	}
}

// TestWeightDelta: what a file check adds to the weight reaches the
// state, a change is queued when it moves on a server that stays up,
// and a check that no longer adds to the weight forgets it.
func TestWeightDelta(t *testing.T) {
	results := []health.Result{
		{OK: true, Weight: -1, Delta: 6}, // a weight change
		{OK: true, Weight: -1, Delta: 6}, // the same: nothing
		{OK: true, Weight: -1, Delta: 0}, // back to the configured weight
		{Reason: "file: read: permission denied", Weight: -1},
		{OK: true, Weight: -1, Delta: -2},
	}
	var mu sync.Mutex
	probes := 0
	check := func(ctx context.Context, _ health.Target) health.Result {
		mu.Lock()
		n := probes
		probes++
		mu.Unlock()
		if n >= len(results) {
			// The last result again, only once the probe times out: a
			// probe started after the Update below ends after the test
			// read the state.
			<-ctx.Done()
			n = len(results) - 1
		}
		return results[n]
	}
	var rec recorder
	m := health.New(zap.NewNop(), rec.add, health.WithChecker(check))
	c := conf.HealthCheck{Type: "file", File: "/run/rs1", FileWeight: 2,
		Interval: 100 * time.Millisecond, Timeout: 50 * time.Millisecond, Rise: 1, Fall: 2}
	tg := fakeTarget(0, c)
	m.Update([]health.Target{tg})
	start(t, m)
	waitFor(t, "every result probed", func() bool { mu.Lock(); defer mu.Unlock(); return probes > len(results) })
	type change struct {
		up, weighted bool
		delta        int
	}
	var got []change
	for _, ch := range rec.get() {
		got = append(got, change{ch.Up, ch.Weighted, ch.Delta})
	}
	if want := []change{{true, true, 6}, {true, true, 0}, {true, true, -2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("changes %+v, want %+v", got, want)
	}
	if st, _ := m.State(tg.Key()); !st.Up || st.WeightDelta != -2 {
		t.Errorf("state up %v weight delta %d, want up at -2", st.Up, st.WeightDelta)
	}
	c.FileWeight = 0 // a drain switch now: it adds nothing
	tg = fakeTarget(0, c)
	m.Update([]health.Target{tg})
	if st, _ := m.State(tg.Key()); st.WeightDelta != 0 {
		t.Errorf("with file_weight 0, weight delta %d, want 0", st.WeightDelta)
	}
}
