package connsync

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// records makes n distinct established NAT connections from client net.
func records(n int, client byte) []lcore.SyncConn {
	out := make([]lcore.SyncConn, n)
	for i := range out {
		out[i] = lcore.SyncConn{ClientIP: 0xc6336400 | uint32(client), ClientPort: uint16(1024 + i),
			VIP: 0xcb007101, VPort: 80, RIP: 0x0a000102, RPort: 8080,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	}
	return out
}

func startDaemon(t *testing.T, ns string, ctl Controller, tr Transport, modes ...Mode) *Daemon {
	t.Helper()
	return startDaemonOpts(t, ns, ctl, Options{Transport: tr}, modes...)
}

func startDaemonOpts(t *testing.T, ns string, ctl Controller, opt Options, modes ...Mode) *Daemon {
	t.Helper()
	opt.Key, opt.Params = testKey, lcore.SyncParams{Threshold: 3, Period: 50}
	d, err := New(ctl, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	for _, m := range modes {
		if err := inNS(t, ns, func() error { return d.Start(m, 1, "") }); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// TestMulticastSync: a master and a backup on a veth pair, each in its
// own namespace, joined to IPVS's group on sync0.
func TestMulticastSync(t *testing.T) {
	nsA, nsB := nsPair(t)
	tr := Transport{Interface: "sync0"}
	ctlA, ctlB := &fakeController{}, &fakeController{}
	master := startDaemon(t, nsA, ctlA, tr, Master)
	backup := startDaemon(t, nsB, ctlB, tr, Backup)

	if p := ctlA.params; !p.On || p.Threshold != 3 || p.Period != 50 {
		t.Errorf("a master turns the workers' sync on with the configured rules: %+v", p)
	}
	want := records(200, 1)
	ctlA.queue(want...)
	eventually(t, "200 records installed on the backup", func() bool { return len(ctlB.installedSet()) == 200 })
	got := ctlB.installedSet()
	for _, r := range want {
		if !got[r] {
			t.Fatalf("record %+v not installed", r)
		}
	}
	sent := statsOf(master, DefaultGroup.String())
	recv := statsOf(backup, "192.0.2.1")
	// 1500-byte MTU: 58 records a datagram, so 200 take at least 4.
	if sent.Sent < 4 || recv.Received != sent.Sent || recv.Records != 200 {
		t.Errorf("sent %d datagrams, backup received %d with %d records", sent.Sent, recv.Received, recv.Records)
	}
	if recv.LastRecord.IsZero() {
		t.Error("the backup's lag clock did not start")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(backup))
	if n := metricValue(t, reg, "dplb_sync_records_received_total", "192.0.2.1"); n != 200 {
		t.Errorf("dplb_sync_records_received_total = %v, want 200", n)
	}
	if lag := metricValue(t, reg, "dplb_sync_lag_seconds", "192.0.2.1"); lag < 0 {
		t.Errorf("lag %v", lag)
	}

	// Bulk: the backup pulls the master's whole table.
	ctlA.mu.Lock()
	ctlA.table = records(1000, 2)
	ctlA.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := backup.RequestBulk(ctx); err != nil {
		t.Fatal(err)
	}
	got = ctlB.installedSet()
	for _, r := range records(1000, 2) {
		if !got[r] {
			t.Fatalf("after bulk-end, table record %+v is not installed", r)
		}
	}
	if s := statsOf(master, "192.0.2.2"); s.BulkServed != 1 {
		t.Errorf("master served %d bulk requests, want 1", s.BulkServed)
	}
	if s := statsOf(backup, "192.0.2.1"); s.BulkEnds != 1 {
		t.Errorf("backup saw %d bulk-ends, want 1", s.BulkEnds)
	}

	if err := master.RequestBulk(ctx); err == nil {
		t.Error("RequestBulk without the backup mode running succeeded")
	}
	if s := master.Status(); len(s) != 1 || s[0].String() != "master sync daemon (mcast=sync0, syncid=1)" {
		t.Errorf("status %v", s)
	}
	if err := master.Stop(Master); err != nil {
		t.Fatal(err)
	}
	if ctlA.params.On {
		t.Error("stopping the master left the workers' sync on")
	}
	if err := master.Stop(Master); err == nil {
		t.Error("stopping a stopped master succeeded")
	}
}

// TestUnicastBothModes: two directors each running master and backup,
// over unicast peers; neither installs its own records.
func TestUnicastBothModes(t *testing.T) {
	nsA, nsB := nsPair(t)
	ip := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	ctlA, ctlB := &fakeController{}, &fakeController{}
	a := startDaemon(t, nsA, ctlA, Transport{Peers: ip("192.0.2.2")}, Master, Backup)
	b := startDaemon(t, nsB, ctlB, Transport{Peers: ip("192.0.2.1")}, Backup, Master)
	ctlA.queue(records(100, 1)...)
	ctlB.queue(records(70, 2)...)
	eventually(t, "records both ways", func() bool {
		return len(ctlA.installedSet()) == 70 && len(ctlB.installedSet()) == 100
	})
	if s := a.Status(); len(s) != 2 || s[1].String() != "backup sync daemon (peers=192.0.2.2, syncid=1)" {
		t.Errorf("status %v", s)
	}
	if err := inNS(t, nsA, func() error { return a.Start(Master, 1, "") }); err == nil ||
		!strings.Contains(err.Error(), "already running") {
		t.Errorf("a second master start: %v", err)
	}
	ctlA.mu.Lock()
	ctlA.table = records(300, 3)
	ctlA.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.RequestBulk(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(ctlB.installedSet()); n != 400 {
		t.Errorf("after the bulk, %d records installed, want 400", n)
	}
	for _, d := range []*Daemon{a, b} {
		for _, s := range d.Stats() {
			if s.Dropped["self"] != 0 || s.Dropped["mac"] != 0 {
				t.Errorf("peer %s drops: %v", s.Peer, s.Dropped)
			}
		}
	}
}

// TestHostileSender: from another address on the master's link, garbage,
// a forgery, another group's message, replays, stale boots and a flood at
// a backup whose installs are stalled. Each is dropped and counted, the
// queue and memory stay bounded, and the master's sync still works after.
func TestHostileSender(t *testing.T) {
	nsA, nsB := nsPair(t)
	tr := Transport{Interface: "sync0"}
	ctlA, ctlB := &fakeController{}, &fakeController{}
	startDaemon(t, nsA, ctlA, tr, Master)
	backup := startDaemon(t, nsB, ctlB, tr, Backup)

	for _, args := range [][]string{{"addr", "add", "192.0.2.3/24", "dev", "sync0"}, {"route", "add", "224.0.0.0/4", "dev", "sync0"}} {
		if out, err := exec.Command("ip", append([]string{"-n", nsA}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	var attacker *net.UDPConn
	if err := inNS(t, nsA, func() error {
		var err error
		attacker, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(192, 0, 2, 3)})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	group := &net.UDPAddr{IP: DefaultGroup.AsSlice(), Port: DefaultPort}
	sendRaw := func(m []byte) {
		if _, err := attacker.WriteToUDP(m, group); err != nil {
			t.Fatal(err)
		}
	}
	other := statsOf(backup, OtherPeer)
	key := mustCodec(t, testKey)
	forger := mustCodec(t, []byte("not-the-shared-key-at-all"))
	recs := records(3, 9)

	sendRaw([]byte("garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage"))
	sendRaw(forger.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 1, Seq: 1}, recs))
	sendRaw(key.Append(nil, Header{Kind: KindRecords, SyncID: 9, Boot: 1, Seq: 1}, recs))
	good := key.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 100, Seq: 1}, recs)
	sendRaw(good)
	sendRaw(good)                                                                          // replayed
	sendRaw(key.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 50, Seq: 9}, recs)) // an earlier boot
	eventually(t, "each hostile message counted", func() bool {
		o, s := statsOf(backup, OtherPeer), statsOf(backup, "192.0.2.3")
		return o.Dropped["length"]+o.Dropped["magic"] > other.Dropped["length"]+other.Dropped["magic"] &&
			o.Dropped["mac"] == other.Dropped["mac"]+1 &&
			s.Dropped["syncid"] == 1 && s.Dropped["replay"] == 1 && s.Dropped["stale"] == 1 && s.Received == 1
	})

	// The flood: installs stall, 20000 valid messages arrive.
	gate := make(chan struct{})
	ctlB.mu.Lock()
	ctlB.gate = gate
	ctlB.mu.Unlock()
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	flood := records(MaxRecords, 7)
	for seq := uint64(2); seq < 20002; seq++ {
		sendRaw(key.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 100, Seq: seq}, flood))
	}
	eventually(t, "the flood dropped for a full queue", func() bool {
		return statsOf(backup, "192.0.2.3").Dropped["queue_full"] > 0
	})
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The queue holds at most QueueLen messages of MaxRecords records;
	// with the batch being decoded and the one stalled in the install,
	// the heap may hold a few queues' worth, never the flood's 20000
	// messages (some 75 times more). The bound follows the record's size,
	// which grew with IPv6 addresses and the FTP helper's state.
	limit := 3 * int64(defaultQueueLen) * int64(MaxRecords) * int64(unsafe.Sizeof(lcore.SyncConn{}))
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > limit {
		t.Errorf("heap grew by %d MiB under the flood (limit %d MiB)", grew>>20, limit>>20)
	}
	t.Logf("flood: %v; heap %d -> %d KiB", statsOf(backup, "192.0.2.3").Dropped, before.HeapInuse>>10, after.HeapInuse>>10)
	close(gate)
	ctlB.mu.Lock()
	ctlB.gate = nil
	ctlB.mu.Unlock()

	// The real master is unaffected. Its first sends may still meet a
	// queue full of the flood's tail; a worker would sync the connections
	// again at their next threshold, so the test queues them again.
	legit := records(10, 4)
	last := time.Time{}
	eventually(t, "the master's records after the flood", func() bool {
		if time.Since(last) > 200*time.Millisecond {
			ctlA.queue(legit...)
			last = time.Now()
		}
		got := ctlB.installedSet()
		for _, r := range legit {
			if !got[r] {
				return false
			}
		}
		return true
	})
	if s := statsOf(backup, "192.0.2.1"); s.Received == 0 || s.Dropped["replay"]+s.Dropped["stale"]+s.Dropped["mac"] != 0 {
		t.Errorf("the master's messages: received %d, dropped %v", s.Received, s.Dropped)
	}
}

// TestBackupPullsTableOnStart: with BulkOnStart (as lbd runs it), a
// backup that starts learns the master's whole table, idle connections
// included; stopped and started again, it asks again and the master's
// messages are still taken (its replay window starts afresh).
func TestBackupPullsTableOnStart(t *testing.T) {
	nsA, nsB := nsPair(t)
	ctlA, ctlB := &fakeController{table: records(500, 5)}, &fakeController{}
	master := startDaemon(t, nsA, ctlA, Transport{Interface: "sync0"}, Master)
	backup := startDaemonOpts(t, nsB, ctlB, Options{Transport: Transport{Interface: "sync0"}, BulkOnStart: true}, Backup)
	eventually(t, "the table installed on start", func() bool { return len(ctlB.installedSet()) == 500 })
	if err := backup.Stop(Backup); err != nil {
		t.Fatal(err)
	}
	if err := inNS(t, nsB, func() error { return backup.Start(Backup, 1, "") }); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second bulk served", func() bool { return statsOf(master, "192.0.2.2").BulkServed == 2 })
	ctlA.queue(records(5, 6)...)
	eventually(t, "records after the restart", func() bool { return len(ctlB.installedSet()) == 505 })
}

func TestResetWindows(t *testing.T) {
	ps := newPeers()
	p := ps.get(netip.MustParseAddr("192.0.2.1"), true)
	p.window.Accept(100, 1)
	if r := p.window.Accept(50, 1); r != ReasonStale {
		t.Fatalf("an earlier boot: %v", r)
	}
	ps.resetWindows()
	if r := p.window.Accept(50, 1); r != ReasonNone {
		t.Errorf("after a reset, an earlier boot: %v", r)
	}
}

func TestStartRefusals(t *testing.T) {
	if _, err := New(&fakeController{}, Options{}); err == nil || !strings.Contains(err.Error(), "key_file") {
		t.Errorf("no key: %v", err)
	}
	d, err := New(&fakeController{}, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(Master, 1, ""); err == nil || !strings.Contains(err.Error(), "mcast_interface") {
		t.Errorf("multicast without an interface: %v", err)
	}
	if err := d.Start(Backup, 1, "no-such-if0"); err == nil || !strings.Contains(err.Error(), "no-such-if0") {
		t.Errorf("a missing interface: %v", err)
	}
	if len(d.Status()) != 0 {
		t.Errorf("a refused start left %v running", d.Status())
	}
	if _, err := ParseMode("primary"); err == nil {
		t.Error("ParseMode accepted primary")
	}
}

// metricValue reads one sample of a gathered metric by its peer label.
func metricValue(t *testing.T, g prometheus.Gatherer, name, peer string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == peer {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{peer=%q}", name, peer)
	return 0
}
