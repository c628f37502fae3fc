package conf

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Validation of the services and their real servers.

// CheckSchedulers checks that every service names one of schedulers (the
// registry's names). Load and Parse validate everything else, so a program
// that knows the registry checks this alone instead of validating again.
func (c *Config) CheckSchedulers(schedulers []string) error {
	for i, s := range c.Services {
		if err := checkScheduler(fmt.Sprintf("services[%d]", i), s.Scheduler, schedulers); err != nil {
			return err
		}
	}
	return nil
}

func checkScheduler(service, name string, schedulers []string) error {
	if !slices.Contains(schedulers, name) {
		return fieldErrorf(service+".scheduler", "unknown scheduler %q (known: %s)", name, strings.Join(schedulers, ", "))
	}
	return nil
}

func (c *Config) validateServices(schedulers []string) error {
	type key struct {
		proto string
		addr  netip.AddrPort
	}
	seen := map[key]int{}
	for i, s := range c.Services {
		f := fmt.Sprintf("services[%d]", i)
		switch s.Protocol {
		case "tcp", "udp":
		case "":
			return fieldErrorf(f+".protocol", "must not be empty (want tcp or udp)")
		default:
			return fieldErrorf(f+".protocol", "%q is not one of tcp, udp", s.Protocol)
		}
		vip, err := parseHost46(f+".vip", s.VIP)
		if err != nil {
			return err
		}
		if j := c.portWithAddr(vip); j >= 0 {
			return fieldErrorf(f+".vip", "%s is the address of ports[%d]", vip, j)
		}
		if err := s.validatePort(f); err != nil {
			return err
		}
		switch {
		case s.Scheduler == "":
			return fieldErrorf(f+".scheduler", "must not be empty")
		case schedulers != nil:
			if err := checkScheduler(f, s.Scheduler, schedulers); err != nil {
				return err
			}
		}
		for j, fl := range s.SchedFlags {
			if !slices.Contains(SchedFlags, fl) {
				return fieldErrorf(fmt.Sprintf("%s.sched_flags[%d]", f, j), "unknown flag %q (known: %s)", fl, strings.Join(SchedFlags, ", "))
			}
		}
		if s.MHTableSize != 0 && (!isPrime(s.MHTableSize) || s.MHTableSize < 251 || s.MHTableSize > 131071) {
			return fieldErrorf(f+".mh_table_size", "%d is not a prime in 251..131071 (e.g. 65537)", s.MHTableSize)
		}
		if s.Persistence != 0 {
			if err := checkDuration(f+".persistence", s.Persistence, time.Second, maxTimeout, "0 (off) or 1s..720h"); err != nil {
				return err
			}
		}
		if s.Netmask != "" {
			if err := checkNetmask(f+".netmask", s.Netmask); err != nil {
				return err
			}
		}
		if err := s.validate6(f, vip); err != nil {
			return err
		}
		if err := checkClientList(f+".blocklist", s.Blocklist, vip); err != nil {
			return err
		}
		if err := checkClientList(f+".allowlist", s.Allowlist, vip); err != nil {
			return err
		}
		if vip.Is6() && !c.hasClientPort6() {
			return fieldErrorf(f+".vip", "%s is IPv6 but no client-facing port has an address6 (its IPv6 link)", vip)
		}
		k := key{s.Protocol, netip.AddrPortFrom(vip, uint16(s.Port))}
		if j, ok := seen[k]; ok {
			return fieldErrorf(f, "%s %s is already defined by services[%d]", k.proto, k.addr, j)
		}
		seen[k] = i
		if err := c.validateHealth(f, s, vip); err != nil {
			return err
		}
		if err := s.Feedback.validate(f + ".feedback"); err != nil {
			return err
		}
		if err := c.validateServers(f, s, vip); err != nil {
			return err
		}
		if err := s.validateHelper(f); err != nil {
			return err
		}
		if err := s.validateOnePacket(f); err != nil {
			return err
		}
		if s.QUIC && s.Protocol != "udp" {
			return fieldErrorf(f+".quic", "is for udp services only (QUIC runs over UDP)")
		}
		if s.QUIC && s.Persistence != 0 {
			return fieldErrorf(f+".quic", "not with persistence: the connection ID chooses the server (as DPVS's)")
		}
		if s.ProxyProtocol && s.Protocol != "tcp" {
			return fieldErrorf(f+".proxy_protocol", "is for tcp services only")
		}
		if err := s.validateTOA(f); err != nil {
			return err
		}
		if err := s.validateUOA(f); err != nil {
			return err
		}
		if s.SynProxy {
			if s.Protocol != "tcp" {
				return fieldErrorf(f+".synproxy", "is for tcp services only")
			}
			for j, r := range s.Servers {
				if r.Forward != "nat" && r.Forward != "fullnat" {
					return fieldErrorf(fmt.Sprintf("%s.servers[%d].forward", f, j), "%s with synproxy: the replies of dr and tun servers bypass lbd, which could not move their sequence numbers (use nat or fullnat)", r.Forward)
				}
			}
		}
	}
	return c.validatePortZeroProxy()
}

// validatePortZeroProxy: the SYN proxy answers a SYN before its
// connection is looked for, so a port-zero service's proxy would answer
// the passive data connections an FTP service of its VIP expects.
func (c *Config) validatePortZeroProxy() error {
	for i, s := range c.Services {
		if s.Port != 0 || !s.SynProxy {
			continue
		}
		vip, _ := netip.ParseAddr(s.VIP) // checked already
		for j, o := range c.Services {
			if o2, _ := netip.ParseAddr(o.VIP); o.Helper == "ftp" && o2 == vip {
				return fieldErrorf(fmt.Sprintf("services[%d].synproxy", i), "not on port 0 of a VIP with an ftp service (services[%d]): the proxy would answer its passive data connections", j)
			}
		}
	}
	return nil
}

// validatePort checks the service's port. Port 0 is IPVS's port-zero
// service (ipvsadm -A -t VIP:0 -p): every port of the VIP that has no
// service of its own, each client to one server for all of them, which
// is why ipvsadm refuses it without persistence.
func (s Service) validatePort(f string) error {
	if err := checkRange(f+".port", s.Port, 0, 65535); err != nil {
		return err
	}
	if s.Port != 0 {
		return nil
	}
	if s.Persistence == 0 {
		return fieldErrorf(f+".port", "0 (every port of the VIP) needs persistence, as ipvsadm's port-zero services do")
	}
	if s.Helper != "" {
		return fieldErrorf(f+".helper", "%s needs the service's control port, not port 0", s.Helper)
	}
	return nil
}

// validateOnePacket: one-packet scheduling keeps no connection past its
// datagram, so only servers that answer the client themselves (dr, tun)
// can serve it; a nat or fullnat server's answer would find nothing to
// translate it back with.
func (s Service) validateOnePacket(f string) error {
	if !s.OnePacket {
		return nil
	}
	if s.Protocol != "udp" {
		return fieldErrorf(f+".one_packet", "is for udp services only (as ipvsadm --ops)")
	}
	for j, r := range s.Servers {
		if r.Forward != "dr" && r.Forward != "tun" {
			return fieldErrorf(fmt.Sprintf("%s.servers[%d].forward", f, j), "%s with one_packet: no connection is kept to translate the server's answers back (use dr or tun)", r.Forward)
		}
	}
	return nil
}

// validateHelper: the FTP helper translates VS/NAT control connections;
// DR and TUN servers answer clients directly, past any rewrite.
func (s Service) validateHelper(f string) error {
	switch s.Helper {
	case "":
		return nil
	case "ftp":
	default:
		return fieldErrorf(f+".helper", "%q is not one of \"\", ftp", s.Helper)
	}
	if s.Protocol != "tcp" {
		return fieldErrorf(f+".helper", "ftp needs protocol tcp, not %s", s.Protocol)
	}
	if s.SynProxy {
		// Both move the connection's sequence numbers, each by its own
		// delta: stacked, the data channel's numbering would be wrong.
		return fieldErrorf(f+".synproxy", "not with helper ftp: both shift the connection's sequence numbers")
	}
	for j, rs := range s.Servers {
		if rs.Forward != "" && rs.Forward != "nat" {
			return fieldErrorf(fmt.Sprintf("%s.servers[%d].forward", f, j), "%q: the ftp helper works through nat only", rs.Forward)
		}
	}
	return nil
}

func (c *Config) validateServers(f string, s Service, vip netip.Addr) error {
	seen := map[netip.AddrPort]int{}
	for i, r := range s.Servers {
		g := fmt.Sprintf("%s.servers[%d]", f, i)
		a, err := parseHost46(g+".address", r.Address)
		if err != nil {
			return err
		}
		switch {
		case a.Is6() && !vip.Is6():
			return fieldErrorf(g+".address", "%s is IPv6 and the service's VIP %s IPv4: lbd does not translate IPv4 clients to IPv6 servers", a, vip)
		case a.Is4() && vip.Is6() && r.Forward != "fullnat":
			return fieldErrorf(g+".address", "%s is IPv4 and the service's VIP %s IPv6: that is NAT64, which needs forward: fullnat (and IPv4 local_addresses), not %s", a, vip, r.Forward)
		}
		if a == vip {
			return fieldErrorf(g+".address", "%s is the service's VIP", a)
		}
		if j := c.portWithAddr(a); j >= 0 {
			return fieldErrorf(g+".address", "%s is the address of ports[%d]", a, j)
		}
		switch r.Forward {
		case "nat", "dr", "tun":
		case "fullnat":
			if len(s.LocalAddresses) == 0 {
				return fieldErrorf(g+".forward", "fullnat needs the service's local_addresses")
			}
			if !s.hasLocalAddress(a.Is6()) {
				family := map[bool]string{false: "IPv4", true: "IPv6"}[a.Is6()]
				return fieldErrorf(g+".forward", "fullnat to %s server %s needs %s local_addresses", family, a, family)
			}
		default:
			return fieldErrorf(g+".forward", "%q is not one of nat, dr, tun, fullnat", r.Forward)
		}
		if err := c.checkReachable(g+".address", a, r.Forward); err != nil {
			return err
		}
		if s.Port == 0 && r.Port != 0 {
			return fieldErrorf(g+".port", "%d: the servers of a port-zero service take the client's port, so theirs is 0 (or left out)", r.Port)
		}
		if err := checkRange(g+".port", r.Port, min(s.Port, 1), 65535); err != nil {
			return err
		}
		if err := checkRange(g+".weight", r.Weight, 0, MaxWeight); err != nil {
			return err
		}
		if r.Forward != "nat" && r.Forward != "fullnat" && r.Port != s.Port {
			return fieldErrorf(g+".port", "%d differs from the service's port %d: only nat and fullnat rewrite ports (dr and tun forward the packet unchanged)", r.Port, s.Port)
		}
		if err := checkRange(g+".upper_threshold", r.Upper, 0, 1000000); err != nil {
			return err
		}
		if err := checkRange(g+".lower_threshold", r.Lower, 0, max(r.Upper, 0)); err != nil {
			if r.Upper == 0 && r.Lower != 0 {
				return fieldErrorf(g+".lower_threshold", "%d needs an upper_threshold", r.Lower)
			}
			return err
		}
		if err := validateServerHealth(f, g, s, r); err != nil {
			return err
		}
		ap := netip.AddrPortFrom(a, uint16(r.Port))
		if j, ok := seen[ap]; ok {
			return fieldErrorf(g, "%s is already listed as %s.servers[%d]", ap, f, j)
		}
		seen[ap] = i
	}
	return nil
}

// hasLocalAddress reports whether the service lists a local address of
// the family (IPv6 when six).
func (s Service) hasLocalAddress(six bool) bool {
	for _, l := range s.LocalAddresses {
		if a, err := netip.ParseAddr(l); err == nil && (a.Is6() && !a.Is4In6()) == six {
			return true
		}
	}
	return false
}

// validateLocalAddresses checks the services' FullNAT local addresses,
// once the ports and services are known valid: each inside a
// server-facing port's prefix, a host address that no port, gateway, VIP,
// floating address or other local address already is (pools never
// overlap: a local port belongs to one connection).
func (c *Config) validateLocalAddresses() error {
	seen := c.portAddresses()
	for i, s := range c.Services {
		if a, err := netip.ParseAddr(s.VIP); err == nil {
			if _, ok := seen[a]; !ok {
				seen[a] = fmt.Sprintf("services[%d].vip", i)
			}
		}
	}
	for i, s := range c.Services {
		vip, _ := netip.ParseAddr(s.VIP) // checked already
		for j, l := range s.LocalAddresses {
			f := fmt.Sprintf("services[%d].local_addresses[%d]", i, j)
			a, err := parseHost46(f, l)
			if err != nil {
				return err
			}
			if a.Is6() && !vip.Is6() {
				return fieldErrorf(f, "%s is IPv6 and the service's VIP %s IPv4: an IPv4 service's servers are IPv4, reached from IPv4 local addresses", a, vip)
			}
			var subnets []string
			inside := false
			for _, p := range c.Ports {
				if !p.FacesServers() {
					continue
				}
				pfx := p.Prefix()
				if a.Is6() {
					p6, ok := p.Prefix6()
					if !ok {
						continue
					}
					pfx = p6
				}
				subnets = append(subnets, pfx.Masked().String())
				if pfx.Contains(a) {
					inside = true
					if a.Is4() && pfx.Bits() <= 30 && (a == pfx.Masked().Addr() || a == lastAddr(pfx)) {
						return fieldErrorf(f, "%s is the network or broadcast address of %s", a, pfx.Masked())
					}
					if a.Is6() && a == pfx.Masked().Addr() {
						return fieldErrorf(f, "%s is the subnet-router anycast address of %s", a, pfx.Masked())
					}
				}
			}
			if !inside {
				return fieldErrorf(f, "%s is not on any server-facing port's subnet (%s)", a, strings.Join(subnets, ", "))
			}
			if other, ok := seen[a]; ok {
				return fieldErrorf(f, "%s is already %s", a, other)
			}
			seen[a] = f
		}
	}
	return nil
}

// portAddresses are the ports' own addresses, gateways and floating
// addresses, each with its field: what no local or SNAT address may be.
func (c *Config) portAddresses() map[netip.Addr]string {
	seen := map[netip.Addr]string{}
	for i, p := range c.Ports {
		seen[p.Prefix().Addr()] = fmt.Sprintf("ports[%d].address", i)
		if gw, ok := p.GatewayAddr(); ok {
			seen[gw] = fmt.Sprintf("ports[%d].gateway", i)
		}
		if p6, ok := p.Prefix6(); ok {
			seen[p6.Addr()] = fmt.Sprintf("ports[%d].address6", i)
		}
		if gw, err := netip.ParseAddr(p.Gateway6); err == nil {
			seen[gw] = fmt.Sprintf("ports[%d].gateway6", i)
		}
		for j, f := range p.Floating {
			if a, err := netip.ParseAddr(f); err == nil {
				seen[a] = fmt.Sprintf("ports[%d].floating[%d]", i, j)
			}
		}
	}
	return seen
}

// checkReachable says whether the load balancer can forward to a real
// server by the given method: dr needs the server on the subnet of a
// server-facing port (it rewrites only the MAC); nat, fullnat and tun
// also reach servers through a static route of such a port, and tun
// servers beyond a gateway too.
func (c *Config) checkReachable(field string, a netip.Addr, forward string) error {
	var subnets []string
	gateway := false
	for _, p := range c.Ports {
		if !p.FacesServers() || forward == "dr" {
			continue
		}
		for _, r := range p.Routes {
			if pfx, _, ok := r.RouteNet(); ok && pfx.Contains(a) {
				return nil
			}
		}
	}
	for _, p := range c.Ports {
		if _, ok := p.GatewayAddr(); ok && a.Is4() {
			gateway = true
		}
		if _, ok := p.Gateway6Addr(); ok && a.Is6() {
			gateway = true
		}
		if !p.FacesServers() {
			continue
		}
		pfx := p.Prefix()
		if a.Is6() {
			var ok bool
			if pfx, ok = p.Prefix6(); !ok {
				continue
			}
		}
		subnets = append(subnets, pfx.Masked().String())
		if pfx.Contains(a) {
			return nil
		}
	}
	if forward == "tun" && gateway {
		return nil
	}
	if len(subnets) == 0 {
		return fieldErrorf(field, "%s is not on any server-facing port's subnet (no port has role server or both)", a)
	}
	return fieldErrorf(field, "%s is not on any server-facing port's subnet (%s)", a, strings.Join(subnets, ", "))
}

// checkNetmask accepts a contiguous IPv4 netmask such as 255.255.255.0.
func checkNetmask(field, s string) error {
	m, err := netip.ParseAddr(s)
	if err != nil || !m.Is4() {
		return fieldErrorf(field, "%q is not an IPv4 netmask (want e.g. 255.255.255.0)", s)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if v != 0 && (^v)&(^v+1) != 0 {
		return fieldErrorf(field, "%s is not a contiguous netmask", s)
	}
	return nil
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}

// validateUOA: the option protocol carries an IPv6 client's address, an
// IPv4 option (DPVS's ipo) only an IPv4 one.
func (s Service) validateUOA(f string) error {
	switch s.UOA {
	case "":
		return nil
	case "ipo", "opp":
	default:
		return fieldErrorf(f+".uoa", "%q is not one of ipo, opp (or empty: none)", s.UOA)
	}
	if s.Protocol != "udp" {
		return fieldErrorf(f+".uoa", "is for udp services only (toa is tcp's)")
	}
	if vip, err := netip.ParseAddr(s.VIP); err == nil && vip.Is6() && s.UOA == "ipo" {
		return fieldErrorf(f+".uoa", "ipo carries an IPv4 client only: an IPv6 service's NAT64 servers take uoa: opp")
	}
	return nil
}

// validateTOA: with the PROXY header too the server would be told the
// client's address twice, in two ways.
func (s Service) validateTOA(f string) error {
	switch {
	case !s.TOA:
		return nil
	case s.Protocol != "tcp":
		return fieldErrorf(f+".toa", "is for tcp services only")
	case s.ProxyProtocol:
		return fieldErrorf(f+".toa", "not with proxy_protocol: both tell the servers the client's address (choose the one they expect)")
	}
	return nil
}
