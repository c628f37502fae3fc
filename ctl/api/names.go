package api

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Names as ipvsadm takes and prints them: a restore file saved without -n
// names hosts and services (-A -t lb.example.com:http). Hosts resolve
// once, when the line is parsed (IPv4 only: the dataplane is IPv4), and a
// name must give exactly one address; services resolve from /etc/services
// (Go's resolver, with its built-in table as fallback).

// nameTimeout bounds one name lookup; reverseTimeout one reverse lookup
// for -S (an address without a name only costs its wait).
const (
	nameTimeout    = 5 * time.Second
	reverseTimeout = 2 * time.Second
)

// lookupIPv4 resolves a host name; tests replace it.
var lookupIPv4 = func(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
}

// lookupPort resolves a service name for a protocol; tests replace it.
var lookupPort = func(ctx context.Context, proto, service string) (int, error) {
	return net.DefaultResolver.LookupPort(ctx, proto, service)
}

// resolveHost turns host (an IPv4 address or a name) into one IPv4
// address; what names the argument in errors ("-t lb.example.com:http").
func resolveHost(what, host string) (string, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		if !a.Is4() && (a.Is4In6() || a.Zone() != "") {
			return "", fmt.Errorf("%s: %q is not an IPv4 or IPv6 address", what, host)
		}
		return a.String(), nil
	}
	if host == "" || strings.ContainsAny(host, " /") {
		return "", fmt.Errorf("%s: %q is not an IPv4 address or host name", what, host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nameTimeout)
	defer cancel()
	addrs, err := lookupIPv4(ctx, host)
	if err != nil || len(addrs) == 0 {
		return "", fmt.Errorf("%s: host name %q does not resolve to an IPv4 address", what, host)
	}
	if len(addrs) > 1 {
		s := make([]string, len(addrs))
		for i, a := range addrs {
			s[i] = a.String()
		}
		return "", fmt.Errorf("%s: host name %q resolves to %d addresses (%s): give one of them", what, host, len(addrs), strings.Join(s, ", "))
	}
	return addrs[0].Unmap().String(), nil
}

// resolvePort turns port (a number or a service name of proto) into a
// number; numbers are not range-checked here.
func resolvePort(what, proto, port string) (int, error) {
	if n, err := strconv.Atoi(port); err == nil {
		return n, nil
	}
	if port == "" || strings.ContainsAny(port, " /") || port[0] == '-' || port[0] == '+' {
		return 0, fmt.Errorf("%s: port %q is not a number or service name", what, port)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nameTimeout)
	defer cancel()
	n, err := lookupPort(ctx, proto, port)
	if err != nil {
		return 0, fmt.Errorf("%s: port %q is not a number or a %s service name (/etc/services)", what, port, proto)
	}
	return n, nil
}

// Namer turns addresses and ports into names for -S without -n.
type Namer struct {
	Host    func(addr string) string            // "" keeps the address
	Service func(proto string, port int) string // "" keeps the number
}

// SystemNamer names hosts by reverse DNS (each address asked once, within
// reverseTimeout; none: the address) and ports by servicesFile.
func SystemNamer(servicesFile string) Namer {
	hosts := map[string]string{}
	services := readServices(servicesFile)
	return Namer{
		Host: func(addr string) string {
			if n, ok := hosts[addr]; ok {
				return n
			}
			ctx, cancel := context.WithTimeout(context.Background(), reverseTimeout)
			defer cancel()
			name := ""
			if names, err := net.DefaultResolver.LookupAddr(ctx, addr); err == nil && len(names) > 0 {
				name = strings.TrimSuffix(names[0], ".")
			}
			hosts[addr] = name
			return name
		},
		Service: func(proto string, port int) string { return services[strconv.Itoa(port)+"/"+proto] },
	}
}

// readServices reads an /etc/services file: "80/tcp" -> "http", the
// first name given for a port.
func readServices(path string) map[string]string {
	out := map[string]string{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if _, seen := out[fields[1]]; !seen {
			out[fields[1]] = fields[0]
		}
	}
	return out
}

// NameRules rewrites ipvsadm -S lines (as lbd saves them, numeric) with
// names where n has them: -t/-u VIP:port and -r RIP:port, the ports by the
// line's protocol. Other text is kept as it is.
func NameRules(text string, n Namer) string {
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		body := strings.TrimRight(line, "\n")
		fields := strings.Split(body, " ")
		proto := ""
		for j := 0; j+1 < len(fields); j++ {
			switch fields[j] {
			case "-t":
				proto = "tcp"
			case "-u":
				proto = "udp"
			}
		}
		if proto == "" {
			continue
		}
		for j := 0; j+1 < len(fields); j++ {
			switch fields[j] {
			case "-t", "-u", "-r":
				fields[j+1] = nameEndpoint(fields[j+1], proto, n)
			}
		}
		lines[i] = strings.Join(fields, " ") + line[len(body):]
	}
	return strings.Join(lines, "")
}

func nameEndpoint(s, proto string, n Namer) string {
	host, port, hasPort := strings.Cut(s, ":")
	if n.Host != nil {
		if name := n.Host(host); name != "" {
			host = name
		}
	}
	if !hasPort {
		return host
	}
	if p, err := strconv.Atoi(port); err == nil && n.Service != nil {
		if name := n.Service(proto, p); name != "" {
			port = name
		}
	}
	return host + ":" + port
}
