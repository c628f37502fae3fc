package api

import (
	"strings"
	"testing"
	"time"
)

func TestParseBGPVerbs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		op   string
	}{
		{[]string{"drain"}, OpDrain},
		{[]string{"undrain"}, OpUndrain},
		{[]string{"-L", "--bgp"}, OpBGP},
		{[]string{"--bgp", "-o", "json"}, OpBGP},
	} {
		c, err := ParseArgs(tc.args)
		if err != nil || c.Op != tc.op {
			t.Errorf("ParseArgs(%q) = %q, %v; want %q", tc.args, c.Op, err, tc.op)
		}
	}
	for _, args := range [][]string{{"-C", "--bgp"}, {"drain", "undrain"}, {"-L", "drain"}} {
		if c, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) = %q, accepted", args, c.Op)
		}
	}
}

func TestWriteBGP(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	resp := Response{BGP: &BGP{ASN: 65001, RouterID: "10.0.0.1", NextHop: "198.51.100.1",
		Peers: []BGPPeer{
			{Address: "10.255.0.254", ASN: 65000, State: "established", Since: now.Add(-90 * time.Second), Advertised: 1},
			{Address: "10.255.0.253", ASN: 65000, State: "active"},
		},
		Announced: []string{"203.0.113.10/32"},
		Withheld:  []BGPWithheld{{VIP: "203.0.113.11", Reason: "no live server"}}}}
	var b strings.Builder
	if err := WriteBGP(&b, resp, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BGP AS 65001 router-id 10.0.0.1 next-hop 198.51.100.1: announcing",
		"10.255.0.254       65000      established  1m30s      1", "10.255.0.253       65000      active       -",
		"Announced: 203.0.113.10/32", "Withheld: 203.0.113.11/32 (no live server)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	resp.BGP.Draining, resp.BGP.Announced = true, nil
	b.Reset()
	WriteBGP(&b, resp, now)
	if !strings.Contains(b.String(), ": drained (withdrawn)") || !strings.Contains(b.String(), "Announced: none") {
		t.Errorf("drained:\n%s", b.String())
	}
	b.Reset()
	WriteBGP(&b, Response{}, now)
	if !strings.Contains(b.String(), "BGP is off") {
		t.Errorf("off:\n%s", b.String())
	}
}
