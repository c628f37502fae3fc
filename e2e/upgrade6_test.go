package e2e

import (
	"testing"

	"github.com/dplb/dplb/e2e/harness"
)

// IPv6 connections across an upgrade: the restart tests' topology (the
// client behind a router, lbd and two servers on one segment) with IPv6
// on every link, 100 long-lived streams through NAT66, 50 through VS/DR
// and 50 through NAT64 (to the servers' IPv4 addresses from a local
// address on the segment: local ports reserved again) to an IPv6 VIP, on
// two workers; NAT66 and NAT64 behind the SYN proxy. The entries of IPv6 connections
// hold folds of the addresses under a key each lbd draws at start, so the
// new lbd must enter the handed-over addresses under its own folds.

const v6VIPUpgrade = "2001:db8:4::30" // routed by the router to lbd

// TestUpgradeKeepsIPv6Connections: lbctl upgrade under IPv6 load; every
// stream delivers its last byte, the counters go on, new connections
// balance.
func TestUpgradeKeepsIPv6Connections(t *testing.T) {
	waitBound(t)
	e, dir := newEnv(t)
	l := buildNATAndDR(t, e)
	six := v6Setup{t, e.topo}
	six.lvs(l, v6VIPUpgrade)
	var servers []string
	for _, h := range l.Servers {
		// NAT66 replies (from the server's address) go back through lbd,
		// VS/DR ones (from the VIP, held on lo) through the router.
		six.do(h.NS, "ip", "-6", "route", "add", "default", "via", v6LVSLB)
		six.do(h.NS, "sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=0")
		six.do(h.NS, "ip", "-6", "addr", "add", v6VIPUpgrade+"/128", "dev", "lo", "nodad")
		six.do(h.NS, "ip", "-6", "rule", "add", "from", v6VIPUpgrade, "table", "100")
		six.do(h.NS, "ip", "-6", "route", "add", "default", "via", v6LVSRouterSeg, "table", "100")
		servers = append(servers, h.NS)
	}
	startStreamServers6(t, natStreamPort, servers...)
	startStreamServers6(t, drStreamPort, servers...)
	startStreamServers(t, fnatStreamPort, servers...) // NAT64's servers are IPv4
	e.vip = v6VIPUpgrade

	port := harness.AFPacketPort(0, harness.LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both")
	port.Device += ",qpairs=2"
	port.Address6, port.Gateway6 = v6LVSLB+"/64", v6LVSRouterSeg
	cfg := harness.BaseConfig(e.topo.Suffix(), dir, port)
	cfg.Workers = []int{0, 1}
	cfg.ConnTableSize = 65536
	groups := []streamGroup{{"nat66", natStreamPort, 100}, {"dr6", drStreamPort, 50}, {"nat64", fnatStreamPort, 50}}
	for _, g := range groups {
		// NAT66 and NAT64 behind the SYN proxy: the handover carries the
		// proxy's sequence deltas.
		svc := harness.Service{VIP: v6VIPUpgrade, Port: g.port, Scheduler: "rr", SynProxy: g.method != "dr6"}
		for i, h := range l.Servers {
			rs := harness.Server{Address: v6LVSServer(i), Port: g.port, Weight: 1, Forward: "nat"}
			switch g.method {
			case "dr6":
				rs.Forward = "dr"
			case "nat64":
				rs.Address, rs.Forward = h.Addr.Addr().String(), "fullnat"
				svc.LocalAddresses = []string{restartLocal}
			}
			svc.Servers = append(svc.Servers, rs)
		}
		cfg.Services = append(cfg.Services, svc)
	}
	e.startLBD(t, cfg, dir)
	e.restartUnderLoad(t, groups, func() { e.upgrade(t, cfg) })
}
