package topo

import (
	"fmt"
	"net/netip"
)

// Addresses of the VS/DR and VS/TUN topologies (RFC 5737). The client
// reaches the VIP through a router that is not the load balancer; the
// real servers answer the client through the same router, so their
// replies never pass through the load balancer.
//
// VS/DR: one L2 segment 198.51.100.0/24 holds the LB, the router and the
// real servers.
//
//	client 203.0.113.2/24 ── 203.0.113.1 router 198.51.100.254 ── bridge ─┬─ LB port 198.51.100.1/24
//	                                                                        ├─ rs1 198.51.100.11 (VIP on lo)
//	                                                                        └─ rs2 198.51.100.12 (VIP on lo)
//
// VS/TUN: the real servers sit behind the router on their own subnet, so
// the LB reaches them only through its gateway (the router) in IPIP.
// 198.51.100.0/24 is split in two /25s so that no range outside RFC 5737
// is needed and the VIP 192.0.2.100 stays alone in 192.0.2.0/24.
//
//	client 203.0.113.2/24 ── 203.0.113.1 router 198.51.100.126/25 ── LB port 198.51.100.1/25 (gateway .126)
//	                                 router 198.51.100.254/25 ── bridge ─┬─ rs1 198.51.100.131/25 (VIP on a TUN)
//	                                                                     └─ rs2 198.51.100.132/25 (VIP on a TUN)
//
// In both the router routes the VIP (192.0.2.100/32) via the LB's
// address, and the real servers' default route is the router.
var (
	LVSClientAddr       = netip.MustParsePrefix("203.0.113.2/24") // the client
	LVSRouterClientAddr = netip.MustParsePrefix("203.0.113.1/24") // the router, client side
	LVSVIP              = netip.MustParseAddr("192.0.2.100")      // the virtual IP

	DRLBAddr     = netip.MustParsePrefix("198.51.100.1/24")   // lbd's only port
	DRRouterAddr = netip.MustParsePrefix("198.51.100.254/24") // the router on the shared segment
	drFirstRS    = netip.MustParsePrefix("198.51.100.11/24")  // rs1; rs2 is .12, ...

	TUNLBAddr           = netip.MustParsePrefix("198.51.100.1/25")   // lbd's only port
	TUNRouterLBAddr     = netip.MustParsePrefix("198.51.100.126/25") // the router facing the LB: lbd's gateway
	TUNRouterServerAddr = netip.MustParsePrefix("198.51.100.254/25") // the router facing the real servers
	tunFirstRS          = netip.MustParsePrefix("198.51.100.131/25") // rs1; rs2 is .132, ...
)

// Router is the namespace between the client and the rest: it forwards,
// routes the VIP to the LB and does no reverse-path filtering (the real
// servers' replies come from the VIP, which it routes elsewhere).
type Router struct {
	NS         string
	ClientIf   string       // facing the client
	ClientAddr netip.Prefix // 203.0.113.1/24
	LBIf       string       // facing the LB (DR: on the shared segment)
	LBAddr     netip.Prefix
	ServerIf   string       // TUN only: facing the real servers' subnet
	ServerAddr netip.Prefix // TUN only
}

// LVS is the VS/DR or VS/TUN topology (see the addresses above). The LB
// namespace's single interface is up with no address: lbd owns it through
// af_packet. Every veth end has offloads and IPv6 turned off. The real
// servers have arp_ignore=1 and arp_announce=2 (all and their interface)
// and no reverse-path filtering.
type LVS struct {
	Client  Host
	Router  Router
	LBNS    string
	LBIf    string       // lbd's port, role both
	LBAddr  netip.Prefix // its address
	Gateway netip.Addr   // lbd's gateway (the router's address facing it)
	VIP     netip.Addr
	// SwitchNS holds Bridge: DR's shared segment (router, LB, servers) or
	// TUN's server subnet (router, servers).
	SwitchNS string
	Bridge   string
	Servers  []Host
	// TUN: the VIP is not on the servers yet; the decapsulator
	// (nshelper decap) puts it on a TUN device. DR: it is on lo.
	Tunnel bool
}

// DR and TUN are the two shapes of LVS.
type (
	DR  = LVS
	TUN = LVS
)

// Sysctl sets key (net.ipv4.ip_forward) to value in ns.
func (t *Topo) Sysctl(ns, key, value string) error {
	_, err := t.Exec(ns, "sysctl", "-q", "-w", key+"="+value)
	return err
}

// routerSysctls make a namespace a router that forwards whatever reaches
// it, whichever way the replies go (VS/DR and VS/TUN replies bypass lbd):
// no reverse-path filter, no redirects. "default" is set before the
// router's interfaces exist, "all" too (the kernel uses the larger of
// "all" and the interface's value).
var routerSysctls = [][2]string{
	{"net.ipv4.ip_forward", "1"},
	{"net.ipv4.conf.all.rp_filter", "0"},
	{"net.ipv4.conf.default.rp_filter", "0"},
	{"net.ipv4.conf.all.send_redirects", "0"},
	{"net.ipv4.conf.default.send_redirects", "0"},
}

// clientBehindRouter returns the steps that join the client to the
// router on a link of their own (both ends ready for af_packet), with
// their addresses and the client's default route through the router.
func (t *Topo) clientBehindRouter(c Host, r Router) []func() error {
	return []func() error{
		func() error { return t.Veth(c.NS, c.If, r.NS, r.ClientIf) },
		func() error { return t.ForAFPacket(c.NS, c.If) },
		func() error { return t.ForAFPacket(r.NS, r.ClientIf) },
		func() error { return t.Addr(c.NS, c.If, c.Addr.String()) },
		func() error { return t.Up(c.NS, c.If) },
		func() error { return t.Route(c.NS, "default via "+r.ClientAddr.Addr().String()) },
		func() error { return t.Addr(r.NS, r.ClientIf, r.ClientAddr.String()) },
		func() error { return t.Up(r.NS, r.ClientIf) },
	}
}

// BuildDR builds the VS/DR topology with n real servers (1..9). Each
// server holds the VIP on lo. On error the caller still owns t and must
// call Teardown.
func BuildDR(t *Topo, n int) (*DR, error) {
	return buildLVS(t, n, false)
}

// BuildTUN builds the VS/TUN topology with n real servers (1..9). The
// servers do not hold the VIP until a decapsulator runs in them
// (harness.StartDecap). On error the caller still owns t and must call
// Teardown.
func BuildTUN(t *Topo, n int) (*TUN, error) {
	return buildLVS(t, n, true)
}

func buildLVS(t *Topo, n int, tunnel bool) (*LVS, error) {
	what := map[bool]string{false: "BuildDR", true: "BuildTUN"}[tunnel]
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("topo: %s: %d real servers, want 1..9", what, n)
	}
	l := &LVS{VIP: LVSVIP, Tunnel: tunnel}
	l.Router.ClientAddr = LVSRouterClientAddr
	first := drFirstRS
	if tunnel {
		l.LBAddr, l.Router.LBAddr, l.Router.ServerAddr = TUNLBAddr, TUNRouterLBAddr, TUNRouterServerAddr
		first = tunFirstRS
	} else {
		l.LBAddr, l.Router.LBAddr = DRLBAddr, DRRouterAddr
	}
	l.Gateway = l.Router.LBAddr.Addr()
	rsGateway := l.Router.LBAddr.Addr()
	if tunnel {
		rsGateway = l.Router.ServerAddr.Addr()
	}

	var err error
	mk := func(base string) string {
		if err != nil {
			return ""
		}
		var ns string
		ns, err = t.AddNS(base)
		return ns
	}
	l.Client = Host{Name: "client", NS: mk("cli"), If: t.IfName("cli"), Addr: LVSClientAddr}
	l.Router.NS = mk("rt")
	l.LBNS = mk("lb")
	l.SwitchNS = mk("sw")
	l.Servers = t.serverHosts(mk, first, n)
	if err != nil {
		return nil, err
	}
	l.Router.ClientIf = t.IfName("rtc")
	l.Router.LBIf = t.IfName("rti")
	l.LBIf = t.IfName("lb")
	l.Bridge = t.IfName("br")
	if tunnel {
		l.Router.ServerIf = t.IfName("rts")
	}
	rt := l.Router.NS

	// veth creates a pair prepared for af_packet on both ends.
	veth := func(nsA, ifA, nsB, ifB string) []func() error {
		return []func() error{
			func() error { return t.Veth(nsA, ifA, nsB, ifB) },
			func() error { return t.ForAFPacket(nsA, ifA) },
			func() error { return t.ForAFPacket(nsB, ifB) },
		}
	}
	sysctl := func(ns, key, value string) func() error {
		return func() error { return t.Sysctl(ns, key, value) }
	}
	var steps []func() error
	for _, kv := range routerSysctls {
		steps = append(steps, sysctl(rt, kv[0], kv[1]))
	}
	steps = append(steps, t.clientBehindRouter(l.Client, l.Router)...)
	var bridgePorts []string
	if tunnel {
		// router <-> LB directly; router <-> the servers' bridge.
		swr := t.IfName("swr")
		bridgePorts = append(bridgePorts, swr)
		steps = append(steps, veth(rt, l.Router.LBIf, l.LBNS, l.LBIf)...)
		steps = append(steps, veth(rt, l.Router.ServerIf, l.SwitchNS, swr)...)
		steps = append(steps,
			func() error { return t.Addr(rt, l.Router.ServerIf, l.Router.ServerAddr.String()) },
			func() error { return t.Up(rt, l.Router.ServerIf) },
		)
	} else {
		// router and LB on the shared bridge.
		swr, swb := t.IfName("swr"), t.IfName("swb")
		bridgePorts = append(bridgePorts, swr, swb)
		steps = append(steps, veth(rt, l.Router.LBIf, l.SwitchNS, swr)...)
		steps = append(steps, veth(l.LBNS, l.LBIf, l.SwitchNS, swb)...)
	}
	steps = append(steps,
		func() error { return t.Addr(rt, l.Router.LBIf, l.Router.LBAddr.String()) },
		func() error { return t.Up(rt, l.Router.LBIf) },
		func() error { return t.Up(l.LBNS, l.LBIf) },
		func() error {
			return t.Route(rt, netip.PrefixFrom(l.VIP, 32).String()+" via "+l.LBAddr.Addr().String())
		},
	)
	for i, h := range l.Servers {
		swPort := t.IfName(fmt.Sprintf("sw%d", i+1))
		bridgePorts = append(bridgePorts, swPort)
		steps = append(steps, veth(h.NS, h.If, l.SwitchNS, swPort)...)
		for _, kv := range [][2]string{
			// Never answer ARP for the VIP, never announce it.
			{"net.ipv4.conf.all.arp_ignore", "1"},
			{"net.ipv4.conf.all.arp_announce", "2"},
			{"net.ipv4.conf." + h.If + ".arp_ignore", "1"},
			{"net.ipv4.conf." + h.If + ".arp_announce", "2"},
			// TUN: the inner packet arrives on the TUN device from a
			// client routed via the real interface.
			{"net.ipv4.conf.all.rp_filter", "0"},
			{"net.ipv4.conf.default.rp_filter", "0"},
			{"net.ipv4.conf." + h.If + ".rp_filter", "0"},
		} {
			steps = append(steps, sysctl(h.NS, kv[0], kv[1]))
		}
		steps = append(steps,
			func() error { return t.Addr(h.NS, h.If, h.Addr.String()) },
			func() error { return t.Up(h.NS, h.If) },
			func() error { return t.Route(h.NS, "default via "+rsGateway.String()) },
		)
		if !tunnel {
			steps = append(steps, func() error { return t.Addr(h.NS, "lo", netip.PrefixFrom(l.VIP, 32).String()) })
		}
	}
	steps = append(steps, func() error { return t.Bridge(l.SwitchNS, l.Bridge, bridgePorts...) })
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// serverHosts names n real servers rs1..rsN, each in a namespace made by
// mk, at consecutive addresses from first.
func (t *Topo) serverHosts(mk func(string) string, first netip.Prefix, n int) []Host {
	var hosts []Host
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("rs%d", i)
		hosts = append(hosts, Host{Name: name, NS: mk(name), If: t.IfName(name), Addr: first})
		first = netip.PrefixFrom(first.Addr().Next(), first.Bits())
	}
	return hosts
}
