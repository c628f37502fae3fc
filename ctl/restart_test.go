package ctl

import (
	"net/netip"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/handover"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestHandoverCarriesCountersAndNeighbours: what one controller collects
// for a handover, encoded and decoded, makes the next one list the same
// counters (with the same -Z baselines) and know the same neighbours
// before its lcores receive; the connections become sync records.
func TestHandoverCarriesCountersAndNeighbours(t *testing.T) {
	old, f := newTestController(t)
	web := old.Snapshot().Services[0]
	f.dest[web.Dests[0].ID] = lcore.DestStats{lcore.DestConns: 10, lcore.DestInPkts: 50, lcore.DestOutPkts: 40, lcore.DestInBytes: 5000, lcore.DestActive: 1}
	f.dest[web.Dests[1].ID] = lcore.DestStats{lcore.DestConns: 20, lcore.DestInPkts: 100}
	client, vip, rs1 := ip4(192, 0, 2, 7), ip4(203, 0, 113, 100), ip4(198, 51, 100, 11)
	f.conns = []lcore.ConnInfo{
		{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, ClientIP: client, ClientPort: 40000, VIP: vip, VPort: 80, RIP: rs1, RPort: 80},
		{Proto: hdr.ProtoTCP, Template: true, ClientIP: ip4(192, 0, 2, 0), VIP: vip, VPort: 80, RIP: rs1, RPort: 80},
		{Proto: hdr.ProtoTCP, Template: true, ClientIP: ip4(192, 0, 2, 0), VIP: vip, VPort: 21}, // its server left: no record
	}
	gw := ip4(198, 51, 100, 254)
	old.neigh.learn(gw, hdr.MAC{2, 9, 9, 9, 9, 9}, 1, time.Now())
	base := baselines{keyOf(old.services[0].conf, old.services[0].conf.Servers[0]): {Conns: 4, InPkts: 10}}
	if err := old.SetHAState(false); err != nil { // keepalived made it the backup at run time
		t.Fatal(err)
	}

	s, err := old.collectHandover(base, "/etc/dplb/lbd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 2 || s.Records[0].ClientPort != 40000 || s.Records[0].State != conn.StateEstablished || !s.Records[1].Template {
		t.Errorf("records %+v: want the connection and the template whose server is still there", s.Records)
	}
	dec, err := handover.Decode(handover.Encode(nil, s))
	if err != nil {
		t.Fatal(err)
	}
	dec.Records = nil // the fake lcores install nothing

	next, nf := newTestController(t)
	nextBase := baselines{}
	res, err := next.restoreHandover(&dec, nextBase)
	if err != nil {
		t.Fatal(err)
	}
	if res.Counters != 3 || res.Neighbours != 1 {
		t.Errorf("restored counters of %d servers and %d neighbours, want 3 and 1", res.Counters, res.Neighbours)
	}
	if next.HAState() != "backup" || res.HA != "backup" || !next.Snapshot().Backup {
		t.Errorf("the next lbd is %s (result %q): want the backup keepalived made the old one", next.HAState(), res.HA)
	}
	if mac, ok := next.Snapshot().Neigh[gw]; !ok || mac != (hdr.MAC{2, 9, 9, 9, 9, 9}) || len(nf.published) == 0 {
		t.Errorf("the gateway's MAC is not in the published snapshot (%v, %t)", mac, ok)
	}
	want := old.view(base)
	got := next.view(nextBase)
	for i := range want.Services {
		for j := range want.Services[i].Servers {
			if w, g := want.Services[i].Servers[j].Stats, got.Services[i].Servers[j].Stats; w != g {
				t.Errorf("service %d server %d lists %+v after the handover, %+v before", i, j, g, w)
			}
		}
	}
	// The new lbd's own traffic adds to the carried counters.
	nf.dest[next.Snapshot().Services[0].Dests[1].ID] = lcore.DestStats{lcore.DestConns: 1}
	if got := next.view(nil).Services[0].Servers[1].Stats.Conns; got != 21 {
		t.Errorf("carried 20 connections plus 1 new lists %d", got)
	}
}

// TestHandoverCarriesIPv6: an IPv6 connection becomes a record with its
// addresses (its template none: the next lbd rebuilds it), an IPv6
// service's counters and the IPv6 neighbours reach the next lbd.
func TestHandoverCarriesIPv6(t *testing.T) {
	o, old, f := newTestOps6(t)
	if resp := do(o, rule(t, "-A -t [2001:db8::10]:80 -s rr -p 300")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if resp := do(o, rule(t, "-a -t [2001:db8::10]:80 -r [fd00:1::11]:8080 -m")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	var svc lcore.Service
	for _, s := range old.Snapshot().Services {
		if s.Key.IsIPv6() {
			svc = s
		}
	}
	f.dest[svc.Dests[0].ID] = lcore.DestStats{lcore.DestConns: 7, lcore.DestInPkts: 70}
	client6, vip6, rip6 := ipv6(netip.MustParseAddr("2001:db8::7")), svc.Key.VIP6, svc.Dests[0].Addr6
	f.conns = []lcore.ConnInfo{
		{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, IPv6: true, Client6: client6, ClientPort: 40000,
			VIP6: vip6, VPort: 80, RIP6: rip6, RPort: 8080},
		{Proto: hdr.ProtoTCP, Template: true, Fwd: fwd.NAT, IPv6: true, VIP6: vip6, VPort: 80, RIP6: rip6, RPort: 8080},
	}
	old.neigh6.learn(rip6, hdr.MAC{2, 0, 0, 0, 0, 0x11}, 1, time.Now())
	s, err := old.collectHandover(baselines{}, "/etc/dplb/lbd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := lcore.SyncConn{ClientPort: 40000, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
		Fwd: fwd.NAT, IPv6: true, Six: conn.Addrs6{Client: client6, VIP: vip6, RIP: rip6}}
	if len(s.Records) != 1 || s.Records[0] != want {
		t.Fatalf("records %+v, want the connection alone", s.Records)
	}
	dec, err := handover.Decode(handover.Encode(nil, s))
	if err != nil {
		t.Fatal(err)
	}
	dec.Records = nil // the fake lcores install nothing
	no, next, _ := newTestOps6(t)
	for _, l := range []string{"-A -t [2001:db8::10]:80 -s rr -p 300", "-a -t [2001:db8::10]:80 -r [fd00:1::11]:8080 -m"} {
		if resp := do(no, rule(t, l)); resp.Error != "" {
			t.Fatal(resp.Error)
		}
	}
	res, err := next.restoreHandover(&dec, baselines{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Counters != 2 || res.Neighbours != 1 {
		t.Errorf("restored counters of %d servers and %d neighbours, want 2 and 1", res.Counters, res.Neighbours)
	}
	if mac, ok := next.Snapshot().Neigh6[rip6]; !ok || mac != (hdr.MAC{2, 0, 0, 0, 0, 0x11}) {
		t.Errorf("the IPv6 server's MAC is not in the published snapshot (%v, %t)", mac, ok)
	}
	found := false
	for _, sv := range next.view(nil).Services {
		for _, r := range sv.Servers {
			if r.key.svc.IsIPv6() {
				found = true
				if r.Stats.Conns != 7 || r.Stats.InPkts != 70 {
					t.Errorf("the IPv6 server lists %+v after the handover", r.Stats)
				}
			}
		}
	}
	if !found {
		t.Error("no IPv6 server listed")
	}
}
