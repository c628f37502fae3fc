package e2e

import (
	"testing"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// TestNATUDP: 100 UDP queries through VS/NAT to VIP:53, served on port
// 5353 by two real servers. Each query comes from a new source port, so
// each is a new connection: both servers answer half, every answer comes
// from VIP:53, and the servers see the client's own address and port.
func TestNATUDP(t *testing.T) {
	e, dir := newEnv(t)
	nat, err := topo.BuildNAT(e.topo, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS, e.vip = nat.Client, nat.Servers, nat.LBNS, nat.VIP.String()
	e.startServers(t, "udp", ":5353")
	e.startLBD(t, harness.NATUDPConfig(nat, e.topo.Suffix(), dir, 53, 5353), dir)

	answers, failed := e.round(t, "udp", 53, 100)
	e.pollStats(t, func(r api.Response) []string {
		return e.serverStats(r, "udp", 53, 5353, "Masq", answers, failed, true)
	})
	e.stop(t)
}
