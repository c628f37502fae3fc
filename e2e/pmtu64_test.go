package e2e

import (
	"errors"
	"net"
	"strconv"
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
