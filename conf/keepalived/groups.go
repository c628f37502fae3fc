package keepalived

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// The groups of keepalived.conf's top level that virtual servers name:
// virtual_server_group (keepalived's), and DPVS's address groups:
// local_address_group (FullNAT's local addresses, also LVS FullNAT's),
// deny_address_group and allow_address_group (the blocklist and the
// allowlist). keepalived looks a name up once the whole file is read, so
// a group may follow the virtual servers that use it.

// Origin is where a service comes from: its virtual_server and, for a
// virtual_server group, the group's entry it was made for.
type Origin struct {
	Pos   Pos
	Group string // the virtual_server_group's name, "" for virtual_server VIP PORT
	Entry string // the group's entry: one address (of a range) and the port
}

func (o Origin) String() string {
	if o.Group == "" {
		return "virtual_server at " + o.Pos.String()
	}
	return fmt.Sprintf("virtual_server group %s at %s, entry %s", o.Group, o.Pos, o.Entry)
}

// vsEntry is one address and port of a virtual_server_group.
type vsEntry struct {
	vip   netip.Addr
	port  int
	entry string
}

// addrGroup is one of DPVS's address groups.
type addrGroup struct {
	n     *Node
	addrs []netip.Addr
}

// addrGroupOf is the address group each of a virtual server's keywords
// names.
var addrGroupOf = map[string]string{
	"laddr_group_name": "local_address_group",
	"daddr_group_name": "deny_address_group",
	"waddr_group_name": "allow_address_group",
}

// groups reads every group of the top level, before the virtual servers.
func (c *converter) groups(nodes []*Node) {
	c.vsGroups = map[string][]vsEntry{}
	c.addrGroups = map[string]*addrGroup{}
	seen := map[string]*Node{}
	for _, n := range nodes {
		kw := n.Keyword()
		if !isGroup(kw) {
			continue
		}
		a := n.Args()
		if len(a) != 1 {
			c.warn(n, "%q is not a group name: dropped", strings.Join(a, " "))
			continue
		}
		key := kw + " " + a[0]
		if first, ok := seen[key]; ok {
			// keepalived finds the first of the name.
			c.warn(n, "%s %s is already at line %d, which keepalived uses: dropped", kw, a[0], first.Pos.Line)
			continue
		}
		seen[key] = n
		if kw == "virtual_server_group" {
			c.vsGroups[a[0]] = c.vsGroup(n)
		} else {
			c.addrGroups[key] = c.addrGroup(n)
		}
	}
}

func isGroup(kw string) bool {
	switch kw {
	case "virtual_server_group", "local_address_group", "deny_address_group", "allow_address_group":
		return true
	}
	return false
}

// vsGroup reads a virtual_server_group's entries: IP PORT, an IPv4 range
// A.B.C.D-E PORT (an IPv6 one on the last group, in hex), fwmark N.
func (c *converter) vsGroup(n *Node) []vsEntry {
	var out []vsEntry
	for _, e := range n.Block {
		w := e.Words
		switch {
		case w[0] == "fwmark":
			c.warn(e, "lbd has no fwmark services (they balance by address and port): entry skipped")
			continue
		case e.HasBlock || len(w) > 2:
			c.warn(e, "%q is not an address and a port: entry skipped", strings.Join(w, " "))
			continue
		}
		addrs, ok := c.addrRange(e, w[0])
		if !ok {
			continue
		}
		port, ok := 0, true // no port, or 0: every port (a port-zero service)
		if len(w) == 2 && !isZeros(w[1]) {
			port, ok = parsePort(w[1])
		}
		if !ok {
			c.warn(e, "%q is not a port in 1..65535: entry skipped", w[1])
			continue
		}
		if len(out) > 0 && out[0].vip.Is4() != addrs[0].Is4() {
			c.warn(e, "keepalived mixes no IPv4 and IPv6 in a group: entry skipped")
			continue
		}
		for _, a := range addrs {
			out = append(out, vsEntry{vip: a, port: port, entry: a.String() + " " + strconv.Itoa(port)})
		}
	}
	return out
}

// addrGroup reads an address group's entries: IP or a range, after which
// a local_address_group's name the interface (DPVS's dpdk0), which lbd
// does not need: it places a local address on the server-facing port
// whose subnet holds it.
func (c *converter) addrGroup(n *Node) *addrGroup {
	g := &addrGroup{n: n}
	for _, e := range n.Block {
		w := e.Words
		switch {
		case w[0] == "zone" || e.HasBlock:
			c.warn(e, "LVS FullNAT's zones have no lbd equivalent (a service's local addresses are its own): ignored")
			continue
		case strings.HasPrefix(w[0], "ipset:"):
			c.warn(e, "lbd reads no ipsets: dropped")
			continue
		case len(w) > 1 && n.Keyword() != "local_address_group":
			c.warn(e, "%q is not an address or a range: dropped", strings.Join(w, " "))
			continue
		}
		addrs, ok := c.addrRange(e, w[0])
		if !ok {
			continue
		}
		for _, a := range addrs {
			if !slices.Contains(g.addrs, a) {
				g.addrs = append(g.addrs, a)
			}
		}
	}
	return g
}

// addrRange reads an address or keepalived's range of them: A.B.C.D-E
// ends at E in the last octet, an IPv6 address's range at a last group in
// hex.
func (c *converter) addrRange(e *Node, s string) ([]netip.Addr, bool) {
	first, last, isRange := strings.Cut(s, "-")
	a, err := netip.ParseAddr(first)
	if err != nil || a.Zone() != "" {
		c.warn(e, "%q is not an IP address: skipped", first)
		return nil, false
	}
	a = a.Unmap()
	if !isRange {
		return []netip.Addr{a}, true
	}
	b := a.AsSlice()
	var start, end uint64
	if a.Is4() {
		start = uint64(b[3])
		end, err = strconv.ParseUint(last, 10, 8)
	} else {
		start = uint64(b[14])<<8 | uint64(b[15])
		end, err = strconv.ParseUint(last, 16, 16)
	}
	if err != nil || end <= start {
		form := "A.B.C.D-E, E above D"
		if a.Is6() {
			form = "the last group's end, in hex, above its start"
		}
		c.warn(e, "%q is not a range of addresses (%s): skipped", s, form)
		return nil, false
	}
	out := make([]netip.Addr, 0, end-start+1)
	for v := start; v <= end; v++ {
		if a.Is4() {
			b[3] = byte(v)
		} else {
			b[14], b[15] = byte(v>>8), byte(v)
		}
		x, _ := netip.AddrFromSlice(b)
		out = append(out, x)
	}
	return out, true
}
