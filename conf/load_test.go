package conf_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

// minimal is the smallest valid configuration: one port.
const minimal = `
ports:
  - name: lan
    device: net_ring0
    address: 198.51.100.1/24
`

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lbd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadMinimalIsDefault(t *testing.T) {
	got, err := conf.Load(writeFile(t, minimal))
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	want := conf.Default()
	want.Ports = []conf.Port{{Name: "lan", Device: "net_ring0", Address: "198.51.100.1/24", Role: "both"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadEverySetting(t *testing.T) {
	text := `
eal:
  file_prefix: t1
  memory_mb: 128
  huge_pages: false
  main_cpu: 2
  extra_args: ["--log-level", "8"]
dataplane:
  workers: [3, 3, 4]
  burst: 64
  mbufs: 4095
  mbuf_cache: 128
  rx_descriptors: 512
  tx_descriptors: 2048
  conn_table_size: 4096
  idle_sleep: 0
  defense:
    drop_entry: 95
    secure: 0
    idle_after: 2m
    syn_timeout: 3s
    udp_timeout: 4s
  fragments:
    datagrams: 64
    held: 16
    timeout: 2s
ports:
  - name: c
    device: net_tap0,iface=dtap0
    address: 203.0.113.1/24
    gateway: 203.0.113.254
    role: client
    mtu: 1500
    promiscuous: true
    floating: [203.0.113.2]
  - name: s
    device: 0000:03:00.0
    address: 198.51.100.1/24
    role: server
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 443
    scheduler: wrr
    servers:
      - address: 198.51.100.11
        port: 8443
        weight: 0
        forward: nat
timeouts:
  tcp: 1h
  tcp_fin: 2m
  udp: 30s
  syn: 10s
neighbour:
  reachable_time: 10s
  stale_time: 1m
control:
  socket: /tmp/lbd.sock
  socket_mode: 0660
  group: lbadm
metrics:
  listen: ""
log:
  level: warn
  format: json
restart:
  state_file: /var/lib/dplb/handover
  max_age: 30s
  pull_wait: 0s
ha:
  state: backup
sync:
  master: true
  backup: true
  mcast_interface: mgmt0
  mcast_group: 239.1.2.3
  peers: [192.0.2.2, 192.0.2.3]
  listen: 192.0.2.1
  port: 9848
  syncid: 7
  key_file: /etc/dplb/sync.key
  threshold: 2
  period: 20
  refresh_period: 30s
  peer_dead_after: 5s
bgp:
  asn: 4200000001
  router_id: 10.0.0.1
  listen_port: 1179
  next_hop: 203.0.113.1
  peers:
    - address: 10.0.0.254
      asn: 65000
      port: 1790
      local_address: 10.0.0.1
      password: s3cret
      hold_time: 9s
      keepalive: 3s
  communities: ["65000:1"]
  vip_communities:
    - vip: 203.0.113.10
      communities: ["65000:443"]
  require_live_server: false
  shutdown_grace: 10s
`
	got, err := conf.Load(writeFile(t, text))
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	want := conf.Config{
		EAL: conf.EAL{FilePrefix: "t1", MemoryMB: 128, HugePages: false, MainCPU: 2, ExtraArgs: []string{"--log-level", "8"}},
		Dataplane: conf.Dataplane{Workers: []int{3, 3, 4}, Burst: 64, Mbufs: 4095, MbufCache: 128,
			RxDescriptors: 512, TxDescriptors: 2048, ConnTableSize: 4096, IdleSleep: 0,
			Defense:   conf.Defense{DropEntry: 95, Secure: 0, IdleAfter: 2 * time.Minute, SYNTimeout: 3 * time.Second, UDPTimeout: 4 * time.Second},
			Fragments: conf.Fragments{Datagrams: 64, Held: 16, Timeout: 2 * time.Second}},
		Ports: []conf.Port{
			{Name: "c", Device: "net_tap0,iface=dtap0", Address: "203.0.113.1/24", Gateway: "203.0.113.254", Role: "client", MTU: 1500, Promiscuous: true, Floating: []string{"203.0.113.2"}},
			{Name: "s", Device: "0000:03:00.0", Address: "198.51.100.1/24", Role: "server"},
		},
		Services: []conf.Service{{Protocol: "tcp", VIP: "203.0.113.10", Port: 443, Scheduler: "wrr", MHTableSize: 65537, Netmask: "255.255.255.255", Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(), Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 8443, Weight: 0, Forward: "nat"},
		}}},
		Timeouts:  conf.Timeouts{TCP: time.Hour, TCPFin: 2 * time.Minute, UDP: 30 * time.Second, SYN: 10 * time.Second},
		Neighbour: conf.Neighbour{ReachableTime: 10 * time.Second, StaleTime: time.Minute},
		Control:   conf.Control{Socket: "/tmp/lbd.sock", SocketMode: 0o660, Group: "lbadm"},
		Metrics:   conf.Metrics{Listen: ""},
		Web:       conf.Web{TLSDir: "/var/lib/dplb/web", SessionLifetime: 8 * time.Hour},
		Log:       conf.Log{Level: "warn", Format: "json"},
		Restart:   conf.Restart{StateFile: "/var/lib/dplb/handover", MaxAge: 30 * time.Second, PullWait: 0},
		HA:        conf.HA{State: "backup"},
		Sync: conf.Sync{Master: true, Backup: true, McastInterface: "mgmt0", McastGroup: "239.1.2.3",
			Peers: []string{"192.0.2.2", "192.0.2.3"}, Listen: "192.0.2.1", Port: 9848, SyncID: 7,
			KeyFile: "/etc/dplb/sync.key", Threshold: 2, Period: 20, RefreshPeriod: 30 * time.Second, PeerDeadAfter: 5 * time.Second},
		BGP: conf.BGP{ASN: 4200000001, RouterID: "10.0.0.1", ListenPort: 1179, NextHop: "203.0.113.1",
			Peers: []conf.BGPPeer{{Address: "10.0.0.254", ASN: 65000, Port: 1790, LocalAddress: "10.0.0.1",
				Password: "s3cret", HoldTime: 9 * time.Second, Keepalive: 3 * time.Second}},
			Communities:    []string{"65000:1"},
			VIPCommunities: []conf.BGPVIPExtras{{VIP: "203.0.113.10", Communities: []string{"65000:443"}}},
			ShutdownGrace:  10 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestListElementDefaults(t *testing.T) {
	text := `
ports:
  - name: c
    device: net_ring0
    address: 203.0.113.1/24
    role: client
  - name: s
    device: net_ring1
    address: 198.51.100.1/24
    mtu: null
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 80
    servers:
      - address: 198.51.100.11
      - address: 198.51.100.12
        port: 8000
        weight: 2
      - address: 198.51.100.13
        weight: 0
        forward: nat
  - protocol: tcp
    vip: 203.0.113.10
    port: 21
    scheduler: wrr
`
	got, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	wantPorts := []conf.Port{
		{Name: "c", Device: "net_ring0", Address: "203.0.113.1/24", Role: "client"},
		{Name: "s", Device: "net_ring1", Address: "198.51.100.1/24", Role: "both"},
	}
	wantServices := []conf.Service{
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 80, Scheduler: "rr", MHTableSize: 65537, Netmask: "255.255.255.255", Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(), Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "nat"},
			{Address: "198.51.100.12", Port: 8000, Weight: 2, Forward: "nat"},
			{Address: "198.51.100.13", Port: 80, Weight: 0, Forward: "nat"},
		}},
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 21, Scheduler: "wrr", MHTableSize: 65537, Netmask: "255.255.255.255", Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(), Servers: nil},
	}
	if !reflect.DeepEqual(got.Ports, wantPorts) {
		t.Errorf("Ports =\n%+v\nwant\n%+v", got.Ports, wantPorts)
	}
	if !reflect.DeepEqual(got.Services, wantServices) {
		t.Errorf("Services =\n%+v\nwant\n%+v", got.Services, wantServices)
	}
}

func TestEnvOverride(t *testing.T) {
	t.Setenv("DPLB_LOG_LEVEL", "debug")
	t.Setenv("DPLB_METRICS_LISTEN", "0.0.0.0:9999")
	t.Setenv("DPLB_EAL_HUGE_PAGES", "false")
	t.Setenv("DPLB_EAL_MEMORY_MB", "1024")
	t.Setenv("DPLB_EAL_EXTRA_ARGS", "--log-level,8")
	t.Setenv("DPLB_DATAPLANE_WORKERS", "2,3")
	t.Setenv("DPLB_DATAPLANE_IDLE_SLEEP", "1ms")
	t.Setenv("DPLB_TIMEOUTS_TCP_FIN", "2m")
	t.Setenv("DPLB_CONTROL_SOCKET_MODE", "0640")
	got, err := conf.Load(writeFile(t, minimal+"log:\n  level: error\n  format: json\n"))
	if err != nil {
		t.Fatalf("Load() = %v", err)
	}
	want := conf.Default()
	want.Ports = []conf.Port{{Name: "lan", Device: "net_ring0", Address: "198.51.100.1/24", Role: "both"}}
	want.Log = conf.Log{Level: "debug", Format: "json"} // the environment beats the file
	want.Metrics.Listen = "0.0.0.0:9999"
	want.EAL.HugePages = false
	want.EAL.MemoryMB = 1024
	want.EAL.ExtraArgs = []string{"--log-level", "8"}
	want.Dataplane.Workers = []int{2, 3}
	want.Dataplane.IdleSleep = time.Millisecond
	want.Timeouts.TCPFin = 2 * time.Minute
	want.Control.SocketMode = 0o640
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestEnvOverrideValidated(t *testing.T) {
	t.Setenv("DPLB_LOG_LEVEL", "loud")
	_, err := conf.Parse([]byte(minimal))
	if want := `log.level: "loud" is not one of debug, info, warn, error`; err == nil || err.Error() != want {
		t.Errorf("Parse() = %v, want %s", err, want)
	}
}

func TestSocketMode(t *testing.T) {
	tests := []struct {
		yaml string
		want uint32
	}{
		{"0600", 0o600},
		{`"0600"`, 0o600},
		{"0o640", 0o640},
		{`"0o660"`, 0o660},
		{`"600"`, 0o600},
		{"384", 0o600},
		{"0", 0},
	}
	for _, tt := range tests {
		c, err := conf.Parse([]byte(minimal + "control:\n  socket_mode: " + tt.yaml + "\n"))
		if err != nil {
			t.Errorf("socket_mode: %s: Parse() = %v", tt.yaml, err)
			continue
		}
		if c.Control.SocketMode != tt.want {
			t.Errorf("socket_mode: %s = %#o, want %#o", tt.yaml, c.Control.SocketMode, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level key", minimal + "bogus: 1\n",
			`bogus: unknown key`},
		{"unknown section key", minimal + "eal:\n  memory: 512\n",
			`eal.memory: unknown key`},
		{"unknown port key", minimal + "    vlan: 7\n",
			`ports[0].vlan: unknown key`},
		{"unknown server key", minimal + "services:\n- protocol: tcp\n  vip: 198.51.100.10\n  port: 80\n  servers:\n  - address: 198.51.100.11\n  - address: 198.51.100.12\n    wieght: 2\n",
			`services[0].servers[1].wieght: unknown key`},
		{"not a number", minimal + "eal:\n  memory_mb: lots\n",
			`eal.memory_mb: "lots" is not a valid int`},
		{"not a number in a list element", minimal + "services:\n- protocol: tcp\n  vip: 198.51.100.10\n  port: eighty\n",
			`services[0].port: "eighty" is not a valid int`},
		{"list for a number", minimal + "dataplane:\n  burst: [1, 2]\n",
			`dataplane.burst: [1 2] cannot be used as int`},
		{"not a bool", minimal + "eal:\n  huge_pages: maybe\n",
			`eal.huge_pages: "maybe" is not a valid bool`},
		{"number for a list element", minimal + "services:\n- 7\n",
			`services[0]: expected a map or struct, got "int"`},
		{"duration without unit", minimal + "timeouts:\n  tcp: 900\n",
			`timeouts.tcp: 900 has no unit (want e.g. "900s")`},
		{"bad duration", minimal + "neighbour:\n  stale_time: soon\n",
			`neighbour.stale_time: "soon" is not a duration (want e.g. "30s")`},
		{"bad socket mode", minimal + "control:\n  socket_mode: \"rw-------\"\n",
			`control.socket_mode: "rw-------" is not an octal mode (want e.g. 0600)`},
		{"decimal socket mode out of range", minimal + "control:\n  socket_mode: 600\n",
			`control.socket_mode: 01130 is out of range 0..0777 (write modes in octal, e.g. 0600)`},
		{"no ports", "log:\n  level: info\n",
			`ports: at least one port is required`},
		{"empty document", "",
			`ports: at least one port is required`},
		{"validation after defaults", minimal + "services:\n- protocol: tcp\n  vip: 198.51.100.10\n  port: 80\n  servers:\n  - address: 198.51.100.11\n    weight: -3\n",
			`services[0].servers[0].weight: -3 is out of range 0..65535`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conf.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse() = nil, want %s", tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse() =\n%s\nwant\n%s", err, tt.want)
			}
			var fe *conf.FieldError
			if !errors.As(err, &fe) {
				t.Errorf("Parse() error %T is not a *conf.FieldError", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	path := writeFile(t, minimal+"log:\n  format: xml\n")
	_, err := conf.Load(path)
	if want := path + `: log.format: "xml" is not one of json, console`; err == nil || err.Error() != want {
		t.Errorf("Load() = %v, want %s", err, want)
	}
	var fe *conf.FieldError
	if !errors.As(err, &fe) || fe.Field != "log.format" {
		t.Errorf("Load() error does not wrap a FieldError for log.format: %#v", err)
	}

	path = writeFile(t, "ports: [\n")
	if _, err := conf.Load(path); err == nil || !strings.HasPrefix(err.Error(), path+": parsing YAML: ") {
		t.Errorf("Load(bad YAML) = %v, want an error starting %q", err, path+": parsing YAML: ")
	}

	missing := filepath.Join(t.TempDir(), "missing.yaml")
	if _, err := conf.Load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want a not-exist error naming the file", err)
	}
}

func TestExampleFile(t *testing.T) {
	c, err := conf.Load("lbd.example.yaml")
	if err != nil {
		t.Fatalf("Load(example) = %v", err)
	}
	if err := c.Validate([]string{"rr"}); err != nil {
		t.Fatalf("Validate(example) = %v", err)
	}
	// The example documents every default: apart from ports, services and
	// the gateway it must equal Default().
	got := c
	got.Ports, got.Services = nil, nil
	want := conf.Default()
	want.EAL.ExtraArgs = []string{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("example settings =\n%+v\nwant defaults\n%+v", got, want)
	}
	wantServices := []conf.Service{
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 80, Scheduler: "rr", SchedFlags: []string{}, MHTableSize: 65537, Netmask: "255.255.255.255", Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(), Quorum: 1, Servers: []conf.RealServer{
			{Address: "198.51.100.11", Port: 80, Weight: 1, Forward: "nat"},
			{Address: "198.51.100.12", Port: 8000, Weight: 2, Forward: "nat"},
		}},
		{Protocol: "tcp", VIP: "203.0.113.10", Port: 21, Scheduler: "rr", MHTableSize: 65537, Netmask: "255.255.255.255", Health: conf.DefaultHealthCheck(), Feedback: conf.DefaultFeedback(), Servers: []conf.RealServer{
			{Address: "198.51.100.12", Port: 21, Weight: 1, Forward: "nat"},
		}},
	}
	if !reflect.DeepEqual(c.Services, wantServices) {
		t.Errorf("example services =\n%+v\nwant\n%+v", c.Services, wantServices)
	}
	wantArgs := []string{"lbd", "--file-prefix", "dplb", "--huge-unlink", "-m", "512", "-l", "0", "--main-lcore", "0",
		"--vdev", "net_af_packet0,iface=veth-client", "--vdev", "net_af_packet1,iface=veth-server", "--no-pci"}
	if got := c.EALArgs("lbd"); !reflect.DeepEqual(got, wantArgs) {
		t.Errorf("example EALArgs() =\n%q\nwant\n%q", got, wantArgs)
	}
}
