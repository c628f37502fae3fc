package conf_test

import (
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
)

// withSNAT gives validConfig a SNAT rule for the servers' subnet, from an
// address on the client-facing port's.
func withSNAT(c *conf.Config) {
	c.SNAT = []conf.SNAT{{Source: "198.51.100.0/24", Addresses: []string{"203.0.113.60"}}}
}

// TestSNATValid: a rule with the defaults (all three protocols) and one
// with its protocol named pass; their protocols are as said.
func TestSNATValid(t *testing.T) {
	c := validConfig()
	withSNAT(&c)
	c.SNAT = append(c.SNAT, conf.SNAT{Source: "10.1.0.0/16", Addresses: []string{"203.0.113.61", "203.0.113.62"}, Protocols: []string{"udp"}})
	if err := c.Validate(nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.SNAT[0].SNATProtocols(), ","); got != "tcp,udp,icmp" {
		t.Errorf("default protocols %s", got)
	}
	if got := strings.Join(c.SNAT[1].SNATProtocols(), ","); got != "udp" {
		t.Errorf("protocols %s", got)
	}
}

// TestSNATRefused: each bad rule is refused naming its field.
func TestSNATRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		{"source not a prefix", func(c *conf.Config) { c.SNAT[0].Source = "198.51.100.7" },
			`snat[0].source: "198.51.100.7" is not an IPv4 prefix (e.g. 198.51.100.0/24)`},
		{"IPv6 source", func(c *conf.Config) { c.SNAT[0].Source = "fd00::/64" },
			`snat[0].source: "fd00::/64" is not an IPv4 prefix (e.g. 198.51.100.0/24)`},
		{"host bits", func(c *conf.Config) { c.SNAT[0].Source = "198.51.100.7/24" },
			`snat[0].source: 198.51.100.7/24 has host bits set: 198.51.100.0/24`},
		{"overlapping sources", func(c *conf.Config) {
			c.SNAT = append(c.SNAT, conf.SNAT{Source: "198.51.100.128/25", Addresses: []string{"203.0.113.61"}})
		}, `snat[1].source: 198.51.100.128/25 overlaps snat[0].source 198.51.100.0/24`},
		{"no address", func(c *conf.Config) { c.SNAT[0].Addresses = nil },
			`snat[0].addresses: is empty: name the address(es) the servers' connections leave from`},
		{"bad address", func(c *conf.Config) { c.SNAT[0].Addresses = []string{"snat"} },
			`snat[0].addresses[0]: "snat" is not a unicast IPv4 address`},
		{"address on the servers' side", func(c *conf.Config) { c.SNAT[0].Addresses = []string{"198.51.100.60"} },
			`snat[0].addresses[0]: 198.51.100.60 is not a host address of any client-facing port's subnet (203.0.113.0/24): the answers must reach lbd there`},
		{"a port's address", func(c *conf.Config) { c.SNAT[0].Addresses = []string{"203.0.113.1"} },
			`snat[0].addresses[0]: 203.0.113.1 is already ports[0].address`},
		{"a VIP", func(c *conf.Config) { c.SNAT[0].Addresses = []string{"203.0.113.10"} },
			`snat[0].addresses[0]: 203.0.113.10 is already services[1].vip`},
		{"twice", func(c *conf.Config) {
			c.SNAT = append(c.SNAT, conf.SNAT{Source: "10.0.0.0/8", Addresses: []string{"203.0.113.60"}})
		}, `snat[1].addresses[0]: 203.0.113.60 is already snat[0].addresses[0]`},
		{"bad protocol", func(c *conf.Config) { c.SNAT[0].Protocols = []string{"sctp"} },
			`snat[0].protocols[0]: "sctp" is not one of tcp, udp, icmp`},
		{"protocol twice", func(c *conf.Config) { c.SNAT[0].Protocols = []string{"tcp", "tcp"} },
			`snat[0].protocols[1]: "tcp" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			withSNAT(&c)
			tc.edit(&c)
			if err := c.Validate(nil); err == nil || err.Error() != tc.want {
				t.Errorf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}
