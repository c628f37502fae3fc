package conf_test

import (
	"testing"

	"github.com/dplb/dplb/conf"
)

func TestHAConfigValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
	}{
		{"master by default", func(*conf.Config) {}},
		{"backup", func(c *conf.Config) { c.HA.State = "backup" }},
		{"empty state in a literal", func(c *conf.Config) { c.HA.State = "" }},
		{"floating gateway for the real servers", func(c *conf.Config) {
			c.Ports[1].Floating = []string{"198.51.100.254"}
			c.Ports[0].Floating = []string{"203.0.113.2", "203.0.113.3"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			if err := c.Validate(schedulers); err != nil {
				t.Fatal(err)
			}
		})
	}
	c := validConfig()
	if c.HA.IsBackup() {
		t.Fatal("the default is backup")
	}
	c.Ports[1].Floating = []string{"198.51.100.254", "bogus"}
	if got := c.Ports[1].FloatingAddrs(); len(got) != 1 || got[0].String() != "198.51.100.254" {
		t.Fatalf("FloatingAddrs %v", got)
	}
}

func TestHAConfigInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		{"unknown state", func(c *conf.Config) { c.HA.State = "active" },
			`ha.state: "active" is not one of master, backup`},
		{"floating not an address", func(c *conf.Config) { c.Ports[1].Floating = []string{"gw"} },
			`ports[1].floating[0]: "gw" is not an IPv4 address`},
		{"floating off the subnet", func(c *conf.Config) { c.Ports[1].Floating = []string{"203.0.113.5"} },
			`ports[1].floating[0]: 203.0.113.5 is not inside 198.51.100.0/24`},
		{"floating is the port's address", func(c *conf.Config) { c.Ports[1].Floating = []string{"198.51.100.1"} },
			`ports[1].floating[0]: 198.51.100.1 is already ports[1].address`},
		{"floating is the gateway", func(c *conf.Config) { c.Ports[0].Floating = []string{"203.0.113.254"} },
			`ports[0].floating[0]: 203.0.113.254 is already ports[0].gateway`},
		{"floating is a VIP", func(c *conf.Config) { c.Ports[0].Floating = []string{"203.0.113.10"} },
			`ports[0].floating[0]: 203.0.113.10 is already services[0].vip`},
		{"floating twice", func(c *conf.Config) { c.Ports[1].Floating = []string{"198.51.100.254", "198.51.100.254"} },
			`ports[1].floating[1]: 198.51.100.254 is already ports[1].floating[0]`},
		{"floating broadcast", func(c *conf.Config) { c.Ports[1].Floating = []string{"198.51.100.255"} },
			`ports[1].floating[0]: 198.51.100.255 is the network or broadcast address of 198.51.100.0/24`},
		{"floating multicast", func(c *conf.Config) { c.Ports[1].Floating = []string{"224.0.0.18"} },
			`ports[1].floating[0]: 224.0.0.18 is not a unicast host address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.edit(&c)
			err := c.Validate(schedulers)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
}

// TestHAConfigFromYAML: the keys load, and a bad value is refused whole.
func TestHAConfigFromYAML(t *testing.T) {
	base := `
ports:
  - {name: lan, device: net_ring0, address: 198.51.100.1/24, role: both, floating: [198.51.100.254]}
`
	c, err := conf.Parse([]byte(base + "ha: {state: backup}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.HA.IsBackup() || len(c.Ports[0].Floating) != 1 {
		t.Fatalf("loaded %+v %v", c.HA, c.Ports[0].Floating)
	}
	if c, err = conf.Parse([]byte(base)); err != nil || c.HA.State != "master" {
		t.Fatalf("default state %q, %v", c.HA.State, err)
	}
	if _, err := conf.Parse([]byte(base + "ha: {state: standby}\n")); err == nil {
		t.Fatal("ha.state standby accepted")
	}
}
