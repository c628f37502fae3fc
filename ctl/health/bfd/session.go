package bfd

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"
)

// slowTx is the transmit interval of a session that is not up: RFC 5880
// 6.8.3 wants at least a second.
const slowTx = time.Second

// Config is what a session asks of its server.
type Config struct {
	Interval   time.Duration // desired transmit and required receive interval once up
	Multiplier int           // detect multiplier, 1..255
	Auth       Auth          // the packets' authentication both ways (auth.go)
}

// Status is a session's state as the health check reads it.
type Status struct {
	State State
	// Diag says why the session last went down (DiagNone before it was
	// ever up).
	Diag    Diag
	EverUp  bool      // the session has been up since it started
	Heard   bool      // a packet of the server's has been accepted since the session started
	Started time.Time // when lbd started the session
	// AuthError says why the server's last packet failed authentication,
	// "" if it passed (or none came).
	AuthError string
}

// received is a packet of the server's: its mandatory section parsed, and
// the whole packet, which authentication reads.
type received struct {
	p Packet
	b []byte
}

// session is one BFD session's state machine (RFC 5880 6.8), run by its
// own goroutine.
type session struct {
	m      *Manager
	remote netip.Addr
	source netip.Addr // "" = the kernel's choice
	myDisc uint32
	rx     chan received
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	cfg      Config
	status   Status
	lastUsed time.Time
	keepFor  time.Duration

	// The goroutine's own; RFC 5880's bfd.* variables.
	remoteDisc       uint32
	remoteState      State
	remoteMinRx      time.Duration // the server's RequiredMinRxInterval
	remoteMinTx      time.Duration // the server's DesiredMinTxInterval
	remoteDetectMult uint8
	lastRx           time.Time
	polling          bool // a Poll Sequence under way: our packets set P until one with F comes
	xmitSeq          uint32
	rcvAuth          rcvAuth
}

// usec converts d to a wire interval.
func usec(d time.Duration) uint32 { return uint32(d / time.Microsecond) }

// desiredTx is lbd's DesiredMinTxInterval: slowTx until the session is
// up.
func (s *session) desiredTx(st State, cfg Config) time.Duration {
	if st != Up {
		return max(slowTx, cfg.Interval)
	}
	return cfg.Interval
}

// run is the session's goroutine.
func (s *session) run() {
	defer close(s.done)
	tx := time.NewTimer(0) // the first Down packet at once
	defer tx.Stop()
	detect := time.NewTimer(time.Hour)
	detect.Stop()
	defer detect.Stop()
	for {
		select {
		case <-s.stop:
			// Say AdminDown, so that the server does not count it a
			// failure (RFC 5880 6.8.16).
			s.setState(AdminDown, DiagAdminDown)
			s.send(false)
			return
		case <-tx.C:
			s.send(false)
			tx.Reset(s.txInterval())
		case <-detect.C:
			if st := s.get().State; st == Init || st == Up {
				s.setState(Down, DiagTimeExpired)
				s.remoteDisc = 0
				s.polling = false
				s.send(false)
				tx.Reset(s.txInterval())
			}
		case r := <-s.rx:
			if !s.authentic(r) {
				continue
			}
			before := s.get().State
			reply := s.receive(r.p)
			if d := s.detectTime(); d > 0 {
				detect.Reset(d)
			}
			if after := s.get().State; reply || after != before {
				// Answer a Poll at once, and say a new state at
				// once rather than at the next tick.
				s.send(reply)
				tx.Reset(s.txInterval())
			}
		}
	}
}

// get returns the session's status.
func (s *session) get() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *session) config() Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// setState moves the session to st, noting why it left Up.
func (s *session) setState(st State, d Diag) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.State == st {
		return
	}
	if st == Up {
		s.status.EverUp = true
		s.polling = true // the intervals change: confirm them (RFC 5880 6.8.3)
	}
	s.status.State, s.status.Diag = st, d
}

// authentic checks a packet's authentication (none for a session
// without), noting why it failed in the status.
func (s *session) authentic(r received) bool {
	cfg := s.config()
	forget := 2 * time.Duration(r.p.DetectMult) * max(cfg.Interval, slowTx) // Parse: DetectMult is 1 or more
	why := s.rcvAuth.verify(cfg.Auth, r.p, r.b, time.Now(), forget)
	s.mu.Lock()
	s.status.AuthError = why
	s.mu.Unlock()
	return why == ""
}

// receive applies one packet of the server's (RFC 5880 6.8.6) and says
// whether it asks for a Final at once.
func (s *session) receive(p Packet) (final bool) {
	s.lastRx = time.Now()
	s.remoteDisc = p.MyDisc
	s.remoteState = p.State
	s.remoteMinRx = time.Duration(p.RequiredMinRx) * time.Microsecond
	s.remoteMinTx = time.Duration(p.DesiredMinTx) * time.Microsecond
	s.remoteDetectMult = p.DetectMult
	s.mu.Lock()
	s.status.Heard = true
	s.mu.Unlock()
	if p.Final {
		s.polling = false
	}
	st := s.get().State
	switch {
	case st == AdminDown:
		return false
	case p.State == AdminDown:
		if st != Down {
			s.setState(Down, DiagNeighborDown)
		}
	case st == Down && p.State == Down:
		s.setState(Init, DiagNone)
	case st == Down && p.State == Init, st == Init && (p.State == Init || p.State == Up):
		s.setState(Up, DiagNone)
	case st == Up && p.State == Down:
		s.setState(Down, DiagNeighborDown)
	}
	return p.Poll
}

// detectTime is how long the session waits for the server's next
// packet before it declares the session down (RFC 5880 6.8.4), 0 before
// any.
func (s *session) detectTime() time.Duration {
	if s.remoteDetectMult == 0 {
		return 0
	}
	return time.Duration(s.remoteDetectMult) * max(s.config().Interval, s.remoteMinTx)
}

// txInterval is the time to the next periodic packet: the larger of
// lbd's desired interval and the server's required one, less 0 to 25%
// jitter (10 to 25% with a detect multiplier of 1: RFC 5880 6.8.7).
func (s *session) txInterval() time.Duration {
	cfg := s.config()
	iv := max(s.desiredTx(s.get().State, cfg), s.remoteMinRx)
	top := 100
	if cfg.Multiplier == 1 {
		top = 90
	}
	return iv * time.Duration(75+rand.IntN(top-75+1)) / 100
}

// send sends a control packet: a Final answering a Poll, or a periodic
// one (which sets Poll while a Poll Sequence is under way).
func (s *session) send(final bool) {
	if s.remoteMinRx == 0 && s.remoteDetectMult != 0 && !final {
		return // the server wants no periodic packets (RFC 5880 6.8.7)
	}
	cfg := s.config()
	st := s.get()
	p := Packet{
		Diag:          st.Diag,
		State:         st.State,
		Final:         final,
		Poll:          s.polling && !final,
		DetectMult:    uint8(cfg.Multiplier),
		MyDisc:        s.myDisc,
		YourDisc:      s.remoteDisc,
		DesiredMinTx:  usec(s.desiredTx(st.State, cfg)),
		RequiredMinRx: usec(cfg.Interval),
	}
	var buf [PacketLen + 8 + 20]byte
	b := p.Append(buf[:0])
	if a := cfg.Auth; a.Type != AuthNone {
		b[1] |= 0x04 // A
		b[3] = byte(PacketLen + a.sectionLen())
		b = a.sign(b, s.xmitSeq)
		s.xmitSeq++
	}
	s.m.send(b, s.source, s.remote)
}
