package ctl

import (
	"net/netip"
	"slices"

	"go.uber.org/zap"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Removed services. The workers find a packet's connection before they
// look for its service, so a service removed by a reload or lbctl -D
// goes on forwarding its established connections. But a VIP belongs to
// its services: once the last one on it was gone the snapshot would no
// longer answer ARP or neighbour solicitations for it, BGP would withdraw
// it, and the connections would break the next time the router asked for
// the VIP (in IPVS and DPVS the VIP is an address of its own that
// outlives the service). And a connection record for a service not
// configured here (a peer master that has it, an lbd before this one
// whose file still had it) was refused.
//
// So a service's servers drain when it is removed, as a removed server
// does, and while any does the snapshot keeps the service as Removed
// (withDraining): unindexed for new connections (dropped as no_service),
// its VIP still a VIP, its draining servers there for the records to
// name. Records naming a service not configured here adopt it the same
// way (adopt.go), when its VIP could be configured here. Once no
// connection counts on its servers' ids they are reclaimed and the
// service goes with them.

// adoptableService reports whether a peer's records may make k a Removed
// service here: TCP or UDP, and a VIP this node could configure (not its
// own, a gateway's, a floating or local address, a real server's; a
// unicast address). The caller holds mu.
func (c *Controller) adoptableService(k lcore.ServiceKey) bool {
	if k.Proto != hdr.ProtoTCP && k.Proto != hdr.ProtoUDP || k.Port == 0 {
		return false
	}
	vip := addrOfKey(k.VIP, k.VIP6)
	if !vip.IsGlobalUnicast() { // private ones are, link-local and multicast not
		return false
	}
	if k.IsIPv6() && !slices.ContainsFunc(c.ports, func(p lcore.PortInfo) bool { return p.FacesClients && !p.Addr6.IsUnspecified() }) {
		return false // no link to answer an IPv6 VIP on
	}
	for _, p := range c.ports {
		if k.IsIPv6() && (p.Addr6 == k.VIP6 || p.Gateway6 == k.VIP6 || slices.Contains(p.Floating6, k.VIP6)) ||
			!k.IsIPv6() && (p.Addr == k.VIP || p.Gateway == k.VIP || slices.Contains(p.Floating, k.VIP)) {
			return false
		}
	}
	for i := range c.services {
		s := &c.services[i]
		if slices.Contains(s.conf.LocalAddresses, vip.String()) {
			return false
		}
		for _, r := range s.servers {
			if r.key.addr == k.VIP && r.key.addr6 == k.VIP6 {
				return false
			}
		}
	}
	return true
}

// drainingVIPs are the VIPs of snap's Removed services that none of its
// configured services has, in order: kept only while connections to them
// drain.
func drainingVIPs(snap *lcore.Snapshot) []netip.Addr {
	if snap == nil {
		return nil
	}
	configured := map[netip.Addr]bool{}
	var out []netip.Addr
	for i := range snap.Services {
		s := &snap.Services[i]
		vip := addrOfKey(s.Key.VIP, s.Key.VIP6)
		if !s.Removed {
			configured[vip] = true
		} else if !slices.Contains(out, vip) {
			out = append(out, vip)
		}
	}
	out = slices.DeleteFunc(out, func(a netip.Addr) bool { return configured[a] })
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// logVIPDrains names the VIPs that start and end draining when next
// replaces the running snapshot.
func (c *Controller) logVIPDrains(next *lcore.Snapshot) {
	before, after := drainingVIPs(c.snap), drainingVIPs(next)
	for _, a := range after {
		if !slices.Contains(before, a) {
			c.log.Info("VIP draining: no service here has it any more; kept until its connections end", zap.Stringer("vip", a))
		}
	}
	for _, a := range before {
		if !slices.Contains(after, a) {
			c.log.Info("VIP drained: no connection to it any more, no longer answered", zap.Stringer("vip", a))
		}
	}
}
