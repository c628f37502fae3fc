package ctl

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestLIPsToTake: three directors (boot ids 10, 20, 30); b (20) dies.
// Each of its local addresses is taken over by exactly one of a and c,
// each computing on its own, and both take some of eight; an address a
// live director lists stays its own; b saying it leaves counts at once;
// b back (a new boot id) takes nothing; a live director that does not
// take over is never chosen.
func TestLIPsToTake(t *testing.T) {
	now := time.Now()
	pa, pb, pc := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	var lipsB []netip.Addr // four IPv4, four IPv6 (FNAT66's)
	for i := range 4 {
		lipsB = append(lipsB, addrOf(0xc6336450+uint32(i)), netip.MustParseAddr(fmt.Sprintf("fd00:2::50:%d", i)))
	}
	lipsB = append(lipsB, addrOf(0xc6336460)) // also c's own
	ownA, ownC := []netip.Addr{addrOf(0xc6336440)}, []netip.Addr{addrOf(0xc6336441), addrOf(0xc6336460)}
	hello := func(p netip.Addr, boot uint64, ago time.Duration, lips []netip.Addr) connsync.PeerHello {
		return connsync.PeerHello{Peer: p, Hello: connsync.Hello{Boot: boot, At: now.Add(-ago), TakesOver: true, LIPs: lips}}
	}
	const after = 3 * time.Second
	deadB := hello(pb, 20, 5*time.Second, lipsB)
	byA := lipsToTake(10, ownA, []connsync.PeerHello{deadB, hello(pc, 30, time.Second, ownC)}, now, after)
	byC := lipsToTake(30, ownC, []connsync.PeerHello{deadB, hello(pa, 10, time.Second, ownA)}, now, after)
	for _, l := range lipsB[:8] {
		_, a := byA[l]
		_, c := byC[l]
		if a == c {
			t.Errorf("%s: taken over by a %v, by c %v: want exactly one", l, a, c)
		}
	}
	if len(byA) == 0 || len(byC) == 0 {
		t.Errorf("a takes %d of 8, c %d: the addresses do not spread", len(byA), len(byC))
	}
	if _, ok := byA[addrOf(0xc6336460)]; ok {
		t.Errorf("a takes over an address c lists as its own")
	}
	for _, p := range byA {
		if p != pb {
			t.Errorf("taken over from %s, want b", p)
		}
	}

	alive := lipsToTake(10, ownA, []connsync.PeerHello{hello(pb, 20, 2*time.Second, lipsB)}, now, after)
	if len(alive) != 0 {
		t.Errorf("b heard 2 s ago (dead after 3 s): a takes %v", alive)
	}
	leaving := hello(pb, 20, 0, lipsB)
	leaving.Leaving = true
	if got := lipsToTake(10, ownA, []connsync.PeerHello{leaving}, now, after); len(got) != len(lipsB) {
		t.Errorf("b leaving, a alone: a takes %d of its %d addresses", len(got), len(lipsB))
	}
	if got := lipsToTake(10, ownA, []connsync.PeerHello{hello(pb, 21, 0, lipsB), hello(pc, 30, 0, ownC)}, now, after); len(got) != 0 {
		t.Errorf("b back: a takes %v", got)
	}
	// c alive but not taking over (no backup mode, or takeover off): a
	// takes every address of b's that c does not list.
	passive := hello(pc, 30, time.Second, ownC)
	passive.TakesOver = false
	if got := lipsToTake(10, ownA, []connsync.PeerHello{deadB, passive}, now, after); len(got) != 8 {
		t.Errorf("c not taking over: a takes %d of b's 8 addresses", len(got))
	}
}

// TestTakeOver: a taken-over address is in the snapshot (the workers
// answer ARP for it) with no service giving it to new connections, is
// announced by gratuitous ARP, its connections get their steering
// entries' records, lbctl -L --daemon and the metrics show it; given
// back, the snapshot drops it.
func TestTakeOver(t *testing.T) {
	_, c, f := newTestOps(t)
	lipAddr := netip.MustParseAddr("198.51.100.70")
	lip := ipv4(lipAddr)
	peer := netip.MustParseAddr("10.0.0.2")
	installed := keepInstalls(f)
	// A connection the peer made from lip, synced here.
	f.conns = []lcore.ConnInfo{{Proto: hdr.ProtoTCP, VIP: 0xCB007164, VPort: 80, ClientIP: 0xCB007107, ClientPort: 4000,
		RIP: 0xC633640D, RPort: 80, LIP: lip, LPort: 2000, Fwd: fwd.FullNAT, State: conn.StateEstablished, HasExt: true,
		Ext: conn.Ext{LIP: lip, LPort: 2000}}}
	gen := c.Snapshot().Gen
	c.setTakenOver(map[netip.Addr]netip.Addr{lipAddr: peer})
	s := c.Snapshot()
	if !s.IsLIP(lip) || s.Gen == gen {
		t.Fatalf("taken over: the snapshot (gen %d -> %d) answers for it: %v", gen, s.Gen, s.IsLIP(lip))
	}
	for _, svc := range s.Services {
		if slices.Contains(svc.LocalAddrs, lip) {
			t.Errorf("service %v gives new connections the taken-over address", svc.Key)
		}
	}
	if own := c.LocalAddrs(); slices.Contains(own, lipAddr) {
		t.Errorf("LocalAddrs (the hellos') lists the taken-over address: %x", own)
	}
	if len(*installed) == 0 || (*installed)[0].Ext.LIP != lip {
		t.Errorf("the connection's record was not installed again (for its steering entry): %+v", *installed)
	}
	deadline := time.Now().Add(time.Second)
	for !slices.ContainsFunc(f.sent(), func(sc sentCommand) bool { return sc.cmd.Kind == lcore.CmdAnnounce && sc.cmd.IP == lip }) {
		if time.Now().After(deadline) {
			t.Fatal("no gratuitous ARP for the taken-over address")
		}
		time.Sleep(10 * time.Millisecond)
	}
	peers := c.syncPeers([]connsync.PeerHello{{Peer: peer, Hello: connsync.Hello{Boot: 2, At: time.Now().Add(-5 * time.Second), LIPs: []netip.Addr{lipAddr}}}},
		time.Now(), 3*time.Second)
	var b strings.Builder
	api.WriteDaemons(&b, api.Response{SyncPeers: peers})
	if want := "peer 10.0.0.2: dead, hello 5.0s ago, local addresses 198.51.100.70 (taken over here: 198.51.100.70)\n"; b.String() != want {
		t.Errorf("-L --daemon:\n%q\nwant\n%q", b.String(), want)
	}
	m := installCounts(t, c)
	got := map[string]float64{"dplb_sync_local_address_takeovers_total": m["dplb_sync_local_address_takeovers_total"],
		"dplb_sync_local_addresses_taken_over": m["dplb_sync_local_addresses_taken_over"]}
	if want := map[string]float64{"dplb_sync_local_address_takeovers_total": 1, "dplb_sync_local_addresses_taken_over": 1}; !maps.Equal(got, want) {
		t.Errorf("metrics %v, want %v", got, want)
	}

	c.setTakenOver(map[netip.Addr]netip.Addr{})
	if c.Snapshot().IsLIP(lip) || len(c.lipTaken) != 0 {
		t.Errorf("given back: the snapshot still answers for it")
	}
	if !maps.Equal(c.lipTaken, map[netip.Addr]netip.Addr{}) {
		t.Errorf("given back: %v", c.lipTaken)
	}
}

type seedRecorder struct{ got []connsync.PeerHello }

func (s *seedRecorder) SeedHellos(h []connsync.PeerHello) int {
	s.got = append(s.got, h...)
	return len(h)
}

// TestSeedPeers: the peers a handover brings: one alive when it was
// written gets a whole peer_dead_after from now, one dead or leaving
// then stays so, and the next lbd, the taker, takes the dead one's
// address over again while the live one keeps its own.
func TestSeedPeers(t *testing.T) {
	written := time.Unix(1700000000, 0)
	now := written.Add(5 * time.Second) // the restart took 5 s, beyond the patience
	peers := []connsync.PeerHello{
		{Peer: netip.MustParseAddr("192.0.2.2"), Hello: connsync.Hello{Boot: 2, At: written.Add(-time.Second), TakesOver: true, LIPs: []netip.Addr{addrOf(0x0a000002)}}},
		{Peer: netip.MustParseAddr("192.0.2.3"), Hello: connsync.Hello{Boot: 3, At: written.Add(-time.Minute), LIPs: []netip.Addr{addrOf(0x0a000003)}}},
		{Peer: netip.MustParseAddr("192.0.2.4"), Hello: connsync.Hello{Boot: 4, At: written, Leaving: true, LIPs: []netip.Addr{addrOf(0x0a000004)}}},
	}
	var rec seedRecorder
	n, dead := seedPeers(&rec, peers, written, now, 3*time.Second)
	if n != 3 || dead != 2 {
		t.Fatalf("seeded %d, %d dead; want 3 and 2", n, dead)
	}
	if !rec.got[0].At.Equal(now) || !rec.got[1].At.Equal(peers[1].At) || !rec.got[2].At.Equal(peers[2].At) {
		t.Errorf("seeded at %v, %v, %v: want the live one at now, the others as they were", rec.got[0].At, rec.got[1].At, rec.got[2].At)
	}
	if !peers[0].At.Equal(written.Add(-time.Second)) {
		t.Error("seedPeers changed its argument")
	}
	// This director alone takes over: the live peer (a candidate too)
	// may win one of the dead ones' addresses, never its own.
	taken := lipsToTake(1, nil, rec.got, now.Add(takeoverCheck), 3*time.Second)
	if _, ok := taken[addrOf(0x0a000002)]; ok {
		t.Errorf("the live peer's address is taken over: %v", taken)
	}
	solo := lipsToTake(1, nil, rec.got[1:], now.Add(takeoverCheck), 3*time.Second)
	if len(solo) != 2 || solo[addrOf(0x0a000003)] != peers[1].Peer || solo[addrOf(0x0a000004)] != peers[2].Peer {
		t.Errorf("the only live director takes %v, want the dead and the leaving peer's addresses", solo)
	}
	if n, _ := seedPeers(&rec, peers, written, now, 0); n != 0 {
		t.Errorf("takeover off: seeded %d", n)
	}
}

// keepInstalls has f install every record it is given, and keep them.
func keepInstalls(f *fakeDataplane) *[]lcore.SyncConn {
	var installed []lcore.SyncConn
	f.install = func(w int, b *lcore.SyncBatch) {
		installed = append(installed, b.Records...)
		b.Installed = uint32(len(b.Records))
		b.MarkDone()
	}
	return &installed
}

// TestTakeoverRankIPv4: an IPv4 address's rank is what directors before
// IPv6 local addresses computed (its 4 bytes, then the boot id's 8), so
// that in a mixed cluster every director picks the same taker.
func TestTakeoverRankIPv4(t *testing.T) {
	for _, c := range []struct {
		lip  uint32
		boot uint64
		want uint64
	}{{0xc6336450, 1, 0xb6eb94ecf6155a63}, {0x0a000002, 1700000000123456789, 0xf743f58a41f82828}} {
		if got := takeoverRank(addrOf(c.lip), c.boot); got != c.want {
			t.Errorf("takeoverRank(%s, %d) = %#x, want %#x", addrOf(c.lip), c.boot, got, c.want)
		}
	}
}

// TestTakeOver6: a dead peer's IPv6 local address (FNAT66's) taken over
// is in the snapshot (the workers answer neighbour solicitations for it)
// with no service giving it out, is announced by an unsolicited NA on
// the port whose subnet holds it, and its connections' records go to the
// workers again (their steering entries); given back, the snapshot drops
// it.
func TestTakeOver6(t *testing.T) {
	_, c, f := newTestOps6(t)
	lip := netip.MustParseAddr("fd00:1::70")
	lip6 := hdr.Addr6From(lip)
	peer := netip.MustParseAddr("10.0.0.2")
	installed := keepInstalls(f)
	six := func(s string) hdr.Addr6 { return hdr.Addr6From(netip.MustParseAddr(s)) }
	f.conns = []lcore.ConnInfo{{Proto: hdr.ProtoTCP, IPv6: true, VPort: 80, ClientPort: 4000, RPort: 80, LPort: 2000,
		Client6: six("2001:db8::7"), VIP6: six("2001:db8::10"), RIP6: six("fd00:1::11"), LIP6: lip6,
		Fwd: fwd.FullNAT, State: conn.StateEstablished, HasExt: true, Ext: conn.Ext{LPort: 2000}}}
	c.setTakenOver(map[netip.Addr]netip.Addr{lip: peer})
	s := c.Snapshot()
	if !s.IsLIP6(lip6) {
		t.Fatal("taken over: the snapshot does not answer for the IPv6 local address")
	}
	for _, svc := range s.Services {
		if slices.Contains(svc.LocalAddrs6, lip6) {
			t.Errorf("service %v gives new connections the taken-over address", svc.Key)
		}
	}
	if len(*installed) == 0 || (*installed)[0].Six.LIP != lip6 {
		t.Errorf("the FNAT66 connection's record was not installed again (for its steering entry): %+v", *installed)
	}
	deadline := time.Now().Add(time.Second)
	for !slices.ContainsFunc(f.sent(), func(sc sentCommand) bool {
		return sc.cmd.Kind == lcore.CmdAnnounce && sc.cmd.IP6 == lip6 && sc.cmd.Port == 1
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("no unsolicited NA for the taken-over address on port lan: %+v", f.sent())
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.setTakenOver(map[netip.Addr]netip.Addr{})
	if c.Snapshot().IsLIP6(lip6) {
		t.Errorf("given back: the snapshot still answers for it")
	}
}
