package harness

import (
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/e2e/topo"
)

// TestLVSConfigParses: the DR, TUN and NAT-UDP configurations the e2e
// tests write are accepted by lbd's own loader and say what they mean.
func TestLVSConfigParses(t *testing.T) {
	servers := func(first string) []topo.Host {
		a := mustPrefix(first)
		return []topo.Host{{Name: "rs1", Addr: a}, {Name: "rs2", Addr: mustPrefix(a.Addr().Next().String() + "/" + strings.Split(first, "/")[1])}}
	}
	dr := &topo.LVS{LBIf: "dp-lb-abc123", LBAddr: topo.DRLBAddr, Gateway: topo.DRRouterAddr.Addr(), VIP: topo.LVSVIP,
		Servers: servers("198.51.100.11/24")}
	tun := &topo.LVS{LBIf: "dp-lb-abc123", LBAddr: topo.TUNLBAddr, Gateway: topo.TUNRouterLBAddr.Addr(), VIP: topo.LVSVIP,
		Servers: servers("198.51.100.131/25"), Tunnel: true}
	nat := &topo.NAT{WANIf: "dp-wan-abc123", LANIf: "dp-lan-abc123", WANAddr: topo.NATWANAddr, LANAddr: topo.NATLANAddr,
		VIP: topo.NATVIP, Servers: servers("198.51.100.11/24")}
	for _, tc := range []struct {
		name    string
		cfg     Config
		proto   string
		port    int
		rsPort  int
		forward string
		ports   int
	}{
		{"dr tcp", LVSConfig(dr, "abc123", "/tmp/x", "tcp", 80), "tcp", 80, 80, "dr", 1},
		{"dr udp", LVSConfig(dr, "abc123", "/tmp/x", "udp", 53), "udp", 53, 53, "dr", 1},
		{"tun tcp", LVSConfig(tun, "abc123", "/tmp/x", "tcp", 80), "tcp", 80, 80, "tun", 1},
		{"nat udp", NATUDPConfig(nat, "abc123", "/tmp/x", 53, 5353), "udp", 53, 5353, "nat", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			c.Timeouts = Timeouts{UDP: "5s", TCPFin: "3s"}
			got, err := conf.Parse([]byte(c.YAML()))
			if err != nil {
				t.Fatalf("conf.Parse refused:\n%s\n%v", c.YAML(), err)
			}
			if len(got.Ports) != tc.ports || len(got.Services) != 1 || len(got.Services[0].Servers) != 2 {
				t.Fatalf("ports/services differ:\n%s\n%+v", c.YAML(), got)
			}
			s := got.Services[0]
			if s.Protocol != tc.proto || s.Port != tc.port || s.VIP != "192.0.2.100" {
				t.Errorf("service %+v, want %s 192.0.2.100:%d", s, tc.proto, tc.port)
			}
			for _, rs := range s.Servers {
				if rs.Forward != tc.forward || rs.Port != tc.rsPort {
					t.Errorf("server %+v, want forward %s port %d", rs, tc.forward, tc.rsPort)
				}
			}
			if tc.ports == 1 && (got.Ports[0].Role != conf.RoleBoth || got.Ports[0].Gateway != c.Ports[0].Gateway || got.Ports[0].Name != LVSPortName) {
				t.Errorf("port %+v, want role both and gateway %s", got.Ports[0], c.Ports[0].Gateway)
			}
			if got.Timeouts.UDP.Seconds() != 5 || got.Timeouts.TCPFin.Seconds() != 3 || got.Timeouts.TCP.Seconds() != 900 {
				t.Errorf("timeouts %+v, want udp 5s, tcp_fin 3s, the rest default", got.Timeouts)
			}
		})
	}
}

func TestParseDecapStats(t *testing.T) {
	s, ok := ParseDecapStats("ready x\nstats frames=1 decap=1 bad=0 errors=0\nstats frames=7 decap=6 bad=1 errors=0\n")
	if !ok || s != (DecapStats{Frames: 7, Decap: 6, Bad: 1}) {
		t.Errorf("ParseDecapStats = %+v, %t", s, ok)
	}
	if _, ok := ParseDecapStats("ready x\n"); ok {
		t.Error("ParseDecapStats found stats in none")
	}
}
