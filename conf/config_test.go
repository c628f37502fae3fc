package conf_test

import (
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

func TestDefault(t *testing.T) {
	want := conf.Config{
		EAL: conf.EAL{
			FilePrefix: "dplb",
			MemoryMB:   512,
			HugePages:  true,
			MainCPU:    0,
			ExtraArgs:  nil,
		},
		Dataplane: conf.Dataplane{
			Workers:       []int{0},
			Burst:         32,
			Mbufs:         16383,
			MbufCache:     256,
			RxDescriptors: 1024,
			TxDescriptors: 1024,
			ConnTableSize: 1048576,
			IdleSleep:     0,
			Defense: conf.Defense{DropEntry: 90, Secure: 75, IdleAfter: 60 * time.Second,
				SYNTimeout: 10 * time.Second, UDPTimeout: 10 * time.Second},
			Fragments: conf.Fragments{Datagrams: 4096, Held: 256, Timeout: 5 * time.Second},
		},
		Ports:    nil,
		Services: nil,
		Timeouts: conf.Timeouts{
			TCP:    900 * time.Second,
			TCPFin: 60 * time.Second,
			UDP:    300 * time.Second,
			SYN:    60 * time.Second,
		},
		Neighbour: conf.Neighbour{
			ReachableTime: 30 * time.Second,
			StaleTime:     300 * time.Second,
		},
		Control: conf.Control{
			Socket:     "/run/dplb/lbd.sock",
			SocketMode: 0o600,
			Group:      "",
		},
		Metrics: conf.Metrics{Listen: "127.0.0.1:9180"},
		Web:     conf.Web{TLSDir: "/var/lib/dplb/web", SessionLifetime: 8 * time.Hour},
		Log:     conf.Log{Level: "info", Format: "console"},
		Restart: conf.Restart{MaxAge: time.Minute, PullWait: 5 * time.Second},
		HA:      conf.HA{State: "master"},
		Sync:    conf.Sync{McastGroup: "224.0.0.81", Port: 8848, Threshold: 3, Period: 50, PeerDeadAfter: 3 * time.Second},
		BGP:     conf.BGP{ListenPort: -1, RequireLiveServer: true, ShutdownGrace: 5 * time.Second},
	}
	if got := conf.Default(); !reflect.DeepEqual(got, want) {
		t.Errorf("Default() =\n%+v\nwant\n%+v", got, want)
	}
	// Default returns a fresh value each time.
	a := conf.Default()
	a.Dataplane.Workers[0] = 7
	if b := conf.Default(); b.Dataplane.Workers[0] != 0 {
		t.Errorf("Default() shares Workers between calls")
	}
}

func TestPortAccessors(t *testing.T) {
	tests := []struct {
		port    conf.Port
		prefix  netip.Prefix
		gw      netip.Addr
		hasGW   bool
		clients bool
		servers bool
		pci     bool
		name    string
	}{
		{
			port:    conf.Port{Device: "0000:03:00.0", Address: "198.51.100.1/24", Gateway: "198.51.100.254", Role: "both"},
			prefix:  netip.MustParsePrefix("198.51.100.1/24"),
			gw:      netip.MustParseAddr("198.51.100.254"),
			hasGW:   true,
			clients: true, servers: true, pci: true, name: "0000:03:00.0",
		},
		{
			port:    conf.Port{Device: "03:00.1", Address: "10.0.0.1/8", Role: "client"},
			prefix:  netip.MustParsePrefix("10.0.0.1/8"),
			clients: true, pci: true, name: "03:00.1",
		},
		{
			port:    conf.Port{Device: "0000:af:1f.7,rxq_cqe_comp_en=1", Address: "192.0.2.9/30", Role: "server"},
			prefix:  netip.MustParsePrefix("192.0.2.9/30"),
			servers: true, pci: true, name: "0000:af:1f.7",
		},
		{
			port:    conf.Port{Device: "net_af_packet0,iface=veth0", Address: "bogus", Gateway: "bogus", Role: "both"},
			clients: true, servers: true, name: "net_af_packet0",
		},
		{
			port: conf.Port{Device: "net_tap0,iface=dtap0", Role: ""},
			name: "net_tap0",
		},
		{
			port: conf.Port{Device: "net_ring0"},
			name: "net_ring0",
		},
		{
			port: conf.Port{Device: "0000:03:20.0"}, // device number > 0x1f
			name: "0000:03:20.0",
		},
	}
	for _, tt := range tests {
		p := tt.port
		if got := p.Prefix(); got != tt.prefix {
			t.Errorf("%q Prefix() = %v, want %v", p.Address, got, tt.prefix)
		}
		if gw, ok := p.GatewayAddr(); gw != tt.gw || ok != tt.hasGW {
			t.Errorf("%q GatewayAddr() = %v, %v, want %v, %v", p.Gateway, gw, ok, tt.gw, tt.hasGW)
		}
		if got := p.FacesClients(); got != tt.clients {
			t.Errorf("role %q FacesClients() = %v, want %v", p.Role, got, tt.clients)
		}
		if got := p.FacesServers(); got != tt.servers {
			t.Errorf("role %q FacesServers() = %v, want %v", p.Role, got, tt.servers)
		}
		if got := p.IsPCI(); got != tt.pci {
			t.Errorf("%q IsPCI() = %v, want %v", p.Device, got, tt.pci)
		}
		if got := p.DeviceName(); got != tt.name {
			t.Errorf("%q DeviceName() = %q, want %q", p.Device, got, tt.name)
		}
	}
}

func TestAddrAccessors(t *testing.T) {
	tests := []struct {
		s    string
		want netip.Addr
	}{
		{"203.0.113.10", netip.MustParseAddr("203.0.113.10")},
		{"", netip.Addr{}},
		{"x", netip.Addr{}},
	}
	for _, tt := range tests {
		if got := (conf.Service{VIP: tt.s}).VIPAddr(); got != tt.want {
			t.Errorf("VIPAddr(%q) = %v, want %v", tt.s, got, tt.want)
		}
		if got := (conf.RealServer{Address: tt.s}).Addr(); got != tt.want {
			t.Errorf("Addr(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestEALArgs(t *testing.T) {
	af := conf.Port{Name: "c", Device: "net_af_packet0,iface=veth0"}
	ring := conf.Port{Name: "s", Device: "net_ring0"}
	pci1 := conf.Port{Name: "p1", Device: "0000:03:00.0"}
	pci2 := conf.Port{Name: "p2", Device: "03:00.1,rxq_cqe_comp_en=1"}
	tests := []struct {
		name string
		edit func(*conf.Config)
		want []string
	}{
		{
			name: "defaults, no ports",
			edit: func(*conf.Config) {},
			want: []string{"lbd", "--file-prefix", "dplb", "--huge-unlink", "-m", "512", "-l", "0", "--main-lcore", "0", "--no-pci"},
		},
		{
			name: "vdevs only, no hugepages",
			edit: func(c *conf.Config) {
				c.EAL.HugePages = false
				c.EAL.MemoryMB = 256
				c.EAL.MainCPU = 3
				c.EAL.FilePrefix = "test-1"
				c.Dataplane.Workers = []int{4, 5} // not EAL lcores
				c.Ports = []conf.Port{af, ring}
			},
			want: []string{"lbd", "--file-prefix", "test-1", "--no-huge", "-m", "256", "-l", "3", "--main-lcore", "3",
				"--vdev", "net_af_packet0,iface=veth0", "--vdev", "net_ring0", "--no-pci"},
		},
		{
			name: "PCI only, extra args",
			edit: func(c *conf.Config) {
				c.Ports = []conf.Port{pci1, pci2}
				c.EAL.ExtraArgs = []string{"--log-level", "lib.eal:debug"}
			},
			want: []string{"lbd", "--file-prefix", "dplb", "--huge-unlink", "-m", "512", "-l", "0", "--main-lcore", "0",
				"-a", "0000:03:00.0", "-a", "03:00.1,rxq_cqe_comp_en=1", "--log-level", "lib.eal:debug"},
		},
		{
			name: "mixed, port order kept",
			edit: func(c *conf.Config) {
				c.Ports = []conf.Port{ring, pci1, af}
			},
			want: []string{"lbd", "--file-prefix", "dplb", "--huge-unlink", "-m", "512", "-l", "0", "--main-lcore", "0",
				"--vdev", "net_ring0", "-a", "0000:03:00.0", "--vdev", "net_af_packet0,iface=veth0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := conf.Default()
			tt.edit(&c)
			if got := c.EALArgs("lbd"); !slices.Equal(got, tt.want) {
				t.Errorf("EALArgs() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestServiceAccessors(t *testing.T) {
	for _, tc := range []struct {
		netmask string
		bits    int
	}{{"", 32}, {"255.255.255.255", 32}, {"255.255.255.0", 24}, {"255.255.128.0", 17}, {"0.0.0.0", 0}} {
		if got := (conf.Service{Netmask: tc.netmask}).NetmaskBits(); got != tc.bits {
			t.Errorf("NetmaskBits(%q) = %d, want %d", tc.netmask, got, tc.bits)
		}
	}
	if got := (conf.Service{}).MHTable(); got != 65537 {
		t.Errorf("MHTable() of a literal = %d, want 65537", got)
	}
	if got := (conf.Service{MHTableSize: 251}).MHTable(); got != 251 {
		t.Errorf("MHTable() = %d, want 251", got)
	}
	s := conf.Service{SchedFlags: []string{"sh-port"}}
	if !s.HasFlag("sh-port") || s.HasFlag("sh-fallback") {
		t.Error("HasFlag")
	}
}
