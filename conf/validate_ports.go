package conf

import (
	"fmt"
	"net/netip"
	"strings"
)

// Validation of the ports: addresses, devices, subnets and gateways.

// usable reports whether a is an IPv4 address a host can have.
func usable(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// parseHost parses a required IPv4 host address.
func parseHost(field, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fieldErrorf(field, "must not be empty")
	}
	a, err := netip.ParseAddr(s)
	if err == nil && a.Is6() && !a.Is4In6() {
		return netip.Addr{}, fieldErrorf(field, "%s is IPv6: this field takes IPv4 only (IPv6 goes in a service's vip and servers, a port's address6)", s)
	}
	if err != nil || !a.Is4() {
		return netip.Addr{}, fieldErrorf(field, "%q is not an IPv4 address", s)
	}
	if !usable(a) {
		return netip.Addr{}, fieldErrorf(field, "%s is not a unicast host address", a)
	}
	return a, nil
}

// parseHost46 parses a required IPv4 host address or an IPv6 global or
// unique local unicast address (a service's VIP, a real server).
func parseHost46(field, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Is4In6() {
		return parseHost(field, s)
	}
	switch {
	case a.Zone() != "":
		return netip.Addr{}, fieldErrorf(field, "%q has a zone", s)
	case !a.IsGlobalUnicast() && !a.IsPrivate():
		return netip.Addr{}, fieldErrorf(field, "%s is not a global or unique local unicast IPv6 address", a)
	}
	return a, nil
}

// deviceKey is the identity of a device for the uniqueness check: the
// device name, with PCI addresses in their long lower-case form.
func deviceKey(p Port) string {
	name := p.DeviceName()
	if p.IsPCI() {
		name = strings.ToLower(name)
		if strings.Count(name, ":") == 1 {
			name = "0000:" + name
		}
	}
	return name
}

func (p Port) validate(f string) error {
	if p.Name == "" {
		return fieldErrorf(f+".name", "must not be empty")
	}
	if !portNameRE.MatchString(p.Name) {
		return fieldErrorf(f+".name", "%q is not 1 to 15 characters of a-z 0-9 _ -", p.Name)
	}
	if p.KNI != "" && (!kniNameRE.MatchString(p.KNI) || p.KNI == "." || p.KNI == "..") {
		return fieldErrorf(f+".kni", "%q is not an interface name: 1 to 15 characters of A-Z a-z 0-9 _ . -", p.KNI)
	}
	if p.Device == "" {
		return fieldErrorf(f+".device", "must not be empty")
	}
	if !p.IsPCI() && (!vdevNameRE.MatchString(p.DeviceName()) || strings.ContainsAny(p.Device, " \t\r\n")) {
		return fieldErrorf(f+".device", "%q is neither a PCI address (0000:03:00.0) nor a DPDK vdev string (net_af_packet0,iface=veth0)", p.Device)
	}
	if p.Address == "" {
		return fieldErrorf(f+".address", "must not be empty")
	}
	pfx, err := netip.ParsePrefix(p.Address)
	if err != nil {
		return fieldErrorf(f+".address", "%q is not an address with prefix length (want e.g. 198.51.100.1/24)", p.Address)
	}
	a := pfx.Addr()
	if !a.Is4() {
		return fieldErrorf(f+".address", "%q is not IPv4", p.Address)
	}
	if !usable(a) {
		return fieldErrorf(f+".address", "%s is not a unicast host address", a)
	}
	if pfx.Bits() == 0 {
		return fieldErrorf(f+".address", "prefix length /0 is not allowed, want 1..32")
	}
	if pfx.Bits() <= 30 {
		network := pfx.Masked().Addr()
		bcast := lastAddr(pfx)
		if a == network {
			return fieldErrorf(f+".address", "%s is the network address of %s", a, pfx.Masked())
		}
		if a == bcast {
			return fieldErrorf(f+".address", "%s is the broadcast address of %s", a, pfx.Masked())
		}
	}
	if err := p.validateAddress6(f); err != nil {
		return err
	}
	if err := p.validateGateway6(f); err != nil {
		return err
	}
	if p.Gateway != "" {
		gw, err := parseHost(f+".gateway", p.Gateway)
		if err != nil {
			return err
		}
		if !pfx.Contains(gw) {
			return fieldErrorf(f+".gateway", "%s is not inside %s", gw, pfx.Masked())
		}
		if gw == a {
			return fieldErrorf(f+".gateway", "%s is the port's own address", gw)
		}
	}
	for j, r := range p.Routes {
		if err := p.validateRoute(fmt.Sprintf("%s.routes[%d]", f, j), r); err != nil {
			return err
		}
	}
	if err := checkOneOf(f+".role", p.Role, RoleClient, RoleServer, RoleBoth); err != nil {
		return err
	}
	if p.MTU != 0 && (p.MTU < 68 || p.MTU > 9702) {
		return fieldErrorf(f+".mtu", "%d is out of range 68..9702 (or 0 to keep the device's MTU)", p.MTU)
	}
	return nil
}

// validateAddress6: an optional global unicast IPv6 address with a prefix
// length of at most 127 (the prefix is the port's on-link IPv6 subnet).
func (p Port) validateAddress6(f string) error {
	if p.Address6 == "" {
		return nil
	}
	pfx, err := netip.ParsePrefix(p.Address6)
	if err != nil {
		return fieldErrorf(f+".address6", "%q is not an address with prefix length (want e.g. 2001:db8::1/64)", p.Address6)
	}
	a := pfx.Addr()
	switch {
	case !a.Is6() || a.Is4In6():
		return fieldErrorf(f+".address6", "%q is not IPv6 (the IPv4 address goes in address)", p.Address6)
	case a.Zone() != "":
		return fieldErrorf(f+".address6", "%q has a zone", p.Address6)
	case !a.IsGlobalUnicast() && !a.IsPrivate():
		return fieldErrorf(f+".address6", "%s is not a global or unique local unicast address", a)
	case pfx.Bits() == 0 || pfx.Bits() == 128:
		return fieldErrorf(f+".address6", "prefix length /%d is not allowed, want 1..127", pfx.Bits())
	}
	return nil
}

// validateGateway6: an optional IPv6 next hop inside the port's IPv6
// prefix, not the port's own address.
func (p Port) validateGateway6(f string) error {
	if p.Gateway6 == "" {
		return nil
	}
	pfx, ok := p.Prefix6()
	if !ok {
		return fieldErrorf(f+".gateway6", "needs the port's address6")
	}
	gw, err := netip.ParseAddr(p.Gateway6)
	switch {
	case err != nil || !gw.Is6() || gw.Is4In6() || gw.Zone() != "":
		return fieldErrorf(f+".gateway6", "%q is not an IPv6 address", p.Gateway6)
	case !pfx.Contains(gw):
		return fieldErrorf(f+".gateway6", "%s is not inside the port's IPv6 prefix %s", gw, pfx.Masked())
	case gw == pfx.Addr():
		return fieldErrorf(f+".gateway6", "%s is the port's own address", gw)
	}
	return nil
}

// validateRoute: a network without host bits (not /0) and a next hop of
// its family on the port's subnet of that family, not the port's address.
func (p Port) validateRoute(f string, r Route) error {
	pfx, err := netip.ParsePrefix(r.Prefix)
	switch {
	case err != nil || pfx.Addr().Zone() != "" || pfx.Addr().Is4In6():
		return fieldErrorf(f+".prefix", "%q is not a network with prefix length (want e.g. 10.0.0.0/8)", r.Prefix)
	case pfx != pfx.Masked():
		return fieldErrorf(f+".prefix", "%s has host bits set (the network is %s)", pfx, pfx.Masked())
	case pfx.Bits() == 0:
		return fieldErrorf(f+".prefix", "%s is the default route: set the port's gateway", pfx)
	}
	family := "IPv6"
	if pfx.Addr().Is4() {
		family = "IPv4"
	}
	via, err := netip.ParseAddr(r.Via)
	if err != nil || via.Zone() != "" || via.Is4In6() || via.Is4() != pfx.Addr().Is4() {
		return fieldErrorf(f+".via", "%q is not an %s address, as the prefix is", r.Via, family)
	}
	own := p.Prefix()
	if via.Is6() {
		p6, ok := p.Prefix6()
		if !ok {
			return fieldErrorf(f+".via", "an IPv6 next hop needs the port's address6")
		}
		own = p6
	}
	switch {
	case !own.Contains(via):
		return fieldErrorf(f+".via", "%s is not inside the port's subnet %s", via, own.Masked())
	case via == own.Addr():
		return fieldErrorf(f+".via", "%s is the port's own address", via)
	}
	return nil
}

// lastAddr returns the highest address of an IPv4 prefix.
func lastAddr(pfx netip.Prefix) netip.Addr {
	b := pfx.Masked().Addr().As4()
	host := ^uint32(0) >> pfx.Bits()
	for i := range 4 {
		b[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrFrom4(b)
}

func (c *Config) validatePorts() error {
	if len(c.Ports) == 0 {
		return fieldErrorf("ports", "at least one port is required")
	}
	names := map[string]int{}
	knis := map[string]int{}
	devices := map[string]int{}
	gateway, gateway6 := -1, -1
	clients := false
	for i, p := range c.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		if err := p.validate(f); err != nil {
			return err
		}
		if j, ok := names[p.Name]; ok {
			return fieldErrorf(f+".name", "%q is already used by ports[%d]", p.Name, j)
		}
		names[p.Name] = i
		if p.KNI != "" {
			if j, ok := knis[p.KNI]; ok {
				return fieldErrorf(f+".kni", "%q is already ports[%d]'s kernel interface", p.KNI, j)
			}
			knis[p.KNI] = i
		}
		key := deviceKey(p)
		if j, ok := devices[key]; ok {
			return fieldErrorf(f+".device", "device %q is already used by ports[%d]", key, j)
		}
		devices[key] = i
		for j, q := range c.Ports[:i] {
			if p.Prefix().Masked().Overlaps(q.Prefix().Masked()) {
				return fieldErrorf(f+".address", "%s overlaps ports[%d].address %s", p.Prefix().Masked(), j, q.Prefix().Masked())
			}
			p6, ok := p.Prefix6()
			q6, qok := q.Prefix6()
			if ok && qok && p6.Masked().Overlaps(q6.Masked()) {
				return fieldErrorf(f+".address6", "%s overlaps ports[%d].address6 %s", p6.Masked(), j, q6.Masked())
			}
		}
		if p.Gateway != "" {
			if gateway >= 0 {
				return fieldErrorf(f+".gateway", "only one port may have a gateway, ports[%d] has one", gateway)
			}
			gateway = i
		}
		if p.Gateway6 != "" {
			if gateway6 >= 0 {
				return fieldErrorf(f+".gateway6", "only one port may have an IPv6 gateway, ports[%d] has one", gateway6)
			}
			gateway6 = i
		}
		clients = clients || p.FacesClients()
	}
	if len(c.Services) > 0 && !clients {
		return fieldErrorf("ports", "no port has role client or both, but services need one to receive client traffic")
	}
	for i, p := range c.Ports { // a kernel interface cannot be a port's own
		for j, q := range c.Ports {
			if p.KNI != "" && strings.Contains(","+q.Device+",", ",iface="+p.KNI+",") {
				return fieldErrorf(fmt.Sprintf("ports[%d].kni", i), "%q is the interface ports[%d] (%s) runs on", p.KNI, j, q.Name)
			}
		}
	}
	return c.validateRoutes()
}

// validateRoutes: no route's network overlaps a port's subnet (those are
// on-link) nor repeats another's, and at most MaxRoutes a family.
func (c *Config) validateRoutes() error {
	seen := map[netip.Prefix]string{}
	n4, n6 := 0, 0
	for i, p := range c.Ports {
		for j, r := range p.Routes {
			f := fmt.Sprintf("ports[%d].routes[%d]", i, j)
			pfx, _, _ := r.RouteNet()
			if g, ok := seen[pfx]; ok {
				return fieldErrorf(f+".prefix", "%s is already routed by %s", pfx, g)
			}
			seen[pfx] = f
			for k, q := range c.Ports {
				sub, name := q.Prefix().Masked(), "address"
				if pfx.Addr().Is6() {
					var ok bool
					if sub, ok = q.Prefix6(); !ok {
						continue
					}
					sub, name = sub.Masked(), "address6"
				}
				if pfx.Overlaps(sub) {
					return fieldErrorf(f+".prefix", "%s overlaps ports[%d].%s %s, which is on-link", pfx, k, name, sub)
				}
			}
			if pfx.Addr().Is4() {
				n4++
			} else {
				n6++
			}
			if n4 > MaxRoutes || n6 > MaxRoutes {
				return fieldErrorf(f, "more than %d routes of a family (a packet off-link is matched against each)", MaxRoutes)
			}
		}
	}
	return nil
}

// portWithAddr returns the index of the port whose own address is a, or -1.
func (c *Config) portWithAddr(a netip.Addr) int {
	for i, p := range c.Ports {
		if p.Prefix().Addr() == a {
			return i
		}
		if p6, ok := p.Prefix6(); ok && p6.Addr() == a {
			return i
		}
	}
	return -1
}

func (h HA) validate() error {
	if h.State == "" {
		return nil // a Go literal: master
	}
	return checkOneOf("ha.state", h.State, HAMaster, HABackup)
}

// validateFloating checks the ports' floating addresses, once the ports
// and services are known valid: each in its port's prefix, a host
// address no port, gateway, VIP or other floating entry already is.
func (c *Config) validateFloating() error {
	seen := map[netip.Addr]string{}
	for i, p := range c.Ports {
		pfx := p.Prefix()
		seen[pfx.Addr()] = fmt.Sprintf("ports[%d].address", i)
		if gw, ok := p.GatewayAddr(); ok {
			seen[gw] = fmt.Sprintf("ports[%d].gateway", i)
		}
		if p6, ok := p.Prefix6(); ok {
			seen[p6.Addr()] = fmt.Sprintf("ports[%d].address6", i)
		}
		if gw, ok := p.Gateway6Addr(); ok {
			seen[gw] = fmt.Sprintf("ports[%d].gateway6", i)
		}
	}
	for i, s := range c.Services {
		if a, err := netip.ParseAddr(s.VIP); err == nil {
			if _, ok := seen[a]; !ok {
				seen[a] = fmt.Sprintf("services[%d].vip", i)
			}
		}
	}
	for i, p := range c.Ports {
		pfx := p.Prefix()
		for j, s := range p.Floating {
			f := fmt.Sprintf("ports[%d].floating[%d]", i, j)
			a, err := parseHost46(f, s)
			if err != nil {
				return err
			}
			in := pfx
			if a.Is6() {
				p6, ok := p.Prefix6()
				if !ok {
					return fieldErrorf(f, "%s is IPv6 and ports[%d] has no address6", a, i)
				}
				in = p6
			}
			if !in.Contains(a) {
				return fieldErrorf(f, "%s is not inside %s", a, in.Masked())
			}
			if a.Is4() && pfx.Bits() <= 30 && (a == pfx.Masked().Addr() || a == lastAddr(pfx)) {
				return fieldErrorf(f, "%s is the network or broadcast address of %s", a, pfx.Masked())
			}
			if other, ok := seen[a]; ok {
				return fieldErrorf(f, "%s is already %s", a, other)
			}
			seen[a] = f
		}
	}
	return nil
}
