package e2e

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// ICMP errors through NAT64: the IPv6 client and the IPv4 servers each
// hear of the other side's errors in their own ICMP, translated by lbd
// (RFC 7915).

// nat64Service is an IPv6 service on port over the NAT topology's IPv4
// servers by NAT64, from lip64Addr.
func nat64Service(c *harness.Config, proto string, port int) harness.Service {
	svc := harness.Service{Protocol: proto, VIP: v6VIP, Port: port, Scheduler: "rr", LocalAddresses: []string{lip64Addr}}
	for _, h := range c.Services[0].Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: h.Address, Port: port, Weight: 1, Forward: "fullnat"})
	}
	return svc
}

// TestPMTU64: 1 MiB downloads over NAT64 on two lcores from the IPv4
// servers to a far IPv6 client behind a router whose link to it has MTU
// 1280 (farClient6). A full-sized segment (1480 bytes of IPv4, 1500 of
// IPv6) makes the router send an ICMPv6 Packet Too Big to the VIP; lbd
// must turn it into an ICMPv4 "fragmentation needed" (MTU 1260) from the
// local address to the server, quoting the server's segment, or the
// server resends the same segment until the download stalls. The servers
// forget their learnt path MTUs before each download.
func TestPMTU64(t *testing.T) {
	e, farNS, routerIf, servers := startFarClient6(t, func(c *harness.Config) {
		c.Services = append(c.Services, nat64Service(c, "", pmtuPort))
	})
	startStreamServers(t, pmtuPort, servers...)
	farDownloads(t, e, farNS, routerIf, servers, "-4")
	e.stopLBD(t)
}

// TestICMP64PortUnreachable: a UDP datagram over NAT64 to a port no
// server listens on. The server's kernel answers the local address with
// ICMP "port unreachable"; lbd turns it into an ICMPv6 Destination
// Unreachable (port) from the VIP, quoting the client's datagram, and the
// client's connected socket reports the connection refused.
func TestICMP64PortUnreachable(t *testing.T) {
	const port = 5399
	e := startNATWith(t, natOptions{
		setup: withIPv6,
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
			c.Services = append(c.Services, nat64Service(c, "udp", port))
		},
	})
	addr := net.JoinHostPort(v6VIP, strconv.Itoa(port))
	refused := 0
	for i := 0; i < 10 && refused < 3; i++ {
		var c net.Conn
		if err := topo.InNS(e.nat.Client.NS, func() (err error) {
			c, err = net.Dial("udp6", addr)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		c.SetDeadline(time.Now().Add(time.Second))
		_, err := c.Write([]byte("anyone?"))
		if err == nil {
			_, err = c.Read(buf)
		}
		c.Close()
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			refused++
		case err == nil:
			t.Fatalf("an answer from %s, where no server listens", addr)
		default:
			t.Logf("attempt %d: %v (the neighbours may not be resolved yet)", i, err)
		}
	}
	body := e.scrapeMetrics(t)
	t.Logf("lbd: icmp_errors %.0f; drops: %s", counterSum(body, "icmp_errors"), nonZero(dropsByReason(body)))
	if refused < 3 {
		t.Errorf("%d of the datagrams to %s were refused, want 3: the servers' port unreachable did not reach the client", refused, addr)
	}
	e.stopLBD(t)
}

// The far IPv4 server of TestPMTU64Upload, an address of the servers'
// subnet that rs1 answers ARP for, and rs1's narrow link to it.
const (
	farServer4 = "198.51.100.50"
	farLink4   = "203.0.113." // .1 rs1, .2 the far server
)

// farServer4NS turns the NAT topology's first real server into an IPv4
// router for a far server namespace (proxy ARP for farServer4 on the
// servers' link) and returns that namespace and the router's interface
// towards it.
func farServer4NS(t *testing.T, tp *topo.Topo, nat *topo.NAT) (ns, routerIf string) {
	t.Helper()
	do := v6Setup{t, tp}.do
	var err error
	if ns, err = tp.AddNS("far4"); err != nil {
		t.Fatal(err)
	}
	r := nat.Servers[0]
	routerIf, farIf := tp.IfName("gr"), tp.IfName("gf")
	if err := tp.Veth(r.NS, routerIf, ns, farIf); err != nil {
		t.Fatal(err)
	}
	do(r.NS, "ip", "addr", "add", farLink4+"1/30", "dev", routerIf)
	do(r.NS, "ip", "link", "set", routerIf, "up")
	do(ns, "ip", "addr", "add", farLink4+"2/30", "dev", farIf)
	do(ns, "ip", "addr", "add", farServer4+"/32", "dev", farIf)
	do(ns, "ip", "link", "set", farIf, "up")
	do(ns, "ip", "link", "set", "lo", "up")
	do(ns, "ip", "route", "add", "default", "via", farLink4+"1", "src", farServer4)
	do(r.NS, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	do(r.NS, "sysctl", "-q", "-w", "net.ipv4.conf."+r.If+".proxy_arp=1")
	do(r.NS, "sysctl", "-q", "-w", "net.ipv4.icmp_ratelimit=0") // every "fragmentation needed" counts
	do(r.NS, "ip", "route", "add", farServer4+"/32", "via", farLink4+"2", "dev", routerIf)
	return ns, routerIf
}

// TestPMTU64Upload: 1 MiB uploads from the IPv6 client over NAT64 on two
// lcores to an IPv4 server behind an IPv4 router (rs1) whose link to it
// has MTU 1280 (farServer4NS). The client's full-sized segments leave lbd
// as 1480-byte IPv4 packets with DF; the router refuses them with
// "fragmentation needed" (1280) to the local address, which lbd must turn
// into an ICMPv6 Packet Too Big (1300) from the VIP to the client quoting
// the client's segment, or the client resends the same segment until the
// upload stalls. The client forgets its learnt path MTU before each.
func TestPMTU64Upload(t *testing.T) {
	var farNS, routerIf string
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			farNS, routerIf = farServer4NS(t, tp, nat)
		},
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1}
			c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
			c.Services = append(c.Services, harness.Service{VIP: v6VIP, Port: pmtuPort, Scheduler: "rr", LocalAddresses: []string{lip64Addr},
				Servers: []harness.Server{{Address: farServer4, Port: pmtuPort, Weight: 1, Forward: "fullnat"}}})
		},
	})
	startStreamServers(t, pmtuPort, farNS)
	addr := net.JoinHostPort(v6VIP, strconv.Itoa(pmtuPort))
	client := e.nat.Client.NS
	warmStreams6(t, e.ctx, client, addr)
	if _, err := e.topo.Exec(e.nat.Servers[0].NS, "ip", "link", "set", "dev", routerIf, "mtu", strconv.Itoa(smallMTU)); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := e.topo.Exec(client, "ip", "-6", "route", "flush", "cache"); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		if r := upload(e.ctx, client, addr, pmtuBytes, 10*time.Second); r.kind != "" {
			t.Errorf("upload %d of 1 MiB through a %d-byte IPv4 link to the server: %v", i+1, smallMTU, r)
			break
		} else {
			t.Logf("upload %d: %d bytes in %v", i+1, r.got, time.Since(t0).Round(time.Millisecond))
		}
	}
	out, _ := e.topo.Exec(client, "ip", "-6", "route", "get", v6VIP)
	body := e.scrapeMetrics(t)
	t.Logf("lbd: icmp_errors %.0f; drops: %s; the client's route to the VIP: %s",
		counterSum(body, "icmp_errors"), nonZero(dropsByReason(body)), strings.TrimSpace(out))
	// The router's 1280 reached the client as 1280 + 20 (IPv6's longer header).
	if want := "mtu " + strconv.Itoa(smallMTU+20); !strings.Contains(out, want) {
		t.Errorf("the client's route to the VIP has no %q: lbd did not pass the router's MTU on", want)
	}
	e.stopLBD(t)
}
