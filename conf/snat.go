package conf

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// validateSNAT checks the SNAT rules: each source a prefix that overlaps
// no other rule's, each address an IPv4 address on a client-facing
// port's subnet (where the answers come back) that is no other address
// of lbd's, the protocols of tcp, udp and icmp, each once.
func (c *Config) validateSNAT() error {
	seen := c.portAddresses()
	for i, s := range c.Services {
		if a, err := netip.ParseAddr(s.VIP); err == nil {
			seen[a] = fmt.Sprintf("services[%d].vip", i)
		}
		for j, l := range s.LocalAddresses {
			if a, err := netip.ParseAddr(l); err == nil {
				seen[a] = fmt.Sprintf("services[%d].local_addresses[%d]", i, j)
			}
		}
	}
	var sources []netip.Prefix
	for i, r := range c.SNAT {
		field := fmt.Sprintf("snat[%d]", i)
		src, err := netip.ParsePrefix(r.Source)
		if err != nil || !src.Addr().Is4() {
			return fieldErrorf(field+".source", "%q is not an IPv4 prefix (e.g. 198.51.100.0/24)", r.Source)
		}
		if src != src.Masked() {
			return fieldErrorf(field+".source", "%s has host bits set: %s", src, src.Masked())
		}
		for j, o := range sources {
			if o.Overlaps(src) {
				return fieldErrorf(field+".source", "%s overlaps snat[%d].source %s", src, j, o)
			}
		}
		sources = append(sources, src)
		if len(r.Addresses) == 0 {
			return fieldErrorf(field+".addresses", "is empty: name the address(es) the servers' connections leave from")
		}
		for j, s := range r.Addresses {
			f := fmt.Sprintf("%s.addresses[%d]", field, j)
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is4() || !a.IsGlobalUnicast() {
				return fieldErrorf(f, "%q is not a unicast IPv4 address", s)
			}
			var subnets []string
			inside := false
			for _, p := range c.Ports {
				if !p.FacesClients() {
					continue
				}
				pfx := p.Prefix()
				subnets = append(subnets, pfx.Masked().String())
				if pfx.Contains(a) && !(pfx.Bits() <= 30 && (a == pfx.Masked().Addr() || a == lastAddr(pfx))) {
					inside = true
				}
			}
			if !inside {
				return fieldErrorf(f, "%s is not a host address of any client-facing port's subnet (%s): the answers must reach lbd there", a, strings.Join(subnets, ", "))
			}
			if other, ok := seen[a]; ok {
				return fieldErrorf(f, "%s is already %s", a, other)
			}
			seen[a] = f
		}
		for j, proto := range r.Protocols {
			f := fmt.Sprintf("%s.protocols[%d]", field, j)
			if err := checkOneOf(f, proto, "tcp", "udp", "icmp"); err != nil {
				return err
			}
			if slices.Contains(r.Protocols[:j], proto) {
				return fieldErrorf(f, "%q is listed twice", proto)
			}
		}
	}
	return nil
}
