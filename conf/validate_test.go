package conf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

var schedulers = []string{"rr", "wrr"}

// validConfig is a valid VS/NAT configuration for the cases to break.
func validConfig() conf.Config {
	c := conf.Default()
	c.Ports = []conf.Port{
		{Name: "client", Device: "net_af_packet0,iface=veth0", Address: "203.0.113.1/24", Gateway: "203.0.113.254", Role: "client"},
		{Name: "server", Device: "0000:03:00.0", Address: "198.51.100.1/24", Role: "server"},
	}
	c.Services = []conf.Service{
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 80, Scheduler: "rr", Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "nat"},
			{Address: "198.51.100.12", Port: 8000, Weight: 2, Forward: "nat"},
		}},
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 21, Scheduler: "wrr", Servers: []conf.RealServer{
			{Address: "198.51.100.12", Port: 21, Weight: 1, Forward: "nat"},
		}},
	}
	return c
}

// portZero makes services[0] a persistent port-zero service (ipvsadm
// -A -t 203.0.113.10:0 -p 300) to servers on port 0.
func portZero(c *conf.Config) {
	s := &c.Services[0]
	s.Port, s.Persistence = 0, 300*time.Second
	for i := range s.Servers {
		s.Servers[i].Port = 0
	}
}

func TestValidateValid(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(*conf.Config)
		schedulers []string
	}{
		{"as is", func(*conf.Config) {}, schedulers},
		{"fullnat with local addresses and the PROXY header", func(c *conf.Config) {
			c.Services[0].Servers[1].Forward = "fullnat"
			c.Services[0].LocalAddresses = []string{"198.51.100.200", "198.51.100.201"}
			c.Services[0].ProxyProtocol = true
			c.Services[1].LocalAddresses = []string{"198.51.100.202"}
			c.Services[1].SynProxy = true
		}, schedulers},
		{"fullnat with the TCP option address", func(c *conf.Config) {
			c.Services[0].Servers[1].Forward = "fullnat"
			c.Services[0].LocalAddresses = []string{"198.51.100.200"}
			c.Services[0].TOA = true
			c.Services[0].SynProxy = true
		}, schedulers},
		{"nil schedulers skip the name check", func(c *conf.Config) { c.Services[0].Scheduler = "anything" }, nil},
		{"no services, server port only", func(c *conf.Config) { c.Services = nil; c.Ports = c.Ports[1:] }, schedulers},
		{"empty server list", func(c *conf.Config) { c.Services[0].Servers = nil }, schedulers},
		{"weight 0, mtu bounds, idle sleep max", func(c *conf.Config) {
			c.Services[0].Servers[0].Weight = 0
			c.Ports[0].MTU = 68
			c.Ports[1].MTU = 9702
			c.Dataplane.IdleSleep = 10 * time.Millisecond
		}, schedulers},
		{"repeated worker CPUs", func(c *conf.Config) { c.Dataplane.Workers = []int{1, 1, 2} }, schedulers},
		{"steering key with colons", func(c *conf.Config) {
			c.Dataplane.SteeringKey = "6d:5a" + strings.Repeat(":56", 38)
		}, schedulers},
		{"largest cache with fewest mbufs", func(c *conf.Config) { c.Dataplane.Mbufs = 1023; c.Dataplane.MbufCache = 512 }, schedulers},
		{"metrics disabled", func(c *conf.Config) { c.Metrics.Listen = "" }, schedulers},
		{"metrics on all addresses", func(c *conf.Config) { c.Metrics.Listen = ":9180" }, schedulers},
		{"same real server in two services", func(c *conf.Config) { c.Services[1].Port = 8080 }, schedulers},
		{"/32 port", func(c *conf.Config) { c.Ports[0].Address = "203.0.113.1/32"; c.Ports[0].Gateway = "" }, schedulers},
		{"udp service", func(c *conf.Config) {
			c.Services[1].Protocol = "udp"
			c.Services[1].Port = 53
			c.Services[1].Servers[0].Port = 53
		}, schedulers},
		{"dr and tun on the subnet, mixed with nat", func(c *conf.Config) {
			c.Services[0].Servers[0].Forward = "dr"
			c.Services[1].Servers[0].Forward = "tun"
		}, schedulers},
		{"tun beyond the gateway", func(c *conf.Config) {
			c.Services[1].Servers[0].Forward = "tun"
			c.Services[1].Servers[0].Address = "192.0.2.7"
		}, schedulers},
		{"persistence, netmask, flags, mh table, thresholds", func(c *conf.Config) {
			c.Services[0].Persistence = 300 * time.Second
			c.Services[0].Netmask = "255.255.255.0"
			c.Services[0].SchedFlags = []string{"sh-fallback", "sh-port"}
			c.Services[0].MHTableSize = 251
			c.Services[0].Servers[0].Upper, c.Services[0].Servers[0].Lower = 100, 80
			c.Services[0].Servers[1].Upper = 50
		}, schedulers},
		{"netmask 0.0.0.0", func(c *conf.Config) { c.Services[0].Netmask = "0.0.0.0" }, schedulers},
		{"port-zero service", portZero, schedulers},
		{"quic on udp", func(c *conf.Config) { c.Services[0].Protocol, c.Services[0].QUIC = "udp", true }, schedulers},
		{"uoa ipo and opp on udp", func(c *conf.Config) {
			c.Services[0].Protocol, c.Services[0].UOA = "udp", "ipo"
			c.Services[1].Protocol, c.Services[1].UOA = "udp", "opp"
		}, schedulers},
		{"one_packet udp to dr and tun servers", func(c *conf.Config) {
			s := &c.Services[0]
			s.Protocol, s.OnePacket = "udp", true
			s.Servers[0].Forward, s.Servers[1].Forward, s.Servers[1].Port = "dr", "tun", 80
		}, schedulers},
		{"port-zero service checked on a port, by icmp, beside port 80", func(c *conf.Config) {
			portZero(c)
			c.Services[0].Health.Type, c.Services[0].Health.Port = "tcp", 22
			c.Services[0].Servers[1].Health = &conf.HealthCheck{Type: "icmp", Interval: time.Second, Timeout: 500 * time.Millisecond, Rise: 1, Fall: 1, Target: "server"}
			c.Services[1].Port = 80
		}, schedulers},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			if err := c.Validate(tt.schedulers); err != nil {
				t.Errorf("Validate() = %v, want nil", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*conf.Config)
		want string
	}{
		// eal
		{"empty file prefix", func(c *conf.Config) { c.EAL.FilePrefix = "" },
			`eal.file_prefix: must not be empty`},
		{"bad file prefix", func(c *conf.Config) { c.EAL.FilePrefix = "a/b" },
			`eal.file_prefix: "a/b" has characters other than A-Z a-z 0-9 _ -`},
		{"memory too small", func(c *conf.Config) { c.EAL.MemoryMB = 63 },
			`eal.memory_mb: 63 is out of range 64..1048576`},
		{"memory too large", func(c *conf.Config) { c.EAL.MemoryMB = 1048577 },
			`eal.memory_mb: 1048577 is out of range 64..1048576`},
		{"negative main cpu", func(c *conf.Config) { c.EAL.MainCPU = -1 },
			`eal.main_cpu: -1 is negative`},
		{"empty extra arg", func(c *conf.Config) { c.EAL.ExtraArgs = []string{"-v", ""} },
			`eal.extra_args[1]: must not be empty`},

		// dataplane
		{"no workers", func(c *conf.Config) { c.Dataplane.Workers = nil },
			`dataplane.workers: has 0 entries, want 1..64`},
		{"too many workers", func(c *conf.Config) { c.Dataplane.Workers = make([]int, 65) },
			`dataplane.workers: has 65 entries, want 1..64`},
		{"negative worker", func(c *conf.Config) { c.Dataplane.Workers = []int{0, 1, -2} },
			`dataplane.workers[2]: -2 is negative`},
		{"steering key not hex", func(c *conf.Config) { c.Dataplane.SteeringKey = strings.Repeat("zz", 40) },
			`dataplane.steering_key: is not hex: encoding/hex: invalid byte: U+007A 'z'`},
		{"steering key short", func(c *conf.Config) { c.Dataplane.SteeringKey = strings.Repeat("6d", 39) },
			`dataplane.steering_key: has 39 bytes, want 40 (80 hex digits)`},
		{"steering key zero", func(c *conf.Config) { c.Dataplane.SteeringKey = strings.Repeat("00", 40) },
			`dataplane.steering_key: is all zero (every client would hash to one lcore)`},
		{"burst 0", func(c *conf.Config) { c.Dataplane.Burst = 0 },
			`dataplane.burst: 0 is out of range 1..512`},
		{"burst 513", func(c *conf.Config) { c.Dataplane.Burst = 513 },
			`dataplane.burst: 513 is out of range 1..512`},
		{"mbufs too few", func(c *conf.Config) { c.Dataplane.Mbufs = 1022 },
			`dataplane.mbufs: 1022 is out of range 1023..16777215`},
		{"mbuf cache too large", func(c *conf.Config) { c.Dataplane.MbufCache = 513 },
			`dataplane.mbuf_cache: 513 is out of range 0..512`},
		{"rx descriptors not power of two", func(c *conf.Config) { c.Dataplane.RxDescriptors = 1000 },
			`dataplane.rx_descriptors: 1000 is not a power of two`},
		{"tx descriptors too large", func(c *conf.Config) { c.Dataplane.TxDescriptors = 32768 },
			`dataplane.tx_descriptors: 32768 is out of range 64..16384`},
		{"conn table too small", func(c *conf.Config) { c.Dataplane.ConnTableSize = 1023 },
			`dataplane.conn_table_size: 1023 is out of range 1024..67108864`},
		{"idle sleep too long", func(c *conf.Config) { c.Dataplane.IdleSleep = 11 * time.Millisecond },
			`dataplane.idle_sleep: 11ms is out of range 0s..10ms`},
		{"idle sleep negative", func(c *conf.Config) { c.Dataplane.IdleSleep = -time.Microsecond },
			`dataplane.idle_sleep: -1µs is out of range 0s..10ms`},
		{"drop entry over 100", func(c *conf.Config) { c.Dataplane.Defense.DropEntry = 101 },
			`dataplane.defense.drop_entry: 101 is out of range 0..100`},
		{"secure negative", func(c *conf.Config) { c.Dataplane.Defense.Secure = -1 },
			`dataplane.defense.secure: -1 is out of range 0..100`},
		{"idle after zero", func(c *conf.Config) { c.Dataplane.Defense.IdleAfter = 0 },
			`dataplane.defense.idle_after: 0s is out of range 1s..720h (30 days)`},
		{"syn timeout too short", func(c *conf.Config) { c.Dataplane.Defense.SYNTimeout = time.Millisecond },
			`dataplane.defense.syn_timeout: 1ms is out of range 1s..720h (30 days)`},
		{"udp timeout too long", func(c *conf.Config) { c.Dataplane.Defense.UDPTimeout = 31 * 24 * time.Hour },
			`dataplane.defense.udp_timeout: 744h0m0s is out of range 1s..720h (30 days)`},
		{"unknown helper", func(c *conf.Config) { c.Services[0].Helper = "sip" },
			`services[0].helper: "sip" is not one of "", ftp`},
		{"ftp helper on udp", func(c *conf.Config) { c.Services[0].Protocol, c.Services[0].Helper = "udp", "ftp" },
			`services[0].helper: ftp needs protocol tcp, not udp`},
		{"ftp helper with the syn proxy", func(c *conf.Config) { c.Services[0].Helper, c.Services[0].SynProxy = "ftp", true },
			`services[0].synproxy: not with helper ftp: both shift the connection's sequence numbers`},
		{"ftp helper with a dr server", func(c *conf.Config) {
			c.Services[0].Helper, c.Services[0].Servers[0].Forward = "ftp", "dr"
			c.Services[0].Servers[0].Port = c.Services[0].Port
		}, `services[0].servers[0].forward: "dr": the ftp helper works through nat only`},
		{"fragment datagrams too few", func(c *conf.Config) { c.Dataplane.Fragments.Datagrams = 15 },
			`dataplane.fragments.datagrams: 15 is out of range 16..1048576`},
		{"fragments held negative", func(c *conf.Config) { c.Dataplane.Fragments.Held = -1 },
			`dataplane.fragments.held: -1 is out of range 0..65536`},
		{"fragments held starve the pool", func(c *conf.Config) { c.Dataplane.Fragments.Held = 8192 },
			`dataplane.fragments.held: 8192 per lcore on 1 lcores must stay below half of dataplane.mbufs (16383): held fragments must not starve the pool`},
		{"fragment timeout too long", func(c *conf.Config) { c.Dataplane.Fragments.Timeout = 2 * time.Minute },
			`dataplane.fragments.timeout: 2m0s is out of range 100ms..60s`},

		// ports
		{"no ports", func(c *conf.Config) { c.Ports = nil },
			`ports: at least one port is required`},
		{"empty port name", func(c *conf.Config) { c.Ports[1].Name = "" },
			`ports[1].name: must not be empty`},
		{"bad port name", func(c *conf.Config) { c.Ports[0].Name = "Client" },
			`ports[0].name: "Client" is not 1 to 15 characters of a-z 0-9 _ -`},
		{"long port name", func(c *conf.Config) { c.Ports[0].Name = "abcdefghijklmnop" },
			`ports[0].name: "abcdefghijklmnop" is not 1 to 15 characters of a-z 0-9 _ -`},
		{"duplicate port name", func(c *conf.Config) { c.Ports[1].Name = "client" },
			`ports[1].name: "client" is already used by ports[0]`},
		{"bad kni name", func(c *conf.Config) { c.Ports[1].KNI = "dpdk0/kni" },
			`ports[1].kni: "dpdk0/kni" is not an interface name: 1 to 15 characters of A-Z a-z 0-9 _ . -`},
		{"long kni name", func(c *conf.Config) { c.Ports[1].KNI = "dpdk0.kni.toolong" },
			`ports[1].kni: "dpdk0.kni.toolong" is not an interface name: 1 to 15 characters of A-Z a-z 0-9 _ . -`},
		{"duplicate kni", func(c *conf.Config) { c.Ports[0].KNI, c.Ports[1].KNI = "dpdk0.kni", "dpdk0.kni" },
			`ports[1].kni: "dpdk0.kni" is already ports[0]'s kernel interface`},
		{"kni on a port's own interface", func(c *conf.Config) { c.Ports[1].KNI = "veth0" },
			`ports[1].kni: "veth0" is the interface ports[0] (client) runs on`},
		{"empty device", func(c *conf.Config) { c.Ports[0].Device = "" },
			`ports[0].device: must not be empty`},
		{"bad device", func(c *conf.Config) { c.Ports[0].Device = "eth0 x" },
			`ports[0].device: "eth0 x" is neither a PCI address (0000:03:00.0) nor a DPDK vdev string (net_af_packet0,iface=veth0)`},
		{"bad PCI-looking device", func(c *conf.Config) { c.Ports[1].Device = "0000:3:00.0" },
			`ports[1].device: "0000:3:00.0" is neither a PCI address (0000:03:00.0) nor a DPDK vdev string (net_af_packet0,iface=veth0)`},
		{"duplicate vdev name", func(c *conf.Config) { c.Ports[1].Device = "net_af_packet0,iface=veth1" },
			`ports[1].device: device "net_af_packet0" is already used by ports[0]`},
		{"duplicate PCI in short form", func(c *conf.Config) { c.Ports[0].Device = "03:00.0" },
			`ports[1].device: device "0000:03:00.0" is already used by ports[0]`},
		{"empty address", func(c *conf.Config) { c.Ports[0].Address = "" },
			`ports[0].address: must not be empty`},
		{"address without prefix", func(c *conf.Config) { c.Ports[0].Address = "10.0.0.1" },
			`ports[0].address: "10.0.0.1" is not an address with prefix length (want e.g. 198.51.100.1/24)`},
		{"IPv6 address", func(c *conf.Config) { c.Ports[0].Address = "2001:db8::1/64" },
			`ports[0].address: "2001:db8::1/64" is not IPv4`},
		{"multicast address", func(c *conf.Config) { c.Ports[0].Address = "224.0.0.1/24" },
			`ports[0].address: 224.0.0.1 is not a unicast host address`},
		{"prefix /0", func(c *conf.Config) { c.Ports[0].Address = "203.0.113.1/0" },
			`ports[0].address: prefix length /0 is not allowed, want 1..32`},
		{"network address", func(c *conf.Config) { c.Ports[0].Address = "203.0.113.0/24" },
			`ports[0].address: 203.0.113.0 is the network address of 203.0.113.0/24`},
		{"broadcast address", func(c *conf.Config) { c.Ports[1].Address = "198.51.100.255/24" },
			`ports[1].address: 198.51.100.255 is the broadcast address of 198.51.100.0/24`},
		{"overlapping subnets", func(c *conf.Config) { c.Ports[1].Address = "203.0.113.129/25" },
			`ports[1].address: 203.0.113.128/25 overlaps ports[0].address 203.0.113.0/24`},
		{"gateway not an address", func(c *conf.Config) { c.Ports[0].Gateway = "gw" },
			`ports[0].gateway: "gw" is not an IPv4 address`},
		{"gateway off subnet", func(c *conf.Config) { c.Ports[0].Gateway = "192.0.2.1" },
			`ports[0].gateway: 192.0.2.1 is not inside 203.0.113.0/24`},
		{"gateway is own address", func(c *conf.Config) { c.Ports[0].Gateway = "203.0.113.1" },
			`ports[0].gateway: 203.0.113.1 is the port's own address`},
		{"two gateways", func(c *conf.Config) { c.Ports[1].Gateway = "198.51.100.254" },
			`ports[1].gateway: only one port may have a gateway, ports[0] has one`},
		{"route not a network", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.1", Via: "198.51.100.254"}} },
			`ports[1].routes[0].prefix: "10.9.0.1" is not a network with prefix length (want e.g. 10.0.0.0/8)`},
		{"route with host bits", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.1/24", Via: "198.51.100.254"}} },
			`ports[1].routes[0].prefix: 10.9.0.1/24 has host bits set (the network is 10.9.0.0/24)`},
		{"default route", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "0.0.0.0/0", Via: "198.51.100.254"}} },
			`ports[1].routes[0].prefix: 0.0.0.0/0 is the default route: set the port's gateway`},
		{"route via IPv6", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.0/24", Via: "fd00::1"}} },
			`ports[1].routes[0].via: "fd00::1" is not an IPv4 address, as the prefix is`},
		{"route via off subnet", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.0/24", Via: "203.0.113.254"}} },
			`ports[1].routes[0].via: 203.0.113.254 is not inside the port's subnet 198.51.100.0/24`},
		{"route via own address", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.0/24", Via: "198.51.100.1"}} },
			`ports[1].routes[0].via: 198.51.100.1 is the port's own address`},
		{"route via IPv6 without address6", func(c *conf.Config) { c.Ports[1].Routes = []conf.Route{{Prefix: "fd00:9::/48", Via: "fd00:1::fe"}} },
			`ports[1].routes[0].via: an IPv6 next hop needs the port's address6`},
		{"route over a port's subnet", func(c *conf.Config) {
			c.Ports[1].Routes = []conf.Route{{Prefix: "203.0.113.0/25", Via: "198.51.100.254"}}
		},
			`ports[1].routes[0].prefix: 203.0.113.0/25 overlaps ports[0].address 203.0.113.0/24, which is on-link`},
		{"route twice", func(c *conf.Config) {
			c.Ports[0].Routes = []conf.Route{{Prefix: "10.9.0.0/24", Via: "203.0.113.253"}}
			c.Ports[1].Routes = []conf.Route{{Prefix: "10.9.0.0/24", Via: "198.51.100.254"}}
		}, `ports[1].routes[0].prefix: 10.9.0.0/24 is already routed by ports[0].routes[0]`},
		{"too many routes", func(c *conf.Config) {
			for i := range conf.MaxRoutes + 1 {
				c.Ports[1].Routes = append(c.Ports[1].Routes, conf.Route{Prefix: fmt.Sprintf("10.%d.0.0/16", i), Via: "198.51.100.254"})
			}
		}, `ports[1].routes[32]: more than 32 routes of a family (a packet off-link is matched against each)`},
		{"bad role", func(c *conf.Config) { c.Ports[0].Role = "frontend" },
			`ports[0].role: "frontend" is not one of client, server, both`},
		{"empty role", func(c *conf.Config) { c.Ports[1].Role = "" },
			`ports[1].role: "" is not one of client, server, both`},
		{"mtu too small", func(c *conf.Config) { c.Ports[0].MTU = 67 },
			`ports[0].mtu: 67 is out of range 68..9702 (or 0 to keep the device's MTU)`},
		{"mtu too large", func(c *conf.Config) { c.Ports[1].MTU = 9703 },
			`ports[1].mtu: 9703 is out of range 68..9702 (or 0 to keep the device's MTU)`},
		{"no client-facing port", func(c *conf.Config) { c.Ports[0].Role = "server" },
			`ports: no port has role client or both, but services need one to receive client traffic`},

		// services
		{"empty protocol", func(c *conf.Config) { c.Services[0].Protocol = "" },
			`services[0].protocol: must not be empty (want tcp or udp)`},
		{"unknown protocol", func(c *conf.Config) { c.Services[0].Protocol = "sctp" },
			`services[0].protocol: "sctp" is not one of tcp, udp`},
		{"unknown sched flag", func(c *conf.Config) { c.Services[0].SchedFlags = []string{"sh-port", "sh-portx"} },
			`services[0].sched_flags[1]: unknown flag "sh-portx" (known: sh-fallback, sh-port, mh-fallback, mh-port)`},
		{"mh table not prime", func(c *conf.Config) { c.Services[0].MHTableSize = 65536 },
			`services[0].mh_table_size: 65536 is not a prime in 251..131071 (e.g. 65537)`},
		{"mh table too small", func(c *conf.Config) { c.Services[0].MHTableSize = 7 },
			`services[0].mh_table_size: 7 is not a prime in 251..131071 (e.g. 65537)`},
		{"persistence too short", func(c *conf.Config) { c.Services[0].Persistence = time.Millisecond },
			`services[0].persistence: 1ms is out of range 0 (off) or 1s..720h`},
		{"netmask not contiguous", func(c *conf.Config) { c.Services[0].Netmask = "255.0.255.0" },
			`services[0].netmask: 255.0.255.0 is not a contiguous netmask`},
		{"netmask not an address", func(c *conf.Config) { c.Services[0].Netmask = "24" },
			`services[0].netmask: "24" is not an IPv4 netmask (want e.g. 255.255.255.0)`},
		{"empty vip", func(c *conf.Config) { c.Services[0].VIP = "" },
			`services[0].vip: must not be empty`},
		{"bad vip", func(c *conf.Config) { c.Services[0].VIP = "203.0.113.10/32" },
			`services[0].vip: "203.0.113.10/32" is not an IPv4 address`},
		{"unspecified vip", func(c *conf.Config) { c.Services[0].VIP = "0.0.0.0" },
			`services[0].vip: 0.0.0.0 is not a unicast host address`},
		{"vip is a port address", func(c *conf.Config) { c.Services[1].VIP = "198.51.100.1" },
			`services[1].vip: 198.51.100.1 is the address of ports[1]`},
		{"service port 0 without persistence", func(c *conf.Config) { c.Services[0].Port = 0 },
			`services[0].port: 0 (every port of the VIP) needs persistence, as ipvsadm's port-zero services do`},
		{"port-zero service with a server port", func(c *conf.Config) { portZero(c); c.Services[0].Servers[1].Port = 443 },
			`services[0].servers[1].port: 443: the servers of a port-zero service take the client's port, so theirs is 0 (or left out)`},
		{"quic on tcp", func(c *conf.Config) { c.Services[0].QUIC = true },
			`services[0].quic: is for udp services only (QUIC runs over UDP)`},
		{"quic with persistence", func(c *conf.Config) {
			c.Services[0].Protocol, c.Services[0].QUIC, c.Services[0].Persistence = "udp", true, time.Minute
		}, `services[0].quic: not with persistence: the connection ID chooses the server (as DPVS's)`},
		{"one_packet on tcp", func(c *conf.Config) { c.Services[0].OnePacket = true },
			`services[0].one_packet: is for udp services only (as ipvsadm --ops)`},
		{"one_packet to a nat server", func(c *conf.Config) {
			c.Services[0].Protocol, c.Services[0].OnePacket = "udp", true
			c.Services[0].Servers[0].Forward, c.Services[0].Servers[0].Port = "dr", 80
		}, `services[0].servers[1].forward: nat with one_packet: no connection is kept to translate the server's answers back (use dr or tun)`},
		{"port-zero service's synproxy beside ftp", func(c *conf.Config) {
			portZero(c)
			c.Services[0].SynProxy = true
			c.Services[1].Helper = "ftp"
		}, `services[0].synproxy: not on port 0 of a VIP with an ftp service (services[1]): the proxy would answer its passive data connections`},
		{"port-zero service with ftp", func(c *conf.Config) { portZero(c); c.Services[0].Helper = "ftp" },
			`services[0].helper: ftp needs the service's control port, not port 0`},
		{"port-zero service checked on no port", func(c *conf.Config) { portZero(c); c.Services[0].Health.Type = "tcp" },
			`services[0].health.port: 0: services[0].servers[0] has no port of its own (a port-zero service's), say which one the tcp check probes`},
		{"port-zero server checked on no port", func(c *conf.Config) {
			portZero(c)
			c.Services[0].Servers[1].Health = &conf.HealthCheck{Type: "http", Interval: time.Second, Timeout: 500 * time.Millisecond, Rise: 1, Fall: 1, Method: "GET", Path: "/", Target: "server"}
		}, `services[0].servers[1].health.port: 0: services[0].servers[1] has no port of its own (a port-zero service's), say which one the http check probes`},
		{"service port 65536", func(c *conf.Config) { c.Services[0].Port = 65536 },
			`services[0].port: 65536 is out of range 0..65535`},
		{"empty scheduler", func(c *conf.Config) { c.Services[0].Scheduler = "" },
			`services[0].scheduler: must not be empty`},
		{"unknown scheduler", func(c *conf.Config) { c.Services[0].Scheduler = "wlcx" },
			`services[0].scheduler: unknown scheduler "wlcx" (known: rr, wrr)`},
		{"duplicate service", func(c *conf.Config) { c.Services[1].Port = 80 },
			`services[1]: tcp 203.0.113.10:80 is already defined by services[0]`},

		// real servers
		{"empty server address", func(c *conf.Config) { c.Services[0].Servers[1].Address = "" },
			`services[0].servers[1].address: must not be empty`},
		{"bad server address", func(c *conf.Config) { c.Services[0].Servers[0].Address = "rs1" },
			`services[0].servers[0].address: "rs1" is not an IPv4 address`},
		{"server is the VIP", func(c *conf.Config) { c.Services[0].Servers[0].Address = "203.0.113.10" },
			`services[0].servers[0].address: 203.0.113.10 is the service's VIP`},
		{"server is a port address", func(c *conf.Config) { c.Services[0].Servers[0].Address = "198.51.100.1" },
			`services[0].servers[0].address: 198.51.100.1 is the address of ports[1]`},
		{"server off every server subnet", func(c *conf.Config) { c.Services[1].Servers[0].Address = "192.0.2.7" },
			`services[1].servers[0].address: 192.0.2.7 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"server on a client-only subnet", func(c *conf.Config) { c.Services[0].Servers[0].Address = "203.0.113.20" },
			`services[0].servers[0].address: 203.0.113.20 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"no server-facing port", func(c *conf.Config) { c.Ports[1].Role = "client" },
			`services[0].servers[0].address: 198.51.100.11 is not on any server-facing port's subnet (no port has role server or both)`},
		{"server port 0", func(c *conf.Config) { c.Services[0].Servers[1].Port = 0 },
			`services[0].servers[1].port: 0 is out of range 1..65535`},
		{"negative weight", func(c *conf.Config) { c.Services[1].Servers[0].Weight = -3 },
			`services[1].servers[0].weight: -3 is out of range 0..65535`},
		{"weight too large", func(c *conf.Config) { c.Services[0].Servers[0].Weight = 65536 },
			`services[0].servers[0].weight: 65536 is out of range 0..65535`},
		{"fullnat without local addresses", func(c *conf.Config) { c.Services[0].Servers[1].Forward = "fullnat" },
			`services[0].servers[1].forward: fullnat needs the service's local_addresses`},
		{"local address off the server subnets", func(c *conf.Config) { c.Services[0].LocalAddresses = []string{"203.0.113.50"} },
			`services[0].local_addresses[0]: 203.0.113.50 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"local address is a port's", func(c *conf.Config) { c.Services[0].LocalAddresses = []string{"198.51.100.1"} },
			`services[0].local_addresses[0]: 198.51.100.1 is already ports[1].address`},
		{"overlapping local address pools", func(c *conf.Config) {
			c.Services[0].LocalAddresses = []string{"198.51.100.200"}
			c.Services[1].LocalAddresses = []string{"198.51.100.201", "198.51.100.200"}
		}, `services[1].local_addresses[1]: 198.51.100.200 is already services[0].local_addresses[0]`},
		{"local address not an address", func(c *conf.Config) { c.Services[0].LocalAddresses = []string{"lip"} },
			`services[0].local_addresses[0]: "lip" is not an IPv4 address`},
		{"synproxy on udp", func(c *conf.Config) { c.Services[0].Protocol = "udp"; c.Services[0].SynProxy = true },
			`services[0].synproxy: is for tcp services only`},
		{"synproxy with a dr server", func(c *conf.Config) {
			c.Services[1].SynProxy = true
			c.Services[1].Servers[0].Forward = "dr"
		}, `services[1].servers[0].forward: dr with synproxy: the replies of dr and tun servers bypass lbd, which could not move their sequence numbers (use nat or fullnat)`},
		{"blocklist entry not an address", func(c *conf.Config) { c.Services[0].Blocklist = []string{"203.0.113.7", "bad"} },
			`services[0].blocklist[1]: "bad" is neither an address nor a prefix (e.g. 192.0.2.7, 198.51.100.0/24, 2001:db8::/48)`},
		{"blocklist prefix with host bits", func(c *conf.Config) { c.Services[0].Blocklist = []string{"203.0.113.7/24"} },
			`services[0].blocklist[0]: "203.0.113.7/24" has bits set past its length (did you mean 203.0.113.0/24?)`},
		{"allowlist in the other family", func(c *conf.Config) { c.Services[0].Allowlist = []string{"2001:db8::/48"} },
			`services[0].allowlist[0]: 2001:db8::/48 is not in the VIP's family (203.0.113.10)`},
		{"allowlist entry twice", func(c *conf.Config) { c.Services[0].Allowlist = []string{"192.0.2.0/24", "192.0.2.0/24"} },
			`services[0].allowlist[1]: 192.0.2.0/24 is already services[0].allowlist[0]`},
		{"allowlist too long", func(c *conf.Config) { c.Services[0].Allowlist = make([]string, conf.MaxClientList+1) },
			`services[0].allowlist: 65537 entries: at most 65536`},
		{"proxy protocol on udp", func(c *conf.Config) { c.Services[0].Protocol = "udp"; c.Services[0].ProxyProtocol = true },
			`services[0].proxy_protocol: is for tcp services only`},
		{"uoa on tcp", func(c *conf.Config) { c.Services[0].UOA = "opp" },
			`services[0].uoa: is for udp services only (toa is tcp's)`},
		{"uoa mode unknown", func(c *conf.Config) { c.Services[0].Protocol, c.Services[0].UOA = "udp", "yes" },
			`services[0].uoa: "yes" is not one of ipo, opp (or empty: none)`},
		{"toa on udp", func(c *conf.Config) { c.Services[0].Protocol = "udp"; c.Services[0].TOA = true },
			`services[0].toa: is for tcp services only`},
		{"toa with the PROXY header", func(c *conf.Config) { c.Services[0].TOA, c.Services[0].ProxyProtocol = true, true },
			`services[0].toa: not with proxy_protocol: both tell the servers the client's address (choose the one they expect)`},

		{"dr with another port", func(c *conf.Config) { c.Services[0].Servers[1].Forward = "dr" },
			`services[0].servers[1].port: 8000 differs from the service's port 80: only nat and fullnat rewrite ports (dr and tun forward the packet unchanged)`},
		{"tun off every subnet without a gateway", func(c *conf.Config) {
			c.Ports[0].Gateway = ""
			c.Services[1].Servers[0].Forward = "tun"
			c.Services[1].Servers[0].Address = "192.0.2.7"
		}, `services[1].servers[0].address: 192.0.2.7 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"dr off every subnet", func(c *conf.Config) {
			c.Services[1].Servers[0].Forward = "dr"
			c.Services[1].Servers[0].Address = "192.0.2.7"
		}, `services[1].servers[0].address: 192.0.2.7 is not on any server-facing port's subnet (198.51.100.0/24)`},
		{"upper threshold too large", func(c *conf.Config) { c.Services[0].Servers[0].Upper = 1000001 },
			`services[0].servers[0].upper_threshold: 1000001 is out of range 0..1000000`},
		{"lower above upper", func(c *conf.Config) { c.Services[0].Servers[0].Upper, c.Services[0].Servers[0].Lower = 10, 11 },
			`services[0].servers[0].lower_threshold: 11 is out of range 0..10`},
		{"lower without upper", func(c *conf.Config) { c.Services[0].Servers[0].Lower = 5 },
			`services[0].servers[0].lower_threshold: 5 needs an upper_threshold`},
		{"unknown forward", func(c *conf.Config) { c.Services[0].Servers[1].Forward = "" },
			`services[0].servers[1].forward: "" is not one of nat, dr, tun, fullnat`},
		{"duplicate server", func(c *conf.Config) {
			c.Services[0].Servers[1].Address = "198.51.100.11"
			c.Services[0].Servers[1].Port = 80
		},
			`services[0].servers[1]: 198.51.100.11:80 is already listed as services[0].servers[0]`},

		// timeouts, neighbour
		{"tcp timeout 0", func(c *conf.Config) { c.Timeouts.TCP = 0 },
			`timeouts.tcp: 0s is out of range 1s..720h (30 days)`},
		{"tcp_fin timeout too short", func(c *conf.Config) { c.Timeouts.TCPFin = 999 * time.Millisecond },
			`timeouts.tcp_fin: 999ms is out of range 1s..720h (30 days)`},
		{"udp timeout too long", func(c *conf.Config) { c.Timeouts.UDP = 721 * time.Hour },
			`timeouts.udp: 721h0m0s is out of range 1s..720h (30 days)`},
		{"syn timeout negative", func(c *conf.Config) { c.Timeouts.SYN = -time.Second },
			`timeouts.syn: -1s is out of range 1s..720h (30 days)`},
		{"reachable time 0", func(c *conf.Config) { c.Neighbour.ReachableTime = 0 },
			`neighbour.reachable_time: 0s is out of range 1s..1h`},
		{"stale not after reachable", func(c *conf.Config) { c.Neighbour.StaleTime = 30 * time.Second },
			`neighbour.stale_time: 30s is not greater than neighbour.reachable_time 30s`},
		{"stale too long", func(c *conf.Config) { c.Neighbour.StaleTime = 25 * time.Hour },
			`neighbour.stale_time: 25h0m0s is more than 24h`},

		// control, metrics, log
		{"empty socket", func(c *conf.Config) { c.Control.Socket = "" },
			`control.socket: must not be empty`},
		{"relative socket", func(c *conf.Config) { c.Control.Socket = "lbd.sock" },
			`control.socket: "lbd.sock" is not an absolute path`},
		{"socket path too long", func(c *conf.Config) { c.Control.Socket = "/" + strings.Repeat("s", 107) },
			`control.socket: "/` + strings.Repeat("s", 107) + `" is longer than 107 bytes`},
		{"socket mode too large", func(c *conf.Config) { c.Control.SocketMode = 600 },
			`control.socket_mode: 01130 is out of range 0..0777 (write modes in octal, e.g. 0600)`},
		{"metrics not host:port", func(c *conf.Config) { c.Metrics.Listen = "localhost" },
			`metrics.listen: "localhost" is not host:port (want e.g. 127.0.0.1:9180)`},
		{"metrics port not a number", func(c *conf.Config) { c.Metrics.Listen = "127.0.0.1:http" },
			`metrics.listen: port "http" is not a number in 1..65535`},
		{"metrics port 0", func(c *conf.Config) { c.Metrics.Listen = "127.0.0.1:0" },
			`metrics.listen: port "0" is not a number in 1..65535`},
		{"bad log level", func(c *conf.Config) { c.Log.Level = "trace" },
			`log.level: "trace" is not one of debug, info, warn, error`},
		{"bad log format", func(c *conf.Config) { c.Log.Format = "text" },
			`log.format: "text" is not one of json, console`},
		{"relative state file", func(c *conf.Config) { c.Restart.StateFile = "handover" },
			`restart.state_file: "handover" is not an absolute path`},
		{"state max age too short", func(c *conf.Config) { c.Restart.MaxAge = 0 },
			`restart.max_age: 0s is out of range 1s..1h`},
		{"pull wait too long", func(c *conf.Config) { c.Restart.PullWait = 2 * time.Minute },
			`restart.pull_wait: 2m0s is out of range 0..60s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := c.Validate(schedulers)
			if err == nil {
				t.Fatalf("Validate() = nil, want %s", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Validate() =\n%s\nwant\n%s", err, tt.want)
			}
			var fe *conf.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Validate() error %T is not a *conf.FieldError", err)
			}
		})
	}
}

// TestCheckSchedulers: what Validate(nil) leaves out, checked alone, with
// Validate's message.
func TestCheckSchedulers(t *testing.T) {
	c := validConfig()
	if err := c.CheckSchedulers(schedulers); err != nil {
		t.Fatalf("valid names refused: %v", err)
	}
	c.Services[1].Scheduler = "wlcx"
	err := c.CheckSchedulers(schedulers)
	want := c.Validate(schedulers)
	var fe *conf.FieldError
	if err == nil || want == nil || err.Error() != want.Error() || !errors.As(err, &fe) || fe.Field != "services[1].scheduler" {
		t.Fatalf("CheckSchedulers = %v, Validate = %v; want the same FieldError on services[1].scheduler", err, want)
	}
}

// TestPortAddress6: a port's optional IPv6 address is checked, and a bad
// one is refused naming the field.
func TestPortAddress6(t *testing.T) {
	good := validConfig()
	good.Ports[0].Address6 = "2001:db8::1/64"
	good.Ports[1].Address6 = "fd00:1::1/64"
	if err := good.Validate(schedulers); err != nil {
		t.Fatalf("dual-stack ports refused: %v", err)
	}
	for _, tc := range []struct{ name, a0, a1, want string }{
		{"not a prefix", "2001:db8::1", "", "ports[0].address6"},
		{"IPv4", "203.0.113.9/24", "", "ports[0].address6"},
		{"link-local", "fe80::1/64", "", "ports[0].address6"},
		{"multicast", "ff02::1/64", "", "ports[0].address6"},
		{"/128", "2001:db8::1/128", "", "ports[0].address6"},
		{"overlap", "2001:db8::1/64", "2001:db8::2/64", "ports[1].address6"},
	} {
		c := validConfig()
		c.Ports[0].Address6, c.Ports[1].Address6 = tc.a0, tc.a1
		err := c.Validate(schedulers)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.want)
		}
	}
}
