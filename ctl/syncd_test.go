package ctl

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

var (
	client6 = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::7"))
	vip6    = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::100"))
	rip6    = hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))
)

func TestSyncTable(t *testing.T) {
	c, f := newTestController(t)
	f.conns = []lcore.ConnInfo{
		{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.DR, ClientIP: 0xc6336401, ClientPort: 4000,
			VIP: 0xcb007164, VPort: 80, RIP: 0xc633640b, RPort: 80, Expires: 5e9},
		{Proto: hdr.ProtoTCP, Template: true, ClientIP: 0xc6336400, VIP: 0xcb007164, VPort: 80, RIP: 0xc633640c, RPort: 8000},
		{Proto: hdr.ProtoTCP, Template: true, ClientIP: 0xc6336500, VIP: 0xcb007164, VPort: 80}, // its server is gone
		// IPv6: a connection goes with its addresses; a template (its key
		// is a fold) and a NAT64 one without its local port do not.
		{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, IPv6: true, Client6: client6, ClientPort: 4001,
			VIP6: vip6, VPort: 80, RIP6: rip6, RPort: 8080},
		{Proto: hdr.ProtoTCP, Template: true, Fwd: fwd.NAT, IPv6: true, VIP6: vip6, VPort: 80, RIP6: rip6, RPort: 8080},
		{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, IPv6: true, Client6: client6, ClientPort: 4002,
			VIP6: vip6, VPort: 80, RIP: 0xc633640b, RPort: 80},
	}
	recs, err := c.SyncTable()
	if err != nil {
		t.Fatal(err)
	}
	want := []lcore.SyncConn{
		{ClientIP: 0xc6336401, ClientPort: 4000, VIP: 0xcb007164, VPort: 80, RIP: 0xc633640b, RPort: 80,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.DR},
		{ClientIP: 0xc6336400, VIP: 0xcb007164, VPort: 80, RIP: 0xc633640c, RPort: 8000, Proto: hdr.ProtoTCP, Template: true},
		{ClientPort: 4001, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			IPv6: true, Six: conn.Addrs6{Client: client6, VIP: vip6, RIP: rip6}},
	}
	if len(recs) != len(want) || recs[0] != want[0] || recs[1] != want[1] || recs[2] != want[2] {
		t.Errorf("SyncTable() = %+v\nwant %+v", recs, want)
	}
}

func TestSyncVerbsWithoutKey(t *testing.T) {
	o, _, _ := newTestOps(t)
	if resp := do(o, rule(t, "--start-daemon master")); !strings.Contains(resp.Error, "sync.key_file") {
		t.Errorf("start without a key: %q", resp.Error)
	}
	if resp := do(o, rule(t, "-L --daemon")); resp.Error != "" || len(resp.Daemons) != 0 {
		t.Errorf("-L --daemon: %+v", resp)
	}
	edits := do(o, api.Request{Op: api.OpEdits}).Edits
	if len(edits) != 1 || edits[0].Target != "master" || !strings.HasPrefix(edits[0].Result, "refused") {
		t.Errorf("edit log: %+v", edits)
	}
}

func TestSyncDaemonConfig(t *testing.T) {
	c, _ := newTestController(t)
	cfg := conf.DefaultSync()
	cfg.KeyFile = filepath.Join(t.TempDir(), "missing")
	if _, err := NewSyncDaemon(cfg, c, zap.NewNop()); err == nil || !strings.Contains(err.Error(), "sync.key_file") {
		t.Errorf("a missing key file: %v", err)
	}
	cfg.KeyFile = ""
	if d, err := NewSyncDaemon(cfg, c, zap.NewNop()); d != nil || err != nil {
		t.Errorf("no key file: %v %v", d, err)
	}
}

// TestSyncVerbs drives a real daemon (unicast on loopback, nothing is
// received) through lbctl's verbs.
func TestSyncVerbs(t *testing.T) {
	o, c, _ := newTestOps(t)
	key := filepath.Join(t.TempDir(), "sync.key")
	if err := os.WriteFile(key, []byte("a-shared-key-for-the-test\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	cfg := conf.DefaultSync()
	cfg.KeyFile, cfg.Peers, cfg.Listen, cfg.Port, cfg.Threshold, cfg.Period = key, []string{"127.0.0.2"}, "127.0.0.1", port, 4, 40
	d, err := NewSyncDaemon(cfg, c, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	o.SetSync(d)

	if resp := do(o, rule(t, "--start-daemon master --syncid 3")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if p := c.SyncParams(); !p.On || p.Threshold != 4 || p.Period != 40 {
		t.Errorf("the workers' sync rules with a master running: %+v", p)
	}
	if resp := do(o, rule(t, "--start-daemon backup --mcast-interface lo")); !strings.Contains(resp.Error, "share one socket") {
		t.Errorf("backup on another interface: %q", resp.Error)
	}
	resp := do(o, rule(t, "-L --daemon"))
	if len(resp.Daemons) != 1 || resp.Daemons[0].String() != "master sync daemon (peers=127.0.0.2, syncid=3)" {
		t.Errorf("-L --daemon: %+v", resp)
	}
	if resp := do(o, rule(t, "--stop-daemon master")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if c.SyncParams().On {
		t.Error("the workers still sync with no master running")
	}
	if resp := do(o, rule(t, "--stop-daemon master")); !strings.Contains(resp.Error, "not running") {
		t.Errorf("stopping twice: %q", resp.Error)
	}
}
