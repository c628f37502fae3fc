package keepalived_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/conf/keepalived"
)

// ports put the converted services' VIPs on the client side and their
// servers on the server side, both families.
const ports = `
ports:
  - name: client
    device: net_ring0
    address: 192.0.2.1/24
    address6: 2001:db8::1/64
    role: client
  - name: server
    device: net_ring1
    address: 198.51.100.1/24
    address6: 2001:db8:1::1/64
    role: server
`

const realisticYAML = `# services converted from testdata/keepalived.conf by lbd import-keepalived;
# add the ports: section (see lbd.yaml(5)) and check with lbd -check
services:
  # virtual_server at testdata/keepalived.conf:22
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wrr
    persistence: 300s
    servers:
      - address: 198.51.100.11
        port: 8080
        weight: 3
      - address: 198.51.100.12
        port: 8080
    sorry_server: 198.51.100.99:8080
    health:
      type: http
      interval: 6s
      timeout: 3s
      rise: 1
      fall: 4
      retry_interval: 1s
      path: /healthz
      host: www.example.com
      expect_status: "200"
  # virtual_server at testdata/conf.d/more.conf:2
  - protocol: tcp
    vip: 192.0.2.10
    port: 443
    scheduler: sh
    sched_flags: [sh-port]
    persistence: 360s
    netmask: 255.255.255.0
    servers:
      - address: 198.51.100.11
        forward: dr
      - address: 198.51.100.12
        forward: dr
        upper_threshold: 1000
        lower_threshold: 800
    health:
      type: tcp
      interval: 10s
      timeout: 2s
      rise: 1
      fall: 2
      retry_interval: 1s
  # virtual_server at testdata/conf.d/more.conf:25
  - protocol: tcp
    vip: 2001:db8::10
    port: 80
    servers:
      - address: 2001:db8:1::11
    health:
      type: exec
      interval: 5s
      timeout: 4s
      rise: 1
      fall: 1
      command: [/usr/local/bin/check-web, --port, "80", the site]
  # virtual_server at testdata/conf.d/more.conf:38
  - protocol: udp
    vip: 192.0.2.53
    port: 53
    scheduler: lc
    servers:
      - address: 198.51.100.21
        forward: dr
        health:
          type: icmp
          rise: 1
          retry_interval: 1s
      - address: 198.51.100.22
        forward: dr
        health:
          type: icmp
          timeout: 1800ms
          rise: 1
          retry_interval: 1s
`

// service is a service as conf.Load returns it, every default filled in.
func service(proto, vip string, port int, servers ...conf.RealServer) conf.Service {
	return conf.Service{
		Protocol: proto, VIP: vip, Port: port, Scheduler: "rr", MHTableSize: 65537,
		Netmask: "255.255.255.255", Servers: servers,
		Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(),
	}
}

// health is the default check with edit applied.
func health(edit func(*conf.HealthCheck)) conf.HealthCheck {
	h := conf.DefaultHealthCheck()
	h.Rise = 1
	edit(&h)
	return h
}

// TestConvertRealistic: a keepalived.conf as found on a pair of LVS
// directors (VRRP, NAT with HTTP checks, DR with TCP checks, IPv6 with a
// script, UDP with pings, an include) gives services that lbd takes.
func TestConvertRealistic(t *testing.T) {
	r, err := keepalived.Load("testdata/keepalived.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.YAML("testdata/keepalived.conf")); got != realisticYAML {
		t.Errorf("YAML:\n%s\nwant\n%s", got, realisticYAML)
	}
	warnings := warningStrings(r)
	wantWarnings := []string{
		"testdata/conf.d/more.conf:50: PING_CHECK: keepalived's connect_timeout, 5s, is not less than delay_loop 2s, as lbd wants: timeout 1800ms",
	}
	if !slices.Equal(warnings, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}
	if r.VRRP == nil || r.VRRP.String() != "testdata/keepalived.conf:10" {
		t.Errorf("VRRP = %v, want testdata/keepalived.conf:10", r.VRRP)
	}

	web := service("tcp", "192.0.2.10", 80,
		conf.RealServer{Address: "198.51.100.11", Port: 8080, Weight: 3, Forward: "nat"},
		conf.RealServer{Address: "198.51.100.12", Port: 8080, Weight: 1, Forward: "nat"})
	web.Scheduler = "wrr"
	web.Persistence = 300 * time.Second
	web.SorryServer = "198.51.100.99:8080"
	web.Health = health(func(h *conf.HealthCheck) {
		h.Type, h.Interval, h.Timeout, h.Fall = "http", 6*time.Second, 3*time.Second, 4
		h.RetryInterval = time.Second // keepalived's delay_before_retry default
		h.Path, h.Host, h.ExpectStatus = "/healthz", "www.example.com", "200"
	})
	tls := service("tcp", "192.0.2.10", 443,
		conf.RealServer{Address: "198.51.100.11", Port: 443, Weight: 1, Forward: "dr"},
		conf.RealServer{Address: "198.51.100.12", Port: 443, Weight: 1, Forward: "dr", Upper: 1000, Lower: 800})
	tls.Scheduler, tls.SchedFlags = "sh", []string{"sh-port"}
	tls.Persistence, tls.Netmask = 360*time.Second, "255.255.255.0"
	tls.Health = health(func(h *conf.HealthCheck) {
		h.Type, h.Interval, h.Timeout, h.Fall = "tcp", 10*time.Second, 2*time.Second, 2
		h.RetryInterval = time.Second // keepalived's delay_before_retry default
	})
	web6 := service("tcp", "2001:db8::10", 80, conf.RealServer{Address: "2001:db8:1::11", Port: 80, Weight: 1, Forward: "nat"})
	web6.Health = health(func(h *conf.HealthCheck) {
		h.Type, h.Interval, h.Timeout, h.Fall = "exec", 5*time.Second, 4*time.Second, 1
		h.Command = []string{"/usr/local/bin/check-web", "--port", "80", "the site"}
	})
	ping := health(func(h *conf.HealthCheck) { h.Type, h.RetryInterval = "icmp", time.Second })
	ping2 := health(func(h *conf.HealthCheck) {
		h.Type, h.Timeout, h.RetryInterval = "icmp", 1800*time.Millisecond, time.Second
	})
	dns := service("udp", "192.0.2.53", 53,
		conf.RealServer{Address: "198.51.100.21", Port: 53, Weight: 1, Forward: "dr", Health: &ping},
		conf.RealServer{Address: "198.51.100.22", Port: 53, Weight: 1, Forward: "dr", Health: &ping2})
	dns.Scheduler = "lc"
	want := []conf.Service{web, tls, web6, dns}

	if !reflect.DeepEqual(r.Services, want) {
		t.Errorf("Services:\n%+v\nwant\n%+v", r.Services, want)
	}
	cfg, err := conf.Parse(append([]byte(ports), r.YAML("keepalived.conf")...))
	if err != nil {
		t.Fatalf("conf.Parse of the output: %v", err)
	}
	if !reflect.DeepEqual(cfg.Services, want) {
		t.Errorf("conf.Parse of the output:\n%+v\nwant\n%+v", cfg.Services, want)
	}
}

const dpvsYAML = `# services converted from testdata/dpvs.conf by lbd import-keepalived;
# add the ports: section (see lbd.yaml(5)) and check with lbd -check
services:
  # virtual_server group web at testdata/dpvs.conf:42, entry 192.0.2.100 80
  - protocol: tcp
    vip: 192.0.2.100
    port: 80
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        weight: 100
        forward: fullnat
      - address: 198.51.100.12
        weight: 50
        forward: fullnat
    local_addresses: [198.51.100.200, 198.51.100.201]
    toa: true
    synproxy: true
    blocklist: [203.0.113.7, 203.0.113.64, 203.0.113.65, 203.0.113.66]
    health:
      type: tcp
      interval: 3s
      timeout: 2s
      rise: 1
      retry_interval: 1s
  # virtual_server group web at testdata/dpvs.conf:42, entry 192.0.2.101 80
  - protocol: tcp
    vip: 192.0.2.101
    port: 80
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        weight: 100
        forward: fullnat
      - address: 198.51.100.12
        weight: 50
        forward: fullnat
    local_addresses: [198.51.100.202, 198.51.100.203]
    toa: true
    synproxy: true
    blocklist: [203.0.113.7, 203.0.113.64, 203.0.113.65, 203.0.113.66]
    health:
      type: tcp
      interval: 3s
      timeout: 2s
      rise: 1
      retry_interval: 1s
  # virtual_server group web at testdata/dpvs.conf:42, entry 192.0.2.110 8080
  - protocol: tcp
    vip: 192.0.2.110
    port: 8080
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        port: 80
        weight: 100
        forward: fullnat
      - address: 198.51.100.12
        port: 80
        weight: 50
        forward: fullnat
    local_addresses: [198.51.100.204, 198.51.100.205]
    toa: true
    synproxy: true
    blocklist: [203.0.113.7, 203.0.113.64, 203.0.113.65, 203.0.113.66]
    health:
      type: tcp
      interval: 3s
      timeout: 2s
      rise: 1
      retry_interval: 1s
  # virtual_server group web at testdata/dpvs.conf:42, entry 192.0.2.111 8080
  - protocol: tcp
    vip: 192.0.2.111
    port: 8080
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        port: 80
        weight: 100
        forward: fullnat
      - address: 198.51.100.12
        port: 80
        weight: 50
        forward: fullnat
    local_addresses: [198.51.100.206, 198.51.100.207]
    toa: true
    synproxy: true
    blocklist: [203.0.113.7, 203.0.113.64, 203.0.113.65, 203.0.113.66]
    health:
      type: tcp
      interval: 3s
      timeout: 2s
      rise: 1
      retry_interval: 1s
  # virtual_server group web at testdata/dpvs.conf:42, entry 192.0.2.112 8080
  - protocol: tcp
    vip: 192.0.2.112
    port: 8080
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        port: 80
        weight: 100
        forward: fullnat
      - address: 198.51.100.12
        port: 80
        weight: 50
        forward: fullnat
    local_addresses: [198.51.100.208, 198.51.100.209]
    toa: true
    synproxy: true
    blocklist: [203.0.113.7, 203.0.113.64, 203.0.113.65, 203.0.113.66]
    health:
      type: tcp
      interval: 3s
      timeout: 2s
      rise: 1
      retry_interval: 1s
  # virtual_server at testdata/dpvs.conf:68
  - protocol: tcp
    vip: 2001:db8::100
    port: 443
    servers:
      - address: 198.51.100.21
        forward: fullnat
    local_addresses: [198.51.100.220]
    toa: true
    health:
      type: tcp
      interval: 5s
      timeout: 2s
      rise: 1
      fall: 2
      retry_interval: 1s
# the servers' own connections out (DPVS's SNAT match services): each
# address must be on a client-facing port's subnet
snat:
  - source: 198.51.100.0/24
    addresses: [192.0.2.60]
    protocols: [tcp, udp]
`

// TestConvertDPVS: a keepalived.conf of DPVS's (FullNAT on DPDK ports: a
// virtual_server_group with a range, local addresses named with their
// dpdk0 interface, a SYN proxy, a blocklist, NAT64, SNAT match services
// for TCP and UDP) gives services and a SNAT rule that lbd takes, the
// group's local addresses split among its services.
func TestConvertDPVS(t *testing.T) {
	r, err := keepalived.Load("testdata/dpvs.conf")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.YAML("testdata/dpvs.conf")); got != dpvsYAML {
		t.Errorf("YAML:\n%s\nwant\n%s", got, dpvsYAML)
	}
	warnings := warningStrings(r)
	wantWarnings := []string{
		"testdata/dpvs.conf:7: local_address_group: 5 services use it, and a local address of lbd's serves one service (pools never overlap): its 10 address(es) split among them",
		"testdata/dpvs.conf:38: fwmark: lbd has no fwmark services (they balance by address and port): entry skipped",
		"testdata/dpvs.conf:87: src-range: 198.51.100.10-198.51.100.254 is not a network: lbd's rule takes 198.51.100.0/24, 11 address(es) more",
		"testdata/dpvs.conf:88: oif: lbd's SNAT rules match the source alone and leave from the port whose subnet holds their addresses: dropped",
		"testdata/dpvs.conf:99: src-range: 198.51.100.10-198.51.100.254 is not a network: lbd's rule takes 198.51.100.0/24, 11 address(es) more",
		"testdata/dpvs.conf:100: oif: lbd's SNAT rules match the source alone and leave from the port whose subnet holds their addresses: dropped",
	}
	if !slices.Equal(warnings, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}

	check := health(func(h *conf.HealthCheck) {
		h.Type, h.Interval, h.Timeout, h.Fall = "tcp", 3*time.Second, 2*time.Second, 3
		h.RetryInterval = time.Second // keepalived's delay_before_retry default
	})
	var want []conf.Service
	for i, e := range []struct {
		vip  string
		port int
	}{{"192.0.2.100", 80}, {"192.0.2.101", 80}, {"192.0.2.110", 8080}, {"192.0.2.111", 8080}, {"192.0.2.112", 8080}} {
		web := service("tcp", e.vip, e.port,
			conf.RealServer{Address: "198.51.100.11", Port: 80, Weight: 100, Forward: "fullnat"},
			conf.RealServer{Address: "198.51.100.12", Port: 80, Weight: 50, Forward: "fullnat"})
		web.Scheduler, web.Health, web.SynProxy, web.TOA = "wrr", check, true, true
		web.LocalAddresses = []string{fmt.Sprintf("198.51.100.%d", 200+2*i), fmt.Sprintf("198.51.100.%d", 201+2*i)}
		web.Blocklist = []string{"203.0.113.7", "203.0.113.64", "203.0.113.65", "203.0.113.66"}
		want = append(want, web)
	}
	nat64 := service("tcp", "2001:db8::100", 443, conf.RealServer{Address: "198.51.100.21", Port: 443, Weight: 1, Forward: "fullnat"})
	nat64.LocalAddresses, nat64.TOA = []string{"198.51.100.220"}, true
	nat64.Health = health(func(h *conf.HealthCheck) {
		h.Type, h.Interval, h.Timeout, h.Fall = "tcp", 5*time.Second, 2*time.Second, 2
		h.RetryInterval = time.Second // keepalived's delay_before_retry default
	})
	want = append(want, nat64)

	if !reflect.DeepEqual(r.Services, want) {
		t.Errorf("Services:\n%+v\nwant\n%+v", r.Services, want)
	}
	cfg, err := conf.Parse(append([]byte(ports), r.YAML("dpvs.conf")...))
	if err != nil {
		t.Fatalf("conf.Parse of the output: %v", err)
	}
	if !reflect.DeepEqual(cfg.Services, want) {
		t.Errorf("conf.Parse of the output:\n%+v\nwant\n%+v", cfg.Services, want)
	}
	wantSNAT := []conf.SNAT{{Source: "198.51.100.0/24", Addresses: []string{"192.0.2.60"}, Protocols: []string{"tcp", "udp"}}}
	if !reflect.DeepEqual(r.SNAT, wantSNAT) || !reflect.DeepEqual(cfg.SNAT, wantSNAT) {
		t.Errorf("SNAT %+v, parsed back %+v, want %+v", r.SNAT, cfg.SNAT, wantSNAT)
	}
}

// TestConvertSNATRefused: match services lbd cannot take as SNAT rules
// are skipped, naming why; a rule's source or address another rule has
// is refused as lbd's validation would.
func TestConvertSNATRefused(t *testing.T) {
	match := func(body string) string {
		return "virtual_server match M {\n    lb_kind SNAT\n" + body + "}\n"
	}
	tests := []struct {
		name, text string
		warning    string
		rules      int // the rules made (the first of two refused ones)
	}{
		{"not SNAT", "virtual_server match M {\n    lb_kind FNAT\n    src-range 10.0.0.0-10.0.0.255\n    real_server 192.0.2.60 0\n}\n",
			"keepalived.conf:1: virtual_server: a match service whose lb_kind is not SNAT: lbd has no such service: skipped", 0},
		{"no source", match("    real_server 192.0.2.60 0\n"),
			"keepalived.conf:1: virtual_server: no src-range: lbd's SNAT rules name the servers' network: skipped", 0},
		{"IPv6 range", match("    src-range 2001:db8::1-2001:db8::9\n    real_server 192.0.2.60 0\n"),
			`keepalived.conf:3: src-range: "2001:db8::1-2001:db8::9" is not an IPv4 range (lbd's SNAT rules are IPv4): match skipped`, 0},
		{"backwards", match("    src-range 10.0.0.9-10.0.0.1\n    real_server 192.0.2.60 0\n"),
			`keepalived.conf:3: src-range: "10.0.0.9-10.0.0.1" is not an IPv4 range (lbd's SNAT rules are IPv4): match skipped`, 0},
		{"no address", match("    src-range 10.0.0.0-10.0.0.255\n"),
			"keepalived.conf:1: virtual_server: no real_server (the address the servers' connections leave from): skipped", 0},
		{"SCTP", match("    protocol SCTP\n    src-range 10.0.0.0-10.0.0.255\n    real_server 192.0.2.60 0\n"),
			`keepalived.conf:3: protocol: "SCTP": lbd's SNAT rules take TCP, UDP and ICMP: match skipped`, 0},
		{"overlap", match("    src-range 10.0.0.0-10.0.0.255\n    real_server 192.0.2.60 0\n") +
			match("    src-range 10.0.0.128-10.0.0.255\n    real_server 192.0.2.61 0\n"),
			"keepalived.conf:6: virtual_server: its source 10.0.0.128/25 overlaps 10.0.0.0/24's and is not the same (lbd's rules' sources never overlap): skipped", 1},
		{"address twice", match("    src-range 10.0.0.0-10.0.0.255\n    real_server 192.0.2.60 0\n") +
			match("    src-range 10.1.0.0-10.1.0.255\n    real_server 192.0.2.60 0\n"),
			"keepalived.conf:6: virtual_server: 192.0.2.60 is already the address of the rule for 10.0.0.0/24 (a rule's addresses are its own): skipped", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := convert(t, tc.text)
			got := warningStrings(r)
			if !slices.Contains(got, tc.warning) {
				t.Errorf("warnings:\n%s\nwant among them\n%s", strings.Join(got, "\n"), tc.warning)
			}
			if len(r.SNAT) != tc.rules {
				t.Errorf("rules %+v, want %d", r.SNAT, tc.rules)
			}
		})
	}
	// A range that is a network, an ICMP rule merged with TCP's.
	r := convert(t, match("    src-range 10.0.0.0-10.0.0.255:0-0\n    real_server 192.0.2.60 0\n")+
		match("    protocol ICMP\n    src-range 10.0.0.0-10.0.0.255\n    real_server 192.0.2.60 0\n"))
	if want := []conf.SNAT{{Source: "10.0.0.0/24", Addresses: []string{"192.0.2.60"}, Protocols: []string{"tcp", "icmp"}}}; !reflect.DeepEqual(r.SNAT, want) || len(r.Warnings) != 0 {
		t.Errorf("rules %+v, warnings %v; want %+v and none", r.SNAT, r.Warnings, want)
	}
}

// warningStrings is r's warnings as the importer prints them.
func warningStrings(r keepalived.Result) []string {
	var out []string
	for _, w := range r.Warnings {
		out = append(out, w.String())
	}
	return out
}

func convert(t *testing.T, text string) keepalived.Result {
	t.Helper()
	nodes, err := keepalived.Parse("keepalived.conf", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return keepalived.Convert(nodes)
}

// vs wraps real_server lines in a virtual_server at line 1.
func vs(body string) string {
	return "virtual_server 192.0.2.10 80 {\n" + body + "}\n"
}

// TestConvertWarnings: what keepalived does and lbd cannot is named with
// its keyword and line; the services keep the rest.
func TestConvertWarnings(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		warnings []string
		services string // the services section of the output, "" for no check
	}{
		{"DPVS's conhash", "virtual_server 192.0.2.10 80 {\n  lb_algo conhash\n  real_server 198.51.100.11 80\n}\n", []string{
			"keepalived.conf:2: lb_algo: DPVS's conhash is lbd's mh (Maglev consistent hashing of the client's address): the same clients stay together, on other servers than DPVS chose",
		}, "services:\n  - protocol: tcp\n    vip: 192.0.2.10\n    port: 80\n    scheduler: mh\n    servers:\n      - address: 198.51.100.11\n"},
		{"every port", `virtual_server 192.0.2.10 0 {
  lb_kind DR
  persistence_timeout 600
  real_server 198.51.100.11 80 {
    TCP_CHECK {
      connect_timeout 3
    }
  }
  real_server 198.51.100.12 {
    TCP_CHECK {
      connect_port 22
    }
  }
}
virtual_server 192.0.2.11 0 {
  real_server 198.51.100.11 0
}
`, []string{
			"keepalived.conf:4: real_server: a service of every port sends each connection to the client's port, as IPVS: port 80 dropped",
			"keepalived.conf:5: TCP_CHECK: a server of a service of every port has no port to probe without connect_port: the server is left unchecked (type none)",
			"keepalived.conf:15: virtual_server: a service of every port (port 0) needs persistence_timeout, as ipvsadm's: skipped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 0
    scheduler: wlc
    persistence: 600s
    servers:
      - address: 198.51.100.11
        forward: dr
      - address: 198.51.100.12
        forward: dr
        health:
          type: tcp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          port: 22
`},
		{"global_defs", `global_defs {
  router_id lb1
  lvs_timeouts tcp 7200 tcpfin 120 udp 300
  lvs_sync_daemon eth1 VI_1 id 7 port 8848
  lvs_flush
}
global_defs {
  lvs_timeouts sctp 9
}
virtual_server 192.0.2.10 80 {
  real_server 198.51.100.11 80
}
`, []string{
			"keepalived.conf:3: lvs_timeouts: not written here (services only): set timeouts: {tcp: 7200s, tcp_fin: 120s, udp: 300s} in lbd.yaml",
			"keepalived.conf:4: lvs_sync_daemon: not written here (services only): lbd syncs its connections itself, over a management interface: see the sync section of lbd.yaml (master, backup, mcast_interface, syncid, port)",
			"keepalived.conf:5: lvs_flush: lbd starts with the configuration's services and ends with them: dropped",
			"keepalived.conf:8: lvs_timeouts: \"sctp 9\" names no timeout lbd knows: dropped",
		}, `services:
  # virtual_server at keepalived.conf:10
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
`},
		{"ops", `virtual_server 192.0.2.10 53 {
  protocol UDP
  lb_kind DR
  ops
  real_server 198.51.100.11 53
}
virtual_server 192.0.2.10 54 {
  protocol UDP
  ops
  real_server 198.51.100.11 54
}
`, []string{
			"keepalived.conf:9: ops: lbd's one-packet scheduling keeps no connection, so its servers must be dr or tun (a nat server's answers could not be translated back): dropped",
		}, `services:
  - protocol: udp
    vip: 192.0.2.10
    port: 53
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        forward: dr
    one_packet: true
  # virtual_server at keepalived.conf:7
  - protocol: udp
    vip: 192.0.2.10
    port: 54
    scheduler: wlc
    servers:
      - address: 198.51.100.11
`},
		{"fwmark", "virtual_server fwmark 1 {\n  real_server 198.51.100.11 80\n}\n", []string{
			"keepalived.conf:1: virtual_server: lbd has no fwmark services (they balance by address and port): virtual server skipped",
		}, "services: []\n"},
		{"virtual_server_group: one service an address and port", `virtual_server_group web6 {
  2001:db8::10-11 443
  fwmark 3
  192.0.2.10 443
  2001:db8::12 0
  2001:db8::20-1f 443
}
virtual_server_group marks {
  fwmark 1
}
virtual_server group web6 {
  lb_algo rr
  real_server 2001:db8:1::11 443
}
virtual_server group marks {
  real_server 198.51.100.11 80
}
virtual_server group nosuch {
  real_server 198.51.100.11 80
}
`, []string{
			"keepalived.conf:3: fwmark: lbd has no fwmark services (they balance by address and port): entry skipped",
			"keepalived.conf:4: 192.0.2.10: keepalived mixes no IPv4 and IPv6 in a group: entry skipped",
			"keepalived.conf:6: 2001:db8::20-1f: \"2001:db8::20-1f\" is not a range of addresses (the last group's end, in hex, above its start): skipped",
			"keepalived.conf:9: fwmark: lbd has no fwmark services (they balance by address and port): entry skipped",
			"keepalived.conf:11: virtual_server: a service of every port (port 0) needs persistence_timeout, as ipvsadm's: skipped",
			"keepalived.conf:15: virtual_server: virtual_server_group marks has no address and port lbd balances: skipped",
			"keepalived.conf:18: virtual_server: no virtual_server_group nosuch: skipped",
		}, `services:
  # virtual_server group web6 at keepalived.conf:11, entry 2001:db8::10 443
  - protocol: tcp
    vip: 2001:db8::10
    port: 443
    servers:
      - address: 2001:db8:1::11
  # virtual_server group web6 at keepalived.conf:11, entry 2001:db8::11 443
  - protocol: tcp
    vip: 2001:db8::11
    port: 443
    servers:
      - address: 2001:db8:1::11
`},
		{"DPVS's keywords lbd lacks, unknown groups, zones", `virtual_server 192.0.2.10 80 {
  lb_algo rr
  vip_bind_dev dpdk0
  establish_timeout 60
  bps 1000
  limit_proportion 50
  hash_target qid
  expire_quiescent_conn
  src-range 10.0.0.1-10.0.0.5
  iif dpdk0
  zone east {
    198.51.100.200
  }
  laddr_group_name nosuch
  daddr_group_name nosuch
  proxy_protocol v1
  real_server 198.51.100.11 80
}
zone west {
  198.51.100.201
}
tunnel_group tunnel_a {
  tunnel_entry ipip1 {
    kind ipip
  }
}
`, []string{
			"keepalived.conf:3: vip_bind_dev: lbd answers for the VIPs on its client-facing ports (role client or both), bound to no device: dropped",
			"keepalived.conf:4: establish_timeout: lbd's idle timeouts are every service's (timeouts: tcp, udp): dropped",
			"keepalived.conf:5: bps: lbd does not limit a service's traffic: dropped",
			"keepalived.conf:6: limit_proportion: lbd does not limit a service's traffic: dropped",
			"keepalived.conf:7: hash_target: lbd steers packets to its lcores by its own hash: dropped",
			"keepalived.conf:8: expire_quiescent_conn: lbd keeps the connections of a server whose weight is 0 until they end: dropped",
			"keepalived.conf:9: src-range: a match's keyword (virtual_server match NAME, a SNAT rule in lbd) in a virtual server of an address: dropped",
			"keepalived.conf:10: iif: a match's keyword (virtual_server match NAME, a SNAT rule in lbd) in a virtual server of an address: dropped",
			"keepalived.conf:11: zone: LVS FullNAT's zones have no lbd equivalent (a service's local addresses are its own): ignored",
			"keepalived.conf:14: laddr_group_name: no local_address_group nosuch: dropped",
			"keepalived.conf:15: daddr_group_name: no deny_address_group nosuch: dropped",
			"keepalived.conf:16: proxy_protocol: lbd writes the PROXY protocol's version 2 only, not v1: dropped",
			"keepalived.conf:19: zone: LVS FullNAT's zones have no lbd equivalent (a service's local addresses are its own): ignored",
			"keepalived.conf:22: tunnel_group: lbd makes no tunnel devices (its tun servers need none): dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
`},
		{"fullnat udp: DPVS's UDP option of address", `local_address_group one {
  198.51.100.200 dpdk0
}
virtual_server 192.0.2.13 53 {
  lb_algo rr
  protocol UDP
  lb_kind FNAT
  laddr_group_name one
  real_server 198.51.100.11 53
}
`, []string{
			"keepalived.conf:4: virtual_server: uoa: opp as DPVS's default (servers need its uoa module): set uoa: ipo if dpvs.conf says uoa_mode ipo, remove it if uoa_max_trail 0",
		}, `services:
  # virtual_server at keepalived.conf:4
  - protocol: udp
    vip: 192.0.2.13
    port: 53
    servers:
      - address: 198.51.100.11
        forward: fullnat
    local_addresses: [198.51.100.200]
    uoa: opp
`},
		{"fullnat: local addresses, NAT64, FNAT66, the SYN proxy, lists", `local_address_group one {
  198.51.100.200 dpdk0
}
local_address_group six {
  2001:db8:1::200 dpdk0
}
allow_address_group ok {
  192.0.2.0-3
  2001:db8::5
  ipset:friends
}
virtual_server 192.0.2.10 80 {
  lb_algo rr
  lb_kind FNAT
  laddr_group_name one
  waddr_group_name ok
  syn_proxy
  proxy_protocol v2
  real_server 198.51.100.11 8080
}
virtual_server 192.0.2.11 80 {
  lb_algo rr
  lb_kind FNAT
  laddr_group_name one
  real_server 198.51.100.11 80
}
virtual_server 192.0.2.12 80 {
  lb_algo rr
  lb_kind FNAT
  real_server 198.51.100.11 80
}
virtual_server 192.0.2.13 53 {
  lb_algo rr
  protocol UDP
  lb_kind DR
  laddr_group_name one
  syn_proxy
  real_server 198.51.100.11 53
}
virtual_server 192.0.2.14 80 {
  lb_algo rr
  syn_proxy
  real_server 198.51.100.11 80 {
    lvs_method TUN
  }
}
virtual_server 2001:db8::10 80 {
  lb_algo rr
  lb_kind FNAT
  laddr_group_name six
  syn_proxy
  real_server 2001:db8:1::11 80
}
`, []string{
			"keepalived.conf:1: local_address_group: 2 services use it, and a local address of lbd's serves one service (pools never overlap): its 1 address(es) split among them",
			"keepalived.conf:10: ipset:friends: lbd reads no ipsets: dropped",
			"keepalived.conf:16: waddr_group_name: lbd's lists hold addresses in the VIP's family (192.0.2.10): 1 of allow_address_group ok's dropped",
			"keepalived.conf:21: virtual_server: tcp 192.0.2.11:80: no address of local_address_group one is left for it (lbd needs local_addresses for fullnat servers): skipped",
			"keepalived.conf:27: virtual_server: tcp 192.0.2.12:80: lbd needs local_addresses for fullnat servers (laddr_group_name): skipped",
			"keepalived.conf:37: syn_proxy: lbd's synproxy is for tcp services: dropped",
			"keepalived.conf:42: syn_proxy: lbd's synproxy is for nat and fullnat servers (a tun server's replies bypass it): dropped",
		}, `services:
  # virtual_server at keepalived.conf:12
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
        port: 8080
        forward: fullnat
    local_addresses: [198.51.100.200]
    proxy_protocol: true
    synproxy: true
    allowlist: [192.0.2.0, 192.0.2.1, 192.0.2.2, 192.0.2.3]
  # virtual_server at keepalived.conf:32
  - protocol: udp
    vip: 192.0.2.13
    port: 53
    servers:
      - address: 198.51.100.11
        forward: dr
  # virtual_server at keepalived.conf:40
  - protocol: tcp
    vip: 192.0.2.14
    port: 80
    servers:
      - address: 198.51.100.11
        forward: tun
  # virtual_server at keepalived.conf:47
  - protocol: tcp
    vip: 2001:db8::10
    port: 80
    servers:
      - address: 2001:db8:1::11
        forward: fullnat
    local_addresses: ['2001:db8:1::200']
    toa: true
    synproxy: true
`},
		{"digest", vs(`  real_server 198.51.100.11 80 {
    HTTP_GET {
      url {
        path /
        digest 9b3a0c85a887a256d6939da88aabd8cd
      }
      connect_timeout 2
      delay_loop 3
    }
  }
`), nil, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
    health:
      type: http
      interval: 3s
      timeout: 2s
      rise: 1
      fall: 2
      retry_interval: 1s
      expect_status: 200-299
      expect_digest: 9b3a0c85a887a256d6939da88aabd8cd
`},
		{"regexes", vs(`  real_server 198.51.100.11 80 {
    HTTP_GET {
      url {
        path /
        regex "^(up|ready)$"
      }
      connect_timeout 2
      delay_loop 3
    }
  }
  real_server 198.51.100.12 80 {
    HTTP_GET {
      url {
        path /
        regex "(\w+) \1"
      }
      connect_timeout 2
      delay_loop 3
    }
  }
`), []string{
			"keepalived.conf:16: regex: not a regular expression Go's RE2 takes (PCRE's backreferences and lookarounds are not): dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        health:
          type: http
          interval: 3s
          timeout: 2s
          rise: 1
          fall: 2
          retry_interval: 1s
          expect_status: 200-299
          expect_regex: ^(up|ready)$
      - address: 198.51.100.12
        health:
          type: http
          interval: 3s
          timeout: 2s
          rise: 1
          fall: 2
          retry_interval: 1s
          expect_status: 200-299
`},
		{"digests", vs(`  real_server 198.51.100.11 80 {
    HTTP_GET {
      url {
        path /
        digest 9B3A0C85A887A256D6939DA88AABD8CD
      }
      url {
        path /
        digest 00000000000000000000000000000000
      }
      url {
        path /x
        digest 9b3a
      }
      connect_timeout 2
      delay_loop 3
    }
  }
`), []string{
			`keepalived.conf:14: digest: "9b3a" is not an MD5 digest (32 hex digits): dropped`,
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
    health:
      type: http
      interval: 3s
      timeout: 2s
      rise: 1
      fall: 2
      retry_interval: 1s
      expect_status: 200-299
      expect_digest: 9b3a0c85a887a256d6939da88aabd8cd
      extra_urls: [{path: /, expect_digest: "00000000000000000000000000000000"}, {path: /x}]
`},
		{"DNS_CHECK", vs(`  real_server 198.51.100.11 80 {
    DNS_CHECK {
      name example.com
      type mx
    }
  }
  real_server 198.51.100.12 80 {
    DNS_CHECK {
      type ANY
    }
  }
`), []string{
			`keepalived.conf:10: type: "ANY" is not a query type lbd asks (A, AAAA, NS, CNAME, SOA, MX, TXT): SOA`,
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        health:
          type: dns
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          dns_name: example.com
          dns_type: MX
      - address: 198.51.100.12
        health:
          type: dns
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
`},
		{"SMTP_CHECK", vs(`  real_server 198.51.100.11 25 {
    SMTP_CHECK {
      helo_name lb1.example.com
      connect_timeout 3
    }
  }
  real_server 198.51.100.12 25 {
    SMTP_CHECK {
      helo_name "bad name"
      host {
        connect_port 587
        bindto 192.0.2.2
      }
      host {
        connect_ip 198.51.100.13
      }
    }
  }
`), []string{
			`keepalived.conf:10: helo_name: "bad name" is not a domain name: dropped, lbd says its host's name`,
			"keepalived.conf:15: host: lbd probes one address a check, the host at line 11: dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        port: 25
        health:
          type: smtp
          interval: 60s
          timeout: 3s
          rise: 1
          fall: 2
          retry_interval: 1s
          helo_name: lb1.example.com
      - address: 198.51.100.12
        port: 25
        health:
          type: smtp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          port: 587
          source: 192.0.2.2
`},
		{"two checks", vs(`  delay_loop 10
  real_server 198.51.100.11 80 {
    TCP_CHECK {
    }
    PING_CHECK {
    }
  }
`), []string{
			"keepalived.conf:4: TCP_CHECK: lbd probes a server's 2 checks one after the other within the 10s interval: each times out after 3330ms",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
    health:
      type: tcp
      interval: 10s
      timeout: 3330ms
      rise: 1
      fall: 2
      retry_interval: 1s
      also:
        - type: icmp
          timeout: 3330ms
`},
		{"three checks", vs(`  real_server 198.51.100.11 80 {
    TCP_CHECK {
      connect_timeout 2
    }
    MISC_CHECK {
      misc_path "/usr/local/bin/check-db --quick"
      misc_timeout 3
      misc_dynamic
      delay_loop 30
    }
    HTTP_GET {
      url {
        path /ready
      }
    }
  }
`), []string{
			"keepalived.conf:6: MISC_CHECK: lbd probes a server's checks together, at the TCP_CHECK's (line 3) delay_loop, retry and delay_before_retry",
			"keepalived.conf:6: MISC_CHECK: misc_dynamic: only a server's first check sets its weight in lbd: dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
    health:
      type: tcp
      interval: 60s
      timeout: 2s
      rise: 1
      fall: 2
      retry_interval: 1s
      also:
        - type: exec
          timeout: 3s
          command: [/usr/local/bin/check-db, --quick]
        - type: http
          timeout: 5s
          path: /ready
          expect_status: 200-299
`},
		{"FILE_CHECK", `track_file drain {
  file "/run/lb/rs1.drain"
  weight 0
}
vrrp_track_file load {
  file /run/lb/load
  init_file 5 overwrite
}
track_file zero {
  file /run/lb/zero
  init_file
}
track_file relative {
  file run/lb/x
}
` + vs(`  real_server 198.51.100.11 80 {
    FILE_CHECK {
      track_file drain
    }
  }
  real_server 198.51.100.12 80 {
    weight 10
    FILE_CHECK {
      track_file load
      weight 2 reverse
      dynamic
    }
  }
  real_server 198.51.100.13 80 {
    FILE_CHECK {
      track_file zero
    }
    FILE_CHECK {
      track_file nosuch
    }
  }
  real_server 198.51.100.14 80 {
    FILE_CHECK {
      track_file relative
    }
  }
  real_server 198.51.100.15 80 {
    TCP_CHECK {
    }
    FILE_CHECK {
      track_file drain
      weight 70000
    }
  }
`), []string{
			"keepalived.conf:7: init_file: lbd does not write the file: create it before lbd starts (an absent file reads 0): dropped",
			"keepalived.conf:13: track_file: file \"run/lb/x\" is not an absolute path: the servers whose FILE_CHECK tracks it are left unchecked (type none)",
			"keepalived.conf:35: track_file: no track_file \"nosuch\": the server is left unchecked (type none)",
			"keepalived.conf:46: FILE_CHECK: lbd probes a server's checks together, at the TCP_CHECK's (line 44) delay_loop, retry and delay_before_retry",
			"keepalived.conf:48: weight: \"70000\" is not a weight in -65535..65535: dropped",
		}, `services:
  # virtual_server at keepalived.conf:16
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        health:
          type: file
          interval: 1s
          timeout: 500ms
          rise: 1
          fall: 1
          file: /run/lb/rs1.drain
      - address: 198.51.100.12
        weight: 10
        health:
          type: file
          interval: 1s
          timeout: 500ms
          rise: 1
          fall: 1
          file: /run/lb/load
          file_weight: 2
          file_reverse: true
      - address: 198.51.100.13
        health:
          type: file
          interval: 1s
          timeout: 500ms
          rise: 1
          fall: 1
          file: /run/lb/zero
          file_weight: 1
      - address: 198.51.100.14
      - address: 198.51.100.15
        health:
          type: tcp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          also:
            - type: file
              timeout: 500ms
              file: /run/lb/rs1.drain
`},
		{"BFD_CHECK", `bfd_instance rs1 {
  neighbor_ip 198.51.100.11
  source_ip 198.51.100.1
  min_rx 30
  min_tx 50
  multiplier 3
}
bfd_instance rs2 {
  neighbour_ip 198.51.100.12
  weight -20
  checker
}
bfd_instance rs3 {
  neighbor_ip 198.51.100.13
  min_rx 2.5
  min_tx 5
  multiplier 300
}
bfd_instance rs4 {
  neighbor_ip 198.51.100.14
  min_rx 20000
  passive
  ttl 64
  max_hops 2
  idle_tx 2000
  vrf blue
}
bfd_instance rs5 {
  neighbor_ip 198.51.100.15
  vrrp
}
bfd_instance rs1 {
  neighbor_ip 198.51.100.19
}
` + vs(`  real_server 198.51.100.11 80 {
    BFD_CHECK {
      name rs1
    }
  }
  real_server 198.51.100.12 80 {
    alpha
    BFD_CHECK {
      name rs2
    }
  }
  real_server 198.51.100.13 80 {
    BFD_CHECK {
      name rs3
    }
  }
  real_server 198.51.100.14 80 {
    BFD_CHECK {
      name rs4
    }
  }
  real_server 198.51.100.15 80 {
    BFD_CHECK {
      name rs5
    }
  }
  real_server 198.51.100.16 80 {
    BFD_CHECK {
      name rs1
    }
    BFD_CHECK {
      name nosuch
    }
    BFD_CHECK {
      delay_loop 3
    }
  }
  real_server 198.51.100.11 8080 {
    TCP_CHECK {
    }
    BFD_CHECK {
      name rs1
    }
  }
  real_server 198.51.100.12 8080 {
    BFD_CHECK {
      name rs2
    }
    HTTP_GET {
      url {
        path /healthz
      }
    }
  }
`), []string{
			"keepalived.conf:4: min_rx: lbd asks one interval both ways, the larger of min_rx and min_tx: bfd_interval 50ms",
			"keepalived.conf:15: min_rx: lbd's BFD interval is at least 10ms: bfd_interval 10ms",
			"keepalived.conf:16: min_tx: lbd's BFD interval is at least 10ms: bfd_interval 10ms",
			"keepalived.conf:17: multiplier: \"300\" is not a multiplier in 1..255: keepalived's 5",
			"keepalived.conf:19: bfd_instance: lbd asks one interval both ways, the larger of min_rx and min_tx (keepalived's default 10ms): bfd_interval 10s",
			"keepalived.conf:21: min_rx: lbd's BFD interval is at most 10s: bfd_interval 10s",
			"keepalived.conf:22: passive: lbd's session is always active (it sends first): dropped",
			"keepalived.conf:23: ttl: lbd's sessions are single-hop: it sends with TTL 255 (RFC 5881): dropped",
			"keepalived.conf:24: max_hops: lbd's sessions are single-hop: it takes packets that arrive with TTL 255 only (RFC 5881): dropped",
			"keepalived.conf:25: idle_tx: lbd sends once a second until the session is up, as RFC 5880 wants: dropped",
			"keepalived.conf:26: vrf: unknown keyword: dropped",
			"keepalived.conf:32: bfd_instance: bfd_instance rs1 is already at keepalived.conf:1: ignored, as keepalived does",
			"keepalived.conf:59: name: bfd_instance rs5 tells VRRP only (vrrp without checker), and keepalived skips the check: the server is left unchecked (type none)",
			"keepalived.conf:63: BFD_CHECK: lbd's BFD session is with the server's own address, 198.51.100.16, not neighbor_ip 198.51.100.11 (bfd_instance rs1): the server is left unchecked (type none)",
			"keepalived.conf:67: name: no bfd_instance \"nosuch\": the server is left unchecked (type none)",
			"keepalived.conf:69: BFD_CHECK: a BFD_CHECK without a name: the server is left unchecked (type none)",
			"keepalived.conf:70: delay_loop: unknown keyword: dropped",
			"keepalived.conf:76: BFD_CHECK: lbd reads the session's state with the server's other checks, every 60s (the TCP_CHECK's, line 74): not at once",
			"keepalived.conf:81: BFD_CHECK: lbd reads the session's state with the server's other checks, every 60s (the HTTP_GET's, line 84): not at once",
		}, `services:
  # virtual_server at keepalived.conf:35
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        health:
          type: bfd
          interval: 200ms
          timeout: 100ms
          rise: 1
          fall: 1
          source: 198.51.100.1
          bfd_interval: 50ms
      - address: 198.51.100.12
        health:
          type: bfd
          interval: 200ms
          timeout: 100ms
          rise: 1
          fall: 1
          bfd_interval: 10ms
          bfd_multiplier: 5
          start_down: true
      - address: 198.51.100.13
        health:
          type: bfd
          interval: 200ms
          timeout: 100ms
          rise: 1
          fall: 1
          bfd_interval: 10ms
          bfd_multiplier: 5
      - address: 198.51.100.14
        health:
          type: bfd
          interval: 200ms
          timeout: 100ms
          rise: 1
          fall: 1
          bfd_interval: 10s
          bfd_multiplier: 5
      - address: 198.51.100.15
      - address: 198.51.100.16
      - address: 198.51.100.11
        port: 8080
        health:
          type: tcp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          also:
            - type: bfd
              timeout: 100ms
              source: 198.51.100.1
              bfd_interval: 50ms
      - address: 198.51.100.12
        port: 8080
        health:
          type: http
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          path: /healthz
          expect_status: 200-299
          also:
            - type: bfd
              timeout: 100ms
              bfd_interval: 10ms
              bfd_multiplier: 5
`},
		{"quic", `virtual_server 192.0.2.10 443 {
  protocol UDP
  lb_algo rr
  quic
  real_server 198.51.100.11 443
}
virtual_server 192.0.2.10 443 {
  quic
  real_server 198.51.100.11 443
}
virtual_server 192.0.2.11 443 {
  protocol UDP
  persistence_timeout 60
  quic
  real_server 198.51.100.11 443
}
`, []string{
			"keepalived.conf:8: quic: QUIC runs over UDP: dropped on a tcp service",
			"keepalived.conf:14: quic: not with persistence_timeout (DPVS ignores it there too): dropped",
		}, `services:
  - protocol: udp
    vip: 192.0.2.10
    port: 443
    servers:
      - address: 198.51.100.11
    quic: true
  # virtual_server at keepalived.conf:7
  - protocol: tcp
    vip: 192.0.2.10
    port: 443
    scheduler: wlc
    servers:
      - address: 198.51.100.11
  # virtual_server at keepalived.conf:11
  - protocol: udp
    vip: 192.0.2.11
    port: 443
    scheduler: wlc
    persistence: 60s
    servers:
      - address: 198.51.100.11
`},
		{"unknown keywords", vs(`  lb_algo rr
  frobnicate 3
  real_server 198.51.100.11 80 {
    wieght 2
  }
`) + "virtual_sever 192.0.2.11 80 {\n}\n", []string{
			"keepalived.conf:3: frobnicate: unknown keyword: dropped",
			"keepalived.conf:5: wieght: unknown keyword: dropped",
			"keepalived.conf:8: virtual_sever: unknown keyword: dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
`},
		{"quorum and hysteresis", vs(`  sorry_server 198.51.100.99 80
  quorum 3
  hysteresis 5
  real_server 198.51.100.11 80 {
    weight 2
  }
  real_server 198.51.100.12 80 {
    weight 2
  }
`), []string{
			"keepalived.conf:4: hysteresis: 5 is not below the quorum 3 (lbd's rule): 2",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        weight: 2
      - address: 198.51.100.12
        weight: 2
    sorry_server: 198.51.100.99:80
    quorum: 3
    hysteresis: 2
`},
		{"alpha", vs(`  alpha
  real_server 198.51.100.11 80 {
    TCP_CHECK {
      connect_timeout 1
    }
  }
`), nil, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
    health:
      type: tcp
      interval: 60s
      rise: 1
      fall: 2
      retry_interval: 1s
      start_down: true
`},
		{"quorum not a number", vs("  quorum many\n  hysteresis -1\n  real_server 198.51.100.11 80\n"), []string{
			`keepalived.conf:2: quorum: "many" is not a quorum: dropped`,
			"keepalived.conf:3: hysteresis: -1 is less than lbd's 0: 0",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
`},
		{"SCTP", vs("  protocol SCTP\n  real_server 198.51.100.11 80\n"), []string{
			"keepalived.conf:2: protocol: lbd balances TCP and UDP only: virtual server skipped",
		}, "services: []\n"},
		{"what lbd does not do", vs(`  lb_algo wlc
  sh-port
  alpha
  quorum 2
  hysteresis 1
  quorum_down /usr/local/bin/page
  ops
  persistence_engine sip
  smtp_alert
  real_server 198.51.100.11 80 {
    notify_down "/usr/local/bin/page rs1"
    lvs_method TUN type gue port 6080
  }
`), []string{
			"keepalived.conf:3: sh-port: only the sh and mh schedulers take flags, not wlc: dropped",
			"keepalived.conf:4: alpha: no real_server has a check to pass: dropped",
			"keepalived.conf:7: quorum_down: lbd runs no quorum scripts: dropped",
			"keepalived.conf:8: ops: lbd schedules every datagram on its own for udp services only: dropped",
			"keepalived.conf:9: persistence_engine: lbd has no persistence engines (keepalived's sip): dropped",
			"keepalived.conf:10: smtp_alert: lbd sends no mail (its events and metrics say when a server goes down): dropped",
			"keepalived.conf:12: notify_down: lbd runs no scripts when a server changes state (its events say so): dropped",
			"keepalived.conf:13: lvs_method: lbd tunnels in IPIP only, not gue: tun (ipip)",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    scheduler: wlc
    servers:
      - address: 198.51.100.11
        forward: tun
    quorum: 2
    hysteresis: 1
`},
		{"timers lbd bounds", vs(`  lb_algo rr
  delay_loop 3
  real_server 198.51.100.11 80 {
    delay_before_retry 2
    TCP_CHECK {
      connect_timeout 4
    }
  }
  real_server 198.51.100.12 80 {
    TCP_CHECK {
      retry 0
    }
  }
`), []string{
			"keepalived.conf:7: connect_timeout: lbd wants a timeout less than the interval (delay_loop 3s): 2700ms",
			"keepalived.conf:11: TCP_CHECK: keepalived's connect_timeout, 5s, is not less than delay_loop 3s, as lbd wants: timeout 2700ms",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
        health:
          type: tcp
          interval: 3s
          timeout: 2700ms
          rise: 1
          fall: 2
          retry_interval: 2s
      - address: 198.51.100.12
        health:
          type: tcp
          interval: 3s
          timeout: 2700ms
          rise: 1
          fall: 1
`},
		{"a virtual server's setting, named once", vs(`  lb_algo rr
  delay_loop 2
  connect_timeout 2
  real_server 198.51.100.11 80 {
    TCP_CHECK {
    }
  }
  real_server 198.51.100.12 80 {
    TCP_CHECK {
    }
  }
`), []string{
			"keepalived.conf:4: connect_timeout: lbd wants a timeout less than the interval (delay_loop 2s): 1800ms",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
      - address: 198.51.100.12
    health:
      type: tcp
      timeout: 1800ms
      rise: 1
      fall: 2
      retry_interval: 1s
`},
		{"http urls", vs(`  lb_algo rr
  delay_loop 5
  virtualhost vs.example.com
  real_server 198.51.100.11 8080 {
    SSL_GET {
      url {
        path /ready
        status_code 200 204
        regex ok
      }
      url {
        path /live
        status_code 301-302
        regex "^up$"
      }
      virtualhost app.example.com
      connect_port 8443
      bindto 2001:db8::5
      connect_timeout 1.5
      nb_get_retry 2
    }
  }
`) + "SSL {\n  certificate /etc/keepalived/client.pem\n}\n", []string{
			"keepalived.conf:19: bindto: lbd's probes take an IPv4 source only: dropped, the kernel chooses",
			"keepalived.conf:25: SSL: lbd's https checks present no client certificate and verify no server's (tls_skip_verify: true): dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
        port: 8080
    health:
      type: https
      interval: 5s
      timeout: 1500ms
      rise: 1
      retry_interval: 1s
      port: 8443
      path: /ready
      host: app.example.com
      expect_status: 200,204
      expect_body: ok
      extra_urls: [{path: /live, expect_status: 301-302, expect_regex: ^up$}]
`},
		{"udp checks", vs(`  lb_algo rr
  protocol UDP
  delay_loop 5
  connect_timeout 2
  real_server 198.51.100.11 53 {
    UDP_CHECK {
      payload 00 01 61 62
      require_reply 0x
    }
  }
  real_server 198.51.100.12 53 {
    UDP_CHECK {
      payload 70 69 6e 67
      require_reply 70 6F 6E 67
    }
  }
  real_server 198.51.100.13 53 {
    UDP_CHECK {
      payload 70 69 6e 67
    }
  }
  real_server 198.51.100.14 53 {
    UDP_CHECK {
      min_reply_length 4
    }
  }
`), []string{
			"keepalived.conf:9: require_reply: lbd looks for the exact bytes in the reply, without X wildcards: any reply passes",
			"keepalived.conf:19: UDP_CHECK: keepalived's check passes when nothing answers (only an ICMP port unreachable fails it); lbd's fails without a reply: a server that never answers will be taken out",
			"keepalived.conf:24: UDP_CHECK: no payload (keepalived sends random bytes): lbd's udp check needs one to send; the server is left unchecked (type none)",
			"keepalived.conf:25: min_reply_length: lbd's udp check does not measure the reply: dropped",
		}, `services:
  - protocol: udp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
        port: 53
        health:
          type: udp
          interval: 5s
          timeout: 2s
          rise: 1
          fall: 2
          retry_interval: 1s
          send: "\0\x01ab"
      - address: 198.51.100.12
        port: 53
        health:
          type: udp
          interval: 5s
          timeout: 2s
          rise: 1
          fall: 2
          retry_interval: 1s
          send: ping
          expect: pong
      - address: 198.51.100.13
        port: 53
        health:
          type: udp
          interval: 5s
          timeout: 2s
          rise: 1
          fall: 2
          retry_interval: 1s
          send: ping
      - address: 198.51.100.14
        port: 53
`},
		{"scripts", vs(`  lb_algo rr
  delay_loop 10
  real_server 198.51.100.11 80 {
    MISC_CHECK {
      misc_path "check-web 80"
    }
  }
  real_server 198.51.100.12 80 {
    MISC_CHECK {
      misc_path /usr/local/bin/check-web 80
      misc_dynamic
      user nobody
    }
  }
`), []string{
			"keepalived.conf:5: MISC_CHECK: lbd runs a command by its absolute path, not \"check-web\": the server is left unchecked (type none)",
			"keepalived.conf:11: misc_path: keepalived runs /usr/local/bin/check-web without the words after it, and so does lbd: quote the whole command to pass them",
			"keepalived.conf:13: user: lbd runs the command as its own user: dropped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    servers:
      - address: 198.51.100.11
      - address: 198.51.100.12
        health:
          type: exec
          interval: 10s
          timeout: 9s
          rise: 1
          fall: 1
          command: [/usr/local/bin/check-web]
          weight_from_exit: true
`},
		{"dr: the service's port, the VIP as target, a sorry server by nat", vs(`  lb_algo rr
  lb_kind DR
  persistence_timeout
  sorry_server 198.51.100.99 8080
  real_server 198.51.100.11 8080 {
    TCP_CHECK {
      connect_ip 192.0.2.10
    }
  }
  real_server 198.51.100.12 80 {
    lvs_method NAT
    uthreshold 10
    lthreshold 20
    TCP_CHECK {
      connect_port 80
    }
  }
  real_server 198.51.100.12 80 {
  }
`), []string{
			"keepalived.conf:5: sorry_server: lbd reaches the sorry server by nat, not dr: its replies must come back through lbd",
			"keepalived.conf:14: lthreshold: 20 is above uthreshold 10: dropped",
			"keepalived.conf:19: real_server: 198.51.100.12:80 is already a server of this virtual server: skipped",
		}, `services:
  - protocol: tcp
    vip: 192.0.2.10
    port: 80
    persistence: 360s
    servers:
      - address: 198.51.100.11
        forward: dr
        health:
          type: tcp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
          port: 8080
          target: vip
      - address: 198.51.100.12
        upper_threshold: 10
        health:
          type: tcp
          interval: 60s
          timeout: 5s
          rise: 1
          fall: 2
          retry_interval: 1s
    sorry_server: 198.51.100.99:80
`},
		{"ipv6 persistence and families", `virtual_server 2001:db8::10 443 {
  lb_algo mh
  flag-1
  mh-port
  flag-3
  persistence_granularity 64
  sorry_server 198.51.100.99 443
  real_server 198.51.100.11 443
  real_server 2001:db8:1::11 443
}
`, []string{
			"keepalived.conf:5: flag-3: no scheduler of lbd's uses IPVS's third flag: dropped",
			"keepalived.conf:7: sorry_server: 198.51.100.99 is not in the VIP's family, as lbd reaches it by nat: dropped",
			"keepalived.conf:8: real_server: 198.51.100.11 is not in the family of the VIP 2001:db8::10: skipped",
		}, `services:
  - protocol: tcp
    vip: 2001:db8::10
    port: 443
    scheduler: mh
    sched_flags: [mh-fallback, mh-port]
    persistence: 360s
    persistence_prefix: 64
    servers:
      - address: 2001:db8:1::11
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := convert(t, tt.text)
			got := warningStrings(r)
			if !slices.Equal(got, tt.warnings) {
				t.Errorf("warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.warnings, "\n"))
			}
			_, services, _ := strings.Cut(string(r.YAML("keepalived.conf")), "lbd -check\n")
			services = strings.ReplaceAll(services, "  # virtual_server at keepalived.conf:1\n", "")
			if services != tt.services {
				t.Errorf("services:\n%s\nwant\n%s", services, tt.services)
			}
			if _, err := conf.Parse(append([]byte(ports), services...)); err != nil {
				t.Errorf("conf.Parse of the output: %v", err)
			}
		})
	}
}
