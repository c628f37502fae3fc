package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// removedEchoPort is the echo service TestRemovedServiceKeepsItsConnections
// removes.
const removedEchoPort = 9400

// TestRemovedServiceKeepsItsConnections: a client that reaches the VIP on
// its own link (it asks ARP for the VIP, as a router in front of a
// director does) holds a connection to the VIP's only service, and the
// service is removed with lbctl -D. The connection goes on after the
// client forgot the VIP's MAC address: lbd still answers ARP (and echo)
// for the VIP while a connection to it remains, lbctl -L says the VIP
// drains, a new connection is refused. The file without the service,
// lbctl upgrade: the new lbd has no such service, yet takes the
// connection from the handover and goes on answering for its VIP. Once
// the connection idled out, lbd stops answering for the VIP. Without the
// drain the client found no MAC address for the VIP after -D, and the
// upgrade refused the connection (no_service).
func TestRemovedServiceKeepsItsConnections(t *testing.T) {
	waitBound(t)
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, _ *topo.Topo, nat *topo.NAT) {
			startEchoServers(t, removedEchoPort, nat.Servers[0].NS, nat.Servers[1].NS)
		},
		configure: func(c *harness.Config) {
			svc := harness.Service{VIP: c.Services[0].VIP, Port: removedEchoPort, Scheduler: "rr"}
			for _, s := range c.Services[0].Servers {
				svc.Servers = append(svc.Servers, harness.Server{Address: s.Address, Port: removedEchoPort, Weight: 1})
			}
			c.Services = []harness.Service{svc}
			c.Timeouts.TCP = "8s" // the held connection expires soon after its last echo
		},
	})
	vip := e.nat.VIP.String()
	addr := net.JoinHostPort(vip, fmt.Sprint(removedEchoPort))
	client := e.nat.Client
	if _, err := e.topo.Exec(client.NS, "ip", "route", "add", vip+"/32", "dev", client.If); err != nil {
		t.Fatal(err)
	}
	dial := func(timeout time.Duration) (c net.Conn, err error) {
		err = topo.InNS(client.NS, func() (err error) {
			c, err = net.DialTimeout("tcp4", addr, timeout)
			return err
		})
		return c, err
	}
	held, err := dial(5 * time.Second)
	if err != nil {
		t.Fatalf("connect to %s on the VIP's own link: %v", addr, err)
	}
	defer held.Close()
	ask := func(when string) {
		t.Helper()
		_ = held.SetDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4)
		if _, err := held.Write([]byte("ping")); err != nil {
			t.Fatalf("the held connection %s: %v", when, err)
		}
		if _, err := io.ReadFull(held, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("the held connection %s: %q, %v", when, buf, err)
		}
	}
	forgetVIP := func() {
		t.Helper()
		if _, err := e.topo.Exec(client.NS, "ip", "neigh", "flush", "to", vip, "dev", client.If); err != nil {
			t.Fatal(err)
		}
	}
	draining := func(when string) {
		t.Helper()
		if list := e.lbctlOK(t, "-L", "-n"); !strings.Contains(list, "VIP draining: "+vip+" (") {
			t.Errorf("%s: lbctl -L does not say the VIP drains:\n%s", when, list)
		}
	}
	ask("on the VIP's own link")

	e.lbctlOK(t, "-D", "-t", addr)
	forgetVIP()
	ask("after its service was removed")
	draining("after -D")
	if !strings.Contains(e.log.String(), "VIP draining") {
		t.Error("lbd did not log that the VIP drains")
	}
	if c, err := dial(2 * time.Second); err == nil {
		c.Close()
		t.Error("a new connection to the removed service was answered")
	}
	forgetVIP()
	if _, err := e.topo.Exec(client.NS, "ping", "-c", "1", "-W", "2", vip); err != nil {
		t.Errorf("the draining VIP does not answer echo: %v", err)
	}

	cfg := e.cfg
	cfg.Services = nil
	if err := os.WriteFile(e.cfgPath, []byte(cfg.YAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	ask("before the upgrade")
	e.upgrade(t)
	forgetVIP()
	ask("after an upgrade to a file without its service")
	draining("after the upgrade")

	// The held connection idles out (tcp 8s); its server's id is
	// reclaimed and the service goes, and the VIP is no longer answered.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(e.log.String(), "VIP drained") {
		if time.Now().After(deadline) {
			t.Fatal("the VIP still drains 30 s after its last connection went idle")
		}
		time.Sleep(500 * time.Millisecond)
	}
	if list := e.lbctlOK(t, "-L", "-n"); strings.Contains(list, "VIP draining") {
		t.Errorf("lbctl -L still says the VIP drains:\n%s", list)
	}
	forgetVIP()
	if _, err := e.topo.Exec(client.NS, "ping", "-c", "1", "-W", "1", vip); err == nil {
		t.Error("the VIP still answers echo after its drain ended")
	}
	e.stopLBD(t)
}
