package api

import (
	"strings"
	"testing"
	"time"
)

func TestParseLinks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		op   string
	}{
		{[]string{"-L", "--links"}, OpLinks},
		{[]string{"--links", "-o", "json"}, OpLinks},
		{[]string{"--ha-check"}, OpHACheck},
	} {
		c, err := ParseArgs(tc.args)
		if err != nil || c.Op != tc.op {
			t.Errorf("ParseArgs(%q) = %q, %v; want %q", tc.args, c.Op, err, tc.op)
		}
	}
	for _, args := range [][]string{{"-C", "--links"}, {"--ha-check", "-L"}, {"--ha-check", "master"}} {
		if c, err := ParseArgs(args); err == nil {
			t.Errorf("ParseArgs(%q) = %q, accepted", args, c.Op)
		}
	}
}

func TestWriteLinks(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	resp := Response{HAState: "master", Links: []PortLink{
		{Port: "wan", Role: "client", Up: true, SpeedMbps: 25000, Since: now.Add(-time.Hour)},
		{Port: "lan", Role: "server", Since: now.Add(-90 * time.Second), Changes: 3},
	}}
	var b strings.Builder
	if err := WriteLinks(&b, resp, now); err != nil {
		t.Fatal(err)
	}
	want := "Port         Role    Link  Speed       Changes  Since\n" +
		"wan          client  up    25000 Mbps  0        1h0m0s ago\n" +
		"lan          server  down  -           3        1m30s ago\n"
	if b.String() != want {
		t.Errorf("lbctl -L --links:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if up, err := WriteHACheck(&b, resp); err != nil || up || b.String() != "master: link down on lan\n" {
		t.Errorf("--ha-check with lan down: %v %v %q", up, err, b.String())
	}
	b.Reset()
	resp.Links[1].Up = true
	if up, err := WriteHACheck(&b, resp); err != nil || !up || b.String() != "master: every port's link is up\n" {
		t.Errorf("--ha-check with every link up: %v %v %q", up, err, b.String())
	}
	b.Reset()
	list := Response{Info: &Info{ConnTableSize: 8, LinksDown: []string{"lan"}}}
	if err := WriteList(&b, list, ListFormat{}); err != nil || !strings.Contains(b.String(), "\nLink down: lan (lbctl -L --links)\n") {
		t.Errorf("-L with a link down: %v\n%s", err, b.String())
	}
}
