package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynProxyCase: "nat-synproxy" is lbgen's syn pattern against a
// SYN-proxied service, whose received rate is the client side's.
func TestSynProxyCase(t *testing.T) {
	c, err := parseCase("nat-synproxy-2lc", options{flows: 1000, pattern: "established"})
	if err != nil || !c.SynProxy || c.Pattern != "syn" || c.Lcores != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	cfg := synProxyConfig(lbdConfig(options{connTable: 1 << 16}, c, "c", "s", "ctl", "127.0.0.1:1"))
	if strings.Count(cfg, "    synproxy: true\n") != 1 {
		t.Fatalf("configuration:\n%s", cfg)
	}
	k := &Case{Name: "nat-synproxy-2lc", Spec: c, Extra: map[string]any{}, steps: []step{{SentPPS: 100, CliPPS: 80}, {SentPPS: 200, CliPPS: 120}}}
	cookieRates(k)
	if k.steps[1].SrvPPS != 120 || k.steps[0].Loss < 0.199 || k.steps[0].Loss > 0.201 || k.Extra["syn_cookies_per_lcore_pps"] != 60.0 {
		t.Fatalf("steps %+v extra %v", k.steps, k.Extra)
	}
}

// TestSynCookieTarget: the issue #15 row gives the best cookie rate, its
// verdict against 3M/s, and the rate the lcore's busy cycles allow.
func TestSynCookieTarget(t *testing.T) {
	if got := synCookieTarget(nil, 0); got.Measured != "not run" || got.Verdict != "n/a" {
		t.Fatalf("without the case: %+v", got)
	}
	k := &Case{Name: "nat-synproxy", steps: []step{{SrvPPS: 1e6, CliPPS: 1e6}, {SrvPPS: 1.2e6, CliPPS: 1.2e6}},
		Metrics: []StepMetrics{{}, {CyclesPerPacket: 800, LcoreBusy: []float64{42}}}}
	got := synCookieTarget(k, 2_400_000_000)
	if got.Verdict != verdict(false) || !strings.HasPrefix(got.Measured, si(1.2e6)+"/s at 42% busy, 800 busy cycles per SYN: "+si(3e6)+"/s at 100% busy") {
		t.Fatalf("%+v", got)
	}
}

// TestNewConnCeiling: a -new case's row gives the busy cycles per new
// connection and the rate they allow at 100% busy, and nothing without
// busy time.
func TestNewConnCeiling(t *testing.T) {
	m := StepMetrics{NewConnsPerSec: 1e6, LcoreBusy: []float64{50, 80}}
	if got, want := newConnCeiling(m, 2_000_000_000), "at 80% busy, 1600 busy cycles per connection: "+si(1.25e6)+"/s at 100% busy"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := newConnCeiling(StepMetrics{NewConnsPerSec: 1e6}, 2_000_000_000); got != "" {
		t.Fatalf("without busy time: %q", got)
	}
}

// TestReportFromReadsCookies: -report-from reads a SYN proxy case's rate
// back from the client side, as the run did (the servers get nothing).
func TestReportFromReadsCookies(t *testing.T) {
	spec, err := parseCase("nat-synproxy", options{flows: 1000, pattern: "established"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Case{Name: "nat-synproxy", Spec: spec, Extra: map[string]any{},
		Report: json.RawMessage(`{"steps":[{"offered_pps":1000000,"sent_pps":1000000,"server_pps":0,"client_pps":900000},` +
			`{"offered_pps":0,"sent_pps":4000000,"server_pps":0,"client_pps":3500000}],"tsc_hz":2100000000}`)}
	b, err := json.Marshal(Results{Options: []string{"perfrun"}, Cases: []*Case{c}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "run.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reportFrom(path, options{rates: quickRates}); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(strings.TrimSuffix(path, ".json") + ".md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| SYN cookies (issue #15), nat-synproxy: 3M/s or more on one lcore | " + si(3.5e6) + "/s",
		"| 3.50 |", // the summary's highest received rate
	} {
		if !strings.Contains(string(md), want) {
			t.Fatalf("report lacks %q:\n%s", want, md)
		}
	}
}
