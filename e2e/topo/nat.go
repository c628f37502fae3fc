package topo

import (
	"fmt"
	"net/netip"
)

// Addresses of the VS/NAT topology (RFC 5737).
var (
	NATClientAddr = netip.MustParsePrefix("192.0.2.2/24")    // the client
	NATWANAddr    = netip.MustParsePrefix("192.0.2.1/24")    // lbd's client-facing port
	NATVIP        = netip.MustParseAddr("192.0.2.100")       // the virtual IP, on the client subnet
	NATLANAddr    = netip.MustParsePrefix("198.51.100.1/24") // lbd's server-facing port
	natFirstRS    = netip.MustParseAddr("198.51.100.11")     // rs1; rs2 is .12, ...
	natRSBits     = NATLANAddr.Bits()                        // prefix length of the servers
)

// Host is one namespace with one interface facing the topology.
type Host struct {
	Name string       // logical name: "client", "rs1", ...
	NS   string       // namespace
	If   string       // its interface
	Addr netip.Prefix // its address
}

// NAT is the VS/NAT topology:
//
//	client ns [Client.If] --veth-- [WANIf] LB ns [LANIf] --veth-- [SwitchLANIf] bridge in switch ns
//	                                                     bridge --veth-- [If] rs1 ns, rs2 ns, ...
//
// The LB namespace's interfaces are up with no address: lbd owns them
// through af_packet. Every veth end has offloads and IPv6 turned off.
type NAT struct {
	Client   Host
	LBNS     string
	WANIf    string // lbd's client-facing port, in LBNS
	LANIf    string // lbd's server-facing port, in LBNS
	WANAddr  netip.Prefix
	LANAddr  netip.Prefix
	VIP      netip.Addr
	SwitchNS string
	Bridge   string
	Servers  []Host // rs1, rs2, ... at 198.51.100.11, .12, ...
}

// BuildNAT builds the VS/NAT topology with n real servers (1..9).
// On error the caller still owns t and must call Teardown.
func BuildNAT(t *Topo, n int) (*NAT, error) {
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("topo: BuildNAT: %d real servers, want 1..9", n)
	}
	nat := &NAT{WANAddr: NATWANAddr, LANAddr: NATLANAddr, VIP: NATVIP}
	var err error
	mk := func(base string) string {
		if err != nil {
			return ""
		}
		var ns string
		ns, err = t.AddNS(base)
		return ns
	}
	nat.Client = Host{Name: "client", NS: mk("cli"), If: t.IfName("cli"), Addr: NATClientAddr}
	nat.LBNS = mk("lb")
	nat.SwitchNS = mk("sw")
	rs := netip.PrefixFrom(natFirstRS, natRSBits)
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("rs%d", i)
		nat.Servers = append(nat.Servers, Host{Name: name, NS: mk(name), If: t.IfName(name), Addr: rs})
		rs = netip.PrefixFrom(rs.Addr().Next(), natRSBits)
	}
	if err != nil {
		return nil, err
	}
	nat.WANIf = t.IfName("wan")
	nat.LANIf = t.IfName("lan")
	nat.Bridge = t.IfName("br")
	swLAN := t.IfName("swl")

	steps := []func() error{
		// client <-> LB
		func() error { return t.Veth(nat.Client.NS, nat.Client.If, nat.LBNS, nat.WANIf) },
		func() error { return t.ForAFPacket(nat.Client.NS, nat.Client.If) },
		func() error { return t.ForAFPacket(nat.LBNS, nat.WANIf) },
		func() error { return t.Addr(nat.Client.NS, nat.Client.If, nat.Client.Addr.String()) },
		func() error { return t.Up(nat.Client.NS, nat.Client.If) },
		func() error { return t.Up(nat.LBNS, nat.WANIf) },
		func() error { return t.Route(nat.Client.NS, "default via "+nat.WANAddr.Addr().String()) },
		// LB <-> switch
		func() error { return t.Veth(nat.LBNS, nat.LANIf, nat.SwitchNS, swLAN) },
		func() error { return t.ForAFPacket(nat.LBNS, nat.LANIf) },
		func() error { return t.ForAFPacket(nat.SwitchNS, swLAN) },
		func() error { return t.Up(nat.LBNS, nat.LANIf) },
	}
	ports := []string{swLAN}
	for i, h := range nat.Servers {
		swPort := t.IfName(fmt.Sprintf("sw%d", i+1))
		ports = append(ports, swPort)
		steps = append(steps,
			func() error { return t.Veth(h.NS, h.If, nat.SwitchNS, swPort) },
			func() error { return t.ForAFPacket(h.NS, h.If) },
			func() error { return t.ForAFPacket(nat.SwitchNS, swPort) },
			func() error { return t.Addr(h.NS, h.If, h.Addr.String()) },
			func() error { return t.Up(h.NS, h.If) },
			func() error { return t.Route(h.NS, "default via "+nat.LANAddr.Addr().String()) },
		)
	}
	steps = append(steps, func() error { return t.Bridge(nat.SwitchNS, nat.Bridge, ports...) })
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return nat, nil
}
