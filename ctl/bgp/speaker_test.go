package bgp

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dplb/dplb/conf"
)

// The speaker against a second, independent GoBGP in the process playing
// the router: real BGP sessions over loopback TCP (the router on
// 127.0.0.1, lbd dialling from 127.0.0.2).

const (
	lbdASN    = 65001
	routerASN = 65000
)

// router is the peer: a GoBGP that listens on a free loopback port and
// accepts lbd's session.
type router struct {
	srv  *server.BgpServer
	port int
}

func newRouter(t *testing.T, password string) *router {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := server.NewBgpServer(server.LoggerOption(zapLogger{zap.NewNop()}))
	go srv.Serve()
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: routerASN, RouterId: "10.0.0.254",
		ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.2", PeerAsn: lbdASN, AuthPassword: password},
		Transport: &api.Transport{PassiveMode: true},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 9, KeepaliveInterval: 3}},
		AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: ipv4Unicast, Enabled: true}},
			{Config: &api.AfiSafiConfig{Family: ipv6Unicast, Enabled: true}}},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &router{srv: srv, port: port}
}

// route is a prefix the router learnt, with its next hop and communities.
type route struct {
	prefix, nextHop string
	communities     []uint32
}

// routes lists what the router learnt from lbd.
func (r *router) routes(t *testing.T) map[string]route {
	t.Helper()
	out := map[string]route{}
	for _, family := range []*api.Family{ipv4Unicast, ipv6Unicast} {
		err := r.srv.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: family},
			func(d *api.Destination) {
				for _, p := range d.Paths {
					rt := route{prefix: d.Prefix}
					for _, a := range p.Pattrs {
						m, err := a.UnmarshalNew()
						if err != nil {
							continue
						}
						switch v := m.(type) {
						case *api.NextHopAttribute:
							rt.nextHop = v.NextHop
						case *api.MpReachNLRIAttribute:
							rt.nextHop = v.NextHops[0]
						case *api.CommunitiesAttribute:
							rt.communities = v.Communities
						}
					}
					out[d.Prefix] = rt
				}
			})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// waitRoutes waits until the router holds exactly prefixes.
func (r *router) waitRoutes(t *testing.T, what string, prefixes ...string) map[string]route {
	t.Helper()
	slices.Sort(prefixes)
	var got map[string]route
	var have []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = r.routes(t)
		have = have[:0]
		for p := range got {
			have = append(have, p)
		}
		slices.Sort(have)
		if slices.Equal(have, prefixes) {
			return got
		}
	}
	t.Fatalf("%s: the router holds %v, want %v", what, have, prefixes)
	return nil
}

func lbdConfig(port int, password string) conf.BGP {
	b := conf.DefaultBGP()
	b.ASN, b.RouterID = lbdASN, "10.0.0.1"
	b.Peers = []conf.BGPPeer{{Address: "127.0.0.1", ASN: routerASN, Port: port, LocalAddress: "127.0.0.2",
		Password: password, HoldTime: 9 * time.Second}}
	b.Communities = []string{"65001:1"}
	b.VIPCommunities = []conf.BGPVIPExtras{{VIP: "192.0.2.10", Communities: []string{"65001:80"}}}
	return b
}

func waitEstablished(t *testing.T, s *Speaker) Peer {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		ps, err := s.Peers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) == 1 && ps[0].Established {
			return ps[0]
		}
	}
	t.Fatal("the session never came up")
	return Peer{}
}

func TestSpeakerAnnouncesAndWithdraws(t *testing.T) {
	r := newRouter(t, "")
	nh, nh6 := netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("2001:db8:100::1")
	ctx := context.Background()
	core, logs := observer.New(zap.InfoLevel)
	s, err := Start(ctx, lbdConfig(r.port, ""), nh, nh6, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	p := waitEstablished(t, s)
	for deadline := time.Now().Add(5 * time.Second); logs.FilterMessage("bgp: session established").Len() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the session came up and lbd did not log it: %v", logs.All())
			break
		}
	}
	if p.Address != "127.0.0.1" || p.ASN != routerASN || p.State != "established" || p.Since.IsZero() || p.HoldTime != 9 {
		t.Errorf("peer = %+v", p)
	}
	r.waitRoutes(t, "before any announcement")

	a, b := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.11")
	if err := s.Announce(ctx, []netip.Addr{a, b}); err != nil {
		t.Fatal(err)
	}
	got := r.waitRoutes(t, "both announced", "192.0.2.10/32", "192.0.2.11/32")
	if rt := got["192.0.2.10/32"]; rt.nextHop != "198.51.100.1" || !slices.Equal(rt.communities, []uint32{65001<<16 | 1, 65001<<16 | 80}) {
		t.Errorf("192.0.2.10/32: next hop %s communities %v, want 198.51.100.1 and 65001:1, 65001:80", rt.nextHop, rt.communities)
	}
	if rt := got["192.0.2.11/32"]; rt.nextHop != "198.51.100.1" || !slices.Equal(rt.communities, []uint32{65001<<16 | 1}) {
		t.Errorf("192.0.2.11/32: next hop %s communities %v, want 198.51.100.1 and 65001:1", rt.nextHop, rt.communities)
	}
	if !slices.Equal(s.Announced(), []netip.Addr{a, b}) {
		t.Errorf("Announced() = %v", s.Announced())
	}

	if err := s.Announce(ctx, []netip.Addr{b}); err != nil {
		t.Fatal(err)
	}
	r.waitRoutes(t, "192.0.2.10 withdrawn", "192.0.2.11/32")
	if err := s.Announce(ctx, nil); err != nil {
		t.Fatal(err)
	}
	r.waitRoutes(t, "all withdrawn")
	if err := s.Announce(ctx, []netip.Addr{a}); err != nil {
		t.Fatal(err)
	}
	r.waitRoutes(t, "announced again", "192.0.2.10/32")
	if p := waitEstablished(t, s); p.Advertised != 1 {
		t.Errorf("advertised to the peer: %d, want 1", p.Advertised)
	}

	// An IPv6 VIP: a /128 in MP-BGP with the IPv6 next hop, over the same
	// session, and withdrawn alike.
	v6 := netip.MustParseAddr("2001:db8:1::10")
	if err := s.Announce(ctx, []netip.Addr{a, v6}); err != nil {
		t.Fatal(err)
	}
	got = r.waitRoutes(t, "an IPv6 VIP announced", "192.0.2.10/32", "2001:db8:1::10/128")
	if rt := got["2001:db8:1::10/128"]; rt.nextHop != "2001:db8:100::1" || !slices.Equal(rt.communities, []uint32{65001<<16 | 1}) {
		t.Errorf("2001:db8:1::10/128: next hop %s communities %v, want 2001:db8:100::1 and 65001:1", rt.nextHop, rt.communities)
	}
	if err := s.Announce(ctx, []netip.Addr{a}); err != nil {
		t.Fatal(err)
	}
	r.waitRoutes(t, "the IPv6 VIP withdrawn", "192.0.2.10/32")

	// Stopping closes the session: the router drops lbd's routes.
	s.Stop()
	r.waitRoutes(t, "after Stop")
}
