package feedback

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
)

// Key identifies a polled server: the same key as the health Monitor's.
type Key = health.Key

// Target is one real server of a service whose feedback is enabled.
type Target struct {
	Service string         // the service, as health.ServiceName spells it, e.g. "tcp/192.0.2.100:80"
	Addr    netip.AddrPort // the real server's address and port
	VIP     netip.AddrPort // the service's VIP and port (for the command's environment; may be zero)
	Config  conf.Feedback  // the service's feedback; zero values mean the defaults (conf.Feedback.Effective)
}

// Key returns the target's identity.
func (t Target) Key() Key { return Key{Service: t.Service, Addr: t.Addr} }

func (t Target) String() string {
	return fmt.Sprintf("%s %s (%s)", t.Service, t.Addr, t.Config.Effective().Type)
}

// equal reports whether two targets are the same, configuration included.
func (t Target) equal(u Target) bool {
	if !slices.Equal(t.Config.Command, u.Config.Command) {
		return false
	}
	t.Config.Command, u.Config.Command = nil, nil
	return reflect.DeepEqual(t, u)
}

// Targets returns a target for every real server of every service whose
// feedback is enabled (type other than none), in configuration order.
func Targets(svcs []conf.Service) []Target {
	var out []Target
	for _, s := range svcs {
		if !s.Feedback.Enabled() {
			continue
		}
		vip := netip.AddrPortFrom(s.VIPAddr(), uint16(s.Port))
		name := health.ServiceName(s.Protocol, vip)
		for _, r := range s.Servers {
			out = append(out, Target{Service: name, Addr: netip.AddrPortFrom(r.Addr(), uint16(r.Port)), VIP: vip, Config: s.Feedback})
		}
	}
	return out
}

// Status is what the Poller knows of one target.
type Status struct {
	Target   Target
	State    State     // the arithmetic's state (State.Samples 0: no data, configured weight)
	Polls    uint64    // polls done since the target was added
	Failed   uint64    // polls that failed (no answer, not a number, out of range, timeout)
	Failures int       // consecutive failed polls, 0 after a good one
	LastErr  string    // why the last failed poll failed, "" if none has
	LastPoll time.Time // when the last poll ended, zero if none has
}

// Option configures a Poller.
type Option func(*Poller)

// WithProber replaces Poll (tests).
func WithProber(p Prober) Option { return func(pl *Poller) { pl.probe = p } }

// Poller polls the load of real servers and keeps, per server, the
// weight feedback wants for it (see Next and Weight).
//
// Each target is polled every interval of its configuration (the first
// poll within a tenth of the interval after it starts, at random so that
// targets spread out), each poll bounded by the timeout. A failed poll
// keeps the last weight and is logged (a warning when a target starts
// failing, debug while it keeps failing, info when it answers again).
//
// onChange is called when some target's applied weight changed (also
// when a target with a non-configured weight is removed or
// reconfigured), so that the caller republishes the weights; it is
// called from Run's goroutine, never concurrently, and changes made while
// it runs call it again afterwards. It may call Weight, Status, States
// and Update; it must not call Close.
type Poller struct {
	log      *zap.Logger
	onChange func()
	probe    Prober

	mu      sync.Mutex
	targets map[Key]*runner
	ctx     context.Context // the running Run's, nil when not running
	stop    context.CancelFunc
	runDone chan struct{} // closed when the running Run returns
	closed  bool
	dirty   chan struct{} // a weight changed since onChange last ran
	wg      sync.WaitGroup
}

// runner polls one target; st is guarded by Poller.mu. A runner that
// replaces another for a changed configuration inherits its status.
type runner struct {
	t      Target
	st     Status
	cancel context.CancelFunc // nil when not started
}

// New returns a poller that calls onChange (nil: nothing) when a weight
// changes.
func New(log *zap.Logger, onChange func(), opts ...Option) *Poller {
	if log == nil {
		log = zap.NewNop()
	}
	if onChange == nil {
		onChange = func() {}
	}
	p := &Poller{
		log:      log,
		onChange: onChange,
		probe:    Poll,
		targets:  map[Key]*runner{},
		dirty:    make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// markDirty schedules a call of onChange.
func (p *Poller) markDirty() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Update sets the targets to poll. A target whose key (service, server)
// and configuration are unchanged keeps polling with its state; a new one
// starts with no data (its configured weight); a removed one stops (its
// weight is the configured one again); one whose configuration changed
// restarts its polling but keeps its state (the new bounds apply at
// once, see Weight). Targets whose type is none are not polled. Of
// targets with the same key, the last counts. Update may be called
// before Run, during it, and after it.
func (p *Poller) Update(targets []Target) {
	want := make(map[Key]Target, len(targets))
	for _, t := range targets {
		t.Config = t.Config.Effective()
		if t.Config.Enabled() {
			want[t.Key()] = t
		} else {
			delete(want, t.Key())
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for k, r := range p.targets {
		if _, ok := want[k]; !ok {
			r.halt()
			delete(p.targets, k)
			changed = changed || r.st.State.Samples > 0
			p.log.Info("load feedback removed", zap.Stringer("target", r.t))
		}
	}
	for k, t := range want {
		old := p.targets[k]
		if old != nil && old.t.equal(t) {
			continue
		}
		r := &runner{t: t, st: Status{Target: t}}
		if old != nil {
			old.halt()
			r.st = old.st
			r.st.Target = t
			changed = changed || r.st.State.Samples > 0
			p.log.Info("load feedback changed", zap.Stringer("target", t))
		} else {
			p.log.Info("load feedback added", zap.Stringer("target", t))
		}
		p.targets[k] = r
		if p.ctx != nil {
			p.start(r)
		}
	}
	if changed {
		p.markDirty()
	}
}

// halt stops the runner's goroutine, if started; Poller.mu is held.
func (r *runner) halt() {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
}

// start starts r's goroutine; Poller.mu is held and the poller running.
func (p *Poller) start(r *runner) {
	ctx, cancel := context.WithCancel(p.ctx)
	r.cancel = cancel
	p.wg.Go(func() { p.pollLoop(ctx, r) })
}

// ErrRunning is returned by Run when the poller already runs or was closed.
var ErrRunning = errors.New("feedback: poller already running or closed")

// Run polls the targets and calls onChange until ctx is done or Close is
// called; it returns once every poll has stopped. A poller runs once.
func (p *Poller) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.ctx != nil || p.closed {
		p.mu.Unlock()
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p.ctx, p.stop, p.runDone = ctx, cancel, make(chan struct{})
	done := p.runDone
	for _, r := range p.targets {
		p.start(r)
	}
	p.mu.Unlock()

	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-p.dirty:
			if ctx.Err() == nil {
				p.onChange()
			}
		}
	}
	cancel()
	p.wg.Wait()

	p.mu.Lock()
	p.ctx, p.stop, p.closed = nil, nil, true
	for _, r := range p.targets {
		r.cancel = nil
	}
	p.mu.Unlock()
	close(done)
	return nil
}

// Close stops Run and waits for it to return. It may be called more than
// once, and before Run (which then returns at once).
func (p *Poller) Close() {
	p.mu.Lock()
	p.closed = true
	stop, done := p.stop, p.runDone
	p.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (p *Poller) pollLoop(ctx context.Context, r *runner) {
	type result struct {
		load float64
		err  error
	}
	c := r.t.Config
	health.Every(ctx, c.Interval, c.Timeout,
		func(pctx context.Context) result { load, err := p.probe(pctx, r.t); return result{load, err} },
		func(res result, at time.Time) time.Duration { p.record(r, res.load, res.err, at); return 0 })
}

// record applies one poll's result to r's status.
func (p *Poller) record(r *runner, load float64, err error, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.targets[r.t.Key()] != r {
		return // removed or replaced meanwhile
	}
	st := &r.st
	st.Polls++
	st.LastPoll = now
	var next State
	if err == nil {
		next, err = Next(st.State, load, r.t.Config)
	}
	if err != nil {
		st.Failed++
		st.Failures++
		st.LastErr = err.Error()
		log := p.log.Debug
		if st.Failures == 1 {
			log = p.log.Warn
		}
		log("load feedback poll failed, weight kept", zap.Stringer("target", r.t), zap.String("reason", st.LastErr),
			zap.Int("failures", st.Failures), zap.Float64("share", share(st.State)))
		return
	}
	if st.Failures > 0 {
		p.log.Info("load feedback poll answers again", zap.Stringer("target", r.t), zap.Int("failures", st.Failures))
	}
	st.Failures = 0
	prev := share(st.State)
	st.State = next
	if next.Share != prev {
		p.log.Info("load feedback weight changed", zap.String("service", r.t.Service), zap.Stringer("server", r.t.Addr),
			zap.Float64("load", next.Last), zap.Float64("smoothed_load", next.Load),
			zap.Float64("share_before", prev), zap.Float64("share", next.Share))
		p.markDirty()
	}
}

// share is the applied share of a state, 1 with no data.
func share(s State) float64 {
	if s.Samples == 0 {
		return 1
	}
	return s.Share
}

// Weight returns the weight to schedule server k with, given its
// configured weight (see the package function Weight): the configured
// weight while k is not polled or has not answered yet.
func (p *Poller) Weight(k Key, configured int) int {
	p.mu.Lock()
	r, ok := p.targets[k]
	var (
		st State
		c  conf.Feedback
	)
	if ok {
		st, c = r.st.State, r.t.Config
	}
	p.mu.Unlock()
	if !ok {
		return max(configured, 0)
	}
	return Weight(st, configured, c)
}

// Status returns the status of one target and whether it is polled.
func (p *Poller) Status(k Key) (Status, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.targets[k]
	if !ok {
		return Status{}, false
	}
	return r.st, true
}

// States returns the status of every polled target, sorted by service
// and server.
func (p *Poller) States() []Status {
	p.mu.Lock()
	out := make([]Status, 0, len(p.targets))
	for _, r := range p.targets {
		out = append(out, r.st)
	}
	p.mu.Unlock()
	slices.SortFunc(out, func(a, b Status) int {
		if a.Target.Service != b.Target.Service {
			if a.Target.Service < b.Target.Service {
				return -1
			}
			return 1
		}
		return a.Target.Addr.Compare(b.Target.Addr)
	})
	return out
}
