package connsync

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"
)

// addrs parses local addresses.
func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// TestHelloRoundTrip: a hello carries its state in ref and the local
// addresses of its family: IPv4 as 4-byte records (kind 7), IPv6 as
// 16-byte ones (kind 10); a bad state or address is refused.
func TestHelloRoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	lips := addrs("198.51.100.80", "fd00:2::60", "198.51.100.81", "fd00:2::61")
	for _, k := range []Kind{KindHello, KindHello6} {
		h := Header{Kind: k, SyncID: 3, Boot: 1 << 40, Seq: 5, Ref: HelloLeaving}
		msg := c.AppendHello(nil, h, lips)
		want, rlen := addrs("198.51.100.80", "198.51.100.81"), HelloAddrLen
		if k == KindHello6 {
			want, rlen = addrs("fd00:2::60", "fd00:2::61"), HelloAddr6Len
		}
		if len(msg) != MinMessageLen+2*rlen {
			t.Fatalf("%v: length %d", k, len(msg))
		}
		got, recs, why := c.Decode(msg, nil)
		if why != ReasonNone || got != h || len(recs) != 0 {
			t.Fatalf("%v: decoded %+v, %d records, %v; want %+v and no record", k, got, len(recs), why, h)
		}
		if a := HelloAddrs(msg); !slices.Equal(a, want) {
			t.Errorf("%v: addresses %v, want %v", k, a, want)
		}
		if _, _, why := c.Decode(c.AppendHello(nil, Header{Kind: k, Boot: 1, Seq: 1}, nil), nil); why != ReasonNone {
			t.Errorf("%v: a hello without addresses: %v", k, why)
		}
	}
	for _, tc := range []struct {
		name string
		h    Header
		lips []netip.Addr
		want Reason
	}{
		{"unknown state", Header{Kind: KindHello, Boot: 1, Seq: 1, Ref: 3}, lips, ReasonMalformed},
		{"unknown state (IPv6)", Header{Kind: KindHello6, Boot: 1, Seq: 1, Ref: 3}, lips, ReasonMalformed},
		{"unknown flag", Header{Kind: KindHello, Boot: 1, Seq: 1, Ref: 1 << 9}, lips, ReasonMalformed},
		{"taking over", Header{Kind: KindHello, Boot: 1, Seq: 1, Ref: HelloLeaving | HelloTakesOver}, lips, ReasonNone},
		{"address 0", Header{Kind: KindHello, Boot: 1, Seq: 1}, addrs("0.0.0.0"), ReasonRecord},
		{"multicast address", Header{Kind: KindHello, Boot: 1, Seq: 1}, addrs("224.0.0.81"), ReasonRecord},
		{"address ::", Header{Kind: KindHello6, Boot: 1, Seq: 1}, addrs("::"), ReasonRecord},
		{"IPv6 multicast address", Header{Kind: KindHello6, Boot: 1, Seq: 1}, addrs("ff02::1"), ReasonRecord},
		{"IPv4-mapped address", Header{Kind: KindHello6, Boot: 1, Seq: 1}, addrs("::ffff:198.51.100.80"), ReasonRecord},
	} {
		if _, _, why := c.Decode(c.AppendHello(nil, tc.h, tc.lips), nil); why != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, why, tc.want)
		}
	}
}

// TestHellos: a master's hellos reach its peer's backup with its local
// addresses, IPv4 and IPv6 (kinds 7 and 10, each keeping the other's);
// its lbd leaving says so; a master stopped by hand is forgotten, and
// hellos do not count as sync traffic.
func TestHellos(t *testing.T) {
	nsA, nsB := nsPair(t)
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	lipsA := addrs("198.51.100.80", "fd00:2::60")
	ctlA, ctlB := &fakeController{lips: lipsA}, &fakeController{}
	a := startDaemon(t, nsA, ctlA, Transport{Peers: ip("192.0.2.2")}, Master)
	b := startDaemon(t, nsB, ctlB, Transport{Peers: ip("192.0.2.1")}, Backup)
	peerA := netip.MustParseAddr("192.0.2.1")
	hello := func() (Hello, bool) {
		for _, p := range b.Hellos() {
			if p.Peer == peerA {
				return p.Hello, true
			}
		}
		return Hello{}, false
	}
	eventually(t, "a's hello at b", func() bool { _, ok := hello(); return ok })
	eventually(t, "a's hello at b with its IPv6 half", func() bool { h, _ := hello(); return len(h.LIPs) == 2 })
	h, _ := hello()
	if h.Boot != a.Boot() || h.Leaving || h.TakesOver || !slices.Equal(h.LIPs, lipsA) {
		t.Errorf("hello %+v, want a's boot %d and its local addresses %v, a not taking over (no backup mode)", h, a.Boot(), lipsA)
	}
	// Each second's hellos keep both families, whichever came last.
	for range 4 {
		last := h.At
		eventually(t, "a's next hello", func() bool { h, _ = hello(); return h.At.After(last) })
		if !slices.Equal(h.LIPs, lipsA) {
			t.Errorf("a later hello lists %v, want %v", h.LIPs, lipsA)
		}
	}
	if s := statsOf(a, "192.0.2.2"); s.Sent != 0 {
		t.Errorf("a counts %d messages sent for its hellos alone", s.Sent)
	}
	if s := statsOf(b, "192.0.2.1"); s.Hellos < 2 || s.Received != 0 {
		t.Errorf("b counts %d hellos and %d messages received, want 2+ and 0", s.Hellos, s.Received)
	}

	// b's backup stopped: no hello comes in, none is kept (they would
	// all age into dead peers).
	if err := b.Stop(Backup); err != nil {
		t.Fatal(err)
	}
	if _, ok := hello(); ok {
		t.Errorf("b's backup stopped, a's hello kept")
	}
	if err := inNS(t, nsB, func() error { return b.Start(Backup, 1, "") }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's hello at b's backup again", func() bool { _, ok := hello(); return ok })

	// lbctl --stop-daemon master: forgotten, nothing to take over.
	if err := a.Stop(Master); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a forgotten", func() bool { _, ok := hello(); return !ok })

	// Started again, then lbd stopping: leaving.
	if err := inNS(t, nsA, func() error { return a.Start(Master, 1, "") }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's hello again", func() bool { _, ok := hello(); return ok })
	a.Leave()
	eventually(t, "a leaving", func() bool { h, ok := hello(); return ok && h.Leaving })
	a.Close()
	if h, ok := hello(); !ok || !h.Leaving {
		t.Errorf("after a's close (which follows Leave) b has %+v, %v: want a leaving, not forgotten", h, ok)
	}

	// A handover's hellos: a peer b never heard is seeded; a's, which
	// b holds, stays b's own.
	dead := PeerHello{Peer: netip.MustParseAddr("192.0.2.9"), Hello: Hello{Boot: 99, LIPs: addrs("198.51.100.89")}}
	if n := b.SeedHellos([]PeerHello{dead, {Peer: peerA, Hello: Hello{Boot: 1}}}); n != 1 {
		t.Errorf("seeded %d peers, want 1 (a's hello is b's own)", n)
	}
	if h, _ := hello(); h.Boot != a.Boot() || !h.Leaving {
		t.Errorf("a's hello after seeding: %+v, want its own (leaving)", h)
	}
	if !slices.ContainsFunc(b.Hellos(), func(p PeerHello) bool { return p.Peer == dead.Peer && p.Boot == 99 }) {
		t.Errorf("the seeded peer is not among b's hellos: %+v", b.Hellos())
	}
	if err := b.Stop(Backup); err != nil {
		t.Fatal(err)
	}
	if n := b.SeedHellos([]PeerHello{dead}); n != 0 || len(b.Hellos()) != 0 {
		t.Errorf("a stopped backup seeded %d peers and holds %d hellos, want none", n, len(b.Hellos()))
	}
}

// TestHelloTakesOverAtOnce: a master whose backup mode starts later (lbd
// starts its master first) says at once that it takes over, not at its
// next hello a second later; its backup stopped, it says at once that
// it no longer does.
func TestHelloTakesOverAtOnce(t *testing.T) {
	nsA, nsB := nsPair(t)
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	a := startDaemonOpts(t, nsA, &fakeController{}, Options{Transport: Transport{Peers: ip("192.0.2.2")}, TakeOver: true}, Master)
	b := startDaemon(t, nsB, &fakeController{}, Transport{Peers: ip("192.0.2.1")}, Backup)
	hello := func() Hello {
		for _, p := range b.Hellos() {
			if p.Peer == netip.MustParseAddr("192.0.2.1") {
				return p.Hello
			}
		}
		return Hello{}
	}
	eventually(t, "a's hello at b", func() bool { return hello().Boot == a.Boot() })
	if hello().TakesOver {
		t.Fatal("a without its backup mode says it takes over")
	}
	within := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(HelloInterval / 2); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v", what, HelloInterval/2)
			}
		}
	}
	// Right after a hello: the next periodic one is a second away.
	last := hello().At
	eventually(t, "a's next hello", func() bool { return hello().At.After(last) })
	if err := inNS(t, nsA, func() error { return a.Start(Backup, 1, "") }); err != nil {
		t.Fatal(err)
	}
	within("a's backup started: it takes over", func() bool { return hello().TakesOver })
	if err := a.Stop(Backup); err != nil {
		t.Fatal(err)
	}
	within("a's backup stopped: it no longer takes over", func() bool { return !hello().TakesOver })
}

// TestPeersWithBulk: a master's bulk dump tells the requester the peers
// its backup heard, so that a director starting after a crash (no
// handover) knows a peer that died before it: a's backup holds a dead
// peer's hello (seeded, an hour old) and b, starting, learns it with its
// age and local addresses (IPv4 ones by kind 8, IPv6 by kind 11), but
// not itself.
func TestPeersWithBulk(t *testing.T) {
	nsA, nsB := nsPair(t)
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	a := startDaemon(t, nsA, &fakeController{}, Transport{Peers: ip("192.0.2.2")}, Master, Backup)
	dead := PeerHello{Peer: netip.MustParseAddr("192.0.2.9"),
		Hello: Hello{Boot: 99, At: time.Now().Add(-time.Hour), TakesOver: true, LIPs: addrs("198.51.100.89", "198.51.100.90", "fd00:2::89")}}
	if n := a.SeedHellos([]PeerHello{dead}); n != 1 {
		t.Fatalf("a seeded %d peers", n)
	}
	b := startDaemonOpts(t, nsB, &fakeController{}, Options{Transport: Transport{Peers: ip("192.0.2.1")}, BulkOnStart: true}, Master, Backup)
	var got Hello
	eventually(t, "the dead peer at b", func() bool {
		for _, p := range b.Hellos() {
			if p.Peer == dead.Peer {
				got = p.Hello
				return true
			}
		}
		return false
	})
	if got.Boot != 99 || !got.TakesOver || got.Leaving || !slices.Equal(got.LIPs, dead.LIPs) ||
		got.At.Sub(dead.At).Abs() > 5*time.Second {
		t.Errorf("b holds %+v for the dead peer, want %+v", got, dead.Hello)
	}
	for _, p := range b.Hellos() {
		if p.Peer == netip.MustParseAddr("192.0.2.2") {
			t.Errorf("b holds a hello from itself: %+v", p)
		}
	}
	if s := statsOf(b, "192.0.2.1"); s.BulkEnds == 0 {
		t.Errorf("b counts no bulk end from a: %+v", s)
	}
}

// TestPeersRoundTrip: a peers message carries each peer's hello with its
// age, one record a local address of its family (kind 8: IPv4, and one
// for a peer with none; kind 11: IPv6), and refuses impossible records.
func TestPeersRoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	now := time.Unix(1700000000, 0)
	hello := func(lips ...string) Hello {
		return Hello{Boot: 9, At: now.Add(-90 * time.Second), TakesOver: true, LIPs: addrs(lips...)}
	}
	peers := []PeerHello{
		{Peer: netip.MustParseAddr("192.0.2.9"), Hello: hello("198.51.100.89", "198.51.100.90", "fd00:2::89")},
		{Peer: netip.MustParseAddr("2001:db8::3"), Hello: Hello{Boot: 3, At: now.Add(-time.Second), Leaving: true}},
	}
	msg := c.AppendPeers(nil, Header{Kind: KindPeers, SyncID: 1, Boot: 5, Seq: 1}, peers, now)
	if len(msg) != MinMessageLen+3*PeerRecordLen {
		t.Fatalf("length %d", len(msg))
	}
	if _, _, why := c.Decode(msg, nil); why != ReasonNone {
		t.Fatalf("decoded: %v", why)
	}
	want := []PeerHello{{Peer: peers[0].Peer, Hello: hello("198.51.100.89", "198.51.100.90")}, peers[1]}
	if got := PeersOf(msg, now); !reflect.DeepEqual(got, want) {
		t.Errorf("peers %+v, want %+v", got, want)
	}
	msg6 := c.AppendPeers(nil, Header{Kind: KindPeers6, SyncID: 1, Boot: 5, Seq: 2}, peers, now)
	if len(msg6) != MinMessageLen+PeerRecord6Len {
		t.Fatalf("IPv6: length %d", len(msg6))
	}
	if _, _, why := c.Decode(msg6, nil); why != ReasonNone {
		t.Fatalf("IPv6: decoded: %v", why)
	}
	want6 := []PeerHello{{Peer: peers[0].Peer, Hello: hello("fd00:2::89")}}
	if got := PeersOf(msg6, now); !reflect.DeepEqual(got, want6) {
		t.Errorf("IPv6: peers %+v, want %+v", got, want6)
	}
	for name, tc := range map[string]struct {
		k Kind
		p PeerHello
	}{
		"no address":             {KindPeers, PeerHello{Hello: Hello{Boot: 1}}},
		"boot 0":                 {KindPeers, PeerHello{Peer: netip.MustParseAddr("192.0.2.9")}},
		"multicast address":      {KindPeers, PeerHello{Peer: netip.MustParseAddr("192.0.2.9"), Hello: Hello{Boot: 1, LIPs: addrs("224.0.0.81")}}},
		"IPv6 multicast address": {KindPeers6, PeerHello{Peer: netip.MustParseAddr("192.0.2.9"), Hello: Hello{Boot: 1, LIPs: addrs("ff02::1")}}},
	} {
		if _, _, why := c.Decode(c.AppendPeers(nil, Header{Kind: tc.k, Boot: 5, Seq: 1}, []PeerHello{tc.p}, now), nil); why != ReasonRecord {
			t.Errorf("%s: %v, want %v", name, why, ReasonRecord)
		}
	}
}
