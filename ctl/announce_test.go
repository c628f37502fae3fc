package ctl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// announceView has three VIPs: .10 with a live server on one of its two
// services, .11 whose only server is down (its sorry server standing
// in), .12 whose only server has weight 0.
func announceView() View {
	vip := func(s string) uint32 { return ipv4(netip.MustParseAddr(s)) }
	return View{Services: []ServiceView{
		{Key: lcore.ServiceKey{VIP: vip("203.0.113.10"), Port: 80}, Servers: []ServerView{{Health: Down, Weight: 0}}},
		{Key: lcore.ServiceKey{VIP: vip("203.0.113.10"), Port: 443}, Servers: []ServerView{{Health: Unchecked, Weight: 1}}},
		{Key: lcore.ServiceKey{VIP: vip("203.0.113.11"), Port: 80}, Servers: []ServerView{{Health: Down, Weight: 0}},
			Sorry: &ServerView{Health: Unchecked, Weight: 1}},
		{Key: lcore.ServiceKey{VIP: vip("203.0.113.12"), Port: 80}, Servers: []ServerView{{Health: Up, Weight: 0}}},
	}}
}

func TestAnnouncerWantsHealthyVIPs(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	cfg := conf.DefaultBGP()
	a := &announcer{cfg: cfg}
	want, withheld := a.wanted(announceView())
	if !slices.Equal(want, addrs("203.0.113.10")) {
		t.Errorf("announced %v, want 203.0.113.10 only", want)
	}
	if !slices.Equal(withheld, []api.BGPWithheld{{VIP: "203.0.113.11", Reason: withheldNoServer}, {VIP: "203.0.113.12", Reason: withheldNoServer}}) {
		t.Errorf("withheld %v", withheld)
	}

	a.cfg.RequireLiveServer = false
	if want, withheld := a.wanted(announceView()); !slices.Equal(want, addrs("203.0.113.10", "203.0.113.11", "203.0.113.12")) || len(withheld) != 0 {
		t.Errorf("without require_live_server: announced %v, withheld %v; want every VIP", want, withheld)
	}

	// An IPv6 VIP is announced with an IPv6 next hop, withheld without.
	six := announceView()
	six.Services = append(six.Services, ServiceView{Key: lcore.ServiceKey{VIP6: hdr.Addr6From(netip.MustParseAddr("2001:db8::10")), Port: 80},
		Servers: []ServerView{{Health: Up, Weight: 1}}})
	if want, withheld := a.wanted(six); !slices.Equal(want, addrs("203.0.113.10", "203.0.113.11", "203.0.113.12")) ||
		!slices.Equal(withheld, []api.BGPWithheld{{VIP: "2001:db8::10", Reason: withheldNoNH6}}) {
		t.Errorf("no IPv6 next hop: announced %v, withheld %v", want, withheld)
	}
	a.nextHop6 = netip.MustParseAddr("2001:db8:100::1")
	if want, _ := a.wanted(six); !slices.Equal(want, addrs("203.0.113.10", "203.0.113.11", "203.0.113.12", "2001:db8::10")) {
		t.Errorf("with an IPv6 next hop: announced %v", want)
	}

	// A removed service's VIP stays announced while its connections
	// drain, but has no live server.
	removed := announceView()
	removed.DrainingVIPs = addrs("203.0.113.20")
	if want, _ := a.wanted(removed); !slices.Equal(want, addrs("203.0.113.10", "203.0.113.11", "203.0.113.12", "203.0.113.20")) {
		t.Errorf("a draining VIP: announced %v, want it among the others", want)
	}
	a.cfg.RequireLiveServer = true
	if _, withheld := a.wanted(removed); !slices.Contains(withheld, api.BGPWithheld{VIP: "203.0.113.20", Reason: withheldNoServer}) {
		t.Errorf("a draining VIP with require_live_server: withheld %v", withheld)
	}
	a.cfg.RequireLiveServer = false

	// A port whose link is down withholds every VIP.
	down := announceView()
	down.Links = []api.PortLink{{Port: "wan", Up: true}, {Port: "lan"}}
	if want, withheld := a.wanted(down); len(want) != 0 || len(withheld) != 3 || withheld[0].Reason != withheldLinkDown {
		t.Errorf("a link down: announced %v, withheld %v; want nothing announced", want, withheld)
	}

	a.draining = true
	want, withheld = a.wanted(announceView())
	if len(want) != 0 || len(withheld) != 3 || withheld[0].Reason != withheldDraining {
		t.Errorf("drained: announced %v, withheld %v; want nothing announced", want, withheld)
	}
	a.stopping = true
	if _, withheld = a.wanted(announceView()); withheld[0].Reason != withheldStopping {
		t.Errorf("stopping: withheld %v", withheld)
	}
}

// TestOpsSloppyTCP: lbctl's --sloppy-tcp and --no-sloppy-tcp on -A and
// -E set a service's sloppy_tcp, which the listing shows.
func TestOpsSloppyTCP(t *testing.T) {
	o, c, _ := newTestOps(t)
	sloppy := func() bool {
		svcs, _ := c.Services()
		for _, s := range svcs {
			if s.Port == 443 {
				return s.SloppyTCP
			}
		}
		t.Fatal("no service on port 443")
		return false
	}
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"-A -t 203.0.113.100:443 -s mh -b mh-port --sloppy-tcp", true},
		{"-E -t 203.0.113.100:443 -s mh", true}, // unchanged when not given
		{"-E -t 203.0.113.100:443 --no-sloppy-tcp", false},
		{"-E -t 203.0.113.100:443 --sloppy-tcp", true},
	} {
		if resp := do(o, rule(t, tc.line)); resp.Error != "" {
			t.Fatalf("%s: %s", tc.line, resp.Error)
		}
		if got := sloppy(); got != tc.want {
			t.Errorf("after %s: sloppy_tcp %v, want %v", tc.line, got, tc.want)
		}
	}
	if l := listing(t, o, api.ListFormat{}); !strings.Contains(l, "TCP  203.0.113.100:443 mh (mh-port) sloppy-tcp\n") {
		t.Errorf("the listing does not show sloppy-tcp:\n%s", l)
	}
	for _, args := range [][]string{
		{"-a", "-t", "203.0.113.100:443", "-r", "198.51.100.30", "--sloppy-tcp"},
		{"-E", "-t", "203.0.113.100:443", "--sloppy-tcp", "--no-sloppy-tcp"},
	} {
		if _, err := api.ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) accepted", args)
		}
	}
}
