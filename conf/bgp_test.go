package conf_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

// bgpOn is a valid BGP section with one router.
func bgpOn(b *conf.BGP) {
	b.ASN, b.RouterID = 65001, "10.0.0.1"
	b.Peers = []conf.BGPPeer{{Address: "10.0.0.254", ASN: 65000}}
}

func TestBGPValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.BGP)
	}{
		{"off", func(*conf.BGP) {}},
		{"one peer, defaults", bgpOn},
		{"everything", func(b *conf.BGP) {
			bgpOn(b)
			b.ASN, b.ListenPort, b.NextHop, b.NextHop6 = 4200000000, 179, "203.0.113.1", "2001:db8:100::1"
			b.Peers = append(b.Peers, conf.BGPPeer{Address: "10.0.0.253", ASN: 65001, Port: 1179,
				LocalAddress: "10.0.0.1", Password: "k", HoldTime: 3 * time.Second, Keepalive: time.Second})
			b.Communities = []string{"65000:0", "0:65535"}
			b.VIPCommunities = []conf.BGPVIPExtras{{VIP: "203.0.113.10", Communities: []string{"65000:80"}}}
			b.ShutdownGrace = 10 * time.Minute
		}},
	} {
		c := validConfig()
		tc.edit(&c.BGP)
		if err := c.Validate(schedulers); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestBGPInvalid(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*conf.BGP)
	}{
		{"bgp.asn", func(b *conf.BGP) { b.Peers = []conf.BGPPeer{{Address: "10.0.0.254", ASN: 65000}} }},
		{"bgp.asn", func(b *conf.BGP) { bgpOn(b); b.ASN = 1 << 32 }},
		{"bgp.router_id", func(b *conf.BGP) { bgpOn(b); b.RouterID = "" }},
		{"bgp.router_id", func(b *conf.BGP) { bgpOn(b); b.RouterID = "::1" }},
		{"bgp.listen_port", func(b *conf.BGP) { b.ListenPort = 65536 }},
		{"bgp.listen_port", func(b *conf.BGP) { b.ListenPort = -2 }},
		{"bgp.next_hop", func(b *conf.BGP) { bgpOn(b); b.NextHop = "nope" }},
		{"bgp.next_hop6", func(b *conf.BGP) { bgpOn(b); b.NextHop6 = "203.0.113.1" }},
		{"bgp.next_hop6", func(b *conf.BGP) { bgpOn(b); b.NextHop6 = "fe80::1" }},
		{"bgp.peers", func(b *conf.BGP) { bgpOn(b); b.Peers = nil }},
		{"bgp.peers[0].address", func(b *conf.BGP) { bgpOn(b); b.Peers[0].Address = "10.0.0" }},
		{"bgp.peers[1].address", func(b *conf.BGP) { bgpOn(b); b.Peers = append(b.Peers, b.Peers[0]) }},
		{"bgp.peers[0].asn", func(b *conf.BGP) { bgpOn(b); b.Peers[0].ASN = 0 }},
		{"bgp.peers[0].port", func(b *conf.BGP) { bgpOn(b); b.Peers[0].Port = 70000 }},
		{"bgp.peers[0].local_address", func(b *conf.BGP) { bgpOn(b); b.Peers[0].LocalAddress = "x" }},
		{"bgp.peers[0].password", func(b *conf.BGP) { bgpOn(b); b.Peers[0].Password = string(make([]byte, 81)) }},
		{"bgp.peers[0].hold_time", func(b *conf.BGP) { bgpOn(b); b.Peers[0].HoldTime = 2 * time.Second }},
		{"bgp.peers[0].hold_time", func(b *conf.BGP) { bgpOn(b); b.Peers[0].HoldTime = 3500 * time.Millisecond }},
		{"bgp.peers[0].keepalive", func(b *conf.BGP) { bgpOn(b); b.Peers[0].Keepalive = 90 * time.Second }},
		{"bgp.communities[1]", func(b *conf.BGP) { bgpOn(b); b.Communities = []string{"1:2", "65536:1"} }},
		{"bgp.communities[0]", func(b *conf.BGP) { bgpOn(b); b.Communities = []string{"100"} }},
		{"bgp.vip_communities[0].vip", func(b *conf.BGP) {
			bgpOn(b)
			b.VIPCommunities = []conf.BGPVIPExtras{{VIP: "203.0.113.99"}}
		}},
		{"bgp.vip_communities[0].communities[0]", func(b *conf.BGP) {
			bgpOn(b)
			b.VIPCommunities = []conf.BGPVIPExtras{{VIP: "203.0.113.10", Communities: []string{"x:1"}}}
		}},
		{"bgp.shutdown_grace", func(b *conf.BGP) { b.ShutdownGrace = 11 * time.Minute }},
	} {
		c := validConfig()
		tc.edit(&c.BGP)
		err := c.Validate(schedulers)
		var fe *conf.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
}

func TestBGPNextHopDefaultsToTheClientPort(t *testing.T) {
	c := validConfig()
	bgpOn(&c.BGP)
	if a, ok := c.BGPNextHop(); !ok || a != netip.MustParseAddr("203.0.113.1") {
		t.Errorf("BGPNextHop() = %v, %v; want the client port's 203.0.113.1", a, ok)
	}
	c.Ports[0].Role = "server"
	if err := c.Validate(schedulers); err == nil {
		t.Errorf("no port faces clients and no bgp.next_hop: accepted")
	}
}

// TestBGPNextHop6: the IPv6 VIPs' next hop is bgp.next_hop6, else the
// first client-facing port's address6; none without either.
func TestBGPNextHop6(t *testing.T) {
	c := validConfig()
	bgpOn(&c.BGP)
	if a, ok := c.BGPNextHop6(); ok {
		t.Errorf("no address6 and no bgp.next_hop6: BGPNextHop6() = %v", a)
	}
	c.Ports[0].Address6 = "2001:db8:100::1/64"
	if a, ok := c.BGPNextHop6(); !ok || a != netip.MustParseAddr("2001:db8:100::1") {
		t.Errorf("BGPNextHop6() = %v, %v; want the client port's 2001:db8:100::1", a, ok)
	}
	c.BGP.NextHop6 = "2001:db8:200::1"
	if a, ok := c.BGPNextHop6(); !ok || a != netip.MustParseAddr("2001:db8:200::1") {
		t.Errorf("BGPNextHop6() = %v, %v; want bgp.next_hop6", a, ok)
	}
}

func TestBGPCommunitiesAndTimers(t *testing.T) {
	b := conf.BGP{Communities: []string{"65000:1"},
		VIPCommunities: []conf.BGPVIPExtras{{VIP: "192.0.2.1", Communities: []string{"1:2"}}}}
	if got := b.CommunitiesOf(netip.MustParseAddr("192.0.2.1")); !slices.Equal(got, []uint32{65000<<16 | 1, 1<<16 | 2}) {
		t.Errorf("CommunitiesOf(192.0.2.1) = %v", got)
	}
	if got := b.CommunitiesOf(netip.MustParseAddr("192.0.2.2")); !slices.Equal(got, []uint32{65000<<16 | 1}) {
		t.Errorf("CommunitiesOf(192.0.2.2) = %v", got)
	}
	p := conf.BGPPeer{}
	if h, k := p.Timers(); h != 90*time.Second || k != 30*time.Second || p.PeerPort() != 179 {
		t.Errorf("defaults: hold %v keepalive %v port %d", h, k, p.PeerPort())
	}
	p.HoldTime = 10 * time.Second
	if h, k := p.Timers(); h != 10*time.Second || k != 3*time.Second {
		t.Errorf("hold 10s: hold %v keepalive %v", h, k)
	}
}
