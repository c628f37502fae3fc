package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestQUICMigration: a UDP service with quic (DPVS's QUIC connection
// migration), rr over rs1 and rs2, NAT. Datagrams whose QUIC connection
// ID names rs2, each from a new client port as a client's after a NAT
// rebinding, all reach rs2 (rr would share them), and rs1's all reach
// rs1; datagrams that are not QUIC are shared by rr. lbctl lists the
// service's quic flag.
func TestQUICMigration(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		udp := harness.Service{Protocol: "udp", VIP: c.Services[0].VIP, Port: 443, Scheduler: "rr", QUIC: true}
		for _, s := range c.Services[0].Servers {
			udp.Servers = append(udp.Servers, harness.Server{Address: s.Address, Port: 4433, Weight: 1})
		}
		c.Services = append(c.Services, udp)
	}})
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, ":4433", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	vip := e.nat.VIP.String() + ":443"
	count := func(res []harness.Result) map[string]int {
		t.Helper()
		got := map[string]int{}
		for _, r := range res {
			if r.Err != "" {
				t.Fatalf("query %d: %s", r.I, r.Err)
			}
			got[r.Server()]++
		}
		return got
	}
	// Plain datagrams are scheduled. The first ones may be lost while lbd
	// resolves the servers' MACs: ask until both answered.
	for deadline := time.Now().Add(15 * time.Second); ; {
		res, err := harness.UDPGet(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, vip, "", 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range res {
			if r.Err == "" {
				got[r.Server()]++
			}
		}
		if got["rs1"] > 0 && got["rs2"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plain datagrams: %v, want both servers (rr)", got)
		}
	}
	for _, h := range e.nat.Servers {
		res, err := harness.UDPGetQUIC(e.ctx, e.topo, e.nat.Client.NS, e.nshelper, vip, h.Addr.Addr().String(), 12, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got := count(res); got[h.Name] != 12 {
			t.Fatalf("QUIC packets naming %s from 12 client ports: %v, want all on %s", h.Name, got, h.Name)
		}
	}
	out := e.lbctlOK(t, "-S", "-n")
	if want := "-A -u " + vip + " -s rr --quic\n"; !strings.Contains(out, want) {
		t.Errorf("lbctl -S:\n%s\nwant the line %q", out, want)
	}
	e.stopLBD(t)
}
