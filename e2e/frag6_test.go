package e2e

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// bigRound6 sends n datagrams of fragSize bytes to [vip]:port from the
// client in clientNS (bigDatagrams).
func bigRound6(t *testing.T, e *natEnv, clientNS, vip string, port, n int) map[string]int {
	t.Helper()
	return bigDatagrams(t, e.ctx, e.topo, clientNS, e.nshelper, vip, port, n, nil)
}

// checkFragments6 is checkFragments on a natEnv's metrics, IPv6's
// reasons included.
func checkFragments6(t *testing.T, body string) {
	t.Helper()
	fw := lcoreSum(body, "dplb_lcore_events_total", "counter", "fragments")
	if fw == 0 {
		t.Error("dplb_lcore_events_total{counter=\"fragments\"} is 0: no fragment went through lbd")
	}
	for _, why := range []string{"fragment", "bad_fragment", "fragment_oversize", "fragment_table_full", "fragment_held_full",
		"fragment_timeout", "fragment_orphan", "fragment_no_checksum", "bad_ipv6", "ipv6_ext_header", "ipv6_unserved", "multi_segment", "no_conn"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v packets dropped as %s", v, why)
		}
	}
	t.Logf("fragments forwarded: %v", fw)
}

// tapPorts6 makes lbd's ports TAP ports with IPv6 addresses, lan's role
// lanRole.
func tapPorts6(c *harness.Config, lanRole string) {
	c.Workers = []int{0, 1}
	c.Ports = []harness.Port{
		harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
		harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", lanRole),
	}
	tapPorts(c)
	c.Ports[0].Address6, c.Ports[1].Address6 = v6WAN+"/64", v6LAN+"/64"
}

// bridgeTaps6 joins lbd's TAP interfaces to the NAT topology once lbd is
// up (the TAP driver sets its interfaces' MACs while ports start, which
// would undo BridgeTap's), and logs what lbd dropped if the test fails.
func bridgeTaps6(t *testing.T, e *natEnv) {
	t.Helper()
	for i, ifc := range []string{e.nat.WANIf, e.nat.LANIf} {
		n := strconv.Itoa(i)
		if err := harness.BridgeTap(e.topo, e.nat.LBNS, "brtap"+n, "dtap"+n, ifc, "02:00:00:00:7a:0"+n, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range strings.Split(e.scrapeMetrics(t), "\n") {
				if strings.HasPrefix(l, "dplb_lcore_drops_total") && !strings.HasSuffix(l, " 0") {
					t.Log(l)
				}
			}
		}
	})
}

// TestFragments6NAT: 4 KiB UDP datagrams over IPv6 from a client on a
// 1500-byte MTU through NAT66 on two lcores, both ways: the client's
// kernel cuts each query into fragments (fragment headers), lbd forwards
// each to the real server (the first with the datagram's checksum
// rewritten, the others in their addresses), the server's kernel
// reassembles it and fragments its 4 KiB answer, which lbd sends back
// from the VIP; the client's kernel reassembles them. Every answer is
// checked byte for byte. lbd's ports are DPDK TAP ports bridged to the
// topology (af_packet would hand lbd reassembled datagrams). The lan port
// has a kernel interface (kni): a server's 4 KiB datagram to the port's
// own IPv6 address reaches the kernel there in its fragments, which
// reassembles it and answers as much.
func TestFragments6NAT(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: withIPv6,
		configure: func(c *harness.Config) {
			tapPorts6(c, "server")
			c.Ports[1].KNI = "dp-fk6-" + strings.TrimPrefix(c.FilePrefix, "dplb-e2e-") // unique to the run
			udp := harness.Service{Protocol: "udp", VIP: v6VIP, Port: 53, Scheduler: "rr"}
			for i := range 2 {
				udp.Servers = append(udp.Servers, harness.Server{Address: v6Server(i), Port: 5353, Weight: 1})
			}
			c.Services = append(c.Services, udp)
		},
	})
	bridgeTaps6(t, e)
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "[::]:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	per := bigRound6(t, e, e.nat.Client.NS, v6VIP, 53, 40)
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	kniBigEcho(t, e.nat.LBNS, netip.MustParseAddr(v6LAN), e.nat.Servers[0].NS)
	checkFragments6(t, e.scrapeMetrics(t))
	e.stopLBD(t)
}

// TestFragments64: 4 KiB UDP datagrams from an IPv6 client on a
// 1500-byte MTU through NAT64 on two lcores to IPv4 servers, both ways:
// each IPv6 fragment of the query leaves as an IPv4 fragment from the
// local address (identification, offset and MF carried over, the first
// one's checksum updated for the whole datagram), the server's kernel
// reassembles it and fragments its 4 KiB answer, and lbd turns those into
// IPv6 fragments from the VIP. The server's first answer, cut for 1500
// bytes of IPv4, would not fit the client's link as IPv6 (28 bytes more):
// lbd answers it with "fragmentation needed" for 1472, and the server's
// kernel cuts the next ones smaller (the warm-up allows those losses).
func TestFragments64(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: withIPv6,
		configure: func(c *harness.Config) {
			tapPorts6(c, "server")
			udp := harness.Service{Protocol: "udp", VIP: v6VIP, Port: 5364, Scheduler: "rr", LocalAddresses: []string{lip64Addr}}
			for _, h := range c.Services[0].Servers {
				udp.Servers = append(udp.Servers, harness.Server{Address: h.Address, Port: 5353, Weight: 1, Forward: "fullnat"})
			}
			c.Services = append(c.Services, udp)
		},
	})
	bridgeTaps6(t, e)
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "0.0.0.0:5353", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	per := bigDatagrams(t, e.ctx, e.topo, e.nat.Client.NS, e.nshelper, v6VIP, 5364, 40, seenFrom([]string{lip64Addr}))
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	body := e.scrapeMetrics(t)
	checkFragments6(t, body)
	t.Logf("fragmentation needed sent: %v", lcoreSum(body, "dplb_lcore_events_total", "counter", "icmp_frag_needed"))
	e.stopLBD(t)
}

// The DR test's VIP and client, on the servers' link.
const (
	v6FragVIP    = "fd00:1::10"
	v6FragClient = "fd00:1::99"
)

// TestFragments6DR: 4 KiB UDP datagrams over IPv6 through DR6 on two
// lcores. A client on the servers' link (lbd's lan port answers neighbour
// solicitations for the VIP there) sends them fragmented; lbd forwards
// each fragment to a real server (the VIP on its loopback) unchanged but
// for the MACs and hop limit; the server's kernel reassembles the
// datagram and answers the client directly, fragmenting its 4 KiB reply.
func TestFragments6DR(t *testing.T) {
	var clientNS string
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			do := func(ns string, args ...string) {
				t.Helper()
				if out, err := tp.Exec(ns, args...); err != nil {
					t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
				}
			}
			var err error
			if clientNS, err = tp.AddNS("c6"); err != nil {
				t.Fatal(err)
			}
			cif, sw := tp.IfName("c6"), tp.IfName("c6s")
			if err := tp.Veth(clientNS, cif, nat.SwitchNS, sw); err != nil {
				t.Fatal(err)
			}
			do(nat.SwitchNS, "ip", "link", "set", sw, "master", nat.Bridge, "up")
			do(clientNS, "sysctl", "-q", "-w", "net.ipv6.conf."+cif+".disable_ipv6=0")
			do(clientNS, "sysctl", "-q", "-w", "net.ipv6.conf."+cif+".accept_dad=0")
			do(clientNS, "ip", "-6", "addr", "add", v6FragClient+"/64", "dev", cif, "nodad")
			do(clientNS, "ip", "link", "set", cif, "up")
			// The VIP on the servers' loopback: Linux answers solicitations
			// only for addresses of the interface they come in on.
			for _, h := range nat.Servers {
				do(h.NS, "sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=0")
				do(h.NS, "ip", "-6", "addr", "add", v6FragVIP+"/128", "dev", "lo")
			}
		},
		configure: func(c *harness.Config) {
			tapPorts6(c, "both")
			udp := harness.Service{Protocol: "udp", VIP: v6FragVIP, Port: 53, Scheduler: "rr"}
			for i := range 2 {
				udp.Servers = append(udp.Servers, harness.Server{Address: v6Server(i), Port: 53, Weight: 1, Forward: "dr"})
			}
			c.Services = append(c.Services, udp)
		},
	})
	bridgeTaps6(t, e)
	// Bound to the VIP, so the answers leave from it.
	if _, err := harness.StartUDP(e.topo, e.nat.Servers, e.nshelper, "["+v6FragVIP+"]:53", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	per := bigRound6(t, e, clientNS, v6FragVIP, 53, 40)
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	checkFragments6(t, e.scrapeMetrics(t))
	e.stopLBD(t)
}
