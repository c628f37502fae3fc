package api_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

func sp(s string) *string { return &s }
func ip(n int) *int       { return &n }
func up(n uint32) *uint32 { return &n }
func bp(b bool) *bool     { return &b }

func TestParseRestoreIpvsadmFile(t *testing.T) {
	// As ipvsadm -S writes it, plus what hand-written files carry.
	file := `-A -t 192.0.2.100:80 -s rr
-a -t 192.0.2.100:80 -r 198.51.100.11:8080 -m -w 1
-A -u 192.0.2.100:53 -s wrr -p 600 -M 255.255.255.0 -b sh-fallback,sh-port
-a -u 192.0.2.100:53 -r 198.51.100.21:53 -g -w 5 -x 100 -y 50
ipvsadm -a -u 192.0.2.100:53 -r 198.51.100.22 -i
-E -t 192.0.2.100:80 -p
-D -t 192.0.2.100:80
-A -t 192.0.2.101:0 -s rr -p 3600
-a -t 192.0.2.101:0 -r 198.51.100.31:0 -g -w 1
-A -u 192.0.2.101:53 -s rr -o
-E -u 192.0.2.101:53 --no-ops
-C
--set 900 120 300
`
	want := []api.Request{
		{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 80, Scheduler: sp("rr")}},
		{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 80},
			Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Forward: sp("nat"), Weight: ip(1)}},
		{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.100", Port: 53, Scheduler: sp("wrr"),
			Persistence: up(600), Netmask: sp("255.255.255.0"), SchedFlags: &[]string{"sh-fallback", "sh-port"}}},
		{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.100", Port: 53},
			Server: &api.ServerSpec{Address: "198.51.100.21", Port: 53, Forward: sp("dr"), Weight: ip(5), Upper: ip(100), Lower: ip(50)}},
		{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.100", Port: 53},
			Server: &api.ServerSpec{Address: "198.51.100.22", Forward: sp("tun")}},
		{Op: api.OpEditService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 80, Persistence: up(300)}},
		{Op: api.OpDeleteService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 80}},
		{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.101", Port: 0, Scheduler: sp("rr"), Persistence: up(3600)}},
		{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.101", Port: 0},
			Server: &api.ServerSpec{Address: "198.51.100.31", Port: 0, Forward: sp("dr"), Weight: ip(1)}},
		{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.101", Port: 53, Scheduler: sp("rr"), OnePacket: bp(true)}},
		{Op: api.OpEditService, Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.101", Port: 53, OnePacket: bp(false)}},
		{Op: api.OpClear},
		{Op: api.OpSetTimeouts, Timeouts: &api.TimeoutsSpec{TCP: 900, TCPFin: 120, UDP: 300}},
	}
	got, err := api.ParseRestore(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			if i >= len(got) || i >= len(want) || !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("request %d differs", i)
			}
		}
	}
}

func TestParseArgsErrors(t *testing.T) {
	tests := []struct {
		args string
		want string
	}{
		{"-A", "-A needs a service: -t|-u VIP:port"},
		{"-a -t 192.0.2.1:80", "-a needs a real server: -r RIP[:port]"},
		{"-A -t 192.0.2.1", "-t 192.0.2.1: want VIP:port, e.g. 192.0.2.100:80 or [2001:db8::10]:80"},
		{"-A -t 192.0.2.1:no-such-service", `-t 192.0.2.1:no-such-service: port "no-such-service" is not a number or a tcp service name (/etc/services)`},
		{"-A -t 192.0.2.1:0", "-t 192.0.2.1:0: port 0 (every port of the VIP) needs persistence: add -p [timeout]"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -i --tun-type gue --tun-port 6080", "--tun-type: lbd tunnels in IPIP only (-i): GUE and GRE tunnels are not supported"},
		{"-A -u 192.0.2.1:5060 -p --pe sip", "--pe: persistence engines (sip) are not supported: persistence is by client address (-p, -M)"},
		{"-A -t 192.0.2.1:0 -p 0", "-t 192.0.2.1:0: port 0 (every port of the VIP) needs persistence: add -p [timeout]"},
		{"-A -t 192.0.2.1:65536", "-t 192.0.2.1:65536: port 65536 is out of range 0..65535"},
		{"-A -t a/b:80", `-t a/b:80: "a/b" is not an IPv4 address or host name`},
		{"-A -f 1", "-f 1: firewall-mark services are not supported"},
		{"-A -t [2001:db8::10:80", "-t [2001:db8::10:80: no ] after the IPv6 address"},
		{"-A -t [2001:db8::10]80", "-t [2001:db8::10]80: want [IPv6]:port after the ]"},
		{"-A -t [fe80::1%eth0]:80", `-t [fe80::1%eth0]:80: "fe80::1%eth0" is not an IPv4 or IPv6 address`},
		{"-a -t 192.0.2.1:80 -r [2001:db8::11]:x8080", `-r [2001:db8::11]:x8080: port "x8080" is not a number or a tcp service name (/etc/services)`},
		{"-A -t 192.0.2.1:80 -u 192.0.2.1:80", "-t and -u: one service at a time"},
		{"-A -t 192.0.2.1:80 -p 9999999", "-p 9999999: timeout is out of range 0..2592000"},
		{"-A -t 192.0.2.1:80 -M /24", "-M /24: not an IPv4 netmask (e.g. 255.255.255.0) or a prefix length (e.g. 64)"},
		{"-A -t 192.0.2.1:80 -w 1", "option -w is not allowed with -A"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -s rr", "option -s is not allowed with -a"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1:99999", "-r 198.51.100.1:99999: port 99999 is out of range 0..65535"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -w -1", "-w -1: weight is negative"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -w 65536", "-w 65536: weight is out of range 0..65535"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -x -2", "-x -2: upper threshold is negative"},
		{"-a -t 192.0.2.1:80 -r 198.51.100.1 -w", `option "-w" needs a value`},
		{"-A -a", "-A and -a: only one command at a time"},
		{"--set 1 2", `option "--set" needs three values: tcp tcpfin udp`},
		{"--set 1 x 3", "--set x: tcpfin timeout is not a number"},
		{"-C --stats", "option --stats is not allowed with -C"},
	}
	for _, tt := range tests {
		t.Run(tt.args, func(t *testing.T) {
			_, err := api.ParseArgs(strings.Fields(tt.args))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseArgs(%q) = %v, want %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestWriteSaveAndList(t *testing.T) {
	svcs := []api.Service{
		{Protocol: "UDP", VIP: "192.0.2.100", Port: 53, Scheduler: "sh", Persistence: 600, Netmask: "255.255.255.0",
			SchedFlags: []string{"sh-fallback", "sh-port"}, Servers: []api.RealServer{
				{Address: "198.51.100.22", Port: 53, Forward: "Tunnel", Weight: 1},
				{Address: "198.51.100.21", Port: 53, Forward: "Route", Weight: 5, Upper: 100, Lower: 50},
			}},
		{Protocol: "TCP", VIP: "192.0.2.100", Port: 80, Scheduler: "rr", Servers: []api.RealServer{
			{Address: "198.51.100.11", Port: 8080, Forward: "Masq", Weight: 1},
		}},
	}
	var b bytes.Buffer
	if err := api.WriteSave(&b, svcs); err != nil {
		t.Fatal(err)
	}
	wantSave := `-A -t 192.0.2.100:80 -s rr
-a -t 192.0.2.100:80 -r 198.51.100.11:8080 -m -w 1
-A -u 192.0.2.100:53 -s sh -p 600 -M 255.255.255.0 -b sh-fallback,sh-port
-a -u 192.0.2.100:53 -r 198.51.100.21:53 -g -w 5 -x 100 -y 50
-a -u 192.0.2.100:53 -r 198.51.100.22:53 -i -w 1
`
	if b.String() != wantSave {
		t.Errorf("save:\n%s\nwant:\n%s", b.String(), wantSave)
	}
	// The saved text parses back to the same services.
	if _, err := api.ParseRestore(b.String()); err != nil {
		t.Errorf("ParseRestore(save) = %v", err)
	}
	b.Reset()
	api.WriteList(&b, api.Response{Services: svcs}, api.ListFormat{})
	wantList := strings.Join([]string{
		"dplb lbctl (API v1) (size=0)",
		"Prot LocalAddress:Port Scheduler Flags",
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn",
		"TCP  192.0.2.100:80 rr",
		"  -> 198.51.100.11:8080           Masq    1      0          0         ",
		"UDP  192.0.2.100:53 sh (sh-fallback,sh-port) persistent 600 mask 255.255.255.0",
		"  -> 198.51.100.21:53             Route   5      0          0         ",
		"  -> 198.51.100.22:53             Tunnel  1      0          0         ",
		"",
	}, "\n")
	if b.String() != wantList {
		t.Errorf("list:\n%s\nwant:\n%s", b.String(), wantList)
	}
	b.Reset()
	api.WriteList(&b, api.Response{Services: svcs[1:]}, api.ListFormat{PersistentConn: true})
	wantPC := strings.Join([]string{
		"dplb lbctl (API v1) (size=0)",
		"Prot LocalAddress:Port            Weight    PersistConn ActiveConn InActConn ",
		"  -> RemoteAddress:Port",
		"TCP  192.0.2.100:80",
		"  -> 198.51.100.11:8080           1         0           0          0         ",
		"",
	}, "\n")
	if b.String() != wantPC {
		t.Errorf("--persistent-conn:\n%q\nwant:\n%q", b.String(), wantPC)
	}
}

// TestFullNATAndSynProxyRules: --fullnat and --synproxy parse, save and
// list, and a saved table restores to the same requests.
func TestFullNATAndSynProxyRules(t *testing.T) {
	on, off := true, false
	file := `-A -t 192.0.2.100:443 -s rr --synproxy
-a -t 192.0.2.100:443 -r 198.51.100.11:8443 --fullnat -w 1
-E -t 192.0.2.100:443 --no-synproxy
`
	want := []api.Request{
		{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443, Scheduler: sp("rr"), SynProxy: &on}},
		{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443},
			Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8443, Forward: sp("fullnat"), Weight: ip(1)}},
		{Op: api.OpEditService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443, SynProxy: &off}},
	}
	got, err := api.ParseRestore(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v", got)
	}
	svcs := []api.Service{{Protocol: "TCP", VIP: "192.0.2.100", Port: 443, Scheduler: "rr", SynProxy: true,
		Servers: []api.RealServer{{Address: "198.51.100.11", Port: 8443, Forward: "FullNat", Weight: 1}}}}
	var b bytes.Buffer
	if err := api.WriteSave(&b, svcs); err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(strings.Split(file, "\n")[:2], "\n") + "\n"; b.String() != want {
		t.Errorf("save:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	api.WriteList(&b, api.Response{Services: svcs}, api.ListFormat{})
	if !strings.Contains(b.String(), "TCP  192.0.2.100:443 rr synproxy\n") || !strings.Contains(b.String(), "FullNat 1") {
		t.Errorf("list:\n%s", b.String())
	}
}

// TestServiceFlagRules: --ops and --quic save and list as ipvsadm's
// (DPVS's), and the saved table restores to the same requests.
func TestServiceFlagRules(t *testing.T) {
	tests := []struct {
		flag, file, listed string
		svc                api.Service
		restored           func(s *api.ServiceSpec) *bool
	}{
		{"--ops", `-A -u 192.0.2.100:53 -s rr --ops
-a -u 192.0.2.100:53 -r 198.51.100.11:53 -g -w 1
`, "UDP  192.0.2.100:53 rr ops\n",
			api.Service{Protocol: "UDP", VIP: "192.0.2.100", Port: 53, Scheduler: "rr", OnePacket: true,
				Servers: []api.RealServer{{Address: "198.51.100.11", Port: 53, Forward: "Route", Weight: 1}}},
			func(s *api.ServiceSpec) *bool { return s.OnePacket }},
		{"--quic", `-A -u 192.0.2.100:443 -s rr --quic
-a -u 192.0.2.100:443 -r 198.51.100.11:443 -m -w 1
`, "UDP  192.0.2.100:443 rr quic\n",
			api.Service{Protocol: "UDP", VIP: "192.0.2.100", Port: 443, Scheduler: "rr", QUIC: true,
				Servers: []api.RealServer{{Address: "198.51.100.11", Port: 443, Forward: "Masq", Weight: 1}}},
			func(s *api.ServiceSpec) *bool { return s.QUIC }},
	}
	for _, tt := range tests {
		svcs := []api.Service{tt.svc}
		var b bytes.Buffer
		if err := api.WriteSave(&b, svcs); err != nil {
			t.Fatal(err)
		}
		if b.String() != tt.file {
			t.Errorf("%s save:\n%s\nwant:\n%s", tt.flag, b.String(), tt.file)
		}
		got, err := api.ParseRestore(b.String())
		if err != nil {
			t.Fatal(err)
		}
		if on := tt.restored(got[0].Service); on == nil || !*on {
			t.Errorf("restored %+v: %s lost", got[0], tt.flag)
		}
		c, err := api.ParseArgs([]string{"-E", "-u", "192.0.2.100:443", "--no-" + tt.flag[2:]})
		if err != nil || c.Service == nil {
			t.Fatalf("-E --no-%s: %+v, %v", tt.flag[2:], c, err)
		}
		if off := tt.restored(c.Service); off == nil || *off {
			t.Errorf("-E --no-%s: %+v", tt.flag[2:], c.Service)
		}
		b.Reset()
		api.WriteList(&b, api.Response{Services: svcs}, api.ListFormat{})
		if !strings.Contains(b.String(), tt.listed) {
			t.Errorf("%s list:\n%s", tt.flag, b.String())
		}
	}
}

// TestLocalAddressRules: DPVS's local address verbs parse (long and
// short), are allowed in a restore file, and refuse what they cannot use.
func TestLocalAddressRules(t *testing.T) {
	for line, want := range map[string]api.Request{
		"--add-laddr -t 192.0.2.100:443 -z 198.51.100.50": {Op: api.OpAddLaddr, LocalAddress: "198.51.100.50",
			Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443}},
		"-Q -u 192.0.2.100:53 --laddr 198.51.100.51": {Op: api.OpDelLaddr, LocalAddress: "198.51.100.51",
			Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.100", Port: 53}},
		"--get-laddr":           {Op: api.OpGetLaddr},
		"-G -t 192.0.2.100:443": {Op: api.OpGetLaddr, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443}},
	} {
		c, err := api.ParseArgs(strings.Fields(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !reflect.DeepEqual(c.Request, want) {
			t.Errorf("%s: %+v, want %+v", line, c.Request, want)
		}
	}
	for line, want := range map[string]string{
		"--add-laddr -t 192.0.2.100:443":                 "--add-laddr needs a local address: -z LIP",
		"--del-laddr -z 198.51.100.50":                   "needs a service",
		"--add-laddr -t 192.0.2.100:443 -z fe80::1%eth0": "not an IPv4 or IPv6 address",
		"-a -t 192.0.2.100:443 -r 10.0.0.1 -z 10.0.0.2":  "option -z is not allowed with -a",
		"--get-laddr -z 198.51.100.50":                   "option -z is not allowed with --get-laddr",
	} {
		if _, err := api.ParseArgs(strings.Fields(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", line, err, want)
		}
	}
	reqs, err := api.ParseRestore("-A -t 192.0.2.100:443\n-P -t 192.0.2.100:443 -z 198.51.100.50\n")
	if err != nil || len(reqs) != 2 || reqs[1].Op != api.OpAddLaddr {
		t.Fatalf("restore: %+v %v", reqs, err)
	}
	if _, err := api.ParseRestore("-G\n"); err == nil {
		t.Fatal("--get-laddr accepted in a restore file")
	}
	var b bytes.Buffer
	api.WriteLocalAddresses(&b, api.Response{LocalAddresses: []api.LocalAddress{
		{Protocol: "TCP", VIP: "192.0.2.100", Port: 443, Address: "198.51.100.50"},
		{Protocol: "TCP", VIP: "192.0.2.100", Port: 443, Address: "198.51.100.51", Draining: true}}})
	if want := "Prot VIP:Port                   LocalAddress\nTCP  192.0.2.100:443            198.51.100.50\nTCP  192.0.2.100:443            198.51.100.51 (draining)\n"; b.String() != want {
		t.Errorf("--get-laddr output:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestClientListRules: DPVS's client list verbs parse (long forms, the
// entry's options long and short, IPv6 too), -S writes them after their
// service and -R takes them back, and what they cannot use is refused.
func TestClientListRules(t *testing.T) {
	web := &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.100", Port: 443}
	for line, want := range map[string]api.Request{
		"--add-blklst -t 192.0.2.100:443 -k 198.51.100.0/24":         {Op: api.OpAddBlklst, ClientPrefix: "198.51.100.0/24", Service: web},
		"--del-blklst -t 192.0.2.100:443 --blklst-address 192.0.2.7": {Op: api.OpDelBlklst, ClientPrefix: "192.0.2.7", Service: web},
		"--add-whtlst -t 192.0.2.100:443 -2 192.0.2.0/25":            {Op: api.OpAddWhtlst, ClientPrefix: "192.0.2.0/25", Service: web},
		"--del-whtlst -u 192.0.2.100:53 --whtlst-address=192.0.2.9": {Op: api.OpDelWhtlst, ClientPrefix: "192.0.2.9",
			Service: &api.ServiceSpec{Protocol: "udp", VIP: "192.0.2.100", Port: 53}},
		"--add-blklst -t [2001:db8::10]:80 -k 2001:db8:1::/64": {Op: api.OpAddBlklst, ClientPrefix: "2001:db8:1::/64",
			Service: &api.ServiceSpec{Protocol: "tcp", VIP: "2001:db8::10", Port: 80}},
		"--get-blklst":                    {Op: api.OpGetBlklst},
		"--get-whtlst -t 192.0.2.100:443": {Op: api.OpGetWhtlst, Service: web},
	} {
		c, err := api.ParseArgs(strings.Fields(line))
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if !reflect.DeepEqual(c.Request, want) {
			t.Errorf("%s: %+v, want %+v", line, c.Request, want)
		}
	}
	for line, want := range map[string]string{
		"--add-blklst -t 192.0.2.100:443":                  "--add-blklst needs a client address or prefix: -k ADDR[/LEN]",
		"--del-whtlst -t 192.0.2.100:443":                  "--del-whtlst needs a client address or prefix: -2 ADDR[/LEN]",
		"--add-blklst -k 192.0.2.7":                        "--add-blklst needs a service",
		"--add-blklst -t 192.0.2.100:443 -k nope":          `-k "nope": not an address or a prefix`,
		"--add-whtlst -t 192.0.2.100:443 -2 192.0.2.0/33":  `-2 "192.0.2.0/33": not an address or a prefix`,
		"--add-whtlst -t 192.0.2.100:443 -k 192.0.2.7":     "option -k is not allowed with --add-whtlst",
		"--add-blklst -t 192.0.2.100:443 -2 192.0.2.7":     "option -2 is not allowed with --add-blklst",
		"-a -t 192.0.2.100:443 -r 10.0.0.1 -k 192.0.2.7":   "option -k is not allowed with -a",
		"--add-laddr -t 192.0.2.100:443 -z 10.0.0.2 -k ::": "option -k is not allowed with --add-laddr",
		"--get-blklst -k 192.0.2.7":                        "option -k is not allowed with --get-blklst",
		"--add-blklst --add-whtlst -t 192.0.2.100:443":     "only one command at a time",
	} {
		if _, err := api.ParseArgs(strings.Fields(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", line, err, want)
		}
	}

	svc := api.Service{Protocol: "TCP", VIP: "192.0.2.100", Port: 443, Scheduler: "rr",
		Blocklist: []string{"192.0.2.7", "198.51.100.0/24"}, Allowlist: []string{"192.0.2.0/24"},
		Servers: []api.RealServer{{Address: "10.0.0.1", Port: 443, Forward: "Masq", Weight: 1}}}
	var b bytes.Buffer
	api.WriteSave(&b, []api.Service{svc})
	saved := "-A -t 192.0.2.100:443 -s rr\n" +
		"--add-blklst -t 192.0.2.100:443 -k 192.0.2.7\n" +
		"--add-blklst -t 192.0.2.100:443 -k 198.51.100.0/24\n" +
		"--add-whtlst -t 192.0.2.100:443 -2 192.0.2.0/24\n" +
		"-a -t 192.0.2.100:443 -r 10.0.0.1:443 -m -w 1\n"
	if b.String() != saved {
		t.Fatalf("-S:\n%s\nwant\n%s", b.String(), saved)
	}
	reqs, err := api.ParseRestore(saved + "--del-blklst -t 192.0.2.100:443 -k 192.0.2.7\n--del-whtlst -t 192.0.2.100:443 -2 192.0.2.0/24\n")
	if err != nil || len(reqs) != 7 || reqs[1].Op != api.OpAddBlklst || reqs[3].Op != api.OpAddWhtlst || reqs[3].ClientPrefix != "192.0.2.0/24" ||
		reqs[5].Op != api.OpDelBlklst || reqs[6].Op != api.OpDelWhtlst {
		t.Fatalf("restore: %+v %v", reqs, err)
	}
	for _, line := range []string{"--get-blklst\n", "--get-whtlst -t 192.0.2.100:443\n"} {
		if _, err := api.ParseRestore(line); err == nil || !strings.Contains(err.Error(), "is not allowed in a restore file") {
			t.Fatalf("%q in a restore file: %v", line, err)
		}
	}

	b.Reset()
	api.WriteClientLists(&b, api.Response{ClientLists: []api.ClientListEntry{
		{Protocol: "TCP", VIP: "192.0.2.100", Port: 443, List: api.Blocklist, Prefix: "192.0.2.7"},
		{Protocol: "TCP", VIP: "2001:db8::10", Port: 80, List: api.Blocklist, Prefix: "2001:db8:1::/64"}}}, api.Blocklist)
	if want := "Prot VIP:Port                   Blocklist\n" +
		"TCP  192.0.2.100:443            192.0.2.7\n" +
		"TCP  [2001:db8::10]:80          2001:db8:1::/64\n"; b.String() != want {
		t.Errorf("--get-blklst output:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	api.WriteClientLists(&b, api.Response{}, api.Allowlist)
	if want := "Prot VIP:Port                   Allowlist\n"; b.String() != want {
		t.Errorf("empty --get-whtlst output %q, want %q", b.String(), want)
	}
}

// TestOpsAndOutputFormat: ipvsadm's -o is --ops in a service's add or
// edit unless json or text follows (lbctl's output format).
func TestOpsAndOutputFormat(t *testing.T) {
	for _, tt := range []struct {
		args       string
		ops, json_ bool
	}{
		{"-A -u 192.0.2.1:53 -o", true, false},
		{"-A -u 192.0.2.1:53 -o -s rr", true, false},
		{"-A -u 192.0.2.1:53 --ops -o json", true, true},
		{"-E -u 192.0.2.1:53 -o text", false, false},
		{"-L -n -o json", false, true},
	} {
		c, err := api.ParseArgs(strings.Fields(tt.args))
		if err != nil {
			t.Errorf("%s: %v", tt.args, err)
			continue
		}
		ops := c.Service != nil && c.Service.OnePacket != nil && *c.Service.OnePacket
		if ops != tt.ops || c.JSON != tt.json_ {
			t.Errorf("%s: ops %v json %v, want %v %v", tt.args, ops, c.JSON, tt.ops, tt.json_)
		}
	}
}
