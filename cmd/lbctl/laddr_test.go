package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// TestGetLaddr: lbctl --get-laddr prints lbd's answer as a table (a
// draining address marked) or, with -o json, as the answer's JSON.
func TestGetLaddr(t *testing.T) {
	sock := serveOp(t, api.OpGetLaddr, api.Response{LocalAddresses: []api.LocalAddress{
		{Protocol: "TCP", VIP: "203.0.113.10", Port: 80, Address: "198.51.100.50"},
		{Protocol: "TCP", VIP: "203.0.113.10", Port: 80, Address: "198.51.100.51", Draining: true}}})
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--get-laddr", "-t", "203.0.113.10:80", "--socket", sock}, env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	want := lines("Prot VIP:Port                   LocalAddress",
		"TCP  203.0.113.10:80            198.51.100.50",
		"TCP  203.0.113.10:80            198.51.100.51 (draining)")
	if stdout.String() != want {
		t.Fatalf("output\n%s\nwant\n%s", stdout.String(), want)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"-G", "-o", "json", "--socket", sock}, env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var resp api.Response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil || len(resp.LocalAddresses) != 2 || !resp.LocalAddresses[1].Draining {
		t.Fatalf("json %s: %v", stdout.String(), err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"--add-laddr", "-t", "203.0.113.10:80"}, env(nil), strings.NewReader(""), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "-z LIP") {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}
