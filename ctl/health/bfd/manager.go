package bfd

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Manager runs the sessions of a process: one per server address, with
// the sockets they share, opened with the first session and closed with
// the last. Sessions nobody asks about for their keep time end.
type Manager struct {
	opts Options

	mu       sync.Mutex
	sessions map[netip.Addr]*session
	byDisc   map[uint32]*session
	socks    *sockets // nil while no session runs
	sweeping bool
}

// Options are a Manager's addresses: the defaults for lbd, others for
// tests that run two Managers on one host.
type Options struct {
	Listen4 netip.Addr // the IPv4 address packets arrive at; default 0.0.0.0
	Listen6 netip.Addr // the IPv6 one; default ::
	Port    int        // the port packets arrive at and go to; default 3784 (RFC 5881)
	NoIPv6  bool       // do not listen on IPv6
}

// NewManager returns a Manager; it opens nothing until a session starts.
func NewManager(o Options) *Manager {
	if !o.Listen4.IsValid() {
		o.Listen4 = netip.IPv4Unspecified()
	}
	if !o.Listen6.IsValid() {
		o.Listen6 = netip.IPv6Unspecified()
	}
	if o.Port == 0 {
		o.Port = Port
	}
	return &Manager{opts: o, sessions: map[netip.Addr]*session{}, byDisc: map[uint32]*session{}}
}

// sockets are the sockets a Manager's sessions share: one to receive
// and one to send, for each family.
type sockets struct {
	rx4, tx4 *ipv4.PacketConn
	rx6, tx6 *ipv6.PacketConn
	closers  []net.PacketConn
}

// Status returns the status of the session with the server at remote,
// from source (invalid: the kernel's choice), and starts it with cfg if
// there is none (a session's config follows the last Status call). The
// session ends once nobody asked for keepFor.
func (m *Manager) Status(remote, source netip.Addr, cfg Config, keepFor time.Duration) (Status, error) {
	remote = remote.Unmap()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[remote]
	if s == nil {
		if m.socks == nil {
			socks, err := m.open()
			if err != nil {
				return Status{}, err
			}
			m.socks = socks
		}
		if remote.Is6() && m.socks.rx6 == nil {
			return Status{}, errors.New("bfd: no IPv6 socket")
		}
		s = &session{m: m, remote: remote, source: source, myDisc: m.newDisc(), rx: make(chan received, 8), xmitSeq: rand.Uint32(),
			stop: make(chan struct{}), done: make(chan struct{}), cfg: cfg}
		s.status = Status{State: Down, Started: time.Now()}
		m.sessions[remote] = s
		m.byDisc[s.myDisc] = s
		go s.run()
		if !m.sweeping {
			m.sweeping = true
			go m.sweep()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg, s.lastUsed, s.keepFor = cfg, time.Now(), keepFor
	return s.status, nil
}

// newDisc returns a discriminator no session of m has; m.mu is held.
func (m *Manager) newDisc() uint32 {
	for {
		if d := rand.Uint32(); d != 0 && m.byDisc[d] == nil {
			return d
		}
	}
}

// sweep ends the sessions nobody asked about for their keep time, and
// closes the sockets with the last.
func (m *Manager) sweep() {
	for {
		time.Sleep(time.Second)
		m.mu.Lock()
		var ended []*session
		for k, s := range m.sessions {
			s.mu.Lock()
			idle := time.Since(s.lastUsed) > s.keepFor
			s.mu.Unlock()
			if idle {
				delete(m.sessions, k)
				ended = append(ended, s)
			}
		}
		m.mu.Unlock()
		m.end(ended)
		m.mu.Lock()
		if len(m.sessions) == 0 {
			m.closeSockets()
			m.sweeping = false
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
	}
}

// Close ends every session, saying AdminDown to each server.
func (m *Manager) Close() {
	m.mu.Lock()
	ended := make([]*session, 0, len(m.sessions))
	for k, s := range m.sessions {
		delete(m.sessions, k)
		ended = append(ended, s)
	}
	m.mu.Unlock()
	m.end(ended)
	m.mu.Lock()
	m.closeSockets()
	m.mu.Unlock()
}

// end stops sessions already out of m.sessions (each says AdminDown) and
// forgets their discriminators; m.mu is not held, as they send.
func (m *Manager) end(ended []*session) {
	for _, s := range ended {
		close(s.stop)
		<-s.done
	}
	m.mu.Lock()
	for _, s := range ended {
		delete(m.byDisc, s.myDisc)
	}
	m.mu.Unlock()
}

// closeSockets closes the shared sockets; m.mu is held.
func (m *Manager) closeSockets() {
	if m.socks == nil {
		return
	}
	for _, c := range m.socks.closers {
		c.Close()
	}
	m.socks = nil
}

// open opens the shared sockets: the receiving ones on the port, which
// report each packet's TTL (hop limit) and destination, and the sending
// ones on a port of RFC 5881's source range, at TTL 255.
func (m *Manager) open() (*sockets, error) {
	socks := &sockets{}
	fail := func(err error) (*sockets, error) {
		for _, c := range socks.closers {
			c.Close()
		}
		return nil, err
	}
	rx4, err := net.ListenPacket("udp4", net.JoinHostPort(m.opts.Listen4.String(), strconv.Itoa(m.opts.Port)))
	if err != nil {
		return fail(fmt.Errorf("bfd: %w", err))
	}
	socks.closers = append(socks.closers, rx4)
	socks.rx4 = ipv4.NewPacketConn(rx4)
	if err := socks.rx4.SetControlMessage(ipv4.FlagTTL|ipv4.FlagSrc|ipv4.FlagDst, true); err != nil {
		return fail(fmt.Errorf("bfd: %w", err))
	}
	tx4, err := listenSrcPort("udp4", m.opts.Listen4)
	if err != nil {
		return fail(err)
	}
	socks.closers = append(socks.closers, tx4)
	socks.tx4 = ipv4.NewPacketConn(tx4)
	if err := socks.tx4.SetTTL(requiredTTL); err != nil {
		return fail(fmt.Errorf("bfd: %w", err))
	}
	go m.read4(socks.rx4)
	if m.opts.NoIPv6 {
		return socks, nil
	}
	rx6, err := net.ListenPacket("udp6", net.JoinHostPort(m.opts.Listen6.String(), strconv.Itoa(m.opts.Port)))
	if err != nil {
		return socks, nil // no IPv6 on this host: IPv4 sessions run
	}
	socks.closers = append(socks.closers, rx6)
	tx6, err := listenSrcPort("udp6", m.opts.Listen6)
	if err != nil {
		return fail(err)
	}
	socks.closers = append(socks.closers, tx6)
	socks.rx6, socks.tx6 = ipv6.NewPacketConn(rx6), ipv6.NewPacketConn(tx6)
	if err := socks.rx6.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagSrc|ipv6.FlagDst, true); err != nil {
		return fail(fmt.Errorf("bfd: %w", err))
	}
	if err := socks.tx6.SetHopLimit(requiredTTL); err != nil {
		return fail(fmt.Errorf("bfd: %w", err))
	}
	go m.read6(socks.rx6)
	return socks, nil
}

// listenSrcPort opens a UDP socket on a free port of 49152..65535,
// starting at a random one.
func listenSrcPort(network string, addr netip.Addr) (net.PacketConn, error) {
	n := maxSrcPort - minSrcPort + 1
	first := rand.IntN(n)
	var err error
	for i := range 64 {
		port := minSrcPort + (first+i)%n
		var c net.PacketConn
		if c, err = net.ListenPacket(network, net.JoinHostPort(addr.String(), strconv.Itoa(port))); err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("bfd: no source port: %w", err)
}

// read4 and read6 hand the packets that arrive to their sessions until
// the socket closes.
func (m *Manager) read4(c *ipv4.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, cm, src, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		if cm == nil || cm.TTL != requiredTTL {
			continue // not from a neighbour (RFC 5881 5)
		}
		m.deliver(buf[:n], src)
	}
}

func (m *Manager) read6(c *ipv6.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, cm, src, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		if cm == nil || cm.HopLimit != requiredTTL {
			continue
		}
		m.deliver(buf[:n], src)
	}
}

// deliver finds a packet's session: by the discriminator it names, or by
// the address it comes from while it names none (RFC 5880 6.8.6).
func (m *Manager) deliver(b []byte, from net.Addr) {
	p, err := Parse(b)
	if err != nil {
		return
	}
	ua, ok := from.(*net.UDPAddr)
	if !ok {
		return
	}
	src := ua.AddrPort().Addr().Unmap()
	m.mu.Lock()
	s := m.sessions[src]
	if p.YourDisc != 0 {
		s = m.byDisc[p.YourDisc]
	}
	m.mu.Unlock()
	if s == nil || s.remote != src {
		return
	}
	select {
	case s.rx <- received{p, append([]byte(nil), b[:b[3]]...)}:
	default: // the session is behind: a later packet says as much
	}
}

// send sends b to remote's BFD port, from source when valid.
func (m *Manager) send(b []byte, source, remote netip.Addr) {
	m.mu.Lock()
	socks := m.socks
	m.mu.Unlock()
	if socks == nil {
		return
	}
	dst := &net.UDPAddr{IP: remote.AsSlice(), Port: m.opts.Port}
	if remote.Is4() {
		var cm *ipv4.ControlMessage
		if source.IsValid() {
			cm = &ipv4.ControlMessage{Src: source.AsSlice()}
		}
		socks.tx4.WriteTo(b, cm, dst)
		return
	}
	if socks.tx6 == nil {
		return
	}
	var cm *ipv6.ControlMessage
	if source.IsValid() {
		cm = &ipv6.ControlMessage{Src: source.AsSlice()}
	}
	socks.tx6.WriteTo(b, cm, dst)
}
