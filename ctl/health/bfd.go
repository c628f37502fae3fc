package health

import (
	"net/netip"
	"sync"
	"time"

	"github.com/dplb/dplb/ctl/health/bfd"
)

// bfdSessions runs the process's BFD sessions, opened with the first bfd
// check.
var bfdSessions = sync.OnceValue(func() *bfd.Manager { return bfd.NewManager(bfd.Options{}) })

// CloseBFD ends the process's BFD sessions, each with an AdminDown, when
// lbd stops.
func CloseBFD() { bfdSessions().Close() }

// bfdWarmup is how long a new session that has not come up yet passes:
// the handshake runs at a packet a second (RFC 5880), and a server is up
// until it fails (keepalived's way), not down until its session is up.
// With start_down it fails from the start.
const bfdWarmup = 5 * time.Second

// probeBFD passes while the BFD session with the server is up. The
// session runs on its own; a probe reads its state, and the session ends
// when no probe asked for two intervals and more.
func probeBFD(m *bfd.Manager, t Target) Result {
	c := t.Check
	remote := t.Addr.Addr()
	var source netip.Addr
	if a, err := netip.ParseAddr(c.Source); err == nil && a.Is4() == remote.Is4() {
		source = a
	}
	cfg := bfd.Config{Interval: c.BFDInterval, Multiplier: c.BFDMultiplier,
		Auth: bfd.Auth{Type: bfd.AuthTypes[c.BFDAuth], KeyID: uint8(c.BFDKeyID), Key: c.BFDPassword}}
	st, err := m.Status(remote, source, cfg, 2*c.Interval+5*time.Second)
	switch {
	case err != nil:
		return Outcome(false, truncate(err.Error()))
	case st.State == bfd.Up:
		return Outcome(true, "")
	case !st.EverUp && !c.StartDown && time.Since(st.Started) < bfdWarmup:
		return Outcome(true, "")
	case st.AuthError != "":
		return Outcome(false, truncate("bfd: "+st.AuthError))
	case !st.Heard:
		return Outcome(false, "bfd: no answer from the server")
	case st.Diag != bfd.DiagNone:
		return Outcome(false, "bfd: session "+st.State.String()+": "+st.Diag.String())
	}
	return Outcome(false, "bfd: session "+st.State.String())
}
