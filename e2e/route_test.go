package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// Static routes: a real server in another network, behind a router on
// the servers' segment, while lbd's only other way off its subnets would
// be a gateway on the client side. The VS/NAT topology's rs2 becomes that
// router (forwarding, 10.9.0.1 towards a server "far" at 10.9.0.2, which
// answers on 8080 and routes back through it); lbd's server port has the
// route 10.9.0.0/24 via rs2 and a VS/NAT service to far alone (no
// gateway: without the route, far is unreachable, no_route). Every
// request through the VIP reaches far and comes back translated.

const routeFar = "10.9.0.2"

func TestStaticRoute(t *testing.T) {
	var far string // far's namespace
	_, _, helper := binaries(t)
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			router := nat.Servers[1]
			ns, err := tp.AddNS("far")
			if err != nil {
				t.Fatal(err)
			}
			far = ns
			farIf, routerIf := tp.IfName("far"), tp.IfName("rtf")
			for _, step := range []func() error{
				func() error { return tp.Veth(far, farIf, router.NS, routerIf) },
				func() error { return tp.ForAFPacket(far, farIf) },
				func() error { return tp.ForAFPacket(router.NS, routerIf) },
				func() error { return tp.Addr(far, farIf, routeFar+"/24") },
				func() error { return tp.Addr(router.NS, routerIf, "10.9.0.1/24") },
				func() error { return tp.Up(far, farIf) },
				func() error { return tp.Up(router.NS, routerIf) },
				func() error { return tp.Route(far, "default via 10.9.0.1") },
				func() error { return tp.Sysctl(router.NS, "net.ipv4.ip_forward", "1") },
			} {
				if err := step(); err != nil {
					t.Fatal(err)
				}
			}
			if err := harness.StartHTTP(tp, []topo.Host{{Name: "far", NS: far, If: farIf}}, helper, ":8080", 10*time.Second); err != nil {
				t.Fatal(err)
			}
		},
		configure: func(c *harness.Config) {
			c.Ports = []harness.Port{
				harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
				harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
			}
			c.Ports[1].Routes = [][2]string{{"10.9.0.0/24", "198.51.100.12"}}
			c.Services[0].Servers = []harness.Server{{Address: routeFar, Port: 8080, Weight: 1}}
		},
	})
	e.warmUp(t)
	const n = 50
	res := e.get(t, e.url, n, 5*time.Second)
	for _, r := range res {
		if r.Err != "" {
			t.Fatalf("request %d failed: %s", r.I, r.Err)
		}
		if r.Server() != "far" {
			t.Fatalf("request %d answered by %q, want far", r.I, r.Server())
		}
	}
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, routeFar+":8080") {
		t.Errorf("lbctl -L does not list the far server:\n%s", out)
	}
	t.Logf("%d requests through the route to %s answered", n, routeFar)
}
