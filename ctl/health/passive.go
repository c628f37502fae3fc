package health

import "fmt"

// PassiveThresholds say when connection attempts that never complete make
// a server suspect. The detector is fed, once per window, each server's
// number of new connections scheduled to it in the window and of
// connections that reached ESTABLISHED in the window. Use windows of 10 s
// or more: a connection scheduled at the end of a window may be
// established in the next one, which the ratio tolerates only if the
// window is long against a SYN's round trip.
type PassiveThresholds struct {
	MinAttempts   uint64  // a window with fewer new connections says nothing (quiet); default 10
	MaxUnanswered float64 // a window is bad when more than this fraction of its new connections never reached ESTABLISHED, 0..1; default 0.5
	Windows       int     // consecutive bad windows that make a server suspect, and good ones that clear it; default 2
}

// DefaultPassiveThresholds returns the defaults: at least 10 attempts per
// window, more than half of them unanswered, two windows in a row.
func DefaultPassiveThresholds() PassiveThresholds {
	return PassiveThresholds{MinAttempts: 10, MaxUnanswered: 0.5, Windows: 2}
}

// effective fills zero thresholds with the defaults.
func (th PassiveThresholds) effective() PassiveThresholds {
	d := DefaultPassiveThresholds()
	if th.MinAttempts == 0 {
		th.MinAttempts = d.MinAttempts
	}
	if th.MaxUnanswered <= 0 || th.MaxUnanswered > 1 {
		th.MaxUnanswered = d.MaxUnanswered
	}
	if th.Windows <= 0 {
		th.Windows = d.Windows
	}
	return th
}

// Window is the verdict on one window of one server.
type Window int

// Verdicts on a window.
const (
	WindowQuiet Window = iota // too few attempts to judge
	WindowGood                // most attempts completed
	WindowBad                 // too many attempts never completed
)

// Judge classifies one window: newConns new connections, established of
// which reached ESTABLISHED (more established than new, from connections
// of the previous window, count as all established). Zero thresholds
// mean the defaults.
func (th PassiveThresholds) Judge(newConns, established uint64) Window {
	th = th.effective()
	if newConns < th.MinAttempts {
		return WindowQuiet
	}
	unanswered := newConns - min(established, newConns)
	if float64(unanswered) > th.MaxUnanswered*float64(newConns) {
		return WindowBad
	}
	return WindowGood
}

// Passive tracks servers' windows and says when a server becomes or stops
// being suspect. It holds no clock and does no I/O: the caller feeds it
// one Observe per server per window. It is not safe for concurrent use.
type Passive struct {
	th      PassiveThresholds
	servers map[Key]*passiveServer
}

type passiveServer struct {
	suspect   bool
	bad, good int // consecutive bad and good windows
}

// Suspicion is the result of one observation.
type Suspicion struct {
	Suspect bool   // the server is suspect after this window
	Changed bool   // this window changed it
	Reason  string // for a window that made it suspect: "15 of 20 new connections never reached ESTABLISHED"
}

// NewPassive returns a detector with the thresholds (zero ones: defaults).
func NewPassive(th PassiveThresholds) *Passive {
	return &Passive{th: th.effective(), servers: map[Key]*passiveServer{}}
}

// Observe feeds one window of server k. A quiet window changes nothing
// (a server taken out of scheduling gets no attempts: clear it with Reset
// once an active check passes).
func (p *Passive) Observe(k Key, newConns, established uint64) Suspicion {
	s := p.servers[k]
	if s == nil {
		s = &passiveServer{}
		p.servers[k] = s
	}
	switch p.th.Judge(newConns, established) {
	case WindowQuiet:
		return Suspicion{Suspect: s.suspect}
	case WindowBad:
		s.bad++
		s.good = 0
		if !s.suspect && s.bad >= p.th.Windows {
			s.suspect = true
			unanswered := newConns - min(established, newConns)
			return Suspicion{Suspect: true, Changed: true,
				Reason: fmt.Sprintf("%d of %d new connections never reached ESTABLISHED", unanswered, newConns)}
		}
	case WindowGood:
		s.good++
		s.bad = 0
		if s.suspect && s.good >= p.th.Windows {
			s.suspect = false
			return Suspicion{Suspect: false, Changed: true}
		}
	}
	return Suspicion{Suspect: s.suspect}
}

// Suspect reports whether server k is suspect.
func (p *Passive) Suspect(k Key) bool {
	s := p.servers[k]
	return s != nil && s.suspect
}

// Reset clears server k: not suspect, no streak.
func (p *Passive) Reset(k Key) { delete(p.servers, k) }
