package conf_test

import (
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
)

// validConfig6 is validConfig with IPv6 on both ports and an IPv6 service
// of nat and dr servers.
func validConfig6() conf.Config {
	c := validConfig()
	c.Ports[0].Address6 = "2001:db8::1/64"
	c.Ports[1].Address6 = "fd00:1::1/64"
	c.Services = append(c.Services, conf.Service{Protocol: "tcp", VIP: "2001:db8::10", Port: 80, Scheduler: "rr",
		Netmask: "255.255.255.255", Persistence: 300e9, PersistencePrefix: 64, Servers: []conf.RealServer{
			{Address: "fd00:1::11", Port: 8080, Weight: 1, Forward: "nat"},
			{Address: "fd00:1::12", Port: 80, Weight: 1, Forward: "dr"},
		}})
	return c
}

func TestIPv6ServiceValid(t *testing.T) {
	c := validConfig6()
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("IPv6 service refused: %v", err)
	}
	if got := c.Services[2].PersistPrefixBits(); got != 64 {
		t.Errorf("PersistPrefixBits = %d, want 64", got)
	}
	c.Services[2].PersistencePrefix = 0
	if got := c.Services[2].PersistPrefixBits(); got != 128 {
		t.Errorf("PersistPrefixBits unset = %d, want 128", got)
	}
	c.Services[2].SorryServer = "[fd00:1::99]:8080" // by nat, NAT66
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("IPv6 sorry server refused: %v", err)
	}
	c.Services[2].ProxyProtocol = true // for its NAT64 servers, were it to have some
	c.Services[2].Health = conf.HealthCheck{Type: "tcp", Via: "lbd"}
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("proxy_protocol or probes through lbd refused for an IPv6 service: %v", err)
	}
	c.Services[2].ProxyProtocol, c.Services[2].TOA = false, true // for its NAT64 servers, were it to have some
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("toa refused for an IPv6 service: %v", err)
	}
	c.Services[2].TOA = false
	c.Services[2].Protocol, c.Services[2].UOA = "udp", "opp" // the same
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("uoa: opp refused for an IPv6 service: %v", err)
	}
	c.Services[2].Protocol, c.Services[2].UOA = "tcp", ""
	c.Services[2].SynProxy, c.Services[2].Servers = true, c.Services[2].Servers[:1] // NAT66 only
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("the SYN proxy refused for an IPv6 service of nat servers: %v", err)
	}
}

// TestIPv6ServiceRefused: bad IPv6 services are refused naming the field
// and saying why (NAT64 and the IPv4-only features included).
func TestIPv6ServiceRefused(t *testing.T) {
	for _, tc := range []struct {
		name, field, why string
		edit             func(*conf.Config)
	}{
		{"NAT64 by nat", "services[2].servers[0].address", "NAT64, which needs forward: fullnat", func(c *conf.Config) { c.Services[2].Servers[0].Address = "198.51.100.11" }},
		{"NAT46", "services[0].servers[0].address", "IPv4 clients to IPv6 servers", func(c *conf.Config) { c.Services[0].Servers[0].Address = "fd00:1::11" }},
		{"NAT64 without local addresses", "services[2].servers[0].forward", "local_addresses", func(c *conf.Config) {
			c.Services[2].Servers[0] = conf.RealServer{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "fullnat"}
		}},
		{"link-local VIP", "services[2].vip", "unicast", func(c *conf.Config) { c.Services[2].VIP = "fe80::10" }},
		{"off-link server", "services[2].servers[0].address", "subnet", func(c *conf.Config) { c.Services[2].Servers[0].Address = "fd00:2::11" }},
		{"VIP is a port's address6", "services[2].vip", "ports[0]", func(c *conf.Config) { c.Services[2].VIP = "2001:db8::1" }},
		{"prefix too long", "services[2].persistence_prefix", "0..128", func(c *conf.Config) { c.Services[2].PersistencePrefix = 129 }},
		{"prefix on IPv4", "services[0].persistence_prefix", "IPv6", func(c *conf.Config) { c.Services[0].PersistencePrefix = 24 }},
		{"netmask on IPv6", "services[2].netmask", "persistence_prefix", func(c *conf.Config) { c.Services[2].Netmask = "255.255.255.0" }},
		{"fullnat to IPv6 without local addresses", "services[2].servers[0].forward", "local_addresses", func(c *conf.Config) { c.Services[2].Servers[0].Forward = "fullnat" }},
		{"fullnat to IPv6 from IPv4 local addresses", "services[2].servers[0].forward", "fullnat to IPv6 server fd00:1::11 needs IPv6 local_addresses", func(c *conf.Config) {
			c.Services[2].Servers[0].Forward, c.Services[2].LocalAddresses = "fullnat", []string{"198.51.100.200"}
		}},
		{"NAT64 from IPv6 local addresses", "services[2].servers[0].forward", "fullnat to IPv4 server 198.51.100.11 needs IPv4 local_addresses", func(c *conf.Config) {
			c.Services[2].Servers[0] = conf.RealServer{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "fullnat"}
			c.Services[2].LocalAddresses = []string{"fd00:1::200"}
		}},
		{"IPv6 local address of an IPv4 service", "services[0].local_addresses[0]", "an IPv4 service's servers are IPv4", func(c *conf.Config) {
			c.Services[0].LocalAddresses = []string{"fd00:1::200"}
		}},
		{"IPv6 local address off the server side", "services[2].local_addresses[0]", "not on any server-facing port's subnet (fd00:1::/64)", func(c *conf.Config) {
			c.Services[2].Servers[0].Forward, c.Services[2].LocalAddresses = "fullnat", []string{"fd00:2::200"}
		}},
		{"IPv6 local address is a port's", "services[2].local_addresses[0]", "ports[1].address6", func(c *conf.Config) {
			c.Services[2].Servers[0].Forward, c.Services[2].LocalAddresses = "fullnat", []string{"fd00:1::1"}
		}},
		{"synproxy with a dr server", "services[2].servers[1].forward", "dr with synproxy", func(c *conf.Config) { c.Services[2].SynProxy = true }},
		{"ftp to a dr server", "services[2].servers[1].forward", "nat only", func(c *conf.Config) { c.Services[2].Helper = "ftp" }},
		{"IPv4 sorry server", "services[2].sorry_server", "IPv6 [address]:port", func(c *conf.Config) { c.Services[2].SorryServer = "198.51.100.99:80" }},
		{"link-local sorry server", "services[2].sorry_server", "not a global or unique local", func(c *conf.Config) { c.Services[2].SorryServer = "[fe80::9]:80" }},
		{"sorry server off the server side", "services[2].sorry_server", "not on any server-facing port's subnet (fd00:1::/64)", func(c *conf.Config) { c.Services[2].SorryServer = "[fd00:2::9]:80" }},
		{"sorry server on a port", "services[2].sorry_server", "ports[1]", func(c *conf.Config) { c.Services[2].SorryServer = "[fd00:1::1]:80" }},
		{"IPv6 sorry server of an IPv4 service", "services[0].sorry_server", "not an IPv4 address:port", func(c *conf.Config) { c.Services[0].SorryServer = "[fd00:1::99]:80" }},
		{"no IPv6 client port", "services[2].vip", "address6", func(c *conf.Config) { c.Ports[0].Address6 = "" }},
		{"uoa ipo", "services[2].uoa", "ipo carries an IPv4 client only: an IPv6 service's NAT64 servers take uoa: opp", func(c *conf.Config) {
			c.Services[2].Protocol, c.Services[2].UOA, c.Services[2].Persistence = "udp", "ipo", 0
		}},
	} {
		c := validConfig6()
		tc.edit(&c)
		err := c.Validate(schedulers)
		if err == nil || !strings.Contains(err.Error(), tc.field+":") || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", tc.name, err, tc.field, tc.why)
		}
	}
}

// TestGateway6: an IPv6 gateway inside the port's IPv6 prefix lets tun
// servers be off-link; a bad one is refused naming the field.
func TestGateway6(t *testing.T) {
	c := validConfig6()
	c.Ports[1].Gateway6 = "fd00:1::fe"
	c.Services[2].Servers[1] = conf.RealServer{Address: "fd00:9::12", Port: 80, Weight: 1, Forward: "tun"}
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("tun server beyond the IPv6 gateway refused: %v", err)
	}
	for _, tc := range []struct{ name, gw, want string }{
		{"outside", "fd00:2::fe", "not inside"},
		{"own", "fd00:1::1", "own address"},
		{"IPv4", "198.51.100.254", "not an IPv6 address"},
	} {
		c := validConfig6()
		c.Ports[1].Gateway6 = tc.gw
		if err := c.Validate(schedulers); err == nil || !strings.Contains(err.Error(), "ports[1].gateway6:") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	c = validConfig6()
	c.Ports[0].Address6 = ""
	c.Services = c.Services[:2]
	c.Ports[0].Gateway6 = "2001:db8::fe"
	if err := c.Validate(schedulers); err == nil || !strings.Contains(err.Error(), "needs the port's address6") {
		t.Errorf("without address6: %v", err)
	}
}

// TestNAT64Valid: an IPv6 service with IPv4 fullnat servers and IPv4
// local addresses (NAT64) is accepted, with the SYN proxy and PROXY v2
// too.
func TestNAT64Valid(t *testing.T) {
	c := validConfig6()
	c.Services = append(c.Services, conf.Service{Protocol: "tcp", VIP: "2001:db8::20", Port: 80, Scheduler: "rr",
		Netmask: "255.255.255.255", LocalAddresses: []string{"198.51.100.200"}, Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 8080, Weight: 1, Forward: "fullnat"},
		}})
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("NAT64 refused: %v", err)
	}
	c.Services[3].SynProxy, c.Services[3].ProxyProtocol = true, true
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("NAT64 with the SYN proxy and PROXY v2 refused: %v", err)
	}
}

// TestFloating6: a port's floating addresses may be IPv6 (the NAT
// servers' IPv6 gateway), inside its address6 prefix; the rest is refused
// naming the field.
func TestFloating6(t *testing.T) {
	c := validConfig6()
	c.Ports[1].Floating = []string{"198.51.100.254", "fd00:1::fe"}
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("IPv6 floating address refused: %v", err)
	}
	if v4, v6 := c.Ports[1].FloatingAddrs(), c.Ports[1].FloatingAddrs6(); len(v4) != 1 || len(v6) != 1 || v6[0].String() != "fd00:1::fe" {
		t.Fatalf("FloatingAddrs %v FloatingAddrs6 %v", v4, v6)
	}
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		{"off the prefix", func(c *conf.Config) { c.Ports[1].Floating = []string{"fd00:2::fe"} },
			"ports[1].floating[0]: fd00:2::fe is not inside fd00:1::/64"},
		{"the port's address6", func(c *conf.Config) { c.Ports[1].Floating = []string{"fd00:1::1"} },
			"ports[1].floating[0]: fd00:1::1 is already ports[1].address6"},
		{"no address6", func(c *conf.Config) {
			c.Services, c.Ports[1].Address6, c.Ports[1].Floating = c.Services[:2], "", []string{"fd00:1::fe"}
		},
			"ports[1].floating[0]: fd00:1::fe is IPv6 and ports[1] has no address6"},
		{"link-local", func(c *conf.Config) { c.Ports[1].Floating = []string{"fe80::1"} },
			"ports[1].floating[0]: fe80::1 is not a global or unique local unicast IPv6 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig6()
			tc.edit(&c)
			if err := c.Validate(schedulers); err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestRoutesValid: static routes of both families, through next hops on
// the port's subnets, in any order of prefix length.
func TestRoutesValid(t *testing.T) {
	c := validConfig6()
	c.Ports[1].Routes = []conf.Route{
		{Prefix: "10.0.0.0/8", Via: "198.51.100.254"},
		{Prefix: "10.9.0.0/24", Via: "198.51.100.253"},
		{Prefix: "fd00:9::/48", Via: "fd00:1::fe"},
	}
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("routes refused: %v", err)
	}
	if pfx, via, ok := c.Ports[1].Routes[2].RouteNet(); !ok || pfx.String() != "fd00:9::/48" || via.String() != "fd00:1::fe" {
		t.Fatalf("RouteNet = %v %v %v", pfx, via, ok)
	}
	// A nat server behind a route is reachable; a dr one is not (its MAC
	// is rewritten: it must be on-link).
	c.Services[0].Servers[0].Address = "10.9.0.2"
	if err := c.Validate(schedulers); err != nil {
		t.Fatalf("a nat server behind a route refused: %v", err)
	}
	c.Services[0].Servers[0].Forward = "dr"
	want := "services[0].servers[0].address: 10.9.0.2 is not on any server-facing port's subnet (198.51.100.0/24)"
	if err := c.Validate(schedulers); err == nil || err.Error() != want {
		t.Fatalf("a dr server behind a route: %v, want %q", err, want)
	}
}

// TestFullNAT66Valid: an IPv6 service's fullnat servers may be IPv6
// (FNAT66, from its IPv6 local addresses) beside IPv4 ones (NAT64, from
// its IPv4 local addresses).
func TestFullNAT66Valid(t *testing.T) {
	c := validConfig6()
	s := &c.Services[2]
	s.LocalAddresses = []string{"fd00:1::200", "198.51.100.200"}
	s.Servers[0].Forward = "fullnat"
	s.Servers = append(s.Servers, conf.RealServer{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "fullnat"})
	s.ProxyProtocol = true
	if err := c.Validate(schedulers); err != nil {
		t.Fatal(err)
	}
	s.ProxyProtocol, s.TOA = false, true // DPVS's TCP option address, 20 bytes for an IPv6 client
	s.Servers = s.Servers[:1]            // the SYN proxy wants no dr server
	s.SynProxy = true
	if err := c.Validate(schedulers); err != nil {
		t.Fatal(err)
	}
}
