package ctl

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
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
