package topo

import (
	"fmt"
	"net/netip"
)

// Addresses of the active/backup topologies (RFC 5737 on the data
// segments, RFC 1918 on the management link). Both directors sit on the
// same segments with their own addresses; what only the master answers
// (the VIP, VS/NAT's floating gateway) has no fixed owner.
//
// VS/NAT: the client is on the VIP's subnet; the real servers route
// through the floating gateway 198.51.100.1.
//
//	client 192.0.2.2 ── client bridge ─┬─ node a 192.0.2.11 | node a 198.51.100.2 ─┬─ server bridge ── rs1 198.51.100.11
//	                                   └─ node b 192.0.2.12 | node b 198.51.100.3 ─┘                 └─ rs2 198.51.100.12
//
// VS/DR: the client is behind a router that reaches the VIP on its link
// (it asks by ARP who holds it); the nodes, the router and the real
// servers (VIP on lo) share one segment.
//
//	client 203.0.113.2 ── router 203.0.113.1 | 198.51.100.254 ── server bridge ─┬─ node a 198.51.100.1, node b 198.51.100.2
//	                                                                              └─ rs1 198.51.100.11, rs2 198.51.100.12
//
// In both the nodes' kernels share a management bridge (10.255.0.1 and
// .2/24) for VRRP and connection sync; lbd's dataplane ports carry no
// address in the kernel.
var (
	HANATFloating = netip.MustParsePrefix("198.51.100.1/24") // the real servers' gateway in VS/NAT
	haNATWAN      = [2]netip.Prefix{netip.MustParsePrefix("192.0.2.11/24"), netip.MustParsePrefix("192.0.2.12/24")}
	haNATLAN      = [2]netip.Prefix{netip.MustParsePrefix("198.51.100.2/24"), netip.MustParsePrefix("198.51.100.3/24")}
	haDRPort      = [2]netip.Prefix{netip.MustParsePrefix("198.51.100.1/24"), netip.MustParsePrefix("198.51.100.2/24")}
	haMgmt        = [2]netip.Prefix{netip.MustParsePrefix("10.255.0.1/24"), netip.MustParsePrefix("10.255.0.2/24")}
)

// HANode is one director: its namespace, its dataplane ports (up, no
// address: lbd owns them through af_packet) and its management interface.
type HANode struct {
	Name     string // "a" or "b"
	NS       string
	ClientIf string       // VS/NAT: the port facing the client
	ServerIf string       // the port facing the real servers (VS/DR: the only one)
	ClientIP netip.Prefix // VS/NAT only
	ServerIP netip.Prefix
	MgmtIf   string // kernel interface on the management bridge
	MgmtIP   netip.Prefix
}

// HA is an active/backup pair of directors in VS/NAT or VS/DR.
type HA struct {
	DR       bool
	Client   Host
	Router   Router // VS/DR only
	Nodes    [2]HANode
	VIP      netip.Addr
	Floating netip.Prefix // VS/NAT: the real servers' gateway; invalid for VS/DR
	Gateway  netip.Addr   // VS/DR: the nodes' gateway (the router)
	SwitchNS string       // holds the bridges
	Servers  []Host
}

// BuildHA builds the active/backup topology (VS/DR if dr, else VS/NAT)
// with n real servers (1..9). On error the caller still owns t and must
// call Teardown.
func BuildHA(t *Topo, n int, dr bool) (*HA, error) {
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("topo: BuildHA: %d real servers, want 1..9", n)
	}
	h := &HA{DR: dr}
	var err error
	mk := func(base string) string {
		if err != nil {
			return ""
		}
		var ns string
		ns, err = t.AddNS(base)
		return ns
	}
	if dr {
		h.VIP = LVSVIP
		h.Client = Host{Name: "client", NS: mk("cli"), If: t.IfName("cli"), Addr: LVSClientAddr}
		h.Router = Router{NS: mk("rt"), ClientIf: t.IfName("rtc"), ClientAddr: LVSRouterClientAddr,
			LBIf: t.IfName("rti"), LBAddr: DRRouterAddr}
		h.Gateway = DRRouterAddr.Addr()
	} else {
		h.VIP = NATVIP
		h.Floating = HANATFloating
		h.Client = Host{Name: "client", NS: mk("cli"), If: t.IfName("cli"), Addr: NATClientAddr}
	}
	for i, name := range []string{"a", "b"} {
		nd := HANode{Name: name, NS: mk("n" + name), ServerIf: t.IfName("s" + name), MgmtIf: t.IfName("m" + name), MgmtIP: haMgmt[i]}
		if dr {
			nd.ServerIP = haDRPort[i]
		} else {
			nd.ClientIf, nd.ClientIP, nd.ServerIP = t.IfName("c"+name), haNATWAN[i], haNATLAN[i]
		}
		h.Nodes[i] = nd
	}
	h.SwitchNS = mk("sw")
	h.Servers = t.serverHosts(mk, drFirstRS, n)
	if err != nil {
		return nil, err
	}

	var steps []func() error
	add := func(fs ...func() error) { steps = append(steps, fs...) }
	// veth joins ifc in ns to a new port of the switch namespace, both
	// ends prepared for af_packet, and returns the switch's end.
	veth := func(ns, ifc, swBase string) string {
		sw := t.IfName(swBase)
		add(func() error { return t.Veth(ns, ifc, h.SwitchNS, sw) },
			func() error { return t.ForAFPacket(ns, ifc) },
			func() error { return t.ForAFPacket(h.SwitchNS, sw) },
			func() error { return t.Up(ns, ifc) })
		return sw
	}
	sysctl := func(ns, key, value string) func() error {
		return func() error { return t.Sysctl(ns, key, value) }
	}
	var clientPorts, serverPorts, mgmtPorts []string
	if dr {
		rt := h.Router.NS
		for _, kv := range routerSysctls {
			add(sysctl(rt, kv[0], kv[1]))
		}
		add(t.clientBehindRouter(h.Client, h.Router)...)
		serverPorts = append(serverPorts, veth(rt, h.Router.LBIf, "swr"))
		add(func() error { return t.Addr(rt, h.Router.LBIf, h.Router.LBAddr.String()) },
			// The VIP is on the router's link: whoever answers ARP for it
			// (the master) gets the client's packets.
			func() error {
				return t.Route(rt, netip.PrefixFrom(h.VIP, 32).String()+" dev "+h.Router.LBIf+" src "+h.Router.LBAddr.Addr().String())
			})
	} else {
		clientPorts = append(clientPorts, veth(h.Client.NS, h.Client.If, "swc"))
		add(func() error { return t.Addr(h.Client.NS, h.Client.If, h.Client.Addr.String()) })
	}
	for _, nd := range h.Nodes {
		if !dr {
			clientPorts = append(clientPorts, veth(nd.NS, nd.ClientIf, "sc"+nd.Name))
		}
		serverPorts = append(serverPorts, veth(nd.NS, nd.ServerIf, "ss"+nd.Name))
		mgmtPorts = append(mgmtPorts, veth(nd.NS, nd.MgmtIf, "sm"+nd.Name))
		add(func() error { return t.Addr(nd.NS, nd.MgmtIf, nd.MgmtIP.String()) })
	}
	rsGateway := h.Gateway
	if !dr {
		rsGateway = h.Floating.Addr()
	}
	for i, s := range h.Servers {
		serverPorts = append(serverPorts, veth(s.NS, s.If, fmt.Sprintf("sw%d", i+1)))
		if dr {
			for _, kv := range [][2]string{
				{"net.ipv4.conf.all.arp_ignore", "1"},
				{"net.ipv4.conf.all.arp_announce", "2"},
				{"net.ipv4.conf." + s.If + ".arp_ignore", "1"},
				{"net.ipv4.conf." + s.If + ".arp_announce", "2"},
			} {
				add(sysctl(s.NS, kv[0], kv[1]))
			}
			add(func() error { return t.Addr(s.NS, "lo", netip.PrefixFrom(h.VIP, 32).String()) })
		}
		add(func() error { return t.Addr(s.NS, s.If, s.Addr.String()) },
			func() error { return t.Route(s.NS, "default via "+rsGateway.String()) })
	}
	if len(clientPorts) > 0 {
		add(func() error { return t.Bridge(h.SwitchNS, t.IfName("brc"), clientPorts...) })
	}
	add(func() error { return t.Bridge(h.SwitchNS, t.IfName("brs"), serverPorts...) },
		func() error { return t.Bridge(h.SwitchNS, t.IfName("brm"), mgmtPorts...) })
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return h, nil
}
