package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestPMTU6TUN: VS/TUN over IPv6 on two lcores, the client behind a
// router, path MTU discovery both ways.
//
// Upload: a full-sized segment from the client does not fit lbd's port
// once in the outer IPv6 header, so lbd answers it with a Packet Too Big
// (1500 - 40) from the VIP; without it the upload stalls (IPv6 routers,
// lbd among them, never fragment).
//
// Download: the servers answer the client directly through the router,
// whose link to the client has MTU 1280; its Packet Too Big goes to the
// VIP, that is to lbd, which must pass it in IPv6-in-IPv6 to the server
// holding the connection.
func TestPMTU6TUN(t *testing.T) {
	e, dir := newEnv(t)
	l, six := e.buildV6LVS(t, v6VIPTUN, true)
	rt := l.Router.NS
	six.do(rt, "sysctl", "-q", "-w", "net.ipv6.icmp.ratelimit=0") // every Packet Too Big counts
	var servers []string
	for _, h := range l.Servers {
		servers = append(servers, h.NS)
	}
	startStreamServers6(t, pmtuPort, servers...)

	port := harness.AFPacketPort(0, harness.LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both")
	port.Device += ",qpairs=2"
	port.Address6 = v6LVSLB + "/64"
	cfg := harness.BaseConfig(e.topo.Suffix(), dir, port)
	cfg.Workers = []int{0, 1}
	svc := harness.Service{VIP: v6VIPTUN, Port: pmtuPort, Scheduler: "rr"}
	for i := range l.Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: v6LVSServer(i), Port: pmtuPort, Weight: 1, Forward: "tun"})
	}
	cfg.Services = []harness.Service{svc}
	e.startLBD(t, cfg, dir)

	addr := net.JoinHostPort(v6VIPTUN, strconv.Itoa(pmtuPort))
	warmStreams6(t, e.ctx, l.Client.NS, addr)
	counters := func() (tooBig, delivered float64) {
		body := e.scrape(t)
		tooBig, delivered = counterSum(body, "icmpv6_too_big"), counterSum(body, "icmp_errors")
		t.Logf("lbd: icmpv6_too_big %.0f icmp_errors %.0f; drops: %s", tooBig, delivered, nonZero(dropsByReason(body)))
		return tooBig, delivered
	}

	t.Run("upload", func(t *testing.T) {
		for i := range len(l.Servers) {
			t0 := time.Now()
			if r := upload(e.ctx, l.Client.NS, addr, pmtuBytes, 10*time.Second); r.kind != "" {
				t.Errorf("upload %d of 1 MiB through a tunnel that cannot carry full-sized packets: %v", i, r)
				break
			} else {
				t.Logf("upload %d: %d bytes in %v", i, r.got, time.Since(t0).Round(time.Millisecond))
			}
		}
		if tooBig, _ := counters(); tooBig == 0 {
			t.Error("lbd sent no Packet Too Big")
		}
		out, _ := e.topo.Exec(l.Client.NS, "ip", "-6", "route", "get", v6VIPTUN)
		t.Logf("the client's route to the VIP: %s", strings.TrimSpace(out))
		if want := "mtu 1460"; !strings.Contains(out, want) {
			t.Errorf("the client's route to the VIP has no %q: lbd's Packet Too Big did not reach it", want)
		}
	})
	t.Run("download", func(t *testing.T) {
		six.do(rt, "ip", "link", "set", "dev", l.Router.ClientIf, "mtu", strconv.Itoa(smallMTU))
		defer six.do(rt, "ip", "link", "set", "dev", l.Router.ClientIf, "mtu", "1500")
		_, before := counters()
		big := streamSpec{total: pmtuBytes, chunk: 64 << 10, stall: 10 * time.Second}
		for i := range pmtuRounds {
			for _, ns := range servers {
				six.do(ns, "ip", "-6", "route", "flush", "cache")
			}
			t0 := time.Now()
			if r := stream6(e.ctx, l.Client.NS, addr, big); r.kind != "" {
				t.Errorf("download %d of %d (1 MiB over a %d-byte link): %v", i+1, pmtuRounds, smallMTU, r)
				break
			} else {
				t.Logf("download %d: %d bytes in %v", i+1, r.got, time.Since(t0).Round(time.Millisecond))
			}
		}
		if _, after := counters(); after == before {
			t.Error("lbd passed no ICMPv6 error to a server: the path MTU was not discovered through it")
		}
	})
	e.stop(t)
}
