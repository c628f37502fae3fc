package ctl

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// laddrs lists --get-laddr's answer as "VIP:port LIP[ draining]".
func laddrs(t *testing.T, o *Ops, line string) []string {
	t.Helper()
	resp := do(o, rule(t, line))
	if resp.Error != "" {
		t.Fatalf("%s: %s", line, resp.Error)
	}
	var out []string
	for _, l := range resp.LocalAddresses {
		s := l.VIP + ":" + strconv.Itoa(int(l.Port)) + " " + l.Address
		if l.Draining {
			s += " draining"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// web80 is the snapshot's service 203.0.113.100:80.
func web80(t *testing.T, c *Controller) lcore.Service {
	t.Helper()
	for _, s := range c.Snapshot().Services {
		if s.Key.Port == 80 {
			return s
		}
	}
	t.Fatal("no service :80 in the snapshot")
	return lcore.Service{}
}

// TestLocalAddressVerbs: --add-laddr, --del-laddr and --get-laddr edit a
// service's FullNAT pool through the whole validation (a refusal names
// -z and changes nothing), -S saves the pool and -R restores it, the edit
// log records them, and a removed address drains until no connection
// uses it.
func TestLocalAddressVerbs(t *testing.T) {
	o, c, f := newTestOps(t)
	ok := func(line string) {
		t.Helper()
		if resp := do(o, rule(t, line)); resp.Error != "" {
			t.Fatalf("%s: %s", line, resp.Error)
		}
	}
	refused := func(line, want string) {
		t.Helper()
		before := laddrs(t, o, "--get-laddr")
		gen := c.Snapshot().Gen
		resp := do(o, rule(t, line))
		if !strings.Contains(resp.Error, want) {
			t.Fatalf("%s: error %q, want one saying %q", line, resp.Error, want)
		}
		if after := laddrs(t, o, "--get-laddr"); !slices.Equal(before, after) || c.Snapshot().Gen != gen {
			t.Fatalf("%s: refused but changed the pools %v -> %v", line, before, after)
		}
	}
	ok("--add-laddr -t 203.0.113.100:80 -z 198.51.100.50")
	ok("-a -t 203.0.113.100:80 -r 198.51.100.13:80 --fullnat")
	if got := laddrs(t, o, "--get-laddr -t 203.0.113.100:80"); !slices.Equal(got, []string{"203.0.113.100:80 198.51.100.50"}) {
		t.Fatalf("get-laddr %v", got)
	}
	if lips := web80(t, c).LocalAddrs; len(lips) != 1 || lips[0] != 0xC6336432 {
		t.Fatalf("snapshot local addresses %x", lips)
	}
	refused("--add-laddr -t 203.0.113.100:80 -z 198.51.100.50", "already a local address of the service")
	refused("--add-laddr -t 203.0.113.100:80 -z 10.0.0.5", "-t 203.0.113.100:80: -z: 10.0.0.5 is not on any server-facing port's subnet (198.51.100.0/24)")
	refused("--add-laddr -t 203.0.113.100:21 -z 198.51.100.50", "-z: 198.51.100.50 is already services[0].local_addresses[0]")
	refused("--add-laddr -t 203.0.113.100:80 -z 198.51.100.254", "-z: 198.51.100.254 is already ports[1].gateway")
	refused("--add-laddr -t 203.0.113.100:82 -z 198.51.100.51", "service does not exist")
	refused("--del-laddr -t 203.0.113.100:80 -z 198.51.100.50", "fullnat needs the service's local_addresses")
	refused("--del-laddr -t 203.0.113.100:80 -z 198.51.100.77", "not a local address of the service")
	if _, err := api.ParseArgs(strings.Fields("--add-laddr -t 203.0.113.100:80")); err == nil || !strings.Contains(err.Error(), "-z LIP") {
		t.Fatalf("--add-laddr without -z: %v", err)
	}
	if _, err := api.ParseArgs(strings.Fields("--add-laddr -t 203.0.113.100:80 -z nope")); err == nil || !strings.Contains(err.Error(), `-z "nope"`) {
		t.Fatalf("-z nope: %v", err)
	}

	// -S saves the pool right after its service; -C and -R bring it back.
	ok("-P -t 203.0.113.100:80 -z 198.51.100.51")
	saved := do(o, api.Request{Op: api.OpSave}).Text
	if !strings.Contains(saved, "-A -t 203.0.113.100:80 -s rr\n-P -t 203.0.113.100:80 -z 198.51.100.50\n-P -t 203.0.113.100:80 -z 198.51.100.51\n-a ") {
		t.Fatalf("-S:\n%s", saved)
	}
	ok("-C")
	if resp := do(o, api.Request{Op: api.OpRestore, Text: saved}); resp.Error != "" {
		t.Fatalf("-R: %s", resp.Error)
	}
	if again := do(o, api.Request{Op: api.OpSave}).Text; again != saved {
		t.Fatalf("-R of -S gave\n%s\nwant\n%s", again, saved)
	}
	edits := do(o, api.Request{Op: api.OpEdits}).Edits
	found := false
	for _, e := range edits {
		found = found || e.Op == api.OpAddLaddr && strings.Contains(e.Target, "-z 198.51.100.50") && e.Result == "ok"
	}
	if !found {
		t.Fatalf("edit log has no --add-laddr: %+v", edits)
	}

	// A removed address drains while a connection uses it.
	f.conns = []lcore.ConnInfo{{Proto: 6, VIP: 0xCB007164, VPort: 80, ClientIP: 0xCB007107, ClientPort: 4000, RIP: 0xC633640D, RPort: 80,
		LIP: 0xC6336432, LPort: 2000}}
	ok("-Q -t 203.0.113.100:80 -z 198.51.100.50")
	if got := laddrs(t, o, "-G"); !slices.Equal(got, []string{"203.0.113.100:80 198.51.100.50 draining", "203.0.113.100:80 198.51.100.51"}) {
		t.Fatalf("get-laddr while draining %v", got)
	}
	if lips := web80(t, c).LocalAddrs; len(lips) != 1 || lips[0] != 0xC6336433 {
		t.Fatalf("snapshot local addresses %x: the removed one still serves new connections", lips)
	}
	c.endDrains()
	if got := laddrs(t, o, "-G"); len(got) != 2 {
		t.Fatalf("drain ended with a connection left: %v", got)
	}
	f.conns = nil
	c.endDrains()
	if got := laddrs(t, o, "-G"); !slices.Equal(got, []string{"203.0.113.100:80 198.51.100.51"}) {
		t.Fatalf("drain did not end: %v", got)
	}
}

// TestLocalAddressVerbs6: an IPv6 service's IPv6 local addresses (its
// FNAT66 servers') go through the same verbs and validation, and a
// removed one drains, answered for in neighbour discovery, until no
// connection uses it.
func TestLocalAddressVerbs6(t *testing.T) {
	o, c, f := newTestOps6(t)
	for _, l := range []string{
		"-A -t [2001:db8::10]:80 -s rr",
		"--add-laddr -t [2001:db8::10]:80 -z fd00:1::50",
		"--add-laddr -t [2001:db8::10]:80 -z fd00:1::51",
		"-a -t [2001:db8::10]:80 -r [fd00:1::13]:8080 --fullnat",
	} {
		if resp := do(o, rule(t, l)); resp.Error != "" {
			t.Fatalf("%s: %s", l, resp.Error)
		}
	}
	lip50, lip51 := hdr.Addr6From(netip.MustParseAddr("fd00:1::50")), hdr.Addr6From(netip.MustParseAddr("fd00:1::51"))
	six := func() lcore.Service {
		for _, s := range c.Snapshot().Services {
			if s.Key.IsIPv6() {
				return s
			}
		}
		t.Fatal("no IPv6 service")
		return lcore.Service{}
	}
	if got := six().LocalAddrs6; !slices.Equal(got, []hdr.Addr6{lip50, lip51}) || len(six().LocalAddrs) != 0 {
		t.Fatalf("snapshot local addresses %v %v", got, six().LocalAddrs)
	}
	if resp := do(o, rule(t, "--add-laddr -t [2001:db8::10]:80 -z fd00:2::5")); !strings.Contains(resp.Error, "not on any server-facing port's subnet (fd00:1::/64)") {
		t.Fatalf("an IPv6 local address off the server side: %q", resp.Error)
	}
	f.conns = []lcore.ConnInfo{{Proto: 6, IPv6: true, VPort: 80, ClientPort: 4000, RPort: 8080, LIP6: lip50, LPort: 2000}}
	if resp := do(o, rule(t, "-Q -t [2001:db8::10]:80 -z fd00:1::50")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if got := laddrs(t, o, "-G"); !slices.Equal(got, []string{"2001:db8::10:80 fd00:1::50 draining", "2001:db8::10:80 fd00:1::51"}) {
		t.Fatalf("get-laddr while draining %v", got)
	}
	if got := six().LocalAddrs6; !slices.Equal(got, []hdr.Addr6{lip51}) || !c.Snapshot().IsLIP6(lip50) {
		t.Fatalf("while draining: service's %v, answered for %v", got, c.Snapshot().IsLIP6(lip50))
	}
	c.endDrains()
	if !c.Snapshot().IsLIP6(lip50) {
		t.Fatal("drain ended with a connection left")
	}
	f.conns = nil
	c.endDrains()
	if got := laddrs(t, o, "-G"); !slices.Equal(got, []string{"2001:db8::10:80 fd00:1::51"}) || c.Snapshot().IsLIP6(lip50) {
		t.Fatalf("drain did not end: %v", got)
	}
}
