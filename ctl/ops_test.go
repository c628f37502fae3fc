package ctl

import (
	"bytes"
	"context"
	"github.com/dplb/dplb/lcore/conn"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

func newTestOps(t *testing.T) (*Ops, *Controller, *fakeDataplane) {
	t.Helper()
	c, f := newTestController(t)
	cfg, err := conf.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	return NewOps(c, cfg, "", nil, nil, zap.NewNop()), c, f
}

// rule parses an ipvsadm command line into the request lbctl would send.
func rule(t *testing.T, line string) api.Request {
	t.Helper()
	c, err := api.ParseArgs(strings.Fields(line))
	if err != nil {
		t.Fatalf("ParseArgs(%q): %v", line, err)
	}
	return c.Request
}

func do(o *Ops, req api.Request) api.Response {
	req.Version = api.Version
	return o.Handle(context.Background(), req)
}

func listing(t *testing.T, o *Ops, f api.ListFormat) string {
	t.Helper()
	resp := do(o, api.Request{Op: api.OpList})
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	var b bytes.Buffer
	if err := api.WriteList(&b, resp, f); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func intp(v int) *int { return &v }

func TestOpsRefusals(t *testing.T) {
	tests := []struct {
		name string
		req  func(t *testing.T) api.Request
		want string
	}{
		{"service exists", line("-A -t 203.0.113.100:80"), "-A -t 203.0.113.100:80: service already exists"},
		{"unknown scheduler", line("-A -t 203.0.113.101:80 -s nope"), `-t 203.0.113.101:80: -s: unknown scheduler "nope" (known: ` + strings.Join(Schedulers(), ", ") + ")"},
		{"unknown sched flag", line("-A -t 203.0.113.101:80 -b sh-nope"), `-t 203.0.113.101:80: -b: unknown flag "sh-nope" (known: sh-fallback, sh-port, mh-fallback, mh-port)`},
		{"VIP is a port's address", line("-A -t 203.0.113.1:80"), "-t 203.0.113.1:80: 203.0.113.1 is the address of ports[0]"},
		{"edit missing service", line("-E -t 203.0.113.100:81 -s rr"), "-E -t 203.0.113.100:81: service does not exist"},
		{"delete missing service", line("-D -u 203.0.113.100:80"), "-D -u 203.0.113.100:80: service does not exist"},
		{"server exists", line("-a -t 203.0.113.100:80 -r 198.51.100.11:80"), "-a -t 203.0.113.100:80 -r 198.51.100.11:80: server already exists"},
		{"server exists, port from service", line("-a -t 203.0.113.100:80 -r 198.51.100.11"), "-a -t 203.0.113.100:80 -r 198.51.100.11:80: server already exists"},
		{"server of missing service", line("-a -t 203.0.113.100:81 -r 198.51.100.11"), "-a -t 203.0.113.100:81: service does not exist"},
		{"edit missing server", line("-e -t 203.0.113.100:80 -r 198.51.100.99:80 -w 2"), "-e -t 203.0.113.100:80 -r 198.51.100.99:80: server does not exist"},
		{"delete missing server", line("-d -t 203.0.113.100:80 -r 198.51.100.11:8080"), "-d -t 203.0.113.100:80 -r 198.51.100.11:8080: server does not exist"},
		{"server off the subnets", line("-a -t 203.0.113.100:80 -r 10.0.0.5:80"), "-t 203.0.113.100:80 -r 10.0.0.5:80: 10.0.0.5 is not on any server-facing port's subnet (198.51.100.0/24)"},
		{"lower above upper", line("-a -t 203.0.113.100:80 -r 198.51.100.13 -x 10 -y 20"), "-t 203.0.113.100:80 -r 198.51.100.13:80: -y: 20 is out of range 0..10"},
		{"weight negative", func(*testing.T) api.Request {
			return api.Request{Op: api.OpEditServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 80},
				Server: &api.ServerSpec{Address: "198.51.100.11", Weight: intp(-1)}}
		}, "-e -t 203.0.113.100:80 -r 198.51.100.11:80: -w -1: weight is negative"},
		{"weight too big", func(*testing.T) api.Request {
			return api.Request{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 80},
				Server: &api.ServerSpec{Address: "198.51.100.13", Weight: intp(70000)}}
		}, "-a -t 203.0.113.100:80 -r 198.51.100.13:80: -w 70000: weight is out of range 0..65535"},
		{"service port out of range", func(*testing.T) api.Request {
			return api.Request{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 70000}}
		}, "-A -t 203.0.113.100:70000: port 70000 is out of range 0..65535"},
		{"port-zero service without persistence", func(*testing.T) api.Request {
			return api.Request{Op: api.OpAddService, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 0}}
		}, "-t 203.0.113.100:0: 0 (every port of the VIP) needs persistence, as ipvsadm's port-zero services do"},
		{"bad protocol", func(*testing.T) api.Request {
			return api.Request{Op: api.OpDeleteService, Service: &api.ServiceSpec{Protocol: "sctp", VIP: "203.0.113.100", Port: 80}}
		}, `-D protocol "sctp" is not tcp (-t) or udp (-u)`},
		{"bad server address", func(*testing.T) api.Request {
			return api.Request{Op: api.OpAddServer, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 80},
				Server: &api.ServerSpec{Address: "web1"}}
		}, `-a -t 203.0.113.100:80 -r web1: "web1" is not an IPv4 or IPv6 address`},
		{"no service", func(*testing.T) api.Request { return api.Request{Op: api.OpAddServer} }, "-a needs a service: -t|-u VIP:port"},
		{"timeout negative", func(*testing.T) api.Request {
			return api.Request{Op: api.OpSetTimeouts, Timeouts: &api.TimeoutsSpec{TCP: -1}}
		}, "--set: tcp timeout -1 is out of range 0..2592000 seconds"},
		{"zero missing service", line("-Z -t 203.0.113.100:81"), "-Z -t 203.0.113.100:81: service does not exist"},
		{"connections of a bad client", line("-L -c --client fe80::1%eth0"), "--client fe80::1%eth0: not an IPv4 or IPv6 address without a zone"},
		{"reload without a file", line("reload"), "reload: lbd was started without a configuration file"},
		{"restore: a line fails", restoreReq("-A -t 203.0.113.101:80 -s rr\n-a -t 203.0.113.100:80 -r 198.51.100.11:80 -m -w 1\n"),
			"line 2: -a -t 203.0.113.100:80 -r 198.51.100.11:80: server already exists"},
		{"restore: a line does not parse", restoreReq("\n# rules\n-a -t 203.0.113.100:80 -r 198.51.100.13:80 -w x\n"), "line 3: -w x: weight is not a number"},
		{"restore: not a rule", restoreReq("-L -n\n"), "line 1: -L is not allowed in a restore file"},
		{"restore: a one-packet service's nat server", restoreReq("-A -u 203.0.113.101:53 -s rr --ops\n-a -u 203.0.113.101:53 -r 198.51.100.11:53 -m\n"),
			"-u 203.0.113.101:53 -r 198.51.100.11:53: -g|-i|-m|--fullnat: nat with one_packet: no connection is kept to translate the server's answers back (use dr or tun)"},
		{"restore: the result is invalid", restoreReq("-A -t 203.0.113.101:80 -s rr\n-a -t 203.0.113.101:80 -r 10.0.0.5:80\n"),
			"-t 203.0.113.101:80 -r 10.0.0.5:80: 10.0.0.5 is not on any server-facing port's subnet (198.51.100.0/24)"},
		{"unknown op", func(*testing.T) api.Request { return api.Request{Op: "frobnicate"} }, `unknown operation "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, c, f := newTestOps(t)
			before, beforeT := c.Services()
			beforeList := listing(t, o, api.ListFormat{})
			resp := do(o, tt.req(t))
			if resp.Error != tt.want {
				t.Errorf("refusal\n got %q\nwant %q", resp.Error, tt.want)
			}
			after, afterT := c.Services()
			if !reflect.DeepEqual(before, after) || beforeT != afterT || len(f.published) != 0 {
				t.Errorf("a refused request changed the state (%d snapshots published)", len(f.published))
			}
			if got := listing(t, o, api.ListFormat{}); got != beforeList {
				t.Errorf("listing changed:\n%s", got)
			}
		})
	}
}

func line(l string) func(t *testing.T) api.Request {
	return func(t *testing.T) api.Request { return rule(t, l) }
}

func restoreReq(text string) func(t *testing.T) api.Request {
	return func(*testing.T) api.Request { return api.Request{Op: api.OpRestore, Text: text} }
}

func TestOpsEdits(t *testing.T) {
	o, c, _ := newTestOps(t)
	for _, l := range []string{
		"-A -t 203.0.113.100:443 -s rr",
		"-a -t 203.0.113.100:443 -r 198.51.100.21:8443 -m -w 3 -x 100 -y 50",
		"-a -t 203.0.113.100:443 -r 198.51.100.22",
		"-e -t 203.0.113.100:80 -r 198.51.100.12:8000 -w 0",
		"-d -t 203.0.113.100:80 -r 198.51.100.11",
		"-D -t 203.0.113.100:21",
		"-E -t 203.0.113.100:443 -s rr",
		"--set 1000 0 30",
	} {
		if resp := do(o, rule(t, l)); resp.Error != "" {
			t.Fatalf("%s: %s", l, resp.Error)
		}
	}
	want := strings.Join([]string{
		"dplb lbctl (API v1) (size=2048)",
		"Prot LocalAddress:Port Scheduler Flags",
		"  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn",
		"TCP  203.0.113.100:80 rr",
		"  -> 198.51.100.12:8000           Masq    0      0          0         ",
		"TCP  203.0.113.100:443 rr",
		"  -> 198.51.100.21:8443           Masq    3      0          0         ",
		"  -> 198.51.100.22:443            Masq    1      0          0         ",
		"",
	}, "\n")
	if got := listing(t, o, api.ListFormat{}); got != want {
		t.Errorf("listing:\n%s\nwant:\n%s", got, want)
	}
	wantThresholds := strings.Join([]string{
		"dplb lbctl (API v1) (size=2048)",
		"Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn ",
		"  -> RemoteAddress:Port",
		"TCP  203.0.113.100:80",
		"  -> 198.51.100.12:8000           0          0          0          0         ",
		"TCP  203.0.113.100:443",
		"  -> 198.51.100.21:8443           100        50         0          0         ",
		"  -> 198.51.100.22:443            0          0          0          0         ",
		"",
	}, "\n")
	if got := listing(t, o, api.ListFormat{Thresholds: true}); got != wantThresholds {
		t.Errorf("--thresholds:\n%s\nwant:\n%s", got, wantThresholds)
	}
	_, to := c.Services()
	if to.TCP.Seconds() != 1000 || to.TCPFin.Seconds() != 60 || to.UDP.Seconds() != 30 {
		t.Errorf("timeouts after --set 1000 0 30: %+v", to)
	}
}

func TestOpsSaveClearRestore(t *testing.T) {
	o, c, _ := newTestOps(t)
	do(o, rule(t, "-a -t 203.0.113.100:80 -r 198.51.100.13:80 -w 4 -x 10"))
	wantSave := strings.Join([]string{
		"-A -t 203.0.113.100:21 -s rr",
		"-a -t 203.0.113.100:21 -r 198.51.100.12:21 -m -w 1",
		"-A -t 203.0.113.100:80 -s rr",
		"-a -t 203.0.113.100:80 -r 198.51.100.11:80 -m -w 1",
		"-a -t 203.0.113.100:80 -r 198.51.100.12:8000 -m -w 2",
		"-a -t 203.0.113.100:80 -r 198.51.100.13:80 -m -w 4 -x 10",
		"",
	}, "\n")
	saved := do(o, api.Request{Op: api.OpSave})
	if saved.Error != "" || saved.Text != wantSave {
		t.Fatalf("save:\n%s\nwant:\n%s (error %q)", saved.Text, wantSave, saved.Error)
	}
	before := listing(t, o, api.ListFormat{Thresholds: true})
	if resp := do(o, api.Request{Op: api.OpClear}); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	c.mu.Lock()
	c.republish() // no connection counts on the removed servers: they and their services go (vipdrain.go)
	c.mu.Unlock()
	if got := listing(t, o, api.ListFormat{}); strings.Count(got, "\n") != 3 {
		t.Fatalf("after -C:\n%s", got)
	}
	if resp := do(o, api.Request{Op: api.OpRestore, Text: saved.Text}); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if got := listing(t, o, api.ListFormat{Thresholds: true}); got != before {
		t.Errorf("after restore:\n%s\nbefore:\n%s", got, before)
	}
	if again := do(o, api.Request{Op: api.OpSave}); again.Text != wantSave {
		t.Errorf("save after restore:\n%s", again.Text)
	}
}

// TestOpsRestoreHandWritten restores a file as an operator writes it for
// ipvsadm -R: "ipvsadm" prefixes, comments, long options, a server without
// a port, -C first.
func TestOpsRestoreHandWritten(t *testing.T) {
	o, _, _ := newTestOps(t)
	file := `# web
ipvsadm -C
-A -t 203.0.113.100:80 -s rr
-a -t 203.0.113.100:80 -r 198.51.100.11:8080 -m -w 1
-a -t 203.0.113.100:80 -r 198.51.100.12:8080 -m -w 1

ipvsadm --add-service --tcp-service 203.0.113.100:8080 --scheduler rr
ipvsadm --add-server --tcp-service 203.0.113.100:8080 --real-server 198.51.100.12 --masquerading --weight=2
--set 900 120 300
`
	if resp := do(o, api.Request{Op: api.OpRestore, Text: file}); resp.Error != "" {
		t.Fatal(resp.Error)
	}
	want := strings.Join([]string{
		"-A -t 203.0.113.100:80 -s rr",
		"-a -t 203.0.113.100:80 -r 198.51.100.11:8080 -m -w 1",
		"-a -t 203.0.113.100:80 -r 198.51.100.12:8080 -m -w 1",
		"-A -t 203.0.113.100:8080 -s rr",
		"-a -t 203.0.113.100:8080 -r 198.51.100.12:8080 -m -w 2",
		"",
	}, "\n")
	if got := do(o, api.Request{Op: api.OpSave}).Text; got != want {
		t.Errorf("save after restore:\n%s\nwant:\n%s", got, want)
	}
}

func TestOpsZero(t *testing.T) {
	o, c, f := newTestOps(t)
	web := c.Snapshot().Services[0]
	ftp := c.Snapshot().Services[1]
	stats := func(n uint64) lcore.DestStats {
		return lcore.DestStats{lcore.DestConns: n, lcore.DestInPkts: 10 * n, lcore.DestOutPkts: 9 * n,
			lcore.DestInBytes: 1000 * n, lcore.DestOutBytes: 900 * n, lcore.DestActive: 1}
	}
	f.dest[web.Dests[0].ID], f.dest[web.Dests[1].ID], f.dest[ftp.Dests[0].ID] = stats(5), stats(7), stats(3)
	check := func(step string, want ...uint64) {
		t.Helper()
		resp := do(o, api.Request{Op: api.OpList})
		var got []uint64
		for _, s := range resp.Services {
			got = append(got, s.Stats.Conns)
			for _, rs := range s.Servers {
				got = append(got, rs.Stats.Conns)
				if rs.Stats.InPkts != 10*rs.Stats.Conns || rs.Stats.OutBytes != 900*rs.Stats.Conns || rs.ActiveConns != 1 {
					t.Errorf("%s: %s: counters %+v, active %d", step, rs.Address, rs.Stats, rs.ActiveConns)
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: conns (service, servers...) = %v, want %v", step, got, want)
		}
	}
	check("start", 12, 5, 7, 3, 3)
	do(o, rule(t, "-Z -t 203.0.113.100:80"))
	check("-Z one service", 0, 0, 0, 3, 3)
	f.dest[web.Dests[0].ID] = stats(8)
	check("traffic after -Z", 3, 3, 0, 3, 3)
	do(o, rule(t, "-Z"))
	check("-Z all", 0, 0, 0, 0, 0)
	// A server deleted and added again starts from zero.
	f.dest[web.Dests[1].ID] = stats(20)
	do(o, rule(t, "-d -t 203.0.113.100:80 -r 198.51.100.12:8000"))
	do(o, rule(t, "-a -t 203.0.113.100:80 -r 198.51.100.12:8000"))
	check("re-added", 0, 0, 0, 0, 0)
	f.dest[web.Dests[1].ID] = stats(21)
	check("re-added, then traffic", 1, 0, 1, 0, 0)
}

const reloadConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server, gateway: 198.51.100.253}
timeouts: {tcp: 100s}
log: {level: debug}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    servers:
      - {address: 198.51.100.11, port: 80, weight: 5}
`

func TestOpsReload(t *testing.T) {
	c, f := newTestController(t)
	started, err := conf.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "lbd.yaml")
	o := NewOps(c, started, path, nil, nil, zap.NewNop())

	// An invalid file is refused with the field named; nothing changes.
	bad := strings.Replace(reloadConfig, "weight: 5", "weight: -5", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	before, beforeT := c.Services()
	resp := do(o, api.Request{Op: api.OpReload})
	if want := "reload: " + path + ": services[0].servers[0].weight: -5 is out of range 0..65535; nothing changed"; resp.Error != want {
		t.Errorf("invalid reload: %q, want %q", resp.Error, want)
	}
	if after, afterT := c.Services(); !reflect.DeepEqual(before, after) || beforeT != afterT || len(f.published) != 0 {
		t.Error("an invalid reload changed the state")
	}
	if _, err := o.Reload(api.Author{User: "signal", Via: api.ViaSignal}); err == nil || err.Error() != resp.Error {
		t.Errorf("Reload (SIGHUP) = %v, want the same refusal", err)
	}

	// A valid file: services and timeouts applied, restart fields named.
	if err := os.WriteFile(path, []byte(reloadConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	resp = do(o, api.Request{Op: api.OpReload})
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	if want := []string{"ports[1].gateway", "log.level"}; !reflect.DeepEqual(resp.Restart, want) {
		t.Errorf("restart = %q, want %q", resp.Restart, want)
	}
	svcs, to := c.Services()
	if len(svcs) != 1 || len(svcs[0].Servers) != 1 || svcs[0].Servers[0].Weight != 5 || to.TCP.Seconds() != 100 || len(f.published) != 1 {
		t.Errorf("after reload: %+v %+v (%d published)", svcs, to, len(f.published))
	}
}

func TestOpsConnections(t *testing.T) {
	o, _, f := newTestOps(t)
	f.conns = []lcore.ConnInfo{
		{Proto: 6, State: conn.StateEstablished, ClientIP: ip4(203, 0, 113, 7), ClientPort: 40000, VIP: ip4(203, 0, 113, 100), VPort: 80,
			RIP: ip4(198, 51, 100, 11), RPort: 80, Expires: 895e9},
		{Proto: 6, Template: true, ClientIP: ip4(203, 0, 113, 8), VIP: ip4(203, 0, 113, 100), VPort: 80,
			RIP: ip4(198, 51, 100, 12), RPort: 8000, Expires: 61e9},
	}
	resp := o.Handle(context.Background(), rule(t, "-L -n -c"))
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	var b strings.Builder
	if err := api.WriteConns(&b, resp); err != nil {
		t.Fatal(err)
	}
	want := "IPVS connection entries\n" +
		"pro expire state       source             virtual            destination\n" +
		"TCP 14:55  ESTABLISHED 203.0.113.7:40000  203.0.113.100:80   198.51.100.11:80\n" +
		"TCP 01:01  NONE        203.0.113.8:0      203.0.113.100:80   198.51.100.12:8000\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	resp = o.Handle(context.Background(), rule(t, "-L -n -c --client 203.0.113.8"))
	if len(resp.Conns) != 1 || resp.Conns[0].Client != "203.0.113.8:0" {
		t.Fatalf("client filter: %+v", resp.Conns)
	}
}
