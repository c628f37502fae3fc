package connsync

// WindowSize is how far behind a sender's newest sequence a message may
// arrive (UDP reorders) and still be accepted once.
const WindowSize = 64

// Window is one sender's replay filter: its boot id, the newest sequence
// accepted, and which of the WindowSize before it were seen. A sender
// that restarts takes a larger boot id and starts its sequence again; a
// message from an earlier boot is stale. Only messages whose MAC is right
// reach a window, so a forger cannot move it.
type Window struct {
	boot, top uint64
	seen      uint64 // bit i: top-i was accepted
}

// Accept records (boot, seq) and reports ReasonNone, or why the message
// is a replay or stale; the window is then unchanged.
func (w *Window) Accept(boot, seq uint64) Reason {
	switch {
	case boot < w.boot:
		return ReasonStale
	case boot > w.boot:
		w.boot, w.top, w.seen = boot, seq, 1
		return ReasonNone
	case seq > w.top:
		if d := seq - w.top; d < WindowSize {
			w.seen = w.seen<<d | 1
		} else {
			w.seen = 1
		}
		w.top = seq
		return ReasonNone
	}
	d := w.top - seq
	if d >= WindowSize {
		return ReasonStale
	}
	if w.seen&(1<<d) != 0 {
		return ReasonReplay
	}
	w.seen |= 1 << d
	return ReasonNone
}
