package conf

import (
	"fmt"
	"net/netip"
	"strings"
)

// Client lists: a service's blocklist and allowlist (DPVS's blklst and
// whtlst), each entry an address or a prefix in the VIP's family.

// MaxClientList bounds the entries of one blocklist or allowlist: lbd
// checks a new connection's client against each distinct prefix length
// in a list (one map lookup each), and the list travels in every
// snapshot of the services.
const MaxClientList = 65536

// ParseClientPrefix reads a client list entry: an address (a host
// prefix) or a prefix with no bits set past its length. The error says
// what is wrong with the entry, not where it is.
func ParseClientPrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a prefix (e.g. 192.0.2.7, 198.51.100.0/24, 2001:db8::/48)", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a prefix (e.g. 198.51.100.0/24, 2001:db8::/48)", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q: write an IPv4 prefix as IPv4", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has bits set past its length (did you mean %s?)", s, m)
	}
	return p, nil
}

// ClientPrefixes are a valid client list's entries as prefixes.
func ClientPrefixes(list []string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if p, err := ParseClientPrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// checkClientList checks the list at field f of a service whose VIP is vip.
func checkClientList(f string, list []string, vip netip.Addr) error {
	if len(list) > MaxClientList {
		return fieldErrorf(f, "%d entries: at most %d", len(list), MaxClientList)
	}
	seen := make(map[netip.Prefix]int, len(list))
	for i, s := range list {
		g := fmt.Sprintf("%s[%d]", f, i)
		p, err := ParseClientPrefix(s)
		if err != nil {
			return fieldErrorf(g, "%v", err)
		}
		if p.Addr().Is4() != vip.Is4() {
			return fieldErrorf(g, "%s is not in the VIP's family (%s)", p, vip)
		}
		if j, ok := seen[p]; ok {
			return fieldErrorf(g, "%s is already %s[%d]", p, f, j)
		}
		seen[p] = i
	}
	return nil
}
