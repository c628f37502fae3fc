package api

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Arguments: the numbers and names a command line carries, and the checks
// of a service's and a server's names.

// Limits of the numeric arguments, as lbd's configuration has them.
const (
	MaxPersistence = 30 * 24 * 3600 // -p, seconds
	MaxTimeout     = 30 * 24 * 3600 // --set, seconds
	MaxThreshold   = 1000000        // -x, -y
)

func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 32)
	return err == nil
}

// parseUint parses a decimal in lo..hi for option flag.
func parseUint(flag, s string, lo, hi int, what string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %s: %s is not a number", flag, s, what)
	case n < 0:
		return 0, fmt.Errorf("%s %s: %s is negative", flag, s, what)
	case n < lo || n > hi:
		return 0, fmt.Errorf("%s %s: %s is out of range %d..%d", flag, s, what, lo, hi)
	}
	return n, nil
}

// noIPv6 refuses ipvsadm's IPv6 form ([2001:db8::10]:80, or a bare
// IPv6 address) with a message that says why, rather than trying the
// text as a host name.
func noIPv6(flag, s string) error {
	if strings.HasPrefix(s, "[") || strings.Count(s, ":") > 1 {
		return fmt.Errorf("%s %s: IPv6 services and servers are not supported yet", flag, s)
	}
	return nil
}

// parseService parses -t|-u VIP:port; VIP may be a host name and port a
// service name (names.go).
func parseService(flag, s string) (ServiceSpec, error) {
	if err := noIPv6(flag, s); err != nil {
		return ServiceSpec{}, err
	}
	host, port, ok := strings.Cut(s, ":")
	if !ok || port == "" {
		return ServiceSpec{}, fmt.Errorf("%s %s: want VIP:port, e.g. 192.0.2.100:80", flag, s)
	}
	spec := ServiceSpec{Protocol: map[string]string{"-t": "tcp", "-u": "udp"}[flag]}
	var err error
	if spec.VIP, err = resolveHost(flag+" "+s, host); err != nil {
		return ServiceSpec{}, err
	}
	if spec.Port, err = resolvePort(flag+" "+s, spec.Protocol, port); err != nil {
		return ServiceSpec{}, err
	}
	return spec, spec.Check()
}

// parseServer parses -r RIP[:port] of a service of protocol proto; RIP may
// be a host name and port a service name.
func parseServer(s, proto string) (ServerSpec, error) {
	if err := noIPv6("-r", s); err != nil {
		return ServerSpec{}, err
	}
	host, port, hasPort := strings.Cut(s, ":")
	addr, err := resolveHost("-r "+s, host)
	if err != nil {
		return ServerSpec{}, err
	}
	r := ServerSpec{Address: addr}
	if hasPort {
		n, err := resolvePort("-r "+s, proto, port)
		if err != nil {
			return ServerSpec{}, err
		}
		if n < 1 || n > 65535 {
			return ServerSpec{}, fmt.Errorf("-r %s: port %d is out of range 1..65535", s, n)
		}
		r.Port = n
	}
	return r, r.Check()
}

// Flag is the option that names the service: -t or -u.
func (s ServiceSpec) Flag() string {
	if s.Protocol == "udp" {
		return "-u"
	}
	return "-t"
}

// String is "-t 192.0.2.100:80".
func (s ServiceSpec) String() string { return fmt.Sprintf("%s %s:%d", s.Flag(), s.VIP, s.Port) }

// Check verifies the service's name: protocol, IPv4 VIP, port 1..65535.
// Its settings are checked by lbd against the whole configuration.
func (s ServiceSpec) Check() error {
	if s.Protocol != "tcp" && s.Protocol != "udp" {
		return fmt.Errorf("protocol %q is not tcp (-t) or udp (-u)", s.Protocol)
	}
	if a, err := netip.ParseAddr(s.VIP); err != nil || !a.Is4() {
		return fmt.Errorf("%s %s:%d: %q is not an IPv4 address", s.Flag(), s.VIP, s.Port, s.VIP)
	}
	if s.Port < 1 || s.Port > 65535 {
		return fmt.Errorf("%s: port %d is out of range 1..65535", s, s.Port)
	}
	return nil
}

// Check verifies the server's name: IPv4 address, port 0..65535 (0: the
// service's).
func (r ServerSpec) Check() error {
	name := r.Address
	if r.Port != 0 {
		name = fmt.Sprintf("%s:%d", r.Address, r.Port)
	}
	if a, err := netip.ParseAddr(r.Address); err != nil || !a.Is4() {
		return fmt.Errorf("-r %s: %q is not an IPv4 address", name, r.Address)
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("-r %s: port %d is out of range 1..65535", name, r.Port)
	}
	return nil
}
