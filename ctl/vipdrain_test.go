package ctl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestRemovedServiceDrains: a removed service whose servers still count
// connections stays in the snapshot as Removed (no schedulers, its
// servers draining) and keeps its VIP answered; lbctl -L says the VIP
// drains while no configured service has it. Once no connection counts
// on its servers the service goes, and its VIP with it. A VIP that keeps
// another service never drains, and a service added on a draining VIP
// ends that VIP's drain. IPv4 and IPv6 alike.
func TestRemovedServiceDrains(t *testing.T) {
	o, c, f := newTestOps6(t)
	ok := func(line string) {
		t.Helper()
		if resp := do(o, rule(t, line)); resp.Error != "" {
			t.Fatalf("%s: %s", line, resp.Error)
		}
	}
	republish := func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.republish()
	}
	vip, vip6 := netip.MustParseAddr("203.0.113.101"), netip.MustParseAddr("2001:db8::101")
	v4, v6 := ipv4(vip), hdr.Addr6From(vip6)
	ok("-A -t 203.0.113.100:21 -s rr")
	ok("-a -t 203.0.113.100:21 -r 198.51.100.12:21 -m")
	ok("-A -t 203.0.113.101:80 -s rr")
	ok("-a -t 203.0.113.101:80 -r 198.51.100.11:80 -m")
	ok("-A -t [2001:db8::101]:80 -s rr")
	ok("-a -t [2001:db8::101]:80 -r [fd00:1::11]:80 -m")
	idOf := func(svc, server string) uint32 {
		t.Helper()
		s, r := netip.MustParseAddrPort(svc), netip.MustParseAddrPort(server)
		k := destKey{svc: lcore.ServiceKey{VIP: ipv4(s.Addr()), VIP6: ipv6(s.Addr()), Port: s.Port(), Proto: hdr.ProtoTCP},
			addr: ipv4(r.Addr()), addr6: ipv6(r.Addr()), port: r.Port()}
		id, found := c.ids.lookup(k)
		if !found {
			t.Fatalf("no id for %s -> %s", svc, server)
		}
		return id
	}
	id4, id6 := idOf("203.0.113.101:80", "198.51.100.11:80"), idOf("[2001:db8::101]:80", "[fd00:1::11]:80")
	f.dest[id4] = lcore.DestStats{lcore.DestActive: 1}
	f.dest[id6] = lcore.DestStats{lcore.DestInactive: 1}

	ok("-D -t 203.0.113.101:80")
	ok("-D -t [2001:db8::101]:80")
	ok("-D -t 203.0.113.100:80") // its VIP keeps the service on port 21
	if got := drainingVIPs(c.Snapshot()); !slices.Equal(got, []netip.Addr{vip, vip6}) {
		t.Fatalf("draining VIPs %v, want %v and %v", got, vip, vip6)
	}
	republish() // the servers no connection counts on go, and their service
	snap := c.Snapshot()
	if !snap.IsVIP(v4) || !snap.IsVIP6(v6) {
		t.Fatal("the removed services' VIPs are no longer answered while their connections drain")
	}
	var removed []string
	for _, s := range snap.Services {
		if s.Removed {
			if len(s.Dests) != 0 || len(s.Scheds) != 0 || len(s.Draining) != 1 {
				t.Errorf("removed service %+v: %d servers, %d schedulers, %d draining; want 0, 0, 1", s.Key, len(s.Dests), len(s.Scheds), len(s.Draining))
			}
			removed = append(removed, netip.AddrPortFrom(addrOfKey(s.Key.VIP, s.Key.VIP6), s.Key.Port).String())
		}
	}
	if !slices.Equal(removed, []string{"203.0.113.101:80", "[2001:db8::101]:80"}) {
		t.Errorf("removed services in the snapshot %v, want the two with connections (not 203.0.113.100:80)", removed)
	}
	if out := listing(t, o, api.ListFormat{}); !strings.Contains(out, "VIP draining: 203.0.113.101, 2001:db8::101 (") {
		t.Errorf("the listing does not name the draining VIPs:\n%s", out)
	}
	if svcs, _ := c.Services(); slices.ContainsFunc(svcs, func(s conf.Service) bool { return s.VIP == "203.0.113.101" }) {
		t.Error("a removed service is still among the configured ones")
	}

	republish() // connections still counted: nothing more goes
	if got := drainingVIPs(c.Snapshot()); len(got) != 2 {
		t.Fatalf("drain ended with connections left: %v", got)
	}
	delete(f.dest, id4) // the IPv4 connection ended
	republish()
	if got := drainingVIPs(c.Snapshot()); !slices.Equal(got, []netip.Addr{vip6}) {
		t.Fatalf("after the IPv4 connection ended: draining %v, want %v", got, vip6)
	}
	if snap := c.Snapshot(); snap.IsVIP(v4) || !snap.IsVIP6(v6) {
		t.Fatalf("after the IPv4 drain ended: %v answered %v (want not), %v answered %v (want yes)", vip, snap.IsVIP(v4), vip6, snap.IsVIP6(v6))
	}
	if !c.Snapshot().IsVIP(ipv4(netip.MustParseAddr("203.0.113.100"))) {
		t.Fatal("a VIP that keeps a service stopped being answered")
	}

	// A service on the draining VIP ends the VIP's drain; the removed
	// service stays while its server drains.
	ok("-A -t [2001:db8::101]:443 -s rr")
	if got := drainingVIPs(c.Snapshot()); len(got) != 0 {
		t.Fatalf("a service added on the draining VIP left it draining: %v", got)
	}
	if !slices.ContainsFunc(c.Snapshot().Services, func(s lcore.Service) bool { return s.Removed && s.Key.VIP6 == v6 && s.Key.Port == 80 }) {
		t.Error("the removed service went while its server still counts a connection")
	}
}

// TestAdoptableService: a peer's records make a service here only on a
// VIP this node could configure.
func TestAdoptableService(t *testing.T) {
	_, c, _ := newTestOps6(t)
	for _, tc := range []struct {
		vip   string
		proto uint8
		want  bool
	}{
		{"203.0.113.150", hdr.ProtoTCP, true},
		{"203.0.113.100", hdr.ProtoUDP, true}, // a configured VIP, another protocol
		{"2001:db8::150", hdr.ProtoTCP, true},
		{"10.1.2.3", hdr.ProtoTCP, true},
		{"203.0.113.1", hdr.ProtoTCP, false},   // a port's address
		{"2001:db8::1", hdr.ProtoTCP, false},   // a port's address6
		{"198.51.100.11", hdr.ProtoTCP, false}, // a real server
		{"224.0.0.5", hdr.ProtoTCP, false},
		{"127.0.0.1", hdr.ProtoTCP, false},
		{"fe80::1", hdr.ProtoTCP, false},
		{"203.0.113.150", 132, false}, // SCTP: no service has it
	} {
		a := netip.MustParseAddr(tc.vip)
		k := lcore.ServiceKey{VIP: ipv4(a), VIP6: ipv6(a), Port: 80, Proto: tc.proto}
		c.mu.Lock()
		got := c.adoptableService(k)
		c.mu.Unlock()
		if got != tc.want {
			t.Errorf("adoptableService(%s proto %d) = %v, want %v", tc.vip, tc.proto, got, tc.want)
		}
	}
}

// TestDrainingVIPMetric: dplb_vip_draining names each draining VIP.
func TestDrainingVIPMetric(t *testing.T) {
	o, c, f := newTestOps(t)
	draining := func() []string {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(newCollector(f, c, nil))
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, mf := range mfs {
			if mf.GetName() == "dplb_vip_draining" {
				for _, m := range mf.GetMetric() {
					out = append(out, m.GetLabel()[0].GetValue())
				}
			}
		}
		return out
	}
	if got := draining(); len(got) != 0 {
		t.Fatalf("draining before any removal: %v", got)
	}
	web := c.Snapshot().Services[0]
	f.dest[web.Dests[0].ID] = lcore.DestStats{lcore.DestActive: 1}
	if resp := do(o, rule(t, "-C")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if got := draining(); !slices.Equal(got, []string{"203.0.113.100"}) {
		t.Fatalf("dplb_vip_draining after -C with a connection left: %v", got)
	}
}
