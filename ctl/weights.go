package ctl

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
)

// weigh decides each of s's servers' state for the next snapshot, and
// whether the service has its quorum (keepalived's: the total weight of
// the servers not down, with hysteresis from prev, the running model's
// service or nil) and whether the sorry server stands in (the quorum
// lost: by default every server down, or at weight 0); it reports a slow
// start under way. Without the quorum the sorry server, when there is
// one, takes every new connection, as keepalived puts it in the servers'
// place (theirs go on).
func (c *Controller) weigh(s *service, prev *service, now time.Time) (ramping bool) {
	live := 0
	for i := range s.servers {
		r := &s.servers[i]
		st, ramp := c.serverState(s.conf, r, now)
		r.state = st
		ramping = ramping || ramp
		if !st.down {
			live += st.counted
		}
	}
	s.quorumUp = hasQuorum(s.conf, prev, live)
	// Logged where the quorum decides something: a sorry server, or a
	// quorum of its own (the default's loss is every server down, which
	// the health checks log).
	if prev != nil && prev.quorumUp != s.quorumUp && (s.sorry != nil || s.conf.QuorumWeight() > 1) {
		msg, lvl := "quorum gained", zap.InfoLevel
		if !s.quorumUp {
			msg, lvl = "quorum lost", zap.WarnLevel
		}
		c.log.Log(lvl, msg, zap.String("service", s.name()), zap.Int("weight", live),
			zap.Int("quorum", s.conf.QuorumWeight()), zap.Int("hysteresis", s.conf.Hysteresis), zap.Bool("sorry_server", s.sorry != nil))
	}
	s.sorryActive = s.sorry != nil && !s.quorumUp
	if s.sorryActive {
		for i := range s.servers {
			s.servers[i].state.weight = 0 // the sorry server stands in for them all
		}
	}
	if s.sorry != nil {
		s.sorry.state = serverState{weight: 1}
	}
	return ramping
}

// hasQuorum is keepalived's quorum state of service sc, whose servers not
// down weigh live in all: a service that had it (prev, or the first time
// the quorum itself) keeps it until live falls below quorum - hysteresis
// (or to 0); one without gets it back at quorum + hysteresis. A new
// service has it at quorum.
func hasQuorum(sc conf.Service, prev *service, live int) bool {
	q, h := sc.QuorumWeight(), sc.Hysteresis
	switch {
	case prev == nil:
		return live >= q
	case prev.quorumUp:
		return live > 0 && live >= q-h
	}
	return live >= q+h
}

// serverState decides a real server's weight for the next snapshot: the
// configured one, scaled by dynamic feedback (the servers' reported load)
// or set by its exec check's exit status (weight_from_exit), plus what
// its file checks add (file_weight), ramped over
// slow start after a recovery, and 0 when a health check (or passive
// checking) finds it failed; ramping reports a slow start under way.
func (c *Controller) serverState(s conf.Service, r *server, now time.Time) (st serverState, ramping bool) {
	if c.passive.isSuspect(r.health) {
		return serverState{down: true}, false
	}
	w := r.conf.Weight
	if c.feedback != nil {
		w = c.feedback.Weight(r.health, r.conf.Weight)
	}
	st = serverState{weight: w, counted: r.conf.Weight}
	if c.health == nil {
		return st, false
	}
	hs, ok := c.health.State(r.health)
	check := s.HealthFor(r.conf)
	if !ok {
		// Not yet handed to the monitor (a server just added): a
		// start_down one is down until its probes pass.
		if check.StartDown && check.Effective().Enabled() {
			return serverState{down: true}, false
		}
		return st, false
	}
	if !hs.Up {
		return serverState{down: true, expire: check.OnFailure == conf.OnFailureExpire}, false
	}
	if hs.ExitWeight >= 0 {
		// keepalived's misc_dynamic sets the weight its quorum counts too.
		w, st.counted = hs.ExitWeight, hs.ExitWeight
	}
	if hs.WeightDelta != 0 {
		// keepalived adds a FILE_CHECK's weight to the IPVS weight and
		// its quorum.
		w, st.counted = addWeight(w, hs.WeightDelta), addWeight(st.counted, hs.WeightDelta)
	}
	st.weight = health.EffectiveWeight(w, hs.UpSince, now, check.SlowStart)
	return st, st.weight < w
}

// addWeight adds d to a server's weight w, within a weight's range.
func addWeight(w, d int) int { return min(max(w+d, 0), conf.MaxWeight) }

// SetHealth attaches the health monitor: its state decides weights from
// the next update on, and it follows every applied service set.
func (c *Controller) SetHealth(m *health.Monitor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.health = m
	targets := health.Targets(c.serviceConfs())
	m.Update(targets)
	// The snapshot lbd started with had no monitor: servers that start
	// down (start_down) leave it now, before any probe.
	if slices.ContainsFunc(targets, func(t health.Target) bool { return t.Check.StartDown }) {
		c.republish()
	}
}

// HealthChanged is the monitor's callback: a server went down or came
// back, or its check set its weight, so the lcores get a snapshot with its
// new weight.
func (c *Controller) HealthChanged(ch health.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case ch.Weighted:
		c.log.Info("real server weight set by its check", zap.String("service", ch.Target.Service), zap.Stringer("server", ch.Target.Addr),
			zap.String("reason", ch.Reason))
	case ch.Up:
		c.log.Info("real server up", zap.String("service", ch.Target.Service), zap.Stringer("server", ch.Target.Addr), zap.String("reason", ch.Reason))
	default:
		c.log.Warn("real server down", zap.String("service", ch.Target.Service), zap.Stringer("server", ch.Target.Addr), zap.String("reason", ch.Reason))
	}
	c.republish()
}

// SetFeedback attaches the dynamic weight poller; it follows every applied
// service set.
func (c *Controller) SetFeedback(p *feedback.Poller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feedback = p
	p.Update(feedback.Targets(c.serviceConfs()))
}

// FeedbackChanged is the poller's callback: a server's load moved its
// weight, so the lcores get a snapshot with it.
func (c *Controller) FeedbackChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.republish()
}
