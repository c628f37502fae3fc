package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestIPv6Cases: nat6 and dr6 (and their flow-count and lcore forms)
// are IPv6 cases whose lbd configuration has IPv6 port addresses, VIP and
// real servers; tun6 is refused; nat6 and dr6 run by default, their 1M
// forms with -long.
func TestIPv6Cases(t *testing.T) {
	o := options{flows: 1000, pattern: "established", connTable: 1 << 16, lbdCPU: 1}
	for _, tc := range []struct {
		name, method string
		flows, lc    int
	}{{"nat6", "nat", 1000, 1}, {"dr6", "dr", 1000, 1}, {"nat6-1m", "nat", 1000000, 1}, {"dr6-2lc", "dr", 1000, 2}} {
		c, err := parseCase(tc.name, o)
		if err != nil || !c.IPv6 || c.Method != tc.method || c.Flows != tc.flows || c.Lcores != tc.lc {
			t.Fatalf("%s: %+v %v", tc.name, c, err)
		}
		cfg := lbdConfig(o, c, "c", "s", "ctl", "127.0.0.1:1")
		for _, want := range []string{"    address6: 2001:db8:1::203.0.113.1/64\n", "    address6: fd00:1::198.51.100.1/64\n",
			"    vip: 2001:db8:1::203.0.113.10\n", "      - address: fd00:1::198.51.100.11\n", "      - address: fd00:1::198.51.100.12\n",
			"        forward: " + tc.method + "\n"} {
			if !strings.Contains(cfg, want) {
				t.Fatalf("%s: no %q in\n%s", tc.name, want, cfg)
			}
		}
	}
	c, _ := parseCase("nat", o)
	if cfg := lbdConfig(o, c, "c", "s", "ctl", "127.0.0.1:1"); c.IPv6 || strings.Contains(cfg, "address6") || !strings.Contains(cfg, "    vip: 203.0.113.10\n") {
		t.Fatalf("IPv4 case:\n%s", cfg)
	}
	if _, err := parseCase("tun6", o); err == nil {
		t.Fatal("tun6 accepted")
	}
	if !strings.Contains(","+defaultCases+",", ",nat6,dr6,") || !strings.Contains(longExtraCases, "nat6-1m") || !strings.Contains(longExtraCases, "dr6-1m") {
		t.Fatalf("cases %q, -long %q", defaultCases, longExtraCases)
	}
	if a := addrs6; a.vipPort() != "[2001:db8:1::203.0.113.10]:80" || a.clients("203.0.113.100-203.0.113.115") != "2001:db8:1::203.0.113.100-2001:db8:1::203.0.113.115" ||
		a.servers() != "fd00:1::198.51.100.11-fd00:1::198.51.100.12" || a.lbServer() != "fd00:1::198.51.100.1" || addrs4.vipPort() != "203.0.113.10:80" {
		t.Fatalf("addresses %q %q %q", a.vipPort(), a.servers(), a.lbServer())
	}
}

// TestIPv6Section: each IPv6 case is paired with its IPv4 case (rates,
// their ratio, cycles per packet), bytes per connection come from
// lcore/conn (100 and 148), and the report and the printed summary show
// them; without an IPv6 case there is no section.
func TestIPv6Section(t *testing.T) {
	lbd := func(name, method string, six bool, pps ...float64) *Case {
		c := &Case{Name: name, Spec: &lbdCase{Method: method, IPv6: six}}
		for i, v := range pps {
			c.steps = append(c.steps, step{Offered: float64(i+1) * 1e6, SrvPPS: v, SentPPS: v})
			c.Metrics = append(c.Metrics, StepMetrics{CyclesPerPacket: 100 + float64(i)})
		}
		return c
	}
	cases := []*Case{{Name: "loop", steps: []step{{SrvPPS: 9e6}}},
		lbd("nat", "nat", false, 1e6, 4e6), lbd("dr", "dr", false, 8e6), lbd("nat6", "nat", true, 1e6, 3e6),
		lbd("dr6", "dr", true, 6e6, 2e6), lbd("nat-1M", "nat", false, 2e6), lbd("nat6-1M", "nat", true, 1e6), lbd("dr6-1M", "dr", true, 1e6)}
	if ipv6Beside(cases[:3]) != nil {
		t.Fatal("a section without IPv6 cases")
	}
	s := ipv6Beside(cases)
	if s == nil || s.BytesPerConn4 != 104 || s.BytesPerConn6 != 168 || s.EntryBytes != 64 || s.Addrs6Bytes != 64 || len(s.Rows) != 3 {
		t.Fatalf("%+v", s)
	}
	want := []IPv6Row{{V4: "nat", V6: "nat6", V4PPS: 4e6, V6PPS: 3e6, Ratio: 0.75, V4CPP: 101, V6CPP: 101},
		{V4: "dr", V6: "dr6", V4PPS: 8e6, V6PPS: 6e6, Ratio: 0.75, V4CPP: 100, V6CPP: 100},
		{V4: "nat-1M", V6: "nat6-1M", V4PPS: 2e6, V6PPS: 1e6, Ratio: 0.5, V4CPP: 100, V6CPP: 100}}
	for i, r := range s.Rows {
		if r != want[i] {
			t.Fatalf("row %d: %+v, want %+v", i, r, want[i])
		}
	}
	var b bytes.Buffer
	ipv6Section(&b, s)
	for _, w := range []string{"## IPv6 beside IPv4", "| nat | nat6 | 4.00 | 3.00 | 0.75 | 101 / 101 |", "| dr | dr6 | 8.00 | 6.00 | 0.75 |",
		"IPv4 **104 bytes**", "IPv6 **168 bytes**", "64-byte slot"} {
		if !strings.Contains(b.String(), w) {
			t.Fatalf("no %q in\n%s", w, b.String())
		}
	}
	res := Results{Cases: cases, IPv6: s}
	res.Summary = summarize(cases)
	if md := string(report(res, options{}, nil, "x")); !strings.Contains(md, "## IPv6 beside IPv4") || !strings.Contains(md, "| nat6 |") {
		t.Fatalf("report without the section or the nat6 row:\n%s", md)
	}
}
