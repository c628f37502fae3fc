package ctl

import (
	"fmt"
	"net/netip"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// maxListedConns bounds one connection listing (lbctl -c), so an answer
// stays a few megabytes whatever the table holds.
const maxListedConns = 20000

// connections lists the lcores' connections (ipvsadm -L -c), filtered by
// service and client.
func (c *Controller) connections(req api.Request) (api.Response, error) {
	var f lcore.ConnFilter
	if s := req.Service; s != nil {
		vip, err := netip.ParseAddr(s.VIP)
		if err != nil {
			return api.Response{}, fmt.Errorf("-t/-u %s: not an IP address", s.VIP)
		}
		f.VIP, f.VIP6, f.VPort, f.Proto = ipv4(vip), ipv6(vip), uint16(s.Port), protocols[s.Protocol]
	}
	if req.Client != "" {
		a, err := netip.ParseAddr(req.Client)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			return api.Response{}, fmt.Errorf("--client %s: not an IPv4 or IPv6 address without a zone", req.Client)
		}
		f.Client, f.Client6 = ipv4(a), ipv6(a)
	}
	conns, truncated, err := c.dp.DumpConns(f, maxListedConns)
	if err != nil {
		return api.Response{}, err
	}
	resp := api.Response{ConnsTruncated: truncated}
	for _, ci := range conns {
		state := ci.State.String()
		if ci.Template {
			state = "NONE"
		}
		exp := ci.Expires / 1e9
		if exp < 0 {
			exp = 0
		}
		proto := "TCP"
		switch ci.Proto {
		case hdr.ProtoUDP:
			proto = "UDP"
		case hdr.ProtoICMP: // a server's ping through a SNAT rule: the identifiers are the ports
			proto, state = "ICMP", "ICMP"
		}
		c := api.Conn{
			Protocol: proto, State: state, Template: ci.Template, ExpiresSecs: uint64(exp),
			Client:      netip.AddrPortFrom(addrOfKey(ci.ClientIP, ci.Client6), ci.ClientPort).String(),
			Virtual:     netip.AddrPortFrom(addrOfKey(ci.VIP, ci.VIP6), ci.VPort).String(),
			Destination: netip.AddrPortFrom(addrOfKey(ci.RIP, ci.RIP6), ci.RPort).String(),
		}
		if ci.IPv6 && ci.Template && ci.Client6.IsUnspecified() {
			c.Client = netip.AddrPortFrom(netip.IPv6Unspecified(), 0).String() // a fold: the network is not known
		}
		switch {
		case !ci.LIP6.IsUnspecified(): // FNAT66
			c.Local = netip.AddrPortFrom(ci.LIP6.Netip(), ci.LPort).String()
		case ci.LIP != 0:
			c.Local = netip.AddrPortFrom(addrOf(ci.LIP), ci.LPort).String()
		}
		resp.Conns = append(resp.Conns, c)
	}
	return resp, nil
}
