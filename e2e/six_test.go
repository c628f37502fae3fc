package e2e

import (
	"strings"
	"testing"

	"github.com/dplb/dplb/e2e/topo"
)

// v6Setup runs the commands of an IPv6 setup in the test's namespaces,
// failing the test on the first error.
type v6Setup struct {
	t  *testing.T
	tp *topo.Topo
}

func (s v6Setup) do(ns string, args ...string) {
	s.t.Helper()
	if out, err := s.tp.Exec(ns, args...); err != nil {
		s.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// addr gives ifc in ns an IPv6 address, usable at once (DAD off).
func (s v6Setup) addr(ns, ifc, addr string) {
	s.t.Helper()
	s.do(ns, "sysctl", "-q", "-w", "net.ipv6.conf."+ifc+".disable_ipv6=0")
	s.do(ns, "sysctl", "-q", "-w", "net.ipv6.conf."+ifc+".accept_dad=0")
	s.do(ns, "ip", "-6", "addr", "add", addr, "dev", ifc, "nodad")
}

// lvs gives the VS/DR topology IPv6: the client behind the router, the
// router forwarding between the client's link and the shared segment
// with vip routed to lbd's address there, the segment's bridge flooding
// the solicited-node groups to lbd's port (lbd sends no MLD reports), and
// each server its address; the servers' routes are the caller's.
func (s v6Setup) lvs(l *topo.DR, vip string) {
	s.t.Helper()
	s.clientBehindRouter(l.Client, l.Router)
	s.do(l.Router.NS, "ip", "-6", "route", "add", vip+"/128", "via", v6LVSLB)
	s.do(l.SwitchNS, "ip", "link", "set", l.Bridge, "type", "bridge", "mcast_snooping", "0")
	for i, h := range l.Servers {
		s.addr(h.NS, h.If, v6LVSServer(i)+"/64")
	}
}

// clientBehindRouter gives the client, whose default route is the
// router, and the router, forwarding, their IPv6 addresses on the
// client's link and the segment.
func (s v6Setup) clientBehindRouter(c topo.Host, r topo.Router) {
	s.t.Helper()
	s.addr(c.NS, c.If, v6LVSClient+"/64")
	s.do(c.NS, "ip", "-6", "route", "add", "default", "via", v6LVSRouterCli)
	s.do(r.NS, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1")
	s.addr(r.NS, r.ClientIf, v6LVSRouterCli+"/64")
	s.addr(r.NS, r.LBIf, v6LVSRouterSeg+"/64")
}
