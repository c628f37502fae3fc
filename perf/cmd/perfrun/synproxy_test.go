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
