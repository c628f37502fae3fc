package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// The scale-out test's environment (TestScaleOutBGP): the topology, bird,
// three lbd, and what the test asks of them.

type scaleNode struct {
	topo.ECMPNode
	dir    string
	lbd    *harness.LBD
	starts int
}

type scaleEnv struct {
	ctx                    context.Context
	tp                     *topo.Topo
	net                    *topo.ECMP
	nodes                  []*scaleNode
	bird                   *bird
	lbdPath, lbctl, helper string
	keyFile                string
	prefix                 netip.Prefix
	taps                   bool // lbd on a TAP port bridged to the node's link
	six                    bool // an IPv6 VIP too (scaleVIP6), announced with the port's address6
	fnat                   bool // a FullNAT service too (scaleFNATPort), each director with its local address (scaleLIP); with six an FNAT66 one (scaleFNAT6Port, scaleLIP6)
}

func newScaleEnv(t *testing.T) *scaleEnv {
	t.Helper()
	return newScaleEnvOn(t, false, false)
}

// newScaleEnvOn is newScaleEnv, with taps each lbd's port on a TAP
// device bridged to the node's link (its link follows the tap
// interface's state, which a test can set down), with six an IPv6
// address on the router's and the nodes' segment and an IPv6 VIP.
func newScaleEnvOn(t *testing.T, taps, six bool) *scaleEnv {
	t.Helper()
	return newScaleEnvWith(t, taps, six, false)
}

// newScaleEnvWith is newScaleEnvOn, with fnat a FullNAT echo service on
// scaleFNATPort beside the VS/DR ones.
func newScaleEnvWith(t *testing.T, taps, six, fnat bool) *scaleEnv {
	t.Helper()
	lbdPath, lbctl, helper := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	tp := topo.New(t)
	t.Cleanup(tp.Teardown)
	n, err := topo.BuildECMP(tp, 3, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e := &scaleEnv{ctx: ctx, tp: tp, net: n, lbdPath: lbdPath, lbctl: lbctl, helper: helper,
		prefix: netip.PrefixFrom(n.VIP, 32), taps: taps, six: six, fnat: fnat}
	if six {
		// The client behind the router, which reaches the IPv6 VIP by BGP
		// alone; the servers answer for it on lo (VS/DR).
		s6 := v6Setup{t, tp}
		s6.clientBehindRouter(n.Client, n.Router.Router)
		s6.do(n.SwitchNS, "ip", "link", "set", tp.IfName("brs"), "type", "bridge", "mcast_snooping", "0")
		for i, s := range n.Servers {
			s6.addr(s.NS, s.If, v6LVSServer(i)+"/64")
			s6.do(s.NS, "ip", "-6", "route", "add", "default", "via", v6LVSRouterSeg)
			s6.do(s.NS, "sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=0")
			s6.do(s.NS, "ip", "-6", "addr", "add", scaleVIP6+"/128", "dev", "lo", "nodad")
		}
		if err := harness.StartHTTP(tp, n.Servers, helper, fmt.Sprintf("[::]:%d", scaleHTTP6Port), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	e.keyFile = filepath.Join(dir, "sync.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(e.keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := harness.StartHTTP(tp, n.Servers, helper, fmt.Sprintf(":%d", scaleHTTPPort), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var rsNS []string
	for _, s := range n.Servers {
		rsNS = append(rsNS, s.NS)
	}
	startEchoServers(t, scaleEchoPort, rsNS...)
	if six && fnat {
		startEchoServers6(t, scaleEcho6Port, rsNS...)
	}

	var mgmt []netip.Addr
	for _, nd := range n.Nodes {
		mgmt = append(mgmt, nd.MgmtIP.Addr())
	}
	bdir := filepath.Join(dir, "router")
	if err := os.Mkdir(bdir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.bird = startBird(t, tp, n.Router.NS, bdir, birdConfig(n.Router.MgmtIP.Addr(), mgmt))

	for _, nd := range n.Nodes {
		sn := &scaleNode{ECMPNode: nd, dir: filepath.Join(dir, nd.Name)}
		if err := os.Mkdir(sn.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		e.nodes = append(e.nodes, sn)
		e.startLBD(t, sn)
	}
	return e
}

// config is node n's lbd: VS/DR on its one port, the services mh with
// mh-port and sloppy_tcp, sync with the other nodes, BGP to the router.
func (e *scaleEnv) config(n *scaleNode) harness.Config {
	svc := func(port int) harness.Service {
		s := harness.Service{VIP: e.net.VIP.String(), Port: port, Scheduler: "mh", SchedFlags: []string{"mh-port"}, SloppyTCP: true}
		for _, rs := range e.net.Servers {
			s.Servers = append(s.Servers, harness.Server{Address: rs.Addr.Addr().String(), Port: port, Weight: 1, Forward: "dr"})
		}
		return s
	}
	c := harness.BaseConfig(fmt.Sprintf("%s-%s%d", e.tp.Suffix(), n.Name, n.starts), n.dir,
		harness.AFPacketPort(0, harness.LVSPortName, n.ServerIf, n.ServerIP.String(), e.net.Gateway.String(), "both"))
	if e.taps {
		c.Ports[0].Device = fmt.Sprintf("net_tap0,iface=dtap0,mac=02:00:00:00:7c:%02x", n.Name[0])
	}
	c.Services = []harness.Service{svc(scaleHTTPPort), svc(scaleEchoPort)}
	if e.six {
		c.Ports[0].Address6 = scaleNode6(n) + "/64"
		c.Ports[0].Gateway6 = v6LVSRouterSeg // FNAT66's answers to the clients behind the router
		v6 := harness.Service{VIP: scaleVIP6, Port: scaleHTTP6Port, Scheduler: "mh", SchedFlags: []string{"mh-port"}, SloppyTCP: true}
		for i := range e.net.Servers {
			v6.Servers = append(v6.Servers, harness.Server{Address: v6LVSServer(i), Port: scaleHTTP6Port, Weight: 1, Forward: "dr"})
		}
		c.Services = append(c.Services, v6)
	}
	if e.fnat {
		// The servers' echo port through FullNAT, from this director's
		// own local address on the segment: the servers answer it there.
		s := harness.Service{VIP: e.net.VIP.String(), Port: scaleFNATPort, Scheduler: "mh", SchedFlags: []string{"mh-port"},
			SloppyTCP: true, LocalAddresses: []string{scaleLIP(n)}}
		for _, rs := range e.net.Servers {
			s.Servers = append(s.Servers, harness.Server{Address: rs.Addr.Addr().String(), Port: scaleEchoPort, Weight: 1, Forward: "fullnat"})
		}
		c.Services = append(c.Services, s)
	}
	if e.six && e.fnat {
		// FNAT66: the IPv6 VIP's echo port to the servers' IPv6
		// addresses, from this director's own IPv6 local address.
		s := harness.Service{VIP: scaleVIP6, Port: scaleFNAT6Port, Scheduler: "mh", SchedFlags: []string{"mh-port"},
			SloppyTCP: true, LocalAddresses: []string{scaleLIP6(n)}}
		for i := range e.net.Servers {
			s.Servers = append(s.Servers, harness.Server{Address: v6LVSServer(i), Port: scaleEcho6Port, Weight: 1, Forward: "fullnat"})
		}
		c.Services = append(c.Services, s)
	}
	c.ConnTableSize = 16384
	c.LogFormat = "json"
	var peers []string
	for _, o := range e.net.Nodes {
		if o.Name != n.Name {
			peers = append(peers, o.MgmtIP.Addr().String())
		}
	}
	c.Extra = fmt.Sprintf(`sync:
  master: true
  backup: true
  mcast_interface: %s
  peers: [%s]
  listen: %s
  syncid: 1
  key_file: %s
bgp:
  asn: %d
  router_id: %s
  peers:
    - address: %s
      asn: %d
      hold_time: 9s
      password: %s
  shutdown_grace: %s
`, n.MgmtIf, strings.Join(peers, ", "), n.MgmtIP.Addr(), e.keyFile, directorASN, n.MgmtIP.Addr(),
		e.net.Router.MgmtIP.Addr(), routerASN, bgpPassword, scaleGrace)
	return c
}

// scaleVIP6 is the IPv6 VIP of newScaleEnvOn's six, an HTTP service on
// scaleHTTP6Port (the servers' IPv4 one listens on IPv4 alone).
const (
	scaleVIP6      = "2001:db8:1::100"
	scaleHTTP6Port = 8080
)

// scaleFNATPort is newScaleEnvWith's FullNAT service's port.
const scaleFNATPort = 9002

// scaleLIP is node n's FullNAT local address, on the servers' segment.
func scaleLIP(n *scaleNode) string { return fmt.Sprintf("198.51.100.%d", 60+int(n.Name[0]-'a')) }

// scaleFNAT6Port is the FNAT66 service's port on scaleVIP6 (newScaleEnvWith
// with six and fnat), to the servers' IPv6 echo port scaleEcho6Port.
const (
	scaleFNAT6Port = 9006
	scaleEcho6Port = 9004
)

// scaleLIP6 is node n's IPv6 local address (FNAT66's), on the servers'
// segment.
func scaleLIP6(n *scaleNode) string { return fmt.Sprintf("fd00:2::6%d", int(n.Name[0]-'a')) }

// scaleNode6 is node n's IPv6 address on the segment (the next hop it
// announces scaleVIP6 with).
func scaleNode6(n *scaleNode) string { return fmt.Sprintf("fd00:2::%d", 1+int(n.Name[0]-'a')) }

func (e *scaleEnv) startLBD(t *testing.T, n *scaleNode) {
	t.Helper()
	n.starts++
	cfg := e.config(n)
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", cfg.FilePrefix)) })
	lbd, err := harness.StartLBD(e.ctx, e.tp, n.NS, e.lbdPath, e.lbctl, cfg, n.dir, 30*time.Second)
	if lbd != nil {
		n.lbd = lbd
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node %s lbd configuration:\n%s", n.Name, cfg.YAML())
				t.Logf("node %s lbd log (last 40 lines):\n%s", n.Name, harness.Tail(lbd.Log.String(), 40))
			}
		})
	}
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	if e.taps {
		if err := harness.BridgeTap(e.tp, n.NS, "brdtap0", "dtap0", n.ServerIf, "02:00:00:00:7d:"+fmt.Sprintf("%02x", n.Name[0]), 10*time.Second); err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
	}
}

// waitRoute waits until the router forwards to the VIP over exactly the
// nodes given (their dataplane addresses), in bird's table and in its
// kernel's, and returns how long that took.
func (e *scaleEnv) waitRoute(t *testing.T, when string, nodes ...*scaleNode) time.Duration {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.ServerIP.Addr().String())
	}
	return e.waitRouteVia(t, when, e.prefix, want)
}

// waitRoute6 is waitRoute for the IPv6 VIP, over the nodes' IPv6
// addresses.
func (e *scaleEnv) waitRoute6(t *testing.T, when string, nodes ...*scaleNode) time.Duration {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, scaleNode6(n))
	}
	return e.waitRouteVia(t, when, netip.MustParsePrefix(scaleVIP6+"/128"), want)
}

// waitRouteVia waits until the router forwards to prefix over exactly
// the next hops want.
func (e *scaleEnv) waitRouteVia(t *testing.T, when string, prefix netip.Prefix, want []string) time.Duration {
	t.Helper()
	slices.Sort(want)
	start := time.Now()
	var inBird, inKernel []string
	var kernel string
	for time.Since(start) < scaleRouteWait {
		var err error
		if inBird, err = e.bird.paths(prefix); err != nil {
			t.Fatal(err)
		}
		if inKernel, kernel, err = kernelNextHops(e.tp, e.net.Router.NS, prefix); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(inBird, want) && slices.Equal(inKernel, want) {
			t.Logf("%s: the router reaches %s via %v after %v", when, prefix, want, time.Since(start).Round(time.Millisecond))
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	routes, _ := e.bird.cmd("show", "route", "all")
	t.Fatalf("%s: after %v bird has next hops %v and the kernel %v (%q) for %s, want %v\nbird:\n%s",
		when, scaleRouteWait, inBird, inKernel, kernel, prefix, want, routes)
	return 0
}

// conns is how many connections node n scheduled itself for port (not
// those installed by sync), from its lbctl listing.
func (e *scaleEnv) conns(t *testing.T, n *scaleNode, port int) uint64 {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, n.lbd.Config.Socket)
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	for _, s := range resp.Services {
		if int(s.Port) == port {
			return s.Stats.Conns
		}
	}
	return 0
}

// activeConns is the active connections node n lists for the VIP's
// service on port: those it scheduled and those synced from the others.
func (e *scaleEnv) activeConns(t *testing.T, n *scaleNode, port int) uint64 {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, n.lbd.Config.Socket)
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	var sum uint64
	for _, s := range resp.Services {
		if int(s.Port) == port {
			for _, rs := range s.Servers {
				sum += uint64(rs.ActiveConns)
			}
		}
	}
	return sum
}

// lbctl runs lbctl against node n.
func (e *scaleEnv) lbctlOn(t *testing.T, n *scaleNode, args ...string) string {
	t.Helper()
	out, err := harness.LBCtl(e.ctx, e.lbctl, n.lbd.Config.Socket, args...)
	if err != nil {
		t.Fatalf("node %s: lbctl %s: %v", n.Name, strings.Join(args, " "), err)
	}
	return out
}

// metric reads one of node n's /metrics lines ("" when absent).
func (e *scaleEnv) metric(t *testing.T, n *scaleNode, name string) string {
	t.Helper()
	url := "http://" + n.lbd.Config.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.tp, n.NS, e.helper, url, 1, 3*time.Second)
	if err != nil || res[0].Err != "" {
		t.Fatalf("node %s: metrics: %v %v", n.Name, err, res)
	}
	for _, line := range strings.Split(res[0].Body, "\n") {
		if strings.HasPrefix(line, name) {
			return line
		}
	}
	return ""
}

// newFlows opens k short connections to the VIP's HTTP service and
// checks that every one is answered; it returns how many each node
// scheduled.
func (e *scaleEnv) newFlows(t *testing.T, when string, k int) map[string]uint64 {
	t.Helper()
	before := map[string]uint64{}
	for _, n := range e.nodes {
		if exited(n.lbd.Proc) {
			continue
		}
		before[n.Name] = e.conns(t, n, scaleHTTPPort)
	}
	url := "http://" + net.JoinHostPort(e.net.VIP.String(), strconv.Itoa(scaleHTTPPort)) + "/"
	res, err := harness.Get(e.ctx, e.tp, e.net.Client.NS, e.helper, url, k, 3*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	failed := 0
	for _, r := range res {
		if r.Err != "" || r.Status != 200 {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%s: %d of %d new connections failed", when, failed, k)
	}
	by := map[string]uint64{}
	for name, b := range before {
		for _, n := range e.nodes {
			if n.Name == name {
				by[name] = e.conns(t, n, scaleHTTPPort) - b
			}
		}
	}
	t.Logf("%s: %d new connections scheduled by %v", when, k, by)
	return by
}

// exited reports whether p has ended.
func exited(p *topo.Proc) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// rehashFlows is how many client ports routerChoices asks the router
// about.
const rehashFlows = 300

// routerChoices asks the router's kernel which next hop it gives each of
// rehashFlows new flows from the client to the VIP (ip route get with
// the ports: the L4 multipath hash), without sending a packet.
func (e *scaleEnv) routerChoices(t *testing.T) []string {
	t.Helper()
	out := make([]string, rehashFlows)
	for i := range out {
		text, err := e.tp.Exec(e.net.Router.NS, "ip", "route", "get", e.net.VIP.String(), "from", e.net.Client.Addr.Addr().String(),
			"iif", e.net.Router.ClientIf, "ipproto", "tcp", "sport", strconv.Itoa(20000+i), "dport", strconv.Itoa(scaleEchoPort))
		if err != nil {
			t.Fatalf("ip route get: %v", err)
		}
		if v := vias(text); len(v) == 1 {
			out[i] = v[0]
		}
	}
	return out
}

// logRehash reports how many new flows the router sends to another
// director after a node came back: the share of the new node is the
// least that must move (about 1/3 of the flows with three directors);
// flows moved between the directors that stayed show the router's
// hashing moving more than it must (mh, sloppy_tcp and sync keep those
// on their servers). More than about a third fails the test.
func (e *scaleEnv) logRehash(t *testing.T, before, after []string) {
	t.Helper()
	moved, between := 0, 0
	newcomer := e.nodes[1].ServerIP.Addr().String()
	for i := range before {
		if before[i] != after[i] {
			moved++
			if after[i] != newcomer {
				between++
			}
		}
	}
	t.Logf("node b back: the router sends %d of %d new flows to another director than before (%.0f%%), %d of them between the directors that stayed",
		moved, len(before), 100*float64(moved)/float64(len(before)), between)
	// The newcomer's share, about a third, with room for the sample's
	// spread (300 flows: a standard deviation under 3%).
	if float64(moved) > 0.45*float64(len(before)) {
		t.Errorf("node b back: %d of %d new flows go to another director, want about a third", moved, len(before))
	}
}

// drops is node n's drops by reason, from its /metrics.
func (e *scaleEnv) drops(t *testing.T, n *scaleNode) map[string]float64 {
	t.Helper()
	url := "http://" + n.lbd.Config.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.tp, n.NS, e.helper, url, 1, 3*time.Second)
	if err != nil || res[0].Err != "" {
		t.Fatalf("node %s: metrics: %v %v", n.Name, err, res)
	}
	return dropsByReason(res[0].Body)
}
