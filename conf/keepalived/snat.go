package keepalived

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strings"

	"github.com/dplb/dplb/conf"
)

// DPVS's SNAT match services (virtual_server match NAME { lb_kind SNAT;
// src-range A-B; real_server ADDRESS 0 ... }): the servers' own
// connections out through the director, from the real servers' addresses
// (the director's outside ones). They become lbd's snat rules: the
// source a prefix (src-range's smallest, with a warning when it covers
// more), the real servers the addresses, each protocol of one source and
// addresses one rule's. dst-range, iif and oif have no lbd equivalent:
// the rule leaves from the port whose subnet holds its addresses.

// snatMatch converts one match service n into a SNAT rule, merged into
// c.res.SNAT with the rule of the same source and addresses.
func (c *converter) snatMatch(n *Node) {
	proto, kind := "tcp", ""
	var src netip.Prefix
	var addrs []string
	for _, s := range n.Block {
		a := s.Args()
		switch s.Keyword() {
		case "protocol":
			p := ""
			if len(a) == 1 {
				p = strings.ToLower(a[0])
			}
			if p != "tcp" && p != "udp" && p != "icmp" {
				c.warn(s, "%q: lbd's SNAT rules take TCP, UDP and ICMP: match skipped", strings.Join(a, " "))
				return
			}
			proto = p
		case "lb_kind", "lvs_method":
			if len(a) == 1 {
				kind = strings.ToUpper(a[0])
			}
		case "src-range":
			p, ok := c.srcRange(s)
			if !ok {
				return
			}
			src = p
		case "dst-range", "iif", "oif":
			c.warn(s, "lbd's SNAT rules match the source alone and leave from the port whose subnet holds their addresses: dropped")
		case "real_server":
			ip, err := netip.ParseAddr(firstArg(a))
			if err != nil || !ip.Is4() {
				c.warn(s, "%q is not an IPv4 address (lbd's SNAT rules are IPv4): skipped", firstArg(a))
				continue
			}
			if !slices.Contains(addrs, ip.String()) {
				addrs = append(addrs, ip.String())
			}
		case "lb_algo":
			// lbd takes the addresses in turn.
		default:
			c.warn(s, "no lbd equivalent in a SNAT rule: dropped")
		}
	}
	switch {
	case kind != "SNAT":
		c.warn(n, "a match service whose lb_kind is not SNAT: lbd has no such service: skipped")
		return
	case !src.IsValid():
		c.warn(n, "no src-range: lbd's SNAT rules name the servers' network: skipped")
		return
	case len(addrs) == 0:
		c.warn(n, "no real_server (the address the servers' connections leave from): skipped")
		return
	}
	for i := range c.res.SNAT {
		r := &c.res.SNAT[i]
		other, _ := netip.ParsePrefix(r.Source)
		switch {
		case other == src && slices.Equal(r.Addresses, addrs):
			if !slices.Contains(r.Protocols, proto) {
				r.Protocols = append(r.Protocols, proto)
			}
			return
		case other.Overlaps(src):
			c.warn(n, "its source %s overlaps %s's and is not the same (lbd's rules' sources never overlap): skipped", src, r.Source)
			return
		}
		for _, a := range addrs {
			if slices.Contains(r.Addresses, a) {
				c.warn(n, "%s is already the address of the rule for %s (a rule's addresses are its own): skipped", a, r.Source)
				return
			}
		}
	}
	c.res.SNAT = append(c.res.SNAT, conf.SNAT{Source: src.String(), Addresses: addrs, Protocols: []string{proto}})
}

// srcRange reads a src-range (A-B, or A alone, maybe with :ports) as the
// smallest prefix that holds it; ok false, warned, when it is not one.
func (c *converter) srcRange(s *Node) (netip.Prefix, bool) {
	arg := firstArg(s.Args())
	r, ports, hasPorts := strings.Cut(arg, ":")
	if hasPorts && ports != "0-0" && ports != "0-65535" {
		c.warn(s, "port range %s dropped: lbd's SNAT rules take every source port", ports)
	}
	from, to, isRange := strings.Cut(r, "-")
	if !isRange {
		to = from
	}
	a, err1 := netip.ParseAddr(from)
	b, err2 := netip.ParseAddr(to)
	if err1 != nil || err2 != nil || !a.Is4() || !b.Is4() || b.Less(a) {
		c.warn(s, "%q is not an IPv4 range (lbd's SNAT rules are IPv4): match skipped", arg)
		return netip.Prefix{}, false
	}
	a4, b4 := a.As4(), b.As4()
	lo, hi := binary.BigEndian.Uint32(a4[:]), binary.BigEndian.Uint32(b4[:])
	n := 32 - bits.Len32(lo^hi) // the bits lo and hi share
	p := netip.PrefixFrom(a, n).Masked()
	if first, last := lo&^(1<<(32-n)-1), lo|(1<<(32-n)-1); first != lo || last != hi {
		c.warn(s, "%s is not a network: lbd's rule takes %s, %d address(es) more", r, p, (last-first+1)-(hi-lo+1))
	}
	return p, true
}

// snatYAML writes the rules as lbd.yaml's snat section.
func snatYAML(rules []conf.SNAT) string {
	var b strings.Builder
	b.WriteString("# the servers' own connections out (DPVS's SNAT match services): each\n")
	b.WriteString("# address must be on a client-facing port's subnet\n")
	b.WriteString("snat:\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "  - source: %s\n    addresses: %s\n    protocols: %s\n", r.Source, flow(r.Addresses), flow(r.Protocols))
	}
	return b.String()
}
