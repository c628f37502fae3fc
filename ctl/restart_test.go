package ctl

import (
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
