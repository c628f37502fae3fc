package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
)

// State is what the Monitor knows of one target.
type State struct {
	Target      Target
	Up          bool      // in scheduling; a new target starts up (keepalived's default), or down with start_down
	Successes   int       // consecutive passed probes
	Failures    int       // consecutive failed probes
	LastReason  string    // why the last failed probe failed, "" if none has
	LastFailure time.Time // when the last probe failed, zero if none has
	LastChange  time.Time // when Up last changed, zero if never since the target was added
	LastProbe   time.Time // when the last probe ended, zero if none has
	LastPassed  bool      // whether the last probe passed
	UpSince     time.Time // when the target last came up, zero if up since it was added (for EffectiveWeight)
	Passed      uint64    // probes passed since the target was added
	Failed      uint64    // probes failed since the target was added
	WentUp      uint64    // changes to up
	WentDown    uint64    // changes to down
	// ExitWeight is the weight a weight_from_exit check's last exit status
	// of 2..255 set (status - 2), -1 while none has: the configured
	// weight holds. An exit 0 keeps it, as keepalived's misc_dynamic does.
	ExitWeight int
	// WeightDelta is what the file checks' numbers last added to the
	// weight (file_weight other than 0), 0 while they add nothing.
	WeightDelta int
}

// StartDownReason is a start_down target's reason until a probe passed.
const StartDownReason = "start_down: no probe has passed yet"

// newState is a new target's state: up (keepalived's default), or down
// with start_down (keepalived's alpha) until Rise probes pass.
func newState(t Target) State {
	if t.Check.StartDown {
		return State{Target: t, LastReason: StartDownReason, ExitWeight: -1}
	}
	return State{Target: t, Up: true, ExitWeight: -1}
}

// Change is a target going up or down or, with Weighted, a target that
// stays up getting a weight from its check's exit status or file.
type Change struct {
	Target   Target
	Up       bool
	Reason   string // down: the last probe's failure; up: "N consecutive probes passed"
	At       time.Time
	Weighted bool // Weight or Delta changed, Up did not
	Weight   int  // with Weighted: the weight the check set, -1 if none
	Delta    int  // with Weighted: what the file checks add to the weight
}

// Option configures a Monitor.
type Option func(*Monitor)

// WithChecker replaces Probe (tests).
func WithChecker(c Checker) Option { return func(m *Monitor) { m.check = c } }

// Monitor probes targets and reports their changes.
//
// Semantics (keepalived's): a target starts up and is assumed healthy
// (with start_down, keepalived's alpha, down until Rise probes pass); it
// goes down after Fall consecutive failed probes and comes back after Rise
// consecutive passed ones. The first probe runs within a tenth of the
// interval after the target starts (a random delay, so that targets spread
// out), then one every interval; a probe is bounded by the check's
// timeout.
//
// Changes go to onChange from one goroutine, one at a time, in the order
// they happened: never concurrently, for the same target or any other.
// onChange must not call Close (it may call States, State and Update).
// A change of a target that an Update has removed before its delivery is
// dropped (also if the same key was added again since); one whose check
// an Update changed is delivered.
type Monitor struct {
	log      *zap.Logger
	onChange func(Change)
	check    Checker

	mu      sync.Mutex
	targets map[Key]*runner
	ctx     context.Context // the running Run's, nil when not running
	stop    context.CancelFunc
	runDone chan struct{} // closed when the running Run returns
	closed  bool
	queue   []queued
	wake    chan struct{}
	wg      sync.WaitGroup // runners
	lineage uint64         // the last lineage given out
}

type queued struct {
	lineage uint64
	c       Change
}

// runner probes one target; st is guarded by Monitor.mu. A runner that
// replaces another for a changed check inherits its state and lineage, so
// the changes of the one it replaced are still delivered.
type runner struct {
	t       Target
	st      State
	lineage uint64
	cancel  context.CancelFunc // nil when not started
}

// New returns a monitor that reports changes to onChange (nil: none).
func New(log *zap.Logger, onChange func(Change), opts ...Option) *Monitor {
	if log == nil {
		log = zap.NewNop()
	}
	if onChange == nil {
		onChange = func(Change) {}
	}
	m := &Monitor{
		log:      log,
		onChange: onChange,
		check:    Check,
		targets:  map[Key]*runner{},
		wake:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Update sets the targets to watch. A target whose key (service, server)
// and check are unchanged keeps running with its state; a new one starts
// up; a removed one stops (without a Change); one whose check or VIP
// changed restarts: its consecutive counts start again at zero but it
// keeps its up or down state (a down server needs Rise passes of the new
// check). Targets whose check type is none are not watched. Of targets
// with the same key, the last counts. Update may be called before Run,
// during it, and after it.
func (m *Monitor) Update(targets []Target) {
	want := make(map[Key]Target, len(targets))
	for _, t := range targets {
		t.Check = t.Check.Effective()
		if t.Check.Enabled() {
			want[t.Key()] = t
		} else {
			delete(want, t.Key())
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, r := range m.targets {
		if _, ok := want[k]; !ok {
			r.halt()
			delete(m.targets, k)
			m.log.Info("health check removed", zap.Stringer("target", r.t))
		}
	}
	for k, t := range want {
		old := m.targets[k]
		if old != nil && old.t.equal(t) {
			continue
		}
		r := &runner{t: t, st: newState(t)}
		if old != nil {
			old.halt()
			r.lineage = old.lineage
			r.st = old.st
			r.st.Target = t
			r.st.Successes, r.st.Failures = 0, 0
			if !t.Check.WeightFromExit {
				r.st.ExitWeight = -1
			}
			if !addsWeight(t.Check) {
				r.st.WeightDelta = 0
			}
			m.log.Info("health check changed", zap.Stringer("target", t), zap.Bool("up", r.st.Up))
		} else {
			m.lineage++
			r.lineage = m.lineage
			m.log.Info("health check added", zap.Stringer("target", t))
		}
		m.targets[k] = r
		if m.ctx != nil {
			m.start(r)
		}
	}
}

// halt stops the runner's goroutine, if started; Monitor.mu is held.
func (r *runner) halt() {
	if r.cancel != nil {
		r.cancel()
	}
}

// start starts r's goroutine; Monitor.mu is held and the monitor running.
func (m *Monitor) start(r *runner) {
	ctx, cancel := context.WithCancel(m.ctx)
	r.cancel = cancel
	m.wg.Go(func() { m.probeLoop(ctx, r) })
}

// ErrRunning is returned by Run when the monitor already runs or was closed.
var ErrRunning = errors.New("health: monitor already running or closed")

// Run probes the targets and delivers changes until ctx is done or Close
// is called; it returns once every probe has stopped. A monitor runs once.
func (m *Monitor) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.ctx != nil || m.closed {
		m.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.ctx, m.stop, m.runDone = ctx, cancel, make(chan struct{})
	done := m.runDone
	for _, r := range m.targets {
		m.start(r)
	}
	m.mu.Unlock()

	m.deliver(ctx)
	cancel()
	m.wg.Wait()

	m.mu.Lock()
	m.ctx, m.stop, m.closed = nil, nil, true
	for _, r := range m.targets {
		r.cancel = nil
	}
	m.queue = nil
	m.mu.Unlock()
	close(done)
	return nil
}

// Close stops Run and waits for it to return. It may be called more than
// once, and before Run (which then returns at once).
func (m *Monitor) Close() {
	m.mu.Lock()
	m.closed = true
	stop, done := m.stop, m.runDone
	m.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// deliver calls onChange for queued changes until ctx is done; changes
// still queued then are dropped.
func (m *Monitor) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		for {
			m.mu.Lock()
			if len(m.queue) == 0 || ctx.Err() != nil {
				m.mu.Unlock()
				break
			}
			q := m.queue[0]
			m.queue[0] = queued{}
			m.queue = m.queue[1:]
			r := m.targets[q.c.Target.Key()]
			current := r != nil && r.lineage == q.lineage
			m.mu.Unlock()
			if current {
				m.onChange(q.c)
			}
		}
	}
}

func (m *Monitor) probeLoop(ctx context.Context, r *runner) {
	c := r.t.Check
	Every(ctx, c.Interval, c.ProbeTimeout(),
		func(pctx context.Context) Result { return m.check(pctx, r.t) },
		func(res Result, at time.Time) time.Duration { return m.record(r, res, at) })
}

// record applies one probe's result to r's state, and says when the next
// probe comes: after the check's retry_interval when it failed on a
// server still up (keepalived's delay_before_retry), else 0 (the
// interval).
func (m *Monitor) record(r *runner, res Result, now time.Time) (next time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets[r.t.Key()] != r {
		return // removed or replaced meanwhile
	}
	st := &r.st
	ok, reason := res.OK, res.Reason
	st.LastProbe, st.LastPassed = now, ok
	reweighed := ok && (res.Weight >= 0 && res.Weight != st.ExitWeight || res.Delta != st.WeightDelta)
	if reweighed {
		if res.Weight >= 0 {
			st.ExitWeight = res.Weight
		}
		st.WeightDelta = res.Delta
	}
	if ok {
		st.Passed++
		st.Successes++
		st.Failures = 0
	} else {
		if reason == "" {
			reason = "failed"
		}
		st.Failed++
		st.Failures++
		st.Successes = 0
		st.LastReason, st.LastFailure = reason, now
		m.log.Debug("health probe failed", zap.Stringer("target", r.t), zap.String("reason", reason),
			zap.Int("failures", st.Failures), zap.Bool("up", st.Up))
	}
	c := r.t.Check
	if st.Up && !ok && st.Failures < c.Fall {
		next = c.RetryInterval
	}
	switch {
	case st.Up && !ok && st.Failures >= c.Fall:
		st.Up, st.UpSince = false, time.Time{}
		st.WentDown++
		m.log.Warn("real server down", zap.String("service", r.t.Service), zap.Stringer("server", r.t.Addr),
			zap.String("reason", reason), zap.Int("failures", st.Failures))
	case !st.Up && ok && st.Successes >= c.Rise:
		st.Up, st.UpSince = true, now
		st.WentUp++
		reason = fmt.Sprintf("%d consecutive probes passed", st.Successes)
		m.log.Info("real server up", zap.String("service", r.t.Service), zap.Stringer("server", r.t.Addr),
			zap.String("reason", reason))
	case st.Up && reweighed:
		// Up already and staying up: only the weight changed.
		m.queue = append(m.queue, queued{r.lineage, Change{Target: r.t, Up: true, At: now, Weighted: true, Weight: res.Weight,
			Delta: res.Delta, Reason: weightReason(res)}})
		m.notify()
		return next
	default:
		return next
	}
	st.LastChange = now
	m.queue = append(m.queue, queued{r.lineage, Change{Target: r.t, Up: st.Up, Reason: reason, At: now}})
	m.notify()
	return next
}

// weightReason says what set a weight that changed.
func weightReason(res Result) string {
	if res.Weight >= 0 {
		return fmt.Sprintf("exit status %d: weight %d", res.Weight+2, res.Weight)
	}
	return fmt.Sprintf("file: weight %+d", res.Delta)
}

// addsWeight reports whether c or one of its also checks is a file check
// that adds to the weight.
func addsWeight(c conf.HealthCheck) bool {
	for _, a := range append([]conf.HealthCheck{c}, c.Also...) {
		if a.Effective().Type == conf.HealthFile && a.FileWeight != 0 {
			return true
		}
	}
	return false
}

// notify wakes the delivery of queued changes; Monitor.mu is held.
func (m *Monitor) notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// States returns the state of every watched target, sorted by service
// and server.
func (m *Monitor) States() []State {
	m.mu.Lock()
	out := make([]State, 0, len(m.targets))
	for _, r := range m.targets {
		out = append(out, r.st)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b State) int { return compareKeys(a.Target.Key(), b.Target.Key()) })
	return out
}

// State returns the state of one target and whether it is watched. A
// target that is not watched (no check) counts as up.
func (m *Monitor) State(k Key) (State, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.targets[k]
	if !ok {
		return State{}, false
	}
	return r.st, true
}
