package e2e

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// fragSize is the UDP payload of the fragment tests: 4 KiB, three
// fragments on a 1500-byte MTU each way.
const fragSize = 4096

// tapPorts turns lbd's af_packet ports into tap ports (harness.TapPort:
// af_packet would hand lbd reassembled datagrams), to be bridged to the
// topology once lbd runs.
func tapPorts(c *harness.Config) {
	for i := range c.Ports {
		c.Ports[i] = harness.TapPort(i, c.Ports[i].Name, "dtap"+strconv.Itoa(i), c.Ports[i].Address, c.Ports[i].Gateway, c.Ports[i].Role)
	}
}

// bridgeTaps joins lbd's tap interfaces to the LB namespace's veth ends.
func (e *lbEnv) bridgeTaps(t *testing.T, ifs ...string) {
	t.Helper()
	for i, ifc := range ifs {
		n := strconv.Itoa(i)
		if err := harness.BridgeTap(e.topo, e.lbNS, "brtap"+n, "dtap"+n, ifc, "02:00:00:00:7a:0"+n, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// bigRound sends n datagrams of fragSize bytes to VIP:port from the
// client (bigDatagrams).
func (e *lbEnv) bigRound(t *testing.T, port, n int) map[string]int {
	t.Helper()
	return bigDatagrams(t, e.ctx, e.topo, e.client.NS, e.nshelper, e.vip, port, n, nil)
}

// bigDatagrams sends n datagrams of fragSize bytes to [vip]:port from
// the client in clientNS, each from a new source port, after a warm-up
// until two in a row are answered (ARP or neighbour discovery
// everywhere); every answer must be fragSize bytes with the padding
// intact, come from the VIP and name the client as the server saw it:
// its own end, or, with a seen check (FullNAT, NAT64), what that accepts
// (an empty string, or why not). It returns the answers per server.
func bigDatagrams(t *testing.T, ctx context.Context, tp *topo.Topo, clientNS, nshelper, vip string, port, n int, seen func(harness.Result) string) map[string]int {
	t.Helper()
	vipPort := net.JoinHostPort(vip, strconv.Itoa(port))
	send := func(n int) []harness.Result {
		t.Helper()
		res, err := harness.UDPGetSized(ctx, tp, clientNS, nshelper, vipPort, "", n, fragSize, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		if r := send(1)[0]; r.Err == "" {
			ok++
		} else {
			ok = 0
			t.Logf("warm-up %d failed (allowed): %s", i, r.Err)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive %d-byte datagrams to %s were answered", fragSize, vipPort)
	}
	if seen == nil {
		seen = func(r harness.Result) string {
			if r.SeenClient() != r.Local {
				return "the client's end is " + r.Local
			}
			return ""
		}
	}
	per := map[string]int{}
	for _, r := range send(n) {
		remote, err := netip.ParseAddrPort(r.Remote)
		switch {
		case r.Err != "":
			t.Errorf("datagram %d: %s", r.I, r.Err)
		case err != nil || remote.Addr().String() != vip || int(remote.Port()) != port:
			t.Errorf("datagram %d: answered from %s, want %s", r.I, r.Remote, vipPort)
		case seen(r) != "":
			t.Errorf("datagram %d: server %s saw client %q: %s", r.I, r.Server(), r.SeenClient(), seen(r))
		default:
			per[r.Server()]++
		}
	}
	t.Logf("answers per server: %v", per)
	return per
}

// checkFragments: lbd forwarded fragments on both lcores' behalf and
// dropped none of them.
func (e *lbEnv) checkFragments(t *testing.T, body string) {
	t.Helper()
	fw := lcoreSum(body, "dplb_lcore_events_total", "counter", "fragments")
	if fw == 0 {
		t.Error("dplb_lcore_events_total{counter=\"fragments\"} is 0: no fragment went through lbd")
	}
	for _, why := range []string{"fragment", "bad_fragment", "fragment_oversize", "fragment_table_full", "fragment_held_full", "fragment_timeout", "fragment_orphan", "fragment_shifted", "fragment_no_checksum", "bad_ipv4", "multi_segment"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v fragments dropped as %s", v, why)
		}
	}
	t.Logf("fragments forwarded: %v", fw)
}

// TestFragmentsNAT: 4 KiB UDP datagrams from a client on a 1500-byte MTU
// through VS/NAT on two lcores, both ways: the client's kernel fragments
// the query, lbd forwards each fragment to the real server (the first
// rewritten with the datagram's checksum, the others in their headers),
// the server's kernel reassembles it and fragments its 4 KiB answer, and
// lbd sends those back from the VIP; the client's kernel reassembles
// them. Every answer is checked byte for byte. The lan port has a kernel
// interface (kni): a server's 4 KiB datagram to the port's own address
// reaches the kernel there in its fragments (the later ones follow the
// first, which had the ports), which reassembles it and answers as much.
func TestFragmentsNAT(t *testing.T) {
	e := startFragNAT(t, false, func(c *harness.Config) {
		c.Ports[1].KNI = "dp-fk-" + strings.TrimPrefix(c.FilePrefix, "dplb-e2e-") // unique to the run
	})
	per := e.bigRound(t, 53, 40)
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	kniBigEcho(t, e.lbNS, topo.NATLANAddr.Addr(), e.servers[0].NS)
	e.checkFragments(t, e.scrape(t))
	e.stop(t)
}

// kniBigEcho has a UDP socket of lbd's kernel (in lbNS) on port address
// addr (its kni) echo a fragSize datagram from a host in ns, and checks
// the echo.
func kniBigEcho(t *testing.T, lbNS string, addr netip.Addr, ns string) {
	t.Helper()
	at := net.JoinHostPort(addr.String(), "2222")
	network := "udp4"
	if addr.Is6() {
		network = "udp6"
	}
	var pc net.PacketConn
	if err := topo.InNS(lbNS, func() (err error) {
		pc, err = net.ListenPacket(network, at)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 65536)
		pc.SetDeadline(time.Now().Add(10 * time.Second))
		if n, from, err := pc.ReadFrom(buf); err == nil {
			pc.WriteTo(buf[:n], from)
		}
	}()
	var c net.Conn
	if err := topo.InNS(ns, func() (err error) {
		c, err = net.Dial(network, at)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	big := make([]byte, fragSize)
	for i := range big {
		big[i] = byte(i * 13)
	}
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	back := make([]byte, 65536)
	n, err := c.Read(back)
	if err != nil || !slices.Equal(back[:n], big) {
		t.Fatalf("a %d-byte datagram to %s (lbd's kernel, through the kni): answered %d bytes, %v", len(big), at, n, err)
	}
	t.Logf("a %d-byte datagram to %s went through the kni to lbd's kernel and back, in fragments", len(big), at)
}

// startFragNAT runs lbd on two workers with tap ports in front of two
// real servers of UDP port 5353, VIP:53 forwarded to them by VS/NAT or,
// with fullNAT, by VS/FullNAT from fullNATLocal to servers without a
// default route; configure edits the configuration before lbd starts.
func startFragNAT(t *testing.T, fullNAT bool, configure ...func(*harness.Config)) *lbEnv {
	e, dir := newEnv(t)
	nat, err := topo.BuildNAT(e.topo, 2)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS, e.vip = nat.Client, nat.Servers, nat.LBNS, nat.VIP.String()
	if fullNAT {
		noDefaultRoute(t, e.topo, nat.Servers)
	}
	e.startServers(t, "udp", ":5353")
	cfg := harness.NATUDPConfig(nat, e.topo.Suffix(), dir, 53, 5353)
	if fullNAT {
		toFullNAT(&cfg.Services[0], false)
	}
	cfg.Workers = []int{0, 1}
	cfg.Ports = []harness.Port{
		harness.AFPacketPort(0, "wan", cfg.WANIf, cfg.WANAddr, "", "client"),
		harness.AFPacketPort(1, "lan", cfg.LANIf, cfg.LANAddr, "", "server"),
	}
	tapPorts(&cfg)
	for _, f := range configure {
		f(&cfg)
	}
	e.startLBD(t, cfg, dir)
	e.bridgeTaps(t, nat.WANIf, nat.LANIf)
	return e
}

// TestFragmentsDR: the same through VS/DR on two lcores: lbd forwards
// the client's fragments to the real server, which answers the client
// directly with its own fragments.
func TestFragmentsDR(t *testing.T) {
	e, dir := newEnv(t)
	l := e.buildLVS(t, false)
	e.startServers(t, "udp", ":53")
	cfg := harness.LVSConfig(l, e.topo.Suffix(), dir, "udp", 53)
	cfg.Workers = []int{0, 1}
	tapPorts(&cfg)
	e.startLBD(t, cfg, dir)
	e.bridgeTaps(t, l.LBIf)

	per := e.bigRound(t, 53, 40)
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	e.checkFragments(t, e.scrape(t))
	e.stop(t)
}

// TestFragmentsFullNAT: 4 KiB UDP datagrams from a client on a 1500-byte
// MTU through VS/FullNAT on two lcores, both ways, to real servers with
// no default route (they reach only their segment and the local
// addresses): every fragment of the query leaves from a local address to
// the server (the later ones too, which carry no ports), the server's
// kernel reassembles it, sees a local address as the client and answers
// 4 KiB to it, and lbd sends those fragments back from the VIP.
func TestFragmentsFullNAT(t *testing.T) {
	e := startFragNAT(t, true)
	per := bigDatagrams(t, e.ctx, e.topo, e.client.NS, e.nshelper, e.vip, 53, 40, seenFrom(fullNATLocal))
	if len(per) != 2 {
		t.Errorf("answers %v: want both servers", per)
	}
	e.checkFragments(t, e.scrape(t))
	e.stop(t)
}

// seenFrom accepts a server's view of its client that is one of addrs
// (the local addresses of FullNAT or NAT64).
func seenFrom(addrs []string) func(harness.Result) string {
	return func(r harness.Result) string {
		seen, err := netip.ParseAddrPort(r.SeenClient())
		if err != nil || !slices.Contains(addrs, seen.Addr().Unmap().String()) {
			return "want one of the local addresses " + strings.Join(addrs, ", ")
		}
		return ""
	}
}
