package ctl

import (
	"fmt"
	"math/bits"
	"net/netip"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// snatServices are the configuration's SNAT rules (conf.SNAT) as the
// lcores hold them (lcore/snat.go): a service per rule and protocol,
// keyed by the rule's source network and port 0, whose one server
// (address 0) stands for each packet's destination, with the rule's
// addresses as local addresses. No listing shows them as services: the
// listing has a line per rule (snatViews), lbctl -c their connections
// (from the SNAT address). Their ids are marked used, so they never
// drain.
func (c *Controller) snatServices(ids *destIDs, used map[destKey]bool, workers int) ([]lcore.Service, error) {
	var out []lcore.Service
	for i, r := range c.cfg.SNAT {
		src, err := netip.ParsePrefix(r.Source)
		if err != nil { // conf.Validate checked it
			return nil, fmt.Errorf("snat[%d].source: %w", i, err)
		}
		var addrs []uint32
		for _, a := range r.Addresses {
			addrs = append(addrs, ipv4(netip.MustParseAddr(a)))
		}
		rule := &lcore.SNATRule{Net: ipv4(src.Addr()), Mask: ^uint32(0) << (32 - src.Bits())}
		for _, p := range r.SNATProtocols() {
			key := lcore.ServiceKey{VIP: rule.Net, Proto: snatProtocols[p]}
			k := destKey{svc: key}
			id, err := ids.get(k)
			if err != nil {
				return nil, fmt.Errorf("snat[%d]: %w", i, err)
			}
			used[k] = true
			dests := []sched.Dest{{ID: id, Weight: 1, Fwd: fwd.FullNAT}}
			s := lcore.Service{Key: key, Scheduler: "rr", Dests: dests, LocalAddrs: addrs, SNAT: rule}
			for range max(workers, 1) { // never asked: the lcores take the one server
				sc, err := sched.New("rr", dests, sched.Options{})
				if err != nil {
					return nil, err
				}
				s.Scheds = append(s.Scheds, sc)
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// snatProtocols are the protocols a SNAT rule may name: the services'
// two and ICMP (the servers' pings, lcore/snat.go).
var snatProtocols = map[string]uint8{"tcp": hdr.ProtoTCP, "udp": hdr.ProtoUDP, "icmp": hdr.ProtoICMP}

// snatProtocolName is the configuration's name of a SNAT rule's protocol.
func snatProtocolName(proto uint8) string {
	for name, p := range snatProtocols {
		if p == proto {
			return name
		}
	}
	return fmt.Sprint(proto)
}

// snatRuleStats is a SNAT rule's counters for one protocol.
type snatRuleStats struct {
	proto     string
	source    netip.Prefix
	addresses []netip.Addr
	stats     lcore.DestStats
}

// snatStats reads the SNAT rules' counters (their one server's, summed
// over the lcores), in the snapshot's order.
func (c *Controller) snatStats() []snatRuleStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snatStatsLocked()
}

// snatStatsLocked is snatStats for a caller that holds mu.
func (c *Controller) snatStatsLocked() []snatRuleStats {
	var out []snatRuleStats
	for _, s := range c.snap.Services {
		if s.SNAT == nil {
			continue
		}
		r := snatRuleStats{proto: snatProtocolName(s.Key.Proto), stats: c.dp.DestStats(s.Dests[0].ID),
			source: netip.PrefixFrom(addrOf(s.SNAT.Net), bits.OnesCount32(s.SNAT.Mask))}
		for _, a := range s.LocalAddrs {
			r.addresses = append(r.addresses, addrOf(a))
		}
		out = append(out, r)
	}
	return out
}

// snatViews are the SNAT rules as the listing shows them.
func snatViews(rules []snatRuleStats) []SNATView {
	var out []SNATView
	for _, r := range rules {
		out = append(out, SNATView{Protocol: r.proto, Source: r.source, Addresses: r.addresses,
			Active: r.stats[lcore.DestActive], Inactive: r.stats[lcore.DestInactive], Stats: countersOf(r.stats)})
	}
	return out
}
