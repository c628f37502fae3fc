package lcore

import (
	"sync/atomic"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
)

// ConnInfo is one connection (or persistence template) as listed for
// lbctl -c.
type ConnInfo struct {
	Proto      uint8
	State      conn.State
	Template   bool
	Fwd        fwd.Method
	ClientIP   uint32
	ClientPort uint16
	VIP        uint32
	VPort      uint16
	RIP        uint32
	RPort      uint16
	Expires    int64 // nanoseconds left
}

// ConnFilter selects connections to list; zero fields match everything.
type ConnFilter struct {
	VIP    uint32
	VPort  uint16
	Proto  uint8
	Client uint32
}

// DumpRequest asks a worker for its connections. The control plane makes
// it with Out's capacity as the limit and waits for Done; the worker fills
// Out a slice of its table at a time, between bursts, and never blocks.
type DumpRequest struct {
	ConnFilter

	Out       []ConnInfo // appended by the worker, up to cap(Out)
	Truncated bool       // more matched than cap(Out)

	cursor uint32
	done   atomic.Bool
}

// Done reports whether the worker finished; Out is then the caller's.
func (r *DumpRequest) Done() bool { return r.done.Load() }

// dumpSlots is how many table slots a commands job examines for a dump.
const dumpSlots = 4096

func (r *ConnFilter) matches(c *conn.Conn) bool {
	proto := c.Proto &^ protoTemplate
	return (r.Proto == 0 || r.Proto == proto) && (r.VIP == 0 || r.VIP == c.VIP) &&
		(r.VPort == 0 || r.VPort == c.VPort) && (r.Client == 0 || r.Client == c.ClientIP)
}

// runDump advances the dump in progress by a slice of the table.
func (w *Worker) runDump() {
	r := w.dump
	next, done := w.table.Scan(r.cursor, dumpSlots, func(_ uint32, c *conn.Conn) {
		if !r.matches(c) {
			return
		}
		if len(r.Out) == cap(r.Out) {
			r.Truncated = true
			return
		}
		r.Out = append(r.Out, ConnInfo{
			Proto: c.Proto &^ protoTemplate, State: c.State, Template: c.Flags&conn.FlagTemplate != 0, Fwd: c.Fwd,
			ClientIP: c.ClientIP, ClientPort: c.ClientPort, VIP: c.VIP, VPort: c.VPort, RIP: c.RIP, RPort: c.RPort,
			Expires: c.Expires - w.now,
		})
	})
	r.cursor = next
	if done {
		w.dump = nil
		r.done.Store(true) // publishes Out to the control plane
	}
}
