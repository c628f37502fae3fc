package ctl

import (
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
)

// Passive health checking: every window, the controller compares each
// watched server's new connections with those that reached ESTABLISHED
// (the lcores count both); a server whose attempts mostly go unanswered
// two windows running is suspect and held out of scheduling for a while,
// then let back in to be judged again (a circuit breaker: while held out
// it gets no attempts to judge).
const (
	passiveWindow = 10 * time.Second
	passiveHold   = 30 * time.Second
)

type passiveState struct {
	det     *health.Passive
	last    map[health.Key][2]uint64 // counters at the previous window
	suspect map[health.Key]time.Time // held out until
	next    time.Time                // the next window's end
}

func (p *passiveState) isSuspect(k health.Key) bool {
	_, ok := p.suspect[k]
	return ok
}

// observePassive closes a window when one is due; it reports whether a
// server became suspect or was let back in (the snapshot must change).
// The caller holds mu.
func (c *Controller) observePassive(now time.Time) bool {
	p := &c.passive
	if now.Before(p.next) {
		return false
	}
	p.next = now.Add(passiveWindow)
	if p.det == nil {
		p.det = health.NewPassive(health.DefaultPassiveThresholds())
		p.last, p.suspect = map[health.Key][2]uint64{}, map[health.Key]time.Time{}
	}
	changed := false
	for k, until := range p.suspect {
		if now.After(until) {
			delete(p.suspect, k)
			p.det.Reset(k)
			c.log.Info("real server let back in after passive suspicion", zap.String("service", k.Service), zap.Stringer("server", k.Addr))
			changed = true
		}
	}
	for i := range c.services {
		s := &c.services[i]
		for _, r := range s.servers {
			if !s.conf.HealthFor(r.conf).Passive || s.conf.Protocol != "tcp" {
				continue
			}
			k := r.health
			ds := c.dp.DestStats(r.id)
			cur := [2]uint64{ds[lcore.DestConns], ds[lcore.DestEstablished]}
			prev, seen := p.last[k]
			p.last[k] = cur
			if !seen || p.isSuspect(k) || cur[0] < prev[0] || cur[1] < prev[1] {
				// (Counters that went back: the server was removed, its id
				// reused, and it was added again with a fresh one.)
				continue
			}
			sus := p.det.Observe(k, cur[0]-prev[0], cur[1]-prev[1])
			if sus.Changed && sus.Suspect {
				p.suspect[k] = now.Add(passiveHold)
				c.log.Warn("real server suspect: connection attempts go unanswered", zap.String("service", k.Service),
					zap.Stringer("server", k.Addr), zap.String("reason", sus.Reason))
				changed = true
			}
		}
	}
	return changed
}
