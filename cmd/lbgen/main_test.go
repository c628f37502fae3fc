package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dplb/dplb/perf/gen"
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

func TestSYNPcapFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "syn.pcap")
	o, err := parseFlags([]string{"-syn-pcap", path, "-clients", "203.0.113.100-203.0.113.103",
		"-client-ports", "1024-1029", "-dst-mac", "02:00:00:00:00:01"})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSYNPcap(o); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	// 4 x 6 = 24 SYNs of 60 bytes, each with a 16-byte record header,
	// after the 24-byte file header.
	if want := int64(24 + 24*(16+60)); st.Size() != want {
		t.Fatalf("%d bytes, want %d", st.Size(), want)
	}
	o, _ = parseFlags([]string{"-syn-pcap", path, "-clients", "203.0.113.1-203.0.113.17", "-client-ports", "1-65535"})
	if err := writeSYNPcap(o); err == nil {
		t.Fatal("2M flows accepted")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file left after a refusal: %v", err)
	}
}

// TestParseFlagsIPv6: IPv6 ranges, VIP and lbd's server-side address make
// IPv6 flows, with the smallest IPv6 TCP frame unless -size says; mixed
// families are refused naming the flag.
func TestParseFlagsIPv6(t *testing.T) {
	base := []string{"-loop", "/tmp/x", "-clients", "2001:db8:1::100-2001:db8:1::10f", "-servers", "fd00:1::11-fd00:1::12"}
	o, err := parseFlags(append(base, "-vip", "[2001:db8:1::10]:80", "-lb-server-addr", "fd00:1::1"))
	if err != nil {
		t.Fatal(err)
	}
	six := o.cfg.Six
	if six == nil || o.cfg.Clients != (gen.Range{First: 0x100, Last: 0x10f}) || o.cfg.Servers != (gen.Range{First: 0x11, Last: 0x12}) ||
		six.VIP.String() != "2001:db8:1::10" || six.LBServerAddr.String() != "fd00:1::1" || o.cfg.VPort != 80 ||
		six.ClientNet.Addr(0x100).String() != "2001:db8:1::100" || six.ServerNet.Addr(0x11).String() != "fd00:1::11" || o.cfg.Size != gen.MinFrame6 {
		t.Fatalf("%+v %+v", o.cfg, six)
	}
	if o, err := parseFlags(append(base, "-vip", "[2001:db8:1::10]:80", "-size", "100")); err != nil || o.cfg.Size != 100 {
		t.Fatalf("-size 100: %v", err)
	}
	for _, bad := range [][]string{
		append(base, "-vip", "203.0.113.10:80"),
		append(base, "-vip", "[2001:db8:1::10]:80", "-lb-server-addr", "198.51.100.1"),
		{"-loop", "/x", "-clients", "2001:db8:1::100-2001:db8:1::10f", "-vip", "[2001:db8:1::10]:80"},
		{"-loop", "/x", "-clients", "2001:db8:1::100-2001:db8:2::10f", "-servers", "fd00:1::11", "-vip", "[2001:db8:1::10]:80"},
		{"-loop", "/x", "-vip", "[2001:db8:1::10]:80"},
	} {
		if _, err := parseFlags(bad); err == nil || !strings.HasPrefix(err.Error(), "-") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
