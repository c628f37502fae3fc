package bfd

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

func TestPacketRoundTrip(t *testing.T) {
	p := Packet{Diag: DiagNeighborDown, State: Init, Poll: true, CPI: true, DetectMult: 3,
		MyDisc: 0x01020304, YourDisc: 0x0a0b0c0d, DesiredMinTx: 300000, RequiredMinRx: 250000, RequiredMinEchoRx: 0}
	b := p.Append(nil)
	want := []byte{0x20 | 3, 2<<6 | 0x20 | 0x08, 3, 24, 1, 2, 3, 4, 10, 11, 12, 13, 0, 4, 0x93, 0xe0, 0, 3, 0xd0, 0x90, 0, 0, 0, 0}
	if string(b) != string(want) {
		t.Fatalf("Append = % x\nwant     % x", b, want)
	}
	got, err := Parse(b)
	if err != nil || got != p {
		t.Fatalf("Parse = %+v, %v; want %+v", got, err, p)
	}
}

func TestParseRefuses(t *testing.T) {
	good := Packet{State: Down, DetectMult: 3, MyDisc: 1}.Append(nil)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"short", good[:23], ErrShort},
		{"version 0", edit(func(b []byte) []byte { b[0] &= 0x1f; return b }), ErrVersion},
		{"length below 24", edit(func(b []byte) []byte { b[3] = 20; return b }), ErrLength},
		{"length beyond the datagram", edit(func(b []byte) []byte { b[3] = 26; return b }), ErrLength},
		{"detect mult 0", edit(func(b []byte) []byte { b[2] = 0; return b }), ErrDetectMult},
		{"multipoint", edit(func(b []byte) []byte { b[1] |= 1; return b }), ErrMultipoint},
		{"my disc 0", edit(func(b []byte) []byte { b[7] = 0; return b }), ErrMyDisc},
		{"up with your disc 0", edit(func(b []byte) []byte { b[1] = byte(Up) << 6; return b }), ErrYourDisc},
		{"auth without its section", edit(func(b []byte) []byte { b[1] |= 0x04; return b }), ErrLength},
	}
	for _, tt := range tests {
		if _, err := Parse(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: Parse = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := Parse(good); err != nil {
		t.Errorf("a Down packet naming no session: %v", err)
	}
}

// peer is the test's side of a session: a socket at 127.0.0.2 on the
// port the Manager under test sends to.
type peer struct {
	t    *testing.T
	conn *ipv4.PacketConn
	to   *net.UDPAddr // the Manager's receiving socket
}

func newPeer(t *testing.T, ttl int) (*peer, int) {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.2:0")
	if err != nil {
		t.Skipf("no 127.0.0.2: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetTTL(ttl); err != nil {
		t.Fatal(err)
	}
	if err := pc.SetControlMessage(ipv4.FlagTTL, true); err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	return &peer{t: t, conn: pc, to: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}, port
}

// read returns the next packet the Manager sent, checking RFC 5881's
// TTL and source port.
func (p *peer) read() Packet {
	p.t.Helper()
	buf := make([]byte, 100)
	p.conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, cm, src, err := p.conn.ReadFrom(buf)
	if err != nil {
		p.t.Fatalf("peer: %v", err)
	}
	if cm == nil || cm.TTL != 255 {
		p.t.Fatalf("peer: a packet with TTL %v, want 255", cm)
	}
	if port := src.(*net.UDPAddr).Port; port < 49152 {
		p.t.Fatalf("peer: a packet from port %d, want 49152..65535", port)
	}
	pk, err := Parse(buf[:n])
	if err != nil {
		p.t.Fatalf("peer: %v", err)
	}
	return pk
}

func (p *peer) send(pk Packet) {
	p.t.Helper()
	if _, err := p.conn.WriteTo(pk.Append(nil), nil, p.to); err != nil {
		p.t.Fatal(err)
	}
}

// peerSession is a peer sending at ttl and the Manager under test, the
// peer its server at remote.
func peerSession(t *testing.T, ttl int) (*peer, *Manager, netip.Addr) {
	t.Helper()
	pr, port := newPeer(t, ttl)
	m := NewManager(Options{Listen4: netip.MustParseAddr("127.0.0.1"), Port: port, NoIPv6: true})
	t.Cleanup(m.Close)
	return pr, m, netip.MustParseAddr("127.0.0.2")
}

func waitState(t *testing.T, m *Manager, remote netip.Addr, cfg Config, want State) Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := m.Status(remote, netip.Addr{}, cfg, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s, want %s", st.State, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionHandshake: lbd's side sends Down with no discriminator of
// the server's, goes Up on the server's Init, polls for the intervals it
// asks once up, answers a Poll with a Final, and goes down when the
// server falls silent for its detect time.
func TestSessionHandshake(t *testing.T) {
	pr, m, remote := peerSession(t, 255)
	cfg := Config{Interval: 50 * time.Millisecond, Multiplier: 3}
	if st, err := m.Status(remote, netip.Addr{}, cfg, time.Minute); err != nil || st.State != Down || st.Heard {
		t.Fatalf("a new session: %+v, %v; want Down, nothing heard", st, err)
	}
	first := pr.read()
	if first.State != Down || first.YourDisc != 0 || first.MyDisc == 0 || first.DetectMult != 3 ||
		first.DesiredMinTx != 1000000 || first.RequiredMinRx != 50000 {
		t.Fatalf("first packet %+v: want Down, no your disc, 1s desired tx (not up yet), 50ms required rx", first)
	}
	const peerDisc = 77
	pr.send(Packet{State: Init, DetectMult: 3, MyDisc: peerDisc, YourDisc: first.MyDisc, DesiredMinTx: 50000, RequiredMinRx: 50000})
	up := pr.read()
	if up.State != Up || up.YourDisc != peerDisc || !up.Poll || up.DesiredMinTx != 50000 {
		t.Fatalf("after the server's Init: %+v; want Up at once, polling for a 50ms desired tx", up)
	}
	waitState(t, m, remote, cfg, Up)
	pr.send(Packet{State: Up, Final: true, DetectMult: 3, MyDisc: peerDisc, YourDisc: first.MyDisc, DesiredMinTx: 50000, RequiredMinRx: 50000})
	pr.send(Packet{State: Up, Poll: true, DetectMult: 3, MyDisc: peerDisc, YourDisc: first.MyDisc, DesiredMinTx: 50000, RequiredMinRx: 50000})
	for i := 0; ; i++ {
		pk := pr.read()
		if pk.Final && !pk.Poll {
			break // the Poll answered; the poll of lbd's own ended by the Final
		}
		if i > 10 {
			t.Fatalf("no Final answers the server's Poll: %+v", pk)
		}
	}
	// The server falls silent: down after 3 x 50ms.
	start := time.Now()
	st := waitState(t, m, remote, cfg, Down)
	if st.Diag != DiagTimeExpired || !st.EverUp {
		t.Fatalf("after silence: %+v, want Down for control detection time expired", st)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("down %s after the last packet, want about 150ms", took)
	}
}

// TestSessionIgnoresRemoteHops: a packet whose TTL is not 255 came from
// beyond the link (RFC 5881 5) and is dropped.
func TestSessionIgnoresRemoteHops(t *testing.T) {
	pr, m, remote := peerSession(t, 64)
	cfg := Config{Interval: 50 * time.Millisecond, Multiplier: 3}
	m.Status(remote, netip.Addr{}, cfg, time.Minute)
	first := pr.read()
	pr.send(Packet{State: Init, DetectMult: 3, MyDisc: 5, YourDisc: first.MyDisc, DesiredMinTx: 50000, RequiredMinRx: 50000})
	time.Sleep(200 * time.Millisecond)
	if st, _ := m.Status(remote, netip.Addr{}, cfg, time.Minute); st.State != Down || st.Heard {
		t.Fatalf("after a packet at TTL 64: %+v, want Down and nothing heard", st)
	}
}

// TestTwoManagers: two Managers, each the other's server, bring their
// session up; when one closes, it says AdminDown and the other goes down
// at once; a new session comes up again.
func TestTwoManagers(t *testing.T) {
	ma, mb, a1, a2 := twoManagers(t)
	cfg := Config{Interval: 30 * time.Millisecond, Multiplier: 3}
	deadline := time.Now().Add(6 * time.Second)
	for {
		sa, err1 := ma.Status(a2, netip.Addr{}, cfg, time.Minute)
		sb, err2 := mb.Status(a1, netip.Addr{}, cfg, time.Minute)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if sa.State == Up && sb.State == Up {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions %s and %s, want both Up", sa.State, sb.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // ten intervals: both stay up
	if st, _ := ma.Status(a2, netip.Addr{}, cfg, time.Minute); st.State != Up {
		t.Fatalf("a's session %+v after 300ms, want Up", st)
	}
	mb.Close()
	st := waitState(t, ma, a2, cfg, Down)
	if st.Diag != DiagNeighborDown {
		t.Errorf("after b closed: %+v, want neighbor signaled session down", st)
	}
	mb.Status(a1, netip.Addr{}, cfg, time.Minute)
	waitState(t, ma, a2, cfg, Up)
}

// twoManagers makes two Managers, at 127.0.0.1 (a1) and 127.0.0.2 (a2)
// on one free port, each the other's server.
func twoManagers(t *testing.T) (ma, mb *Manager, a1, a2 netip.Addr) {
	t.Helper()
	probe, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := probe.LocalAddr().(*net.UDPAddr).Port
	probe.Close()
	if c, err := net.ListenPacket("udp4", "127.0.0.2:"+strconv.Itoa(port)); err != nil {
		t.Skipf("no 127.0.0.2:%d: %v", port, err)
	} else {
		c.Close()
	}
	a1, a2 = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ma = NewManager(Options{Listen4: a1, Port: port, NoIPv6: true})
	mb = NewManager(Options{Listen4: a2, Port: port, NoIPv6: true})
	t.Cleanup(ma.Close)
	t.Cleanup(mb.Close)
	return ma, mb, a1, a2
}
