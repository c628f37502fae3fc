package conn

import "time"

// Timeouts holds how long a connection may stay idle in each state before
// Expire removes it. Table.Touch sets Conn.Expires = now + For(state)
// after each packet.
type Timeouts struct {
	// ByState is indexed by State, so For is one array read on the packet
	// path.
	ByState [NumStates]time.Duration
}

// DefaultTimeouts returns the LVS defaults: the seed documents' SYN states
// 1 minute, ESTABLISHED 15 minutes, FIN states 1 minute and UDP 5 minutes,
// and the kernel's values for the rest. Current Linux tcp_timeouts differ
// in places (SYN_SENT, FIN_WAIT, TIME_WAIT and SYNACK are 2 minutes there).
func DefaultTimeouts() Timeouts {
	var t Timeouts
	t.ByState[StateNone] = 2 * time.Second
	t.ByState[StateEstablished] = 900 * time.Second
	t.ByState[StateSynSent] = 60 * time.Second
	t.ByState[StateSynRecv] = 60 * time.Second
	t.ByState[StateFinWait] = 60 * time.Second
	t.ByState[StateTimeWait] = 60 * time.Second
	t.ByState[StateClose] = 10 * time.Second
	t.ByState[StateCloseWait] = 60 * time.Second
	t.ByState[StateLastAck] = 30 * time.Second
	t.ByState[StateListen] = 120 * time.Second
	t.ByState[StateSynAck] = 60 * time.Second
	t.ByState[StateUDP] = 300 * time.Second
	return t
}

// For returns the timeout of state s in nanoseconds, ready to add to a
// monotonic clock. A state out of range gets the NONE timeout, the
// shortest-lived class, rather than a crash or an immortal entry.
func (t *Timeouts) For(s State) int64 {
	if s >= NumStates {
		s = StateNone
	}
	return int64(t.ByState[s])
}
