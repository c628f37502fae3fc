package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseRates(t *testing.T) {
	got, err := parseRates("100k, 1.5M,max,250")
	if err != nil || !reflect.DeepEqual(got, []float64{100e3, 1.5e6, 0, 250}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "x", "-1k", "0"} {
		if _, err := parseRates(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseFlagsLoop(t *testing.T) {
	o, err := parseFlags([]string{"-loop", "/tmp/x", "-flows", "10", "-pattern", "udp"})
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Resolve || o.cfg.ClientDev == "" || o.cfg.Flows != 10 {
		t.Fatalf("%+v", o.cfg)
	}
	if _, err := parseFlags([]string{"-clients", "10.0.0.9-10.0.0.1", "-loop", "/x"}); err == nil {
		t.Fatal("reversed range accepted")
	}
}

// TestParseFlagsSteeringKey: lbd's key is taken in the form lbd's
// configuration takes it; a wrong one is an error naming the flag.
func TestParseFlagsSteeringKey(t *testing.T) {
	key := strings.Repeat("6d:", 39) + "5a"
	o, err := parseFlags([]string{"-loop", "/tmp/x", "-steering-key", key})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.cfg.SteeringKey) != 40 || o.cfg.SteeringKey[0] != 0x6d || o.cfg.SteeringKey[39] != 0x5a {
		t.Fatalf("key %x", o.cfg.SteeringKey)
	}
	if o, err := parseFlags([]string{"-loop", "/tmp/x"}); err != nil || o.cfg.SteeringKey != nil {
		t.Fatalf("no flag: key %x, %v", o.cfg.SteeringKey, err)
	}
	if _, err := parseFlags([]string{"-loop", "/tmp/x", "-steering-key", "6d5a"}); err == nil || !strings.HasPrefix(err.Error(), "-steering-key: ") {
		t.Fatalf("a 2-byte key: %v", err)
	}
}
