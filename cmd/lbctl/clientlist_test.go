package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// TestGetClientLists: lbctl --get-blklst and --get-whtlst print lbd's
// answer as a table or, with -o json, as the answer's JSON.
func TestGetClientLists(t *testing.T) {
	sock := serveOp(t, api.OpGetBlklst, api.Response{ClientLists: []api.ClientListEntry{
		{Protocol: "TCP", VIP: "203.0.113.10", Port: 80, List: api.Blocklist, Prefix: "192.0.2.7"},
		{Protocol: "TCP", VIP: "2001:db8::10", Port: 80, List: api.Blocklist, Prefix: "2001:db8:1::/64"}}})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--get-blklst", "-t", "203.0.113.10:80", "--socket", sock}, env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := lines("Prot VIP:Port                   Blocklist",
		"TCP  203.0.113.10:80            192.0.2.7",
		"TCP  [2001:db8::10]:80          2001:db8:1::/64")
	if stdout.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"--get-blklst", "-o", "json", "--socket", sock}, env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var resp api.Response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || len(resp.ClientLists) != 2 || resp.ClientLists[1].Prefix != "2001:db8:1::/64" ||
		!strings.Contains(stdout.String(), `"list": "blocklist"`) {
		t.Fatalf("json %s: %v", stdout.String(), err)
	}

	sock = serveOp(t, api.OpGetWhtlst, api.Response{ClientLists: []api.ClientListEntry{
		{Protocol: "UDP", VIP: "203.0.113.10", Port: 53, List: api.Allowlist, Prefix: "198.51.100.0/24"}}})
	stdout.Reset()
	if code := run(context.Background(), []string{"--get-whtlst", "--socket", sock}, env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := lines("Prot VIP:Port                   Allowlist", "UDP  203.0.113.10:53            198.51.100.0/24"); stdout.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", stdout.String(), want)
	}

	for args, want := range map[string]string{
		"--add-blklst -t 203.0.113.10:80":              "-k ADDR[/LEN]",
		"--del-whtlst -t 203.0.113.10:80":              "-2 ADDR[/LEN]",
		"--add-blklst -t 203.0.113.10:80 -k 192.0.2.x": `-k "192.0.2.x": not an address or a prefix`,
		"-U -t 203.0.113.10:80 -k 192.0.2.7":           `unknown option "-U"`,
	} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), strings.Fields(args), env(nil), strings.NewReader(""), &stdout, &stderr); code != exitUsage ||
			!strings.Contains(stderr.String(), want) {
			t.Fatalf("%s: exit %d, stderr %q", args, code, stderr.String())
		}
	}
}
