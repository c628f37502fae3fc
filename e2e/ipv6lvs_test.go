package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// IPv6 addresses of the VS/DR topology: the client's link behind the
// router, the shared segment of router, lbd and servers, and two VIPs
// the router routes to lbd (one served by DR, one by TUN).
const (
	v6LVSClient    = "2001:db8:3::2"
	v6LVSRouterCli = "2001:db8:3::1"
	v6LVSRouterSeg = "fd00:2::fe"
	v6LVSLB        = "fd00:2::1"
	v6VIPDR        = "2001:db8:4::10"
	v6VIPTUN       = "2001:db8:4::20"
)

func v6LVSServer(i int) string { return fmt.Sprintf("fd00:2::1%d", i+1) }

// TestIPv6DR: IPv6 services by VS/DR (the MACs changed), TCP and UDP:
// the client behind a router reaches the VIP, the servers (the VIP on
// lo) answer it directly from the VIP, both servers take connections.
func TestIPv6DR(t *testing.T) { testIPv6LVS(t, false) }

// TestIPv6TUN is TestIPv6DR by VS/TUN: lbd puts the packets in IPv6
// (next header 41) from its port's address to the server, where a
// user-space decapsulator (nshelper decap, as the IPv4 VS/TUN tests: the
// machine's kernel may lack ip6_tunnel) hands the inner packet to the
// kernel on a TUN device holding the VIP.
func TestIPv6TUN(t *testing.T) { testIPv6LVS(t, true) }

func testIPv6LVS(t *testing.T, tunnel bool) {
	e, dir := newEnv(t)
	vip, fwd := v6VIPDR, "dr"
	if tunnel {
		vip, fwd = v6VIPTUN, "tun"
	}
	l, _ := e.buildV6LVS(t, vip, tunnel)
	if err := harness.StartHTTP(e.topo, e.servers, e.nshelper, "[::]:80", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := harness.StartUDP(e.topo, e.servers, e.nshelper, "[::]:53", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	cfg := harness.LVSConfig(l, e.topo.Suffix(), dir, "tcp", 80)
	cfg.Ports[0].Address6 = v6LVSLB + "/64"
	cfg.Services = nil
	for _, proto := range []string{"tcp", "udp"} {
		port := map[string]int{"tcp": 80, "udp": 53}[proto]
		svc := harness.Service{Protocol: proto, VIP: vip, Port: port, Scheduler: "rr"}
		for i := range e.servers {
			svc.Servers = append(svc.Servers, harness.Server{Address: v6LVSServer(i), Port: port, Weight: 1, Forward: fwd})
		}
		cfg.Services = append(cfg.Services, svc)
	}
	e.startLBD(t, cfg, dir)

	{
		url := "http://[" + vip + "]/"
		warm := 0
		for i := 0; i < 10 && warm < 2; i++ {
			res, err := harness.Get(e.ctx, e.topo, l.Client.NS, e.nshelper, url, 1, 3*time.Second)
			if err == nil && res[0].Err == "" {
				warm++
			} else {
				warm = 0
				t.Logf("%s warm-up %d failed (allowed): %v %v", vip, i, err, res)
			}
		}
		if warm < 2 {
			t.Fatalf("%s: no two successive requests succeeded", url)
		}
		res, err := harness.Get(e.ctx, e.topo, l.Client.NS, e.nshelper, url, 20, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, r := range res {
			if r.Err != "" || r.Status != 200 || !strings.Contains(r.Body, v6LVSClient) {
				t.Fatalf("%s request %d: status %d %s body %q", vip, r.I, r.Status, r.Err, r.Body)
			}
			got[r.Server()]++
		}
		if got["rs1"] == 0 || got["rs2"] == 0 {
			t.Errorf("%s TCP spread %v, want both servers", vip, got)
		}
		ures, err := harness.UDPGet(e.ctx, e.topo, l.Client.NS, e.nshelper, "["+vip+"]:53", "", 20, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		udp := map[string]int{}
		for _, r := range ures {
			if r.Err != "" {
				t.Errorf("%s UDP query %d: %s", vip, r.I, r.Err)
				continue
			}
			if ap, err := netip.ParseAddrPort(r.Remote); err != nil || ap.Addr().String() != vip {
				t.Errorf("%s UDP answer %d from %s", vip, r.I, r.Remote)
			}
			udp[r.Server()]++
		}
		if udp["rs1"] == 0 || udp["rs2"] == 0 {
			t.Errorf("%s UDP spread %v, want both servers", vip, udp)
		}
	}
	out, _ := harness.LBCtl(e.ctx, e.lbctl, e.lbd.Config.Socket, "-L", "-n")
	if !strings.Contains(out, "["+v6LVSServer(0)+"]:80") || !strings.Contains(out, map[bool]string{false: "Route", true: "Tunnel"}[tunnel]) {
		t.Errorf("lbctl -L -n:\n%s", out)
	}
	e.stop(t)
}

// buildV6LVS builds the IPv6 LVS topology on two servers (v6Setup.lvs):
// each server routes through the router and holds vip on lo (DR) or has
// a decapsulator holding it (tunnel). It returns the topology and the
// setup, for the caller's own commands.
func (e *lbEnv) buildV6LVS(t *testing.T, vip string, tunnel bool) (*topo.DR, v6Setup) {
	t.Helper()
	l, err := topo.BuildDR(e.topo, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS = l.Client, l.Servers, l.LBNS
	six := v6Setup{t, e.topo}
	six.lvs(l, vip)
	for _, h := range l.Servers {
		six.do(h.NS, "ip", "-6", "route", "add", "default", "via", v6LVSRouterSeg)
		if !tunnel {
			six.do(h.NS, "sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=0")
			six.do(h.NS, "ip", "-6", "addr", "add", vip+"/128", "dev", "lo", "nodad")
			continue
		}
		d, err := harness.StartDecap(e.topo, h, e.nshelper, vip, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		e.decaps = append(e.decaps, d)
	}
	return l, six
}
