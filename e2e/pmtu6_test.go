package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// Path-MTU discovery over IPv6 through NAT66. The client namespace is
// made a router for a far client behind it (an address of lbd's wan
// prefix, which the router answers neighbour solicitations for: lbd
// reaches IPv6 clients on its links only), and its link to the far
// client gets MTU 1280 while both hosts keep 1500. A full-sized segment
// from a real server then makes the router send an ICMPv6 Packet Too Big
// to the VIP; lbd must translate it (the quoted source back to the real
// server's address and port, the checksums) and deliver it to the
// server, or the server's TCP resends the same segment until the
// download stalls: IPv6 routers never fragment.

const (
	v6FarClient = "2001:db8:2::200"
	v6FarLink   = "2001:db8:7::" // the router's narrow link to the far client
)

// farClient6 turns the NAT topology's client into a router for a far
// client namespace and returns that namespace and the router's interface
// towards it.
func farClient6(t *testing.T, tp *topo.Topo, nat *topo.NAT) (ns, routerIf string) {
	t.Helper()
	do := func(ns string, args ...string) {
		t.Helper()
		if out, err := tp.Exec(ns, args...); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	var err error
	if ns, err = tp.AddNS("far"); err != nil {
		t.Fatal(err)
	}
	r, f := nat.Client.NS, ns
	routerIf, farIf := tp.IfName("fr"), tp.IfName("ff")
	if err := tp.Veth(r, routerIf, f, farIf); err != nil {
		t.Fatal(err)
	}
	for _, side := range []struct{ ns, ifc, addr string }{{r, routerIf, v6FarLink + "1/64"}, {f, farIf, v6FarLink + "2/64"}} {
		do(side.ns, "sysctl", "-q", "-w", "net.ipv6.conf."+side.ifc+".disable_ipv6=0")
		do(side.ns, "sysctl", "-q", "-w", "net.ipv6.conf."+side.ifc+".accept_dad=0")
		do(side.ns, "ip", "-6", "addr", "add", side.addr, "dev", side.ifc, "nodad")
		do(side.ns, "ip", "link", "set", side.ifc, "up")
	}
	do(f, "ip", "-6", "addr", "add", v6FarClient+"/128", "dev", farIf, "nodad")
	do(f, "ip", "-6", "route", "add", "default", "via", v6FarLink+"1", "src", v6FarClient)
	do(r, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1")
	do(r, "sysctl", "-q", "-w", "net.ipv6.conf."+nat.Client.If+".proxy_ndp=1")
	do(r, "sysctl", "-q", "-w", "net.ipv6.icmp.ratelimit=0") // every Packet Too Big counts
	do(r, "ip", "-6", "neigh", "add", "proxy", v6FarClient, "dev", nat.Client.If)
	do(r, "ip", "-6", "route", "add", v6FarClient+"/128", "via", v6FarLink+"2", "dev", routerIf)
	return ns, routerIf
}

// startStreamServers6 is startStreamServers on IPv6.
func startStreamServers6(t *testing.T, port int, namespaces ...string) {
	t.Helper()
	serveTCP(t, "stream server", "tcp6", port, serveStream, namespaces...)
}

// stream6 downloads s from addr in ns over IPv6.
func stream6(ctx context.Context, ns, addr string, s streamSpec) streamResult {
	c, r := dialStream(ctx, ns, addr, s, 5*time.Second)
	if c == nil {
		return r
	}
	return readStream(c, r, s)
}

// TestPMTU6NAT66: 1 MiB downloads over IPv6 through NAT66 on two lcores
// to a far client behind a router whose link to it has MTU 1280. Each
// download needs the router's Packet Too Big delivered through lbd: the
// servers forget their learnt path MTUs before each.
func TestPMTU6NAT66(t *testing.T) {
	e, farNS, routerIf, servers := startFarClient6(t, func(c *harness.Config) {
		svc := harness.Service{VIP: v6VIP, Port: pmtuPort, Scheduler: "rr"}
		for i := range 2 {
			svc.Servers = append(svc.Servers, harness.Server{Address: v6Server(i), Port: pmtuPort, Weight: 1})
		}
		c.Services = append(c.Services, svc)
	})
	startStreamServers6(t, pmtuPort, servers...)
	farDownloads(t, e, farNS, routerIf, servers, "-6")
	e.stopLBD(t)
}

// farDownloads makes small transfers from the VIP's pmtuPort to the far
// client until two in a row succeed, narrows the router's link to it to
// smallMTU, then downloads 1 MiB pmtuRounds times, the servers forgetting
// the path MTUs they learnt (family: "-6" or "-4") before each; lbd must
// have delivered ICMP errors.
func farDownloads(t *testing.T, e *natEnv, farNS, routerIf string, servers []string, family string) {
	t.Helper()
	addr := net.JoinHostPort(v6VIP, strconv.Itoa(pmtuPort))
	warmStreams6(t, e.ctx, farNS, addr)
	if _, err := e.topo.Exec(e.nat.Client.NS, "ip", "link", "set", "dev", routerIf, "mtu", strconv.Itoa(smallMTU)); err != nil {
		t.Fatal(err)
	}
	big := streamSpec{total: pmtuBytes, chunk: 64 << 10, stall: 10 * time.Second}
	for i := range pmtuRounds {
		for _, ns := range servers {
			if _, err := e.topo.Exec(ns, "ip", family, "route", "flush", "cache"); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		if r := stream6(e.ctx, farNS, addr, big); r.kind != "" {
			t.Errorf("download %d of %d (1 MiB over a %d-byte link): %v", i+1, pmtuRounds, smallMTU, r)
			break
		} else {
			t.Logf("download %d: %d bytes in %v", i+1, r.got, time.Since(t0).Round(time.Millisecond))
		}
	}
	body := e.scrapeMetrics(t)
	delivered := counterSum(body, "icmp_errors")
	t.Logf("lbd: icmp_errors %.0f; drops: %s", delivered, nonZero(dropsByReason(body)))
	if delivered == 0 {
		t.Error("lbd delivered no ICMP error: the path MTU was not discovered through it")
	}
}

// startFarClient6 starts lbd on two workers over the NAT topology with
// IPv6 and a far client behind the client namespace (farClient6), the
// services addService adds; it returns the far client's namespace, the
// router's interface towards it, and the servers' namespaces.
func startFarClient6(t *testing.T, addService func(*harness.Config)) (e *natEnv, farNS, routerIf string, servers []string) {
	t.Helper()
	e = startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			farNS, routerIf = farClient6(t, tp, nat)
		},
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
			addService(c)
		},
	})
	for _, h := range e.nat.Servers {
		servers = append(servers, h.NS)
	}
	return e, farNS, routerIf, servers
}

// warmStreams6 makes small transfers from addr to ns until two in a row
// succeed (the neighbours resolved everywhere), at most ten.
func warmStreams6(t *testing.T, ctx context.Context, ns, addr string) {
	t.Helper()
	small := streamSpec{total: 1000, chunk: 1000, stall: 3 * time.Second}
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		if r := stream6(ctx, ns, addr, small); r.kind == "" {
			ok++
		} else {
			ok = 0
			t.Logf("warm-up %d failed (allowed): %v", i, r)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive transfers from %s succeeded", addr)
	}
}
