package lcore

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestStaticRoutes: a destination on a port's subnet is on-link; else the
// longest static route that holds it gives the port and next hop; else
// the gateway; the same for IPv6.
func TestStaticRoutes(t *testing.T) {
	a6 := func(s string) hdr.Addr6 { return hdr.Addr6From(netip.MustParseAddr(s)) }
	ports := []PortInfo{
		{Name: "wan", Addr: wanAddr, Net: ip4(203, 0, 113, 0), Mask: 0xFFFFFF00, Gateway: ip4(203, 0, 113, 254),
			Addr6: a6("2001:db8::1"), Net6: a6("2001:db8::"), Mask6: Mask6(64), Gateway6: a6("2001:db8::fe")},
		{Name: "lan", Addr: lanAddr, Net: ip4(198, 51, 100, 0), Mask: 0xFFFFFF00,
			Addr6: a6("fd00:1::1"), Net6: a6("fd00:1::"), Mask6: Mask6(64),
			Routes: []StaticRoute{
				{Net: ip4(10, 0, 0, 0), Mask: 0xFF000000, Via: ip4(198, 51, 100, 254)},
				{Net: ip4(10, 9, 0, 0), Mask: 0xFFFFFF00, Via: ip4(198, 51, 100, 253)},
			},
			Routes6: []StaticRoute6{
				{Net: a6("fd00:9::"), Mask: Mask6(32), Via: a6("fd00:1::fe")},
				{Net: a6("fd00:9:1::"), Mask: Mask6(48), Via: a6("fd00:1::fd")},
			}},
	}
	s := NewSnapshot(1, ports, nil, nil, conn.DefaultTimeouts())
	for _, tc := range []struct {
		dst  uint32
		port int
		hop  uint32
		what string
	}{
		{ip4(198, 51, 100, 11), 1, ip4(198, 51, 100, 11), "on-link"},
		{ip4(10, 1, 2, 3), 1, ip4(198, 51, 100, 254), "the /8"},
		{ip4(10, 9, 0, 2), 1, ip4(198, 51, 100, 253), "the /24 over the /8"},
		{ip4(192, 0, 2, 7), 0, ip4(203, 0, 113, 254), "the gateway"},
	} {
		if port, hop, ok := s.Route(tc.dst); !ok || port != tc.port || hop != tc.hop {
			t.Errorf("%s: Route(%x) = %d, %x, %v; want %d, %x", tc.what, tc.dst, port, hop, ok, tc.port, tc.hop)
		}
	}
	for _, tc := range []struct {
		dst, hop string
		port     int
	}{
		{"fd00:1::11", "fd00:1::11", 1},
		{"fd00:9:2::5", "fd00:1::fe", 1},
		{"fd00:9:1::5", "fd00:1::fd", 1},
		{"2001:db8:7::1", "2001:db8::fe", 0},
	} {
		dst := a6(tc.dst)
		if port, hop, ok := s.Route6(&dst); !ok || port != tc.port || hop != a6(tc.hop) {
			t.Errorf("Route6(%s) = %d, %v, %v; want %d, %s", tc.dst, port, hop, ok, tc.port, tc.hop)
		}
	}
}
