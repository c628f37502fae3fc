package topo

import (
	"fmt"
	"net/netip"
)

// Scale-out: N active directors behind a router that learns the VIP from
// each of them over BGP and spreads the flows with ECMP. VS/DR: the
// directors, the router and the real servers (VIP on lo) share one
// segment; the real servers answer the client through the router.
//
//	client 203.0.113.2 ── router 203.0.113.1 | 198.51.100.254 ── server bridge ─┬─ node a 198.51.100.1, b .2, c .3 (lbd, af_packet)
//	                          | 10.255.0.254                                     └─ rs1 198.51.100.11, rs2 .12, ...
//	                          └───────────── management bridge ── node a 10.255.0.1, b .2, c .3 (kernel: BGP, sync)
//
// BGP runs between the router's and the nodes' kernels on the management
// bridge; the next hop the nodes announce is their dataplane address on
// the server segment.

// ECMPRouterMgmt is the router's address on the management bridge.
var ECMPRouterMgmt = netip.MustParsePrefix("10.255.0.254/24")

// ECMPNode is one director.
type ECMPNode struct {
	Name     string // "a", "b", ...
	NS       string
	ServerIf string       // lbd's port (af_packet, no kernel address)
	ServerIP netip.Prefix // lbd's address on it: the next hop it announces
	MgmtIf   string       // kernel interface on the management bridge
	MgmtIP   netip.Prefix
}

// ECMPRouter is the router: client side, server segment, management.
type ECMPRouter struct {
	Router
	MgmtIf string
	MgmtIP netip.Prefix
}

// ECMP is the scale-out topology.
type ECMP struct {
	Client   Host
	Router   ECMPRouter
	Nodes    []ECMPNode
	VIP      netip.Addr
	Gateway  netip.Addr // the nodes' gateway: the router
	SwitchNS string
	Servers  []Host
}

// BuildECMP builds the topology with nodes directors (1..9) and servers
// real servers (1..9). The router forwards with an L4 multipath hash
// (fib_multipath_hash_policy=1) but has no route to the VIP until BGP
// gives it one. On error the caller still owns t and must call Teardown.
func BuildECMP(t *Topo, nodes, servers int) (*ECMP, error) {
	if nodes < 1 || nodes > 9 || servers < 1 || servers > 9 {
		return nil, fmt.Errorf("topo: BuildECMP: %d nodes and %d servers, want 1..9 each", nodes, servers)
	}
	e := &ECMP{VIP: LVSVIP, Gateway: DRRouterAddr.Addr()}
	var err error
	mk := func(base string) string {
		if err != nil {
			return ""
		}
		var ns string
		ns, err = t.AddNS(base)
		return ns
	}
	e.Client = Host{Name: "client", NS: mk("cli"), If: t.IfName("cli"), Addr: LVSClientAddr}
	e.Router = ECMPRouter{Router: Router{NS: mk("rt"), ClientIf: t.IfName("rtc"), ClientAddr: LVSRouterClientAddr,
		LBIf: t.IfName("rti"), LBAddr: DRRouterAddr}, MgmtIf: t.IfName("rtm"), MgmtIP: ECMPRouterMgmt}
	for i := range nodes {
		name := string(rune('a' + i))
		e.Nodes = append(e.Nodes, ECMPNode{Name: name, NS: mk("n" + name), ServerIf: t.IfName("s" + name),
			ServerIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, 100, byte(1 + i)}), 24),
			MgmtIf:   t.IfName("m" + name), MgmtIP: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 255, 0, byte(1 + i)}), 24)})
	}
	e.SwitchNS = mk("sw")
	e.Servers = t.serverHosts(mk, drFirstRS, servers)
	if err != nil {
		return nil, err
	}

	var steps []func() error
	add := func(fs ...func() error) { steps = append(steps, fs...) }
	sysctl := func(ns, key, value string) func() error {
		return func() error { return t.Sysctl(ns, key, value) }
	}
	// veth joins ifc in ns to a new port of the switch namespace and
	// returns the switch's end; afPacket prepares both ends for lbd.
	veth := func(ns, ifc, swBase string, afPacket bool) string {
		sw := t.IfName(swBase)
		add(func() error { return t.Veth(ns, ifc, e.SwitchNS, sw) })
		if afPacket {
			add(func() error { return t.ForAFPacket(ns, ifc) },
				func() error { return t.ForAFPacket(e.SwitchNS, sw) })
		}
		add(func() error { return t.Up(ns, ifc) })
		return sw
	}
	rt := e.Router.NS
	for _, kv := range append(routerSysctls, [2]string{"net.ipv4.fib_multipath_hash_policy", "1"}) { // addresses and ports: flows of one client spread
		add(sysctl(rt, kv[0], kv[1]))
	}
	add(t.clientBehindRouter(e.Client, e.Router.Router)...)
	serverPorts := []string{veth(rt, e.Router.LBIf, "swr", true)}
	mgmtPorts := []string{veth(rt, e.Router.MgmtIf, "smr", false)}
	add(func() error { return t.Addr(rt, e.Router.LBIf, e.Router.LBAddr.String()) },
		func() error { return t.Addr(rt, e.Router.MgmtIf, e.Router.MgmtIP.String()) })
	for _, nd := range e.Nodes {
		serverPorts = append(serverPorts, veth(nd.NS, nd.ServerIf, "ss"+nd.Name, true))
		mgmtPorts = append(mgmtPorts, veth(nd.NS, nd.MgmtIf, "sm"+nd.Name, false))
		add(func() error { return t.Addr(nd.NS, nd.MgmtIf, nd.MgmtIP.String()) },
			func() error { return t.Up(nd.NS, "lo") })
	}
	for i, s := range e.Servers {
		serverPorts = append(serverPorts, veth(s.NS, s.If, fmt.Sprintf("sw%d", i+1), true))
		for _, kv := range [][2]string{
			{"net.ipv4.conf.all.arp_ignore", "1"},
			{"net.ipv4.conf.all.arp_announce", "2"},
			{"net.ipv4.conf." + s.If + ".arp_ignore", "1"},
			{"net.ipv4.conf." + s.If + ".arp_announce", "2"},
		} {
			add(sysctl(s.NS, kv[0], kv[1]))
		}
		add(func() error { return t.Addr(s.NS, "lo", netip.PrefixFrom(e.VIP, 32).String()) },
			func() error { return t.Addr(s.NS, s.If, s.Addr.String()) },
			func() error { return t.Route(s.NS, "default via "+e.Gateway.String()) })
	}
	add(func() error { return t.Bridge(e.SwitchNS, t.IfName("brs"), serverPorts...) },
		func() error { return t.Bridge(e.SwitchNS, t.IfName("brm"), mgmtPorts...) })
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return e, nil
}
