package ctl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestSNATRules: a SNAT rule reaches the lcores as one service per
// protocol, keyed by its source network, with its address as local
// address and one server standing for the destination; it survives an
// edit of the services with the same ids; no listing shows it, and a
// takeover announces its address but not its key as a VIP.
func TestSNATRules(t *testing.T) {
	c, f, cfg := controllerFor(t, testConfig+`
snat:
  - {source: 198.51.100.0/24, addresses: [203.0.113.60]}
`)
	o := NewOps(c, cfg, "", nil, nil, zap.NewNop())
	check := func(s *lcore.Snapshot) []uint32 {
		t.Helper()
		var ids []uint32
		var protos []uint8
		for _, svc := range s.Services {
			if svc.SNAT == nil {
				continue
			}
			if svc.SNAT.Net != ip(t, "198.51.100.0") || svc.SNAT.Mask != 0xffffff00 || svc.Key.VIP != svc.SNAT.Net ||
				!slices.Equal(svc.LocalAddrs, []uint32{ip(t, "203.0.113.60")}) || len(svc.Dests) != 1 ||
				svc.Dests[0].Addr != 0 || svc.Dests[0].Fwd != fwd.FullNAT || len(svc.Scheds) != c.dp.NumWorkers() {
				t.Fatalf("SNAT service %+v", svc)
			}
			ids, protos = append(ids, svc.Dests[0].ID), append(protos, svc.Key.Proto)
		}
		if !slices.Equal(protos, []uint8{hdr.ProtoTCP, hdr.ProtoUDP, hdr.ProtoICMP}) {
			t.Fatalf("SNAT services for protocols %v, want TCP, UDP and ICMP", protos)
		}
		if !s.IsLIP(ip(t, "203.0.113.60")) || s.IsVIP(ip(t, "198.51.100.0")) {
			t.Fatalf("the SNAT address answered: %v; the source network a VIP: %v", s.IsLIP(ip(t, "203.0.113.60")), s.IsVIP(ip(t, "198.51.100.0")))
		}
		return ids
	}
	ids := check(c.Snapshot())
	if r := do(o, rule(t, "-A -t 203.0.113.100:443 -s rr")); r.Error != "" {
		t.Fatal(r.Error)
	}
	if again := check(f.published[len(f.published)-1]); !slices.Equal(again, ids) {
		t.Errorf("after an edit the SNAT servers' ids are %v, were %v", again, ids)
	}
	for _, svc := range do(o, api.Request{Op: api.OpList}).Services {
		if svc.VIP == "198.51.100.0" {
			t.Errorf("the listing shows the SNAT rule as a service: %+v", svc)
		}
	}
	c.mu.Lock()
	targets := c.announceTargets()
	c.mu.Unlock()
	var addrs []netip.Addr
	for _, tg := range targets {
		addrs = append(addrs, tg.addr())
	}
	if !slices.Contains(addrs, netip.MustParseAddr("203.0.113.60")) || slices.Contains(addrs, netip.MustParseAddr("198.51.100.0")) {
		t.Errorf("a takeover announces %v: want the SNAT address, not the rule's network", addrs)
	}
	if own := c.LocalAddrs(); !slices.Contains(own, netip.MustParseAddr("203.0.113.60")) {
		t.Errorf("the hellos' local addresses %v lack the SNAT address (a scale-out peer takes it over)", own)
	}

	// The metrics: the rule's one server's counters, by its source.
	f.dest[ids[0]] = lcore.DestStats{lcore.DestConns: 5, lcore.DestInPkts: 40, lcore.DestOutPkts: 30, lcore.DestActive: 2, lcore.DestInactive: 1}
	f.dest[ids[2]] = lcore.DestStats{lcore.DestConns: 3, lcore.DestInPkts: 9, lcore.DestOutPkts: 8, lcore.DestInactive: 3}

	// The listing: a line per protocol after the services, its
	// connection counts, or with --stats its counters in the services'
	// columns; none in the views of server settings; -S leaves it out.
	l := listing(t, o, api.ListFormat{})
	for _, want := range []string{
		"\nSNAT TCP  198.51.100.0/24 from 203.0.113.60 active 2 inactive 1\n",
		"\nSNAT UDP  198.51.100.0/24 from 203.0.113.60 active 0 inactive 0\n",
		"\nSNAT ICMP 198.51.100.0/24 from 203.0.113.60 active 0 inactive 3\n",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("the listing lacks %q:\n%s", want, l)
		}
	}
	if l := listing(t, o, api.ListFormat{Stats: true}); !strings.Contains(l, "\nSNAT TCP  198.51.100.0/24                5       40       30        0        0\n") {
		t.Errorf("the --stats listing lacks the TCP rule's counters:\n%s", l)
	}
	if l := listing(t, o, api.ListFormat{Thresholds: true}); strings.Contains(l, "SNAT") {
		t.Errorf("the thresholds view lists the SNAT rules:\n%s", l)
	}
	if r := do(o, rule(t, "-S -n")); strings.Contains(r.Text, "198.51.100.0") {
		t.Errorf("-S saves the SNAT rule:\n%s", r.Text)
	}
	if r := do(o, api.Request{Op: api.OpList}).SNAT; len(r) != 3 || r[2].Protocol != "ICMP" || r[2].InactiveConns != 3 || r[2].Stats.InPkts != 9 ||
		!slices.Equal(r[0].Addresses, []string{"203.0.113.60"}) || r[0].Source != "198.51.100.0/24" {
		t.Errorf("the listing's SNAT rules: %+v", r)
	}
	got := collected(t, f, c, func(name string) bool { return strings.HasPrefix(name, "dplb_snat_") })
	for k, want := range map[string]float64{
		"dplb_snat_connections_total{protocol=TCP,source=198.51.100.0/24}":                 5,
		"dplb_snat_connections_total{protocol=UDP,source=198.51.100.0/24}":                 0,
		"dplb_snat_packets_total{dir=out,protocol=TCP,source=198.51.100.0/24}":             40,
		"dplb_snat_packets_total{dir=in,protocol=TCP,source=198.51.100.0/24}":              30,
		"dplb_snat_active_connections{protocol=TCP,source=198.51.100.0/24,state=active}":   2,
		"dplb_snat_active_connections{protocol=TCP,source=198.51.100.0/24,state=inactive}": 1,
		"dplb_snat_connections_total{protocol=ICMP,source=198.51.100.0/24}":                3,
		"dplb_snat_packets_total{dir=out,protocol=ICMP,source=198.51.100.0/24}":            9,
		"dplb_snat_packets_total{dir=in,protocol=ICMP,source=198.51.100.0/24}":             8,
	} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (%v), want %v; all: %v", k, v, ok, want, got)
		}
	}
}

// TestSNATPingListed: a server's ping through a SNAT rule is listed as
// an ICMP connection, its identifiers as ports, from the SNAT address;
// it is not a record for a peer or a handover (records carry TCP and
// UDP; a ping loses the echoes in flight, nothing more).
func TestSNATPingListed(t *testing.T) {
	o, _, f := newTestOps(t)
	ping := lcore.ConnInfo{Proto: hdr.ProtoICMP, State: conn.StateUDP, ClientIP: ip4(198, 51, 100, 11), ClientPort: 77,
		VIP: ip4(192, 0, 2, 50), RIP: ip4(192, 0, 2, 50), Fwd: fwd.FullNAT, HasExt: true,
		LIP: ip4(203, 0, 113, 60), LPort: 4242, Expires: 299e9}
	f.conns = []lcore.ConnInfo{ping}
	resp := do(o, rule(t, "-L -n -c"))
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if c := resp.Conns; len(c) != 1 || c[0].Protocol != "ICMP" || c[0].State != "ICMP" || c[0].Client != "198.51.100.11:77" ||
		c[0].Destination != "192.0.2.50:0" || c[0].Local != "203.0.113.60:4242" {
		t.Fatalf("the ping listed as %+v", c)
	}
	if r, ok := syncable(&ping); ok {
		t.Fatalf("the ping became a record: %+v", r)
	}
	udp := ping
	udp.Proto, udp.ClientPort, udp.VPort, udp.RPort = hdr.ProtoUDP, 5353, 53, 53
	if _, ok := syncable(&udp); !ok {
		t.Fatal("the same UDP connection is no record")
	}
}
