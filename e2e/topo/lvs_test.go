package topo_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// lvsTopo builds nshelper and a DR or TUN topology with two servers, and
// checks at cleanup that Teardown leaves nothing behind.
func lvsTopo(t *testing.T, tunnel bool) (*topo.Topo, *topo.LVS, string) {
	t.Helper()
	needRoot(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	nshelper := filepath.Join(t.TempDir(), "nshelper")
	if err := harness.Build(root, "./e2e/nshelper", nshelper); err != nil {
		t.Fatal(err)
	}
	tp := topo.New(t)
	suffix := tp.Suffix()
	t.Cleanup(func() {
		tp.Teardown()
		if left := leftovers(t, suffix); len(left) > 0 {
			t.Errorf("left after Teardown:\n%s", strings.Join(left, "\n"))
		}
	})
	build := topo.BuildDR
	if tunnel {
		build = topo.BuildTUN
	}
	l, err := build(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	return tp, l, nshelper
}

func mustExec(t *testing.T, tp *topo.Topo, ns string, args ...string) string {
	t.Helper()
	out, err := tp.Exec(ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLVSCommon checks what DR and TUN share: the LB's port is up with
// no address and no offloads, the router routes the VIP to the LB, the
// servers' sysctls and default routes, and the client reaches every
// server through the router.
func checkLVSCommon(t *testing.T, tp *topo.Topo, l *topo.LVS) {
	t.Helper()
	out := mustExec(t, tp, l.LBNS, "ip", "-o", "addr", "show", "dev", l.LBIf)
	if strings.Contains(out, "inet") {
		t.Errorf("the LB's port has an address: %s", out)
	}
	if out := mustExec(t, tp, l.LBNS, "ip", "-o", "link", "show", "dev", l.LBIf); !strings.Contains(out, ",UP") {
		t.Errorf("the LB's port is not up: %s", out)
	}
	if out := mustExec(t, tp, l.LBNS, "ethtool", "-k", l.LBIf); !strings.Contains(out, "tx-checksumming: off") ||
		!strings.Contains(out, "generic-receive-offload: off") || !strings.Contains(out, "tcp-segmentation-offload: off") {
		t.Errorf("offloads still on for the LB's port:\n%s", out)
	}
	if out := mustExec(t, tp, l.Router.NS, "ip", "route", "get", l.VIP.String()); !strings.Contains(out, "via "+l.LBAddr.Addr().String()) {
		t.Errorf("router's route to the VIP: %s, want via %s", out, l.LBAddr.Addr())
	}
	if out := mustExec(t, tp, l.Router.NS, "sysctl", "-n", "net.ipv4.ip_forward"); strings.TrimSpace(out) != "1" {
		t.Errorf("router does not forward: ip_forward=%s", out)
	}
	for _, h := range l.Servers {
		for key, want := range map[string]string{
			"net.ipv4.conf.all.arp_ignore":            "1",
			"net.ipv4.conf.all.arp_announce":          "2",
			"net.ipv4.conf." + h.If + ".arp_ignore":   "1",
			"net.ipv4.conf." + h.If + ".arp_announce": "2",
			"net.ipv6.conf." + h.If + ".disable_ipv6": "1",
		} {
			if got := strings.TrimSpace(mustExec(t, tp, h.NS, "sysctl", "-n", key)); got != want {
				t.Errorf("%s: %s=%s, want %s", h.Name, key, got, want)
			}
		}
		gw := l.Router.LBAddr.Addr()
		if l.Tunnel {
			gw = l.Router.ServerAddr.Addr()
		}
		if out := mustExec(t, tp, h.NS, "ip", "route", "show", "default"); !strings.Contains(out, "via "+gw.String()) {
			t.Errorf("%s: default route %q, want via %s", h.Name, out, gw)
		}
		mustExec(t, tp, l.Client.NS, "ping", "-c", "2", "-W", "2", "-i", "0.2", h.Addr.Addr().String())
	}
}

// TestDRTopology builds the VS/DR topology without lbd: the client
// reaches the servers through the router, the servers hold the VIP on lo,
// and a datagram a server sends from the VIP reaches the client through
// the router (the path of DR replies).
func TestDRTopology(t *testing.T) {
	tp, dr, nshelper := lvsTopo(t, false)
	checkLVSCommon(t, tp, dr)
	if dr.LBAddr.String() != "198.51.100.1/24" || dr.Gateway.String() != "198.51.100.254" || dr.VIP.String() != "192.0.2.100" {
		t.Errorf("addresses: LB %s gateway %s VIP %s", dr.LBAddr, dr.Gateway, dr.VIP)
	}
	for _, h := range dr.Servers {
		if out := mustExec(t, tp, h.NS, "ip", "-o", "addr", "show", "dev", "lo"); !strings.Contains(out, "inet 192.0.2.100/32") {
			t.Errorf("%s: no VIP on lo: %s", h.Name, out)
		}
	}
	// Each server's datagram from VIP:53 reaches the client.
	outs, err := harness.StartUDP(tp, []topo.Host{dr.Client}, nshelper, ":7000", true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := netip.AddrPortFrom(dr.Client.Addr.Addr(), 7000).String()
	for _, h := range dr.Servers {
		// The client's answer goes to the VIP, i.e. to the LB: nobody
		// answers without lbd, so the query itself "fails".
		if _, err := harness.UDPGet(ctx, tp, h.NS, nshelper, client, dr.VIP.String(), 1, 500*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 5*time.Second, func() bool { return strings.Count(outs["client"].String(), "rx 192.0.2.100:") >= len(dr.Servers) },
		func() string {
			return "the client did not receive a datagram from the VIP of every server:\n" + outs["client"].String()
		})
	// Nothing answers for the VIP without lbd.
	res, err := harness.Get(ctx, tp, dr.Client.NS, nshelper, "http://192.0.2.100/", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == "" {
		t.Errorf("the VIP answered without lbd: %+v", res[0])
	}
}

func waitFor(t *testing.T, d time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTUNTopology builds the VS/TUN topology without lbd and runs the
// user-space decapsulator in both servers: IPIP packets sent by the
// router to a server carry a client's UDP query to VIP:53; the server's
// UDP server, bound to the wildcard, gets the inner packet through the
// TUN device and answers from the VIP straight to the client through the
// router.
func TestTUNTopology(t *testing.T) {
	tp, tun, nshelper := lvsTopo(t, true)
	checkLVSCommon(t, tp, tun)
	if tun.LBAddr.String() != "198.51.100.1/25" || tun.Gateway.String() != "198.51.100.126" ||
		tun.Servers[0].Addr.String() != "198.51.100.131/25" {
		t.Errorf("addresses: LB %s gateway %s rs1 %s", tun.LBAddr, tun.Gateway, tun.Servers[0].Addr)
	}
	// The LB reaches the servers only through its gateway.
	if tun.LBAddr.Contains(tun.Servers[0].Addr.Addr()) {
		t.Errorf("rs1 %s is on the LB's subnet %s", tun.Servers[0].Addr, tun.LBAddr)
	}
	var decaps []*harness.Decap
	for _, h := range tun.Servers {
		d, err := harness.StartDecap(tp, h, nshelper, tun.VIP.String(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		decaps = append(decaps, d)
		out := mustExec(t, tp, h.NS, "ip", "-o", "addr", "show", "dev", harness.TUNDevice)
		if !strings.Contains(out, "inet 192.0.2.100/32") {
			t.Errorf("%s: VIP not on the TUN device: %s", h.Name, out)
		}
	}
	if _, err := harness.StartUDP(tp, tun.Servers, nshelper, ":53", false, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	outs, err := harness.StartUDP(tp, []topo.Host{tun.Client}, nshelper, ":40001,:40002", true, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	// Open a raw socket in the router namespace and send each server
	// three IPIP packets from the router's LB-side address.
	var fd int
	if err := topo.InNS(tun.Router.NS, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const perServer = 3
	for i, h := range tun.Servers {
		clientPort := uint16(40001 + i)
		for k := range perServer {
			inner := udp4(tun.Client.Addr.Addr(), clientPort, tun.VIP, 53, fmt.Appendf(nil, "query %d", k))
			pkt := ipv4(tun.Router.LBAddr.Addr(), h.Addr.Addr(), unix.IPPROTO_IPIP, inner)
			if err := unix.Sendto(fd, pkt, 0, &unix.SockaddrInet4{Addr: h.Addr.Addr().As4()}); err != nil {
				t.Fatalf("send IPIP to %s: %v", h.Name, err)
			}
		}
	}
	for i, h := range tun.Servers {
		want := fmt.Sprintf("rx 192.0.2.100:53 203.0.113.2 \"%s 203.0.113.2:%d\\n\"", h.Name, 40001+i)
		waitFor(t, 5*time.Second, func() bool { return strings.Count(outs["client"].String(), want) == perServer },
			func() string {
				return fmt.Sprintf("the client did not get %d answers %s:\n%s", perServer, want, outs["client"].String())
			})
	}
	for _, d := range decaps {
		s, err := d.Stats(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if s.Frames != perServer || s.Decap != perServer || s.Bad != 0 || s.Errors != 0 {
			t.Errorf("%s: decap counters %+v, want %d frames and decapsulated", d.Host.Name, s, perServer)
		}
		// The decapsulator's raw IPIP socket keeps the kernel from
		// answering IPIP with "protocol unreachable".
		if n := snmp(t, tp, d.Host.NS, "Icmp", "OutDestUnreachs"); n != 0 {
			t.Errorf("%s sent %d ICMP destination unreachable", d.Host.Name, n)
		}
	}
}

// snmp returns one counter of /proc/net/snmp in ns.
func snmp(t *testing.T, tp *topo.Topo, ns, group, name string) int {
	t.Helper()
	var header []string
	for _, line := range strings.Split(mustExec(t, tp, ns, "cat", "/proc/net/snmp"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != group+":" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, h := range header {
			if h == name && i < len(f) {
				var n int
				fmt.Sscan(f[i], &n)
				return n
			}
		}
	}
	t.Fatalf("no %s %s in /proc/net/snmp of %s", group, name, ns)
	return 0
}

// ipv4 returns an IPv4 packet (no options, DF set, TTL 64) around payload.
func ipv4(src, dst netip.Addr, proto byte, payload []byte) []byte {
	p := make([]byte, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	binary.BigEndian.PutUint16(p[6:], 0x4000)
	p[8] = 64
	p[9] = proto
	s, d := src.As4(), dst.As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[10:], ^csum(p[:20], 0))
	copy(p[20:], payload)
	return p
}

// udp4 returns an IPv4 UDP packet with correct checksums.
func udp4(src netip.Addr, sport uint16, dst netip.Addr, dport uint16, data []byte) []byte {
	u := make([]byte, 8+len(data))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(len(u)))
	copy(u[8:], data)
	s, d := src.As4(), dst.As4()
	pseudo := append(append(append([]byte{}, s[:]...), d[:]...), 0, unix.IPPROTO_UDP, byte(len(u)>>8), byte(len(u)))
	c := ^csum(u, csum(pseudo, 0))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return ipv4(src, dst, unix.IPPROTO_UDP, u)
}

// csum is the ones' complement sum of b (RFC 1071), starting from init.
func csum(b []byte, init uint16) uint16 {
	sum := uint32(init)
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
