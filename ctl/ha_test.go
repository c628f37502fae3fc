package ctl

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// newHAController is the test configuration with a floating address on
// the server side, in HA state state, over workers fake workers.
func newHAController(t *testing.T, state string, workers int) (*Controller, *fakeDataplane) {
	t.Helper()
	text := strings.Replace(testConfig, "gateway: 198.51.100.254}", "gateway: 198.51.100.254, floating: [198.51.100.253]}", 1)
	cfg, err := conf.Parse([]byte(text + "ha: {state: " + state + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDataplane{dest: map[uint32]lcore.DestStats{}, workers: workers}
	c, err := NewController(f, cfg, []lcore.PortInfo{{MAC: hdr.MAC{2, 0, 0, 0, 0, 1}, MTU: 1500}, {MAC: hdr.MAC{2, 0, 0, 0, 0, 2}, MTU: 1500}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

// installCounts reads dplb_sync_install_records_total by result, and
// dplb_ha_master ("master") and the local address takeover metrics by
// their names.
func installCounts(t *testing.T, c *Controller) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newHACollector(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "dplb_sync_install_records_total":
				got[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			case "dplb_ha_master":
				got["master"] = m.GetGauge().GetValue()
			case "dplb_sync_local_addresses_taken_over", "dplb_sync_local_address_takeovers_total":
				got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return got
}

// TestInstallSyncedRoutesToOwners: each record reaches the worker that
// owns its client endpoint (the steering function), templates worker 0,
// in bounded batches; the workers' counts reach the metrics.
func TestInstallSyncedRoutesToOwners(t *testing.T) {
	c, f := newHAController(t, "backup", 4)
	got := map[lcore.SyncConn]int{}
	f.install = func(w int, b *lcore.SyncBatch) {
		if len(b.Records) > syncBatchMax {
			t.Errorf("a batch of %d records", len(b.Records))
		}
		for _, r := range b.Records {
			want := lcore.Owner(r.ClientIP, r.ClientPort, 4)
			switch {
			case r.IPv6:
				want = lcore.Owner6(&r.Six.Client, r.ClientPort, 4)
			case r.Template:
				want = 0
			}
			if w != want {
				t.Errorf("%+v went to worker %d, owner %d", r, w, want)
			}
			got[r]++
		}
		b.Installed = uint32(len(b.Records) - 1)
		b.NoDest = 1
		b.MarkDone()
	}
	var recs []lcore.SyncConn
	for i := 0; i < 1000; i++ {
		recs = append(recs, lcore.SyncConn{ClientIP: 0xCB007100 + uint32(i%200), ClientPort: uint16(1024 + i), VIP: 0xCB007164,
			RIP: 0xC633640B, VPort: 80, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished})
	}
	recs = append(recs, lcore.SyncConn{ClientIP: 0xCB007107, VIP: 0xCB007164, RIP: 0xC633640B, VPort: 80, RPort: 80, Proto: hdr.ProtoTCP, Template: true})
	for i := range 200 { // IPv6 ones by the IPv6 steering function
		a := client6
		a[15] = byte(i)
		recs = append(recs, lcore.SyncConn{ClientPort: uint16(2000 + i), VPort: 80, RPort: 80, Proto: hdr.ProtoTCP,
			State: conn.StateEstablished, IPv6: true, Six: conn.Addrs6{Client: a, VIP: vip6, RIP: rip6}})
	}
	c.InstallSynced(recs)
	if len(got) != len(recs) {
		t.Fatalf("%d distinct records installed, want %d", len(got), len(recs))
	}
	for r, n := range got {
		if n != 1 {
			t.Fatalf("%+v installed %d times", r, n)
		}
	}
	perWorker := map[int]bool{}
	batches := 0
	for _, s := range f.sent() {
		perWorker[s.worker] = true
		batches++
	}
	if len(perWorker) != 4 {
		t.Fatalf("records reached %d of 4 workers", len(perWorker))
	}
	m := installCounts(t, c)
	if m["installed"] != float64(len(recs)-batches) || m["no_dest"] != float64(batches) || m["timeout"] != 0 || m["master"] != 0 {
		t.Fatalf("metrics %v after %d batches", m, batches)
	}
}

// TestInstallSyncedSteersFullNAT: a FullNAT (or NAT64) record goes to the
// owner of its client, a SNAT one to the owner of its destination (its
// server's packets steer by it); when another worker owns its local port
// here (the peer's worker count or steering key differ), that worker gets
// the record's steering entry, naming the connection's worker.
func TestInstallSyncedSteersFullNAT(t *testing.T) {
	const n = 4
	c, f := newHAController(t, "backup", n)
	type seen struct{ conns, steers int }
	got := map[uint16]*seen{}
	ownerOf := func(r *lcore.SyncConn) int {
		switch {
		case r.IPv6:
			return lcore.Owner6(&r.Six.Client, r.ClientPort, n)
		case r.IsSNAT():
			return lcore.Owner(r.VIP, r.VPort, n)
		}
		return lcore.Owner(r.ClientIP, r.ClientPort, n)
	}
	f.install = func(w int, b *lcore.SyncBatch) {
		for _, r := range b.Records {
			s := got[r.ClientPort]
			if s == nil {
				s = &seen{}
				got[r.ClientPort] = s
			}
			owner := ownerOf(&r)
			if !r.Steer {
				s.conns++
				if w != owner {
					t.Errorf("connection %d went to worker %d, owner %d", r.ClientPort, w, owner)
				}
				continue
			}
			s.steers++
			if w != lcore.Owner(r.Ext.LIP, r.Ext.LPort, n) || r.SteerTo != owner || w == owner {
				t.Errorf("steering entry of %d on worker %d to %d: port owner %d, connection's %d",
					r.ClientPort, w, r.SteerTo, lcore.Owner(r.Ext.LIP, r.Ext.LPort, n), owner)
			}
		}
		b.Installed = uint32(len(b.Records))
		b.MarkDone()
	}
	var recs []lcore.SyncConn
	for i := range 400 {
		r := lcore.SyncConn{ClientIP: 0xCB007107, ClientPort: uint16(1024 + i), VIP: 0xCB007164, RIP: 0xC633640B,
			VPort: 80, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT,
			HasExt: true, Ext: conn.Ext{LIP: 0xC6336432, LPort: uint16(5000 + 7*i)}}
		switch i % 4 {
		case 3: // NAT64: an IPv6 client, the same IPv4 local endpoint
			r.ClientIP, r.VIP, r.IPv6 = 0, 0, true
			r.Six = conn.Addrs6{Client: client6, VIP: vip6}
		case 1: // SNAT: a server's own connection to a host beyond
			r.ClientIP, r.VIP, r.RIP = 0xC633640B, 0xC0000200+uint32(i), 0xC0000200+uint32(i)
			r.VPort, r.RPort = 53, 53
		}
		recs = append(recs, r)
	}
	c.InstallSynced(recs)
	steered, snatElsewhere := 0, 0
	for _, r := range recs {
		s := got[r.ClientPort]
		owner := ownerOf(&r)
		if r.IsSNAT() && owner != lcore.Owner(r.ClientIP, r.ClientPort, n) {
			snatElsewhere++
		}
		want := 0
		if lcore.Owner(r.Ext.LIP, r.Ext.LPort, n) != owner {
			want = 1
		}
		if s == nil || s.conns != 1 || s.steers != want {
			t.Fatalf("record %d: %+v, want one connection and %d steering entries", r.ClientPort, s, want)
		}
		steered += want
	}
	if steered == 0 || steered == len(recs) {
		t.Fatalf("%d of %d records needed a steering entry: the test's ports do not cover both cases", steered, len(recs))
	}
	if snatElsewhere == 0 {
		t.Fatal("no SNAT record's destination has another owner than its server's endpoint: the test shows nothing")
	}
}

// TestInstallSyncedIsBounded: a worker that never confirms, or a command
// ring that stays full, costs the records (counted), not a hung receiver.
func TestInstallSyncedIsBounded(t *testing.T) {
	c, f := newHAController(t, "backup", 2)
	recs := []lcore.SyncConn{{ClientIP: 0xCB007107, ClientPort: 4000, VIP: 0xCB007164, VPort: 80, Proto: hdr.ProtoTCP}}
	c.InstallSynced(recs) // f.install nil: never done
	f.failFull = true
	c.InstallSynced(recs)
	if m := installCounts(t, c); m["timeout"] != 1 || m["ring_full"] != 1 || m["installed"] != 0 {
		t.Fatalf("metrics %v", m)
	}
}

// TestSyncRecordsDrainsTheRings: what the workers queued comes out once.
func TestSyncRecordsDrainsTheRings(t *testing.T) {
	c, f := newHAController(t, "master", 2)
	f.syncOut = []lcore.SyncConn{{ClientIP: 1}, {ClientIP: 2}}
	buf := c.SyncRecords(make([]lcore.SyncConn, 0, 8))
	if len(buf) != 2 || buf[1].ClientIP != 2 {
		t.Fatalf("got %+v", buf)
	}
	if buf = c.SyncRecords(buf[:0]); len(buf) != 0 {
		t.Fatalf("drained twice: %+v", buf)
	}
}

// announced lists the gratuitous ARPs commanded so far, as port/address.
func announced(f *fakeDataplane) []announceTarget {
	var out []announceTarget
	for _, s := range f.sent() {
		if s.cmd.Kind == lcore.CmdAnnounce {
			if s.worker != 0 {
				panic("an announcement not sent by worker 0")
			}
			out = append(out, announceTarget{port: s.cmd.Port, ip: s.cmd.IP})
		}
	}
	return out
}

// TestSetHAState: the state is published in the snapshot (and kept by
// later rebuilds); becoming master announces every VIP on the client side
// and the floating address on its port, three rounds; becoming backup
// stops the rounds.
func TestSetHAState(t *testing.T) {
	c, f := newHAController(t, "backup", 2)
	s := c.Snapshot()
	if !s.Backup || len(s.Ports[1].Floating) != 1 || s.Ports[1].Floating[0] != 0xC63364FD || c.HAState() != "backup" {
		t.Fatalf("first snapshot: backup %v floating %v", s.Backup, s.Ports[1].Floating)
	}
	c.ha.spaced = time.Millisecond
	if err := c.SetHAState(true); err != nil {
		t.Fatal(err)
	}
	if s := f.published[len(f.published)-1]; s.Backup || c.HAState() != "master" {
		t.Fatal("master not published")
	}
	round := []announceTarget{{port: 0, ip: 0xCB007164}, {port: 1, ip: 0xC63364FD}} // the VIP once for both services; the floating gateway
	deadline := time.Now().Add(10 * time.Second)
	for len(announced(f)) < announceRounds*len(round) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	got := announced(f)
	if len(got) != announceRounds*len(round) {
		t.Fatalf("announced %v", got)
	}
	for i, a := range got {
		if a != round[i%len(round)] {
			t.Fatalf("announcement %d: %+v, want %+v", i, a, round[i%len(round)])
		}
	}
	// An update keeps the state; a backup announces nothing.
	svcs, to := c.Services()
	if err := c.Apply(svcs, to); err != nil || c.Snapshot().Backup {
		t.Fatalf("rebuilt snapshot: backup %v, %v", c.Snapshot().Backup, err)
	}
	c.ha.spaced = time.Hour
	if err := c.SetHAState(true); err != nil {
		t.Fatal(err)
	}
	if err := c.SetHAState(false); err != nil {
		t.Fatal(err)
	}
	if n := len(announced(f)); n != (announceRounds+1)*len(round) || !c.Snapshot().Backup {
		t.Fatalf("%d announcements, backup %v", n, c.Snapshot().Backup)
	}
	if m := installCounts(t, c); m["master"] != 0 {
		t.Fatalf("dplb_ha_master %v as backup", m["master"])
	}
}

// TestSetSyncParams: the rules reach the snapshot and survive rebuilds.
func TestSetSyncParams(t *testing.T) {
	c, f := newHAController(t, "master", 2)
	p := lcore.SyncParams{On: true, Threshold: 3, Period: 50, RefreshPeriod: time.Minute}
	c.SetSyncParams(p)
	if got := f.published[len(f.published)-1].Sync; got != p || c.SyncParams() != p {
		t.Fatalf("published %+v", got)
	}
	svcs, to := c.Services()
	if err := c.Apply(svcs, to); err != nil || c.Snapshot().Sync != p || c.Snapshot().Backup {
		t.Fatalf("rebuilt: %+v %v", c.Snapshot().Sync, err)
	}
}

// TestHAStateOp: lbctl --ha-state sets and reads the state through the
// API; a change is kept in the edit log, a read is not; a bad state is
// refused and changes nothing.
func TestHAStateOp(t *testing.T) {
	o, c, f := newTestOps(t)
	if resp := do(o, rule(t, "--ha-state")); resp.Error != "" || resp.HAState != "master" {
		t.Fatalf("read: %+v", resp)
	}
	if resp := do(o, rule(t, "--ha-state backup")); resp.Error != "" || resp.HAState != "backup" || !c.Snapshot().Backup {
		t.Fatalf("set: %+v", resp)
	}
	n := len(f.published)
	if resp := do(o, api.Request{Op: api.OpHAState, HAState: "standby"}); resp.Error == "" || len(f.published) != n || c.HAState() != "backup" {
		t.Fatalf("bad state: %+v", resp)
	}
	edits := do(o, api.Request{Op: api.OpEdits}).Edits
	if len(edits) != 2 || edits[0].Target != "--ha-state backup" || edits[0].Result != "ok" || !strings.HasPrefix(edits[1].Result, "refused") {
		t.Fatalf("edit log %+v", edits)
	}
}

// TestAnnounceLocalAddresses: a new master announces the FullNAT local
// addresses on the port whose subnet holds them, once each.
func TestAnnounceLocalAddresses(t *testing.T) {
	c, _ := newHAController(t, "backup", 2)
	s := c.snap
	svcs := append([]lcore.Service(nil), s.Services...)
	const lip = 0xC6336432 // 198.51.100.50
	for i := range svcs {
		svcs[i].LocalAddrs = []uint32{lip}
	}
	c.snap = lcore.NewSnapshot(s.Gen+1, s.Ports, svcs, s.Neigh, s.Timeouts)
	n := 0
	for _, tg := range c.announceTargets() {
		if tg.ip == lip {
			n++
			if p := s.Ports[tg.port]; lip&p.Mask != p.Net {
				t.Fatalf("announced on port %d (%s)", tg.port, p.Name)
			}
		}
	}
	if n != 1 {
		t.Fatalf("the local address announced %d times per round, want 1", n)
	}
}

// TestAnnounceNAT64LocalAddresses: a new master announces a NAT64
// service's IPv4 local address as a FullNAT one, once per round on the
// port whose subnet holds it; the IPv6 VIP is no ARP target (worker 0's
// unsolicited NA moves it).
func TestAnnounceNAT64LocalAddresses(t *testing.T) {
	text := testConfig6 + `  - protocol: tcp
    vip: 2001:db8::20
    port: 80
    local_addresses: [198.51.100.200]
    servers:
      - {address: 198.51.100.11, port: 8080, forward: fullnat}
ha: {state: backup}
`
	c, _, _ := controllerFor(t, text)
	const lip = 0xC63364C8 // 198.51.100.200
	var on []int
	for _, tg := range c.announceTargets() {
		if tg.ip == lip {
			on = append(on, tg.port)
		}
	}
	if len(on) != 1 || c.snap.Ports[on[0]].Name != "lan" {
		t.Fatalf("the NAT64 local address is announced on ports %v, want lan's once", on)
	}
}

// TestAnnounceDrainingLocalAddresses: a local address removed from its
// service while connections still use it (draining: lbd answers ARP for
// it) is announced by a new master like a listed one, so those
// connections' replies follow the master too.
func TestAnnounceDrainingLocalAddresses(t *testing.T) {
	c, _ := newHAController(t, "backup", 2)
	const lip = 0xC6336433  // 198.51.100.51, on the servers' segment
	const away = 0x0A090909 // 10.9.9.9, on no port's subnet
	c.lipDrain = map[netip.Addr]lipDrain{addrOf(lip): {}, addrOf(away): {}}
	n := 0
	for _, tg := range c.announceTargets() {
		switch tg.ip {
		case lip:
			n++
			if p := c.snap.Ports[tg.port]; lip&p.Mask != p.Net {
				t.Fatalf("announced on port %d (%s)", tg.port, p.Name)
			}
		case away:
			t.Fatal("announced an address on no port's subnet")
		}
	}
	if n != 1 {
		t.Fatalf("the draining local address announced %d times per round, want 1", n)
	}
}
