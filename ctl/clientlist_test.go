package ctl

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
)

// clientLists lists --get-blklst's or --get-whtlst's answer as
// "VIP:port list entry".
func clientLists(t *testing.T, o *Ops, line string) []string {
	t.Helper()
	resp := do(o, rule(t, line))
	if resp.Error != "" {
		t.Fatalf("%s: %s", line, resp.Error)
	}
	var out []string
	for _, e := range resp.ClientLists {
		out = append(out, e.VIP+":"+strconv.Itoa(int(e.Port))+" "+e.List+" "+e.Prefix)
	}
	return out
}

// TestClientListVerbs: --add-blklst, --del-blklst, --add-whtlst and
// --del-whtlst edit a service's client lists through the whole validation
// (a refusal names the command and the entry, and changes nothing), the
// lists reach the snapshot, the listing and -S, -R restores them, -R
// --dry-run shows them as -k and -2, and the edit log records them.
func TestClientListVerbs(t *testing.T) {
	// lbd.yaml may write a host as a /32: lbctl finds it all the same.
	c, _, cfg := controllerFor(t, strings.Replace(testConfig, "    port: 80\n", "    port: 80\n    blocklist: [192.0.2.66/32]\n", 1))
	o := NewOps(c, cfg, "", nil, nil, zap.NewNop())
	ok := func(line string) {
		t.Helper()
		if resp := do(o, rule(t, line)); resp.Error != "" {
			t.Fatalf("%s: %s", line, resp.Error)
		}
	}
	both := func() []string {
		return append(clientLists(t, o, "--get-blklst"), clientLists(t, o, "--get-whtlst")...)
	}
	refused := func(line, want string) {
		t.Helper()
		before, gen := both(), c.Snapshot().Gen
		resp := do(o, rule(t, line))
		if !strings.Contains(resp.Error, want) {
			t.Fatalf("%s: error %q, want one saying %q", line, resp.Error, want)
		}
		if after := both(); !slices.Equal(before, after) || c.Snapshot().Gen != gen {
			t.Fatalf("%s: refused but changed the lists %v -> %v", line, before, after)
		}
	}
	if got := both(); !slices.Equal(got, []string{"203.0.113.100:80 blocklist 192.0.2.66"}) {
		t.Fatalf("lists from lbd.yaml %v", got)
	}
	ok("--del-blklst -t 203.0.113.100:80 -k 192.0.2.66")
	if web80(t, c).Clients != nil {
		t.Fatal("no lists left, yet the snapshot checks clients")
	}
	ok("--add-blklst -t 203.0.113.100:80 -k 192.0.2.7/32")
	ok("--add-blklst -t 203.0.113.100:80 --blklst-address 198.51.100.0/24")
	ok("--add-whtlst -t 203.0.113.100:21 -2 192.0.2.0/24")
	if got := clientLists(t, o, "--get-blklst -t 203.0.113.100:80"); !slices.Equal(got,
		[]string{"203.0.113.100:80 blocklist 192.0.2.7", "203.0.113.100:80 blocklist 198.51.100.0/24"}) {
		t.Fatalf("get-blklst %v", got)
	}
	if got := clientLists(t, o, "--get-whtlst"); !slices.Equal(got, []string{"203.0.113.100:21 allowlist 192.0.2.0/24"}) {
		t.Fatalf("get-whtlst %v", got)
	}
	if got := clientLists(t, o, "--get-whtlst -t 203.0.113.100:80"); len(got) != 0 {
		t.Fatalf("get-whtlst of a service without one %v", got)
	}
	if web80(t, c).Clients == nil {
		t.Fatal("the snapshot does not check the blocklist")
	}
	for _, s := range do(o, api.Request{Op: api.OpList}).Services {
		if s.Port == 80 && !slices.Equal(s.Blocklist, []string{"192.0.2.7", "198.51.100.0/24"}) || s.Port == 80 && s.Allowlist != nil ||
			s.Port == 21 && !slices.Equal(s.Allowlist, []string{"192.0.2.0/24"}) {
			t.Fatalf("listing %+v", s)
		}
	}

	refused("--add-blklst -t 203.0.113.100:80 -k 192.0.2.7", "--add-blklst -t 203.0.113.100:80 -k 192.0.2.7: already in the service's blocklist")
	refused("--add-whtlst -t 203.0.113.100:21 -2 192.0.2.0/24", "already in the service's allowlist")
	refused("--add-blklst -t 203.0.113.100:80 -k 198.51.100.7/24",
		`--add-blklst -t 203.0.113.100:80 -k 198.51.100.7/24: "198.51.100.7/24" has bits set past its length (did you mean 198.51.100.0/24?)`)
	refused("--add-whtlst -t 203.0.113.100:80 -2 2001:db8::/48", "--add-whtlst -t 203.0.113.100:80 -2 2001:db8::/48: not in the VIP's family (203.0.113.100)")
	refused("--add-blklst -t 203.0.113.100:82 -k 192.0.2.8", "--add-blklst -t 203.0.113.100:82: service does not exist")
	refused("--del-blklst -t 203.0.113.100:80 -k 192.0.2.8", "--del-blklst -t 203.0.113.100:80 -k 192.0.2.8: not in the service's blocklist")
	refused("--del-whtlst -t 203.0.113.100:80 -2 192.0.2.0/24", "not in the service's allowlist")
	if resp := do(o, rule(t, "--get-blklst -t 203.0.113.100:82")); !strings.Contains(resp.Error, "--get-blklst -t 203.0.113.100:82: service does not exist") {
		t.Fatalf("--get-blklst of no service: %q", resp.Error)
	}

	// A list at its bound refuses one more entry, as lbd.yaml would.
	svcs, tm := c.Services()
	full := make([]string, conf.MaxClientList)
	for i := range full {
		full[i] = fmt.Sprintf("10.%d.%d.0/24", i>>8, i&0xff)
	}
	svcs[1].Blocklist = full
	if err := o.apply(svcs, tm); err != nil {
		t.Fatal(err)
	}
	refused("--add-blklst -t 203.0.113.100:21 -k 192.0.2.7", "-t 203.0.113.100:21: -k: 65537 entries: at most 65536")
	svcs[1].Blocklist = nil
	if err := o.apply(svcs, tm); err != nil {
		t.Fatal(err)
	}

	// -S saves the lists right after their service; -C and -R bring them
	// back; -R --dry-run shows a list's change as -k or -2.
	saved := do(o, api.Request{Op: api.OpSave}).Text
	if !strings.Contains(saved, "-A -t 203.0.113.100:80 -s rr\n--add-blklst -t 203.0.113.100:80 -k 192.0.2.7\n"+
		"--add-blklst -t 203.0.113.100:80 -k 198.51.100.0/24\n-a ") ||
		!strings.Contains(saved, "-A -t 203.0.113.100:21 -s rr\n--add-whtlst -t 203.0.113.100:21 -2 192.0.2.0/24\n-a ") {
		t.Fatalf("-S:\n%s", saved)
	}
	ok("-C")
	if resp := do(o, api.Request{Op: api.OpRestore, Text: saved}); resp.Error != "" {
		t.Fatalf("-R: %s", resp.Error)
	}
	if again := do(o, api.Request{Op: api.OpSave}).Text; again != saved {
		t.Fatalf("-R of -S gave\n%s\nwant\n%s", again, saved)
	}
	resp := do(o, api.Request{Op: api.OpRestore, DryRun: true, Text: "--del-blklst -t 203.0.113.100:80 -k 192.0.2.7/32\n" +
		"--add-whtlst -t 203.0.113.100:80 -2 192.0.2.0/24\n"})
	if resp.Error != "" || len(resp.Changes) != 1 || !slices.Equal(resp.Changes[0].Fields, []api.FieldChange{
		{Option: "-k", From: "192.0.2.7,198.51.100.0/24", To: "198.51.100.0/24"}, {Option: "-2", From: "", To: "192.0.2.0/24"}}) {
		t.Fatalf("-R --dry-run: %+v", resp)
	}
	if got := clientLists(t, o, "--get-blklst"); len(got) != 2 {
		t.Fatalf("a dry run changed the blocklist: %v", got)
	}
	ok("--del-blklst -t 203.0.113.100:80 -k 192.0.2.7/32")
	if got := clientLists(t, o, "--get-blklst"); !slices.Equal(got, []string{"203.0.113.100:80 blocklist 198.51.100.0/24"}) {
		t.Fatalf("get-blklst after a del %v", got)
	}

	edits := do(o, api.Request{Op: api.OpEdits}).Edits
	var added, removed bool
	for _, e := range edits {
		added = added || e.Op == api.OpAddWhtlst && e.Target == "-t 203.0.113.100:21 -2 192.0.2.0/24" && e.Result == "ok"
		removed = removed || e.Op == api.OpDelBlklst && e.Target == "-t 203.0.113.100:80 -k 192.0.2.66" && e.Result == "ok"
		if e.Op == api.OpGetBlklst || e.Op == api.OpGetWhtlst {
			t.Fatalf("a read is in the edit log: %+v", e)
		}
	}
	if !added || !removed {
		t.Fatalf("edit log: %+v", edits)
	}
}

// TestClientListVerbsIPv6: an IPv6 service's lists take IPv6 entries
// only, and save with the service in brackets.
func TestClientListVerbsIPv6(t *testing.T) {
	o, _, _ := newTestOps6(t)
	for _, l := range []string{
		"-A -t [2001:db8::10]:80",
		"-a -t [2001:db8::10]:80 -r [fd00:1::11]",
		"--add-blklst -t [2001:db8::10]:80 -k 2001:db8:1::/64",
		"--add-whtlst -t [2001:db8::10]:80 -2 2001:db8::/32",
		"--add-blklst -t [2001:db8::10]:80 -k 2001:DB8:2:0::7/128",
	} {
		if resp := do(o, rule(t, l)); resp.Error != "" {
			t.Fatalf("%s: %s", l, resp.Error)
		}
	}
	if got := clientLists(t, o, "--get-blklst -t [2001:db8::10]:80"); !slices.Equal(got,
		[]string{"2001:db8::10:80 blocklist 2001:db8:1::/64", "2001:db8::10:80 blocklist 2001:db8:2::7"}) {
		t.Fatalf("get-blklst %v", got)
	}
	if resp := do(o, rule(t, "--add-blklst -t [2001:db8::10]:80 -k 192.0.2.0/24")); !strings.Contains(resp.Error, "not in the VIP's family (2001:db8::10)") {
		t.Fatalf("an IPv4 entry on an IPv6 service: %q", resp.Error)
	}
	if resp := do(o, rule(t, "--del-blklst -t [2001:db8::10]:80 -k 2001:db8:2::7")); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	saved := do(o, api.Request{Op: api.OpSave}).Text
	if !strings.Contains(saved, "-A -t [2001:db8::10]:80 -s rr\n--add-blklst -t [2001:db8::10]:80 -k 2001:db8:1::/64\n"+
		"--add-whtlst -t [2001:db8::10]:80 -2 2001:db8::/32\n-a ") {
		t.Fatalf("-S:\n%s", saved)
	}
}
