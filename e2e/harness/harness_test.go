package harness

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/e2e/topo"
)

// TestConfigParses checks that the configuration the e2e test and the demo
// write is accepted by lbd's own loader (unknown keys are refused there).
func TestConfigParses(t *testing.T) {
	nat := &topo.NAT{
		WANIf: "dp-wan-abc123", LANIf: "dp-lan-abc123",
		WANAddr: topo.NATWANAddr, LANAddr: topo.NATLANAddr, VIP: topo.NATVIP,
		Servers: []topo.Host{
			{Name: "rs1", Addr: mustPrefix("198.51.100.11/24")},
			{Name: "rs2", Addr: mustPrefix("198.51.100.12/24")},
		},
	}
	for _, format := range []string{"", "json", "console"} {
		c := NATConfig(nat, "abc123", "/tmp/dplb-e2e-x")
		c.LogFormat = format
		c.Services = append(c.Services, Service{VIP: "192.0.2.100", Port: 21, Scheduler: "rr",
			Servers: []Server{{Address: "198.51.100.12", Port: 21, Weight: 1}}})
		got, err := conf.Parse([]byte(c.YAML()))
		if err != nil {
			t.Fatalf("conf.Parse refused:\n%s\n%v", c.YAML(), err)
		}
		if len(got.Ports) != 2 || got.Ports[0].Device != "net_af_packet0,iface=dp-wan-abc123" ||
			got.Ports[1].Role != conf.RoleServer || got.EAL.HugePages ||
			len(got.Services) != 2 || len(got.Services[0].Servers) != 2 ||
			got.Services[0].Servers[1].Port != 8080 || got.Control.Socket != "/tmp/dplb-e2e-x/lbd.sock" ||
			got.Dataplane.IdleSleep.Microseconds() != 20 || got.Dataplane.Workers[0] != 1 {
			t.Errorf("parsed config differs from the one written:\n%s\n%+v", c.YAML(), got)
		}
	}
}

// TestConfigKNI: a port's kni is written as lbd reads it.
func TestConfigKNI(t *testing.T) {
	nat := &topo.NAT{WANIf: "dp-wan-abc123", LANIf: "dp-lan-abc123", WANAddr: topo.NATWANAddr, LANAddr: topo.NATLANAddr,
		VIP: topo.NATVIP, Servers: []topo.Host{{Name: "rs1", Addr: mustPrefix("198.51.100.11/24")}}}
	c := NATConfig(nat, "abc123", "/tmp/dplb-e2e-x")
	c.Ports = []Port{
		AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
		AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
	}
	c.Ports[1].KNI = "dp-kni-abc123"
	got, err := conf.Parse([]byte(c.YAML()))
	if err != nil {
		t.Fatalf("conf.Parse refused:\n%s\n%v", c.YAML(), err)
	}
	if got.Ports[0].KNI != "" || got.Ports[1].KNI != "dp-kni-abc123" {
		t.Errorf("ports' kni %q and %q, want none and dp-kni-abc123:\n%s", got.Ports[0].KNI, got.Ports[1].KNI, c.YAML())
	}
}

func TestMempoolInUse(t *testing.T) {
	for _, tc := range []struct {
		log   string
		inUse int
		ok    bool
	}{
		{`{"level":"info","msg":"mempool in use at exit","pool":"pkt","in_use":0}`, 0, true},
		{"2025-01-01T00:00:00Z\tINFO\tmempool in use at exit\t{\"pool\": \"pkt\", \"in_use\": 12}", 12, true},
		{`{"msg":"mempool in use at exit"}`, 0, false},
		{`{"msg":"bye"}`, 0, false},
	} {
		n, _, ok := MempoolInUse("first line\n" + tc.log + "\nlast line")
		if n != tc.inUse || ok != tc.ok {
			t.Errorf("MempoolInUse(%q) = %d, %t; want %d, %t", tc.log, n, ok, tc.inUse, tc.ok)
		}
	}
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
