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

// splitHostPort splits ipvsadm's ADDR[:port]: an IPv6 address in
// brackets ([2001:db8::10]:80, [2001:db8::11]), an IPv6 address alone,
// or an IPv4 address or host name with an optional :port.
func splitHostPort(flag, s string) (host, port string, hasPort bool, err error) {
	if rest, ok := strings.CutPrefix(s, "["); ok {
		h, after, ok := strings.Cut(rest, "]")
		if !ok {
			return "", "", false, fmt.Errorf("%s %s: no ] after the IPv6 address", flag, s)
		}
		if after == "" {
			return h, "", false, nil
		}
		p, ok := strings.CutPrefix(after, ":")
		if !ok {
			return "", "", false, fmt.Errorf("%s %s: want [IPv6]:port after the ]", flag, s)
		}
		return h, p, true, nil
	}
	if strings.Count(s, ":") > 1 {
		return s, "", false, nil // a bare IPv6 address
	}
	host, port, hasPort = strings.Cut(s, ":")
	return host, port, hasPort, nil
}

// joinHostPort is ADDR:port with an IPv6 address in brackets.
func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// checkAddr accepts an IPv4 address, or an IPv6 one without a zone.
func checkAddr(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && (a.Is4() || a.Is6() && !a.Is4In6() && a.Zone() == "")
}

// parseService parses -t|-u VIP:port; VIP may be a host name and port a
// service name (names.go).
func parseService(flag, s string) (ServiceSpec, error) {
	host, port, ok, err := splitHostPort(flag, s)
	if err != nil {
		return ServiceSpec{}, err
	}
	if !ok || port == "" {
		return ServiceSpec{}, fmt.Errorf("%s %s: want VIP:port, e.g. 192.0.2.100:80 or [2001:db8::10]:80", flag, s)
	}
	spec := ServiceSpec{Protocol: map[string]string{"-t": "tcp", "-u": "udp"}[flag]}
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
	host, port, hasPort, err := splitHostPort("-r", s)
	if err != nil {
		return ServerSpec{}, err
	}
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
		if n < 0 || n > 65535 { // 0: the service's, as no port
			return ServerSpec{}, fmt.Errorf("-r %s: port %d is out of range 0..65535", s, n)
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

// String is "-t 192.0.2.100:80", "-t [2001:db8::10]:80".
func (s ServiceSpec) String() string { return s.Flag() + " " + joinHostPort(s.VIP, s.Port) }

// Check verifies the service's name: protocol, IPv4 or IPv6 VIP, port
// 0..65535 (0: every port of the VIP, IPVS's port-zero service). Its
// settings are checked by lbd against the whole configuration (port 0
// needs persistence).
func (s ServiceSpec) Check() error {
	if s.Protocol != "tcp" && s.Protocol != "udp" {
		return fmt.Errorf("protocol %q is not tcp (-t) or udp (-u)", s.Protocol)
	}
	if !checkAddr(s.VIP) {
		return fmt.Errorf("%s: %q is not an IPv4 or IPv6 address", s, s.VIP)
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("%s: port %d is out of range 0..65535", s, s.Port)
	}
	return nil
}

// Check verifies the server's name: IPv4 or IPv6 address, port 0..65535
// (0: the service's).
func (r ServerSpec) Check() error {
	name := r.Address
	if r.Port != 0 {
		name = joinHostPort(r.Address, r.Port)
	}
	if !checkAddr(r.Address) {
		return fmt.Errorf("-r %s: %q is not an IPv4 or IPv6 address", name, r.Address)
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("-r %s: port %d is out of range 0..65535", name, r.Port)
	}
	return nil
}
