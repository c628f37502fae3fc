package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestSeedServiceTable runs the LVS seeds' own example table (seed 002
// and 004) with wrr: TCP VIP:80 -> RS1:80 weight 1 and RS2:8000 weight 2,
// TCP VIP:21 -> RS2:21; any other port on the VIP is refused.
func TestSeedServiceTable(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": ":80", "rs2": ":8000,:21"},
		configure: func(c *harness.Config) {
			rs1, rs2 := c.Services[0].Servers[0].Address, c.Services[0].Servers[1].Address
			c.Services = []harness.Service{
				{VIP: c.Services[0].VIP, Port: 80, Scheduler: "wrr", Servers: []harness.Server{
					{Address: rs1, Port: 80, Weight: 1}, {Address: rs2, Port: 8000, Weight: 2}}},
				{VIP: c.Services[0].VIP, Port: 21, Scheduler: "wrr", Servers: []harness.Server{
					{Address: rs2, Port: 21, Weight: 1}}},
			}
		},
	})
	e.warmUp(t)
	got := map[string]int{}
	for _, r := range e.get(t, e.url, 150, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
		got[r.Server()]++
	}
	// wrr with weights 1:2 gives rs2, rs1, rs2 per cycle: exactly 1:2.
	if got["rs1"] != 50 || got["rs2"] != 100 {
		t.Fatalf("answers %v, want rs1 50 and rs2 100 (weights 1:2)", got)
	}
	r := e.get(t, "http://"+e.nat.VIP.String()+":21/", 1, 5*time.Second)[0]
	if r.Err != "" || r.Server() != "rs2" {
		t.Fatalf("VIP:21 answered %q %q, want rs2", r.Body, r.Err)
	}
	if r := e.get(t, "http://"+e.nat.VIP.String()+":8000/", 1, 2*time.Second)[0]; r.Err == "" {
		t.Fatalf("VIP:8000 answered %q: only the configured ports may", r.Body)
	}
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TCP  192.0.2.100:80 wrr", "TCP  192.0.2.100:21 wrr", "198.51.100.12:8000           Masq    2"} {
		if !strings.Contains(out, want) {
			t.Errorf("lbctl -L -n lacks %q:\n%s", want, out)
		}
	}
	e.stopLBD(t)
}

// TestPersistentService: a persistent service keeps a client on one real
// server whatever source port it connects from.
func TestPersistentService(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Services[0].Persistence = "300s"
	}})
	e.warmUp(t)
	got := map[string]int{}
	for _, r := range e.get(t, e.url, 40, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
		got[r.Server()]++
	}
	if len(got) != 1 {
		t.Fatalf("a persistent client was spread over %v", got)
	}
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "--persistent-conn")
	if err != nil {
		t.Fatal(err)
	}
	// One template, naming the one server that answered.
	if !strings.Contains(out, fmt.Sprintf("%-9d %-11d", 1, 1)) {
		t.Fatalf("lbctl --persistent-conn shows no template:\n%s", out)
	}
	e.stopLBD(t)
}

// TestPortZeroService: a persistent port-zero service (ipvsadm -A -t
// VIP:0 -p) takes every port of its VIP that has no service of its own,
// to the same port on the real server, and keeps a client on one server
// across ports (one template, on port 0): requests to VIP:80 and
// VIP:8443 all reach one server, which listens on both. VIP:8080 has a
// service of its own (rs2:80), which wins over port zero. Removing the
// persistence is refused, naming the field, and changes nothing.
func TestPortZeroService(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": ":80,:8443", "rs2": ":80,:8443"},
		configure: func(c *harness.Config) {
			rs1, rs2 := c.Services[0].Servers[0].Address, c.Services[0].Servers[1].Address
			c.Services = []harness.Service{
				{VIP: c.Services[0].VIP, Port: 0, Scheduler: "rr", Persistence: "300s", Servers: []harness.Server{
					{Address: rs1, Port: 0, Weight: 1}, {Address: rs2, Port: 0, Weight: 1}}},
				{VIP: c.Services[0].VIP, Port: 8080, Scheduler: "rr", Servers: []harness.Server{
					{Address: rs2, Port: 80, Weight: 1}}},
			}
		},
	})
	vip := e.nat.VIP.String()
	e.warmUp(t)
	got := map[string]int{}
	for _, port := range []int{80, 8443, 80, 8443} {
		for _, r := range e.get(t, fmt.Sprintf("http://%s:%d/", vip, port), 10, 5*time.Second) {
			if r.Err != "" {
				t.Fatalf("VIP:%d request %d: %s", port, r.I, r.Err)
			}
			got[r.Server()]++
		}
	}
	if len(got) != 1 {
		t.Fatalf("one client was spread over %v across ports 80 and 8443: the template must be the VIP's, not a port's", got)
	}
	for _, r := range e.get(t, fmt.Sprintf("http://%s:8080/", vip), 4, 5*time.Second) {
		if r.Err != "" || r.Server() != "rs2" {
			t.Fatalf("VIP:8080 answered %q %q, want rs2 (its own service)", r.Body, r.Err)
		}
	}
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"TCP  " + vip + ":0 rr persistent 300", "198.51.100.11:0 ", "198.51.100.12:0 ", "TCP  " + vip + ":8080 rr"} {
		if !strings.Contains(out, want) {
			t.Errorf("lbctl -L -n lacks %q:\n%s", want, out)
		}
	}
	tmpl, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c", "--persistent-conn")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tmpl, vip+":0") {
		t.Errorf("lbctl -L -n -c --persistent-conn shows no port-0 template:\n%s", tmpl)
	}

	// lbctl refuses a port-zero service without persistence, as ipvsadm,
	// and lbd an edit that would take it away.
	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-A", "-t", "192.0.2.101:0", "-s", "rr"); err == nil ||
		!strings.Contains(out+err.Error(), "port 0 (every port of the VIP) needs persistence") {
		t.Errorf("lbctl -A -t 192.0.2.101:0 without -p: %v\n%s", err, out)
	}
	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-E", "-t", vip+":0", "-s", "rr", "-p", "0"); err == nil ||
		!strings.Contains(out+err.Error(), "needs persistence") {
		t.Errorf("lbctl -E -t %s:0 -p 0: %v\n%s", vip, err, out)
	}
	if after, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n"); err != nil || !strings.Contains(after, "TCP  "+vip+":0 rr persistent 300") {
		t.Errorf("after the refused edit (%v):\n%s", err, after)
	}
	e.stopLBD(t)
}
