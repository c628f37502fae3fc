package main

import (
	"reflect"
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
