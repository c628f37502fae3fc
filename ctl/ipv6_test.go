package ctl

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

const testConfig6 = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, address6: 2001:db8::1/64, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, address6: fd00:1::1/64, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    servers:
      - {address: 198.51.100.11}
`

func newTestOps6(t *testing.T) (*Ops, *Controller, *fakeDataplane) {
	t.Helper()
	c, f, cfg := controllerFor(t, testConfig6)
	return NewOps(c, cfg, "", nil, nil, zap.NewNop()), c, f
}

// TestOpsIPv6Service: an IPv6 service and its servers in ipvsadm's syntax
// reach the snapshot with their IPv6 addresses, list and save in
// ipvsadm's form, and restore to the same; NAT64 and a netmask are
// refused naming what is wrong.
func TestOpsIPv6Service(t *testing.T) {
	o, c, f := newTestOps6(t)
	for _, l := range []string{
		"-A -t [2001:db8::10]:80 -s wrr -p 300 -M 64",
		"-a -t [2001:db8::10]:80 -r [fd00:1::11]:8080 -m -w 2",
		"-a -t [2001:db8::10]:80 -r [fd00:1::12] -g",
		"-A -u [2001:db8::10]:53 -s rr",
		"-a -u [2001:db8::10]:53 -r fd00:1::11 -m",
	} {
		if resp := do(o, rule(t, l)); resp.Error != "" {
			t.Fatalf("%s: %s", l, resp.Error)
		}
	}
	got := listing(t, o, api.ListFormat{})
	for _, want := range []string{
		"TCP  [2001:db8::10]:80 wrr persistent 300 mask 64",
		"  -> [fd00:1::11]:8080",
		"  -> [fd00:1::12]:80",
		"UDP  [2001:db8::10]:53 rr",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	saved := do(o, api.Request{Op: api.OpSave})
	for _, want := range []string{
		"-A -t [2001:db8::10]:80 -s wrr -p 300 -M 64",
		"-a -t [2001:db8::10]:80 -r [fd00:1::11]:8080 -m -w 2",
		"-a -t [2001:db8::10]:80 -r [fd00:1::12]:80 -g -w 1",
	} {
		if !strings.Contains(saved.Text, want) {
			t.Errorf("save lacks %q:\n%s", want, saved.Text)
		}
	}
	before := listing(t, o, api.ListFormat{})
	if resp := do(o, api.Request{Op: api.OpClear}); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if resp := do(o, api.Request{Op: api.OpRestore, Text: saved.Text}); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if after := listing(t, o, api.ListFormat{}); after != before {
		t.Errorf("after restore:\n%s\nbefore:\n%s", after, before)
	}

	s := f.published[len(f.published)-1]
	vip := hdr.Addr6From(netip.MustParseAddr("2001:db8::10"))
	var svc *lcore.Service
	for i := range s.Services {
		if k := s.Services[i].Key; k.VIP6 == vip && k.Port == 80 {
			svc = &s.Services[i]
		}
	}
	if svc == nil || len(svc.Dests) != 2 || svc.Dests[0].Addr6 != hdr.Addr6From(netip.MustParseAddr("fd00:1::11")) ||
		svc.PersistMask6 != lcore.Mask6(64) || svc.Persistence != int64(300*time.Second) {
		t.Fatalf("IPv6 service in the snapshot: %+v", svc)
	}
	if p := s.Ports[1]; p.Net6 != hdr.Addr6From(netip.MustParseAddr("fd00:1::")) || p.Mask6 != lcore.Mask6(64) {
		t.Fatalf("lan port's IPv6 subnet %v/%v", p.Net6, p.Mask6)
	}
	// The controller resolves the IPv6 servers by solicitation.
	c.step(time.Now())
	solicited := map[hdr.Addr6]bool{}
	for _, sc := range f.sent() {
		if sc.cmd.Kind == lcore.CmdSolicit && sc.worker == 0 && sc.cmd.Port == 1 {
			solicited[sc.cmd.IP6] = true
		}
	}
	if !solicited[hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))] || !solicited[hdr.Addr6From(netip.MustParseAddr("fd00:1::12"))] {
		t.Fatalf("solicited %v, want both servers", solicited)
	}
	// An NA's event enters the table and the next snapshot.
	rs := hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))
	f.events = append(f.events, lcore.Event{Kind: lcore.EvNeighbour6, Port: 1, IP6: rs, MAC: hdr.MAC{2, 0, 0, 0, 0, 0x11}})
	c.step(time.Now())
	if last := f.published[len(f.published)-1]; last.Neigh6[rs] != (hdr.MAC{2, 0, 0, 0, 0, 0x11}) {
		t.Fatalf("Neigh6 %v", last.Neigh6)
	}

	for _, tc := range []struct{ line, want string }{
		{"-a -t [2001:db8::10]:80 -r 198.51.100.12", "NAT64"},
		{"-E -t [2001:db8::10]:80 -M 255.255.255.0", "prefix length"},
		{"-E -t [2001:db8::10]:80 -M 129", "1..128"},
		{"-a -t [2001:db8::10]:80 -r [fd00:2::11]", "subnet"},
	} {
		if resp := do(o, rule(t, tc.line)); !strings.Contains(resp.Error, tc.want) {
			t.Errorf("%s: error %q, want it to say %q", tc.line, resp.Error, tc.want)
		}
	}
}
