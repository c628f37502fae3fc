package main

import (
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
