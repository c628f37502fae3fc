package e2e

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// ipLink is what "ip -j addr show" says of an interface.
type ipLink struct {
	IfName   string   `json:"ifname"`
	Flags    []string `json:"flags"`
	MTU      int      `json:"mtu"`
	Address  string   `json:"address"` // the MAC
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		PrefixLen int    `json:"prefixlen"`
	} `json:"addr_info"`
}

// showLink returns "ip -j addr show dev ifc" in ns.
func showLink(tp *topo.Topo, ns, ifc string) (ipLink, error) {
	out, err := tp.Exec(ns, "ip", "-j", "addr", "show", "dev", ifc)
	if err != nil {
		return ipLink{}, err
	}
	var links []ipLink
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return ipLink{}, fmt.Errorf("ip -j addr show dev %s: %v: %q", ifc, err, out)
	}
	return links[0], nil
}

// The IPv6 addresses of lbd's server-facing port and of rs1 in TestKNI.
const (
	kniPort6 = "2001:db8:5::1"
	kniRS6   = "2001:db8:5::11"
)

// kniPage serves the HTTP health checks' page from the test process, on
// a socket in a real server's namespace: a fixed body (nshelper serve's
// names the client's port), good or not, and who asked for it.
type kniPage struct {
	good, bad string
	sick      atomic.Bool  // serve bad instead of good
	fromPort  atomic.Int64 // requests from lbd's port address (through the kernel interface)
	others    atomic.Int64 // requests from anywhere else
}

func (p *kniPage) start(t *testing.T, ns, listen, portAddr string) {
	t.Helper()
	var ln net.Listener
	if err := topo.InNS(ns, func() (err error) {
		ln, err = net.Listen("tcp4", listen)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, _, _ := net.SplitHostPort(r.RemoteAddr); host == portAddr && r.Header.Get("User-Agent") == "dplb-health" {
			p.fromPort.Add(1)
		} else {
			p.others.Add(1)
		}
		w.Header().Set("Connection", "close")
		body := p.good
		if p.sick.Load() {
			body = p.bad
		}
		io.WriteString(w, body)
	})}
	srv.SetKeepAlivesEnabled(false)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// rpFiltered is ns's count of packets the kernel refused by their
// reverse path (TcpExt IPReversePathFilter).
func rpFiltered(t *testing.T, tp *topo.Topo, ns string) uint64 {
	t.Helper()
	return procNetCounter(t, tp, ns, "netstat", "TcpExt", "IPReversePathFilter")
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestKNI: a port's kernel interface (kni). The real servers are
// reachable from lbd's namespace only through lbd's server-facing port:
// the namespace's kernel has no route to them, and its stack refuses
// what arrives straight on the port's veth (no ARP there, and a strict
// reverse-path filter: the way back to the servers is the kernel
// interface), as a NIC bound to DPDK hides its frames from the kernel;
// lbd's af_packet sockets get every frame all the same. With kni on
// that port, lbd's kernel has the interface, up, with the port's MAC,
// MTU and addresses, and the connected route through it; it pings a
// server, over IPv4 and IPv6; it checks the servers with HTTP from the host's stack (via:
// host), reading the whole body for its digest: a server serving the
// right body comes up (start_down), one serving another is down for the
// digest, and a server whose body changes goes down and comes back; it
// takes a TCP connection from a real server to a socket on the port's
// address (ssh to the director over its dataplane port) that carries
// 256 KiB each way, and lbd's BGP session to a router (bird) at a server
// comes up through it, the router learning the VIP. to_kernel and
// from_kernel count at least the segments that carried them. The interface is persistent: an upgrade
// takes it up again, a route the operator added on it included, and a
// stopped lbd leaves it there without carrier (the servers unreachable).
func TestKNI(t *testing.T) {
	waitBound(t)
	const (
		healthPort = 8090
		sshPort    = 2222
		payload    = 256 << 10
	)
	var kni, routerAt string
	var router *bird
	pages := []*kniPage{
		{good: "kni health page\n", bad: "rs1 is sick\n"},
		{good: "another page: rs2's digest is wrong\n", bad: "rs2 is sick\n"},
	}
	portAddr := topo.NATLANAddr.Addr().String()
	digest := md5Hex(pages[0].good)
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			kni = tp.IfName("kni") // dp-kni-<suffix>: 13 characters, unique to the run
			if _, err := tp.Exec(nat.LBNS, "ip", "link", "set", "dev", nat.LANIf, "arp", "off"); err != nil {
				t.Fatal(err)
			}
			if err := tp.Sysctl(nat.LBNS, "net.ipv4.conf."+nat.LANIf+".rp_filter", "1"); err != nil {
				t.Fatal(err)
			}
			// rs1 has IPv6 on its link too (lbd's veth has none).
			rs1 := nat.Servers[0]
			if err := tp.Sysctl(rs1.NS, "net.ipv6.conf."+rs1.If+".disable_ipv6", "0"); err != nil {
				t.Fatal(err)
			}
			if _, err := tp.Exec(rs1.NS, "ip", "-6", "addr", "add", kniRS6+"/64", "dev", rs1.If, "nodad"); err != nil {
				t.Fatal(err)
			}
			for _, h := range nat.Servers {
				if out, err := tp.Exec(nat.LBNS, "ip", "route", "get", h.Addr.Addr().String()); err == nil {
					t.Fatalf("before lbd, lbd's namespace has a route to %s: %s", h.Name, out)
				}
			}
			for i, h := range nat.Servers {
				pages[i].start(t, h.NS, fmt.Sprintf(":%d", healthPort), portAddr)
			}
			// A BGP router at rs1 (bird, passive), which lbd's speaker
			// (the host's TCP stack) can reach only through the kni.
			routerAt = rs1.Addr.Addr().String()
			router = startBird(t, tp, rs1.NS, t.TempDir(), birdConfig(rs1.Addr.Addr(), []netip.Addr{netip.MustParseAddr(portAddr)}))
		},
		configure: func(c *harness.Config) {
			c.Ports = []harness.Port{
				harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
				harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
			}
			c.Ports[1].KNI = kni
			c.Ports[1].Address6 = kniPort6 + "/64"
			c.Extra += fmt.Sprintf(`bgp:
  asn: %d
  router_id: %s
  next_hop: %s
  peers:
    - {address: %s, asn: %d, password: %s}
`, directorASN, portAddr, portAddr, routerAt, routerASN, bgpPassword)
			c.Services[0].Health = fmt.Sprintf("{type: http, via: host, port: %d, path: /kni, expect_digest: %s, "+
				"interval: 300ms, timeout: 250ms, rise: 1, fall: 2, start_down: true}", healthPort, digest)
		},
	})
	tp, lbns := e.topo, e.nat.LBNS
	rs1, rs2 := e.nat.Servers[0], e.nat.Servers[1]
	rs1Addr, rs2Addr := rs1.Addr.Addr().String(), rs2.Addr.Addr().String()

	// 1-2. The interface: up, with the port's MAC (af_packet's is its
	// veth's), MTU and address, and the servers' subnet through it.
	port, err := showLink(tp, lbns, e.nat.LANIf)
	if err != nil {
		t.Fatal(err)
	}
	var link ipLink
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if link, err = showLink(tp, lbns, kni); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lbd is up, but its kernel interface %s is not there: %v", kni, err)
		}
	}
	t.Logf("%s: flags %v, mac %s, mtu %d, addresses %+v", kni, link.Flags, link.Address, link.MTU, link.AddrInfo)
	for _, f := range []string{"UP", "LOWER_UP"} {
		if !slices.Contains(link.Flags, f) {
			t.Errorf("%s flags %v: no %s", kni, link.Flags, f)
		}
	}
	if link.Address != port.Address {
		t.Errorf("%s MAC %s, want the port's %s", kni, link.Address, port.Address)
	}
	if link.MTU != port.MTU {
		t.Errorf("%s MTU %d, want the port's %d", kni, link.MTU, port.MTU)
	}
	var v4, v6 []string
	for _, a := range link.AddrInfo {
		switch a.Family {
		case "inet":
			v4 = append(v4, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		case "inet6":
			v6 = append(v6, fmt.Sprintf("%s/%d", a.Local, a.PrefixLen))
		}
	}
	if len(v4) != 1 || v4[0] != topo.NATLANAddr.String() {
		t.Errorf("%s IPv4 addresses %v, want the port's %s", kni, v4, topo.NATLANAddr)
	}
	if !slices.Contains(v6, kniPort6+"/64") {
		t.Errorf("%s IPv6 addresses %v, want the port's %s/64 among them", kni, v6, kniPort6)
	}
	if out, err := tp.Exec(lbns, "ip", "route", "get", rs1Addr); err != nil || !strings.Contains(out, " dev "+kni+" ") || !strings.Contains(out, " src "+portAddr+" ") {
		t.Errorf("lbd's namespace's route to rs1: %q %v, want through %s from %s", out, err, kni, portAddr)
	}
	if t.Failed() {
		t.FailNow()
	}

	out, err := tp.Exec(lbns, "ping", "-c", "2", "-W", "2", "-i", "0.2", rs1Addr)
	if err != nil || !strings.Contains(out, "2 received") || strings.Contains(out, "DUP!") {
		t.Fatalf("ping rs1 from lbd's namespace: %v\n%s", err, out)
	}
	// IPv6 too: the kernel's solicitation goes out, rs1's advertisement
	// comes back to it, and so does the echo reply.
	if out, err := tp.Exec(lbns, "ping", "-6", "-c", "2", "-W", "2", "-i", "0.2", kniRS6); err != nil || !strings.Contains(out, "2 received") {
		t.Fatalf("ping -6 rs1 from lbd's namespace: %v\n%s", err, out)
	}
	// The kernel resolved rs1 by ARP through the interface (lbd passed it
	// the reply), and rs1 knows the port's address by the port's MAC.
	neigh := func(ns, addr, dev string) string {
		t.Helper()
		out, err := tp.Exec(ns, "ip", "-j", "neigh", "show", addr, "dev", dev)
		if err != nil {
			t.Fatal(err)
		}
		var n []struct {
			LLAddr string `json:"lladdr"`
		}
		if err := json.Unmarshal([]byte(out), &n); err != nil || len(n) != 1 {
			t.Fatalf("ip -j neigh show %s dev %s in %s: %v %q", addr, dev, ns, err, out)
		}
		return n[0].LLAddr
	}
	rs1Link, err := showLink(tp, rs1.NS, rs1.If)
	if err != nil {
		t.Fatal(err)
	}
	if got := neigh(lbns, rs1Addr, kni); got != rs1Link.Address {
		t.Errorf("lbd's kernel has rs1 at %s, rs1's MAC is %s", got, rs1Link.Address)
	}
	if got := neigh(rs1.NS, portAddr, rs1.If); got != port.Address {
		t.Errorf("rs1 has the port's address at %s, want the port's MAC %s", got, port.Address)
	}

	// 3. HTTP checks from the host's stack, through the interface. rs1
	// serves the right body and comes up from start_down; rs2 is down
	// for its digest, having been reached.
	waitHealth(t, e, rs1Addr, "up")
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if rs := findServer(findService(resp, e.nat.VIP.String(), 80), rs1Addr, 8080); rs == nil || rs.Probe == nil || rs.Probe.PassedTotal == 0 {
		t.Fatalf("rs1 up, but no probe of it passed: %+v", rs)
	}
	wantReason := "body digest " + md5Hex(pages[1].good) + ", want " + digest
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, reason := serverHealth(t, e, rs2Addr)
		if h == "down" && strings.Contains(reason, wantReason) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rs2: %q (%s), want down for %q", h, reason, wantReason)
		}
	}
	// rs1's body changes: down for the digest; back: up again.
	pages[0].sick.Store(true)
	if reason := waitHealth(t, e, rs1Addr, "down"); !strings.Contains(reason, "body digest "+md5Hex(pages[0].bad)) {
		t.Errorf("rs1 serving another body went down for %q, want its digest", reason)
	}
	pages[0].sick.Store(false)
	waitHealth(t, e, rs1Addr, "up")
	for i, p := range pages {
		if p.fromPort.Load() == 0 || p.others.Load() != 0 {
			t.Errorf("rs%d's page: %d checks from %s, %d requests from elsewhere; want only checks from the port's address", i+1, p.fromPort.Load(), portAddr, p.others.Load())
		}
	}

	// 4. ssh to the director over its dataplane port: a kernel socket on
	// the port's address takes rs1's connection; the server speaks first,
	// then echoes; payload bytes each way.
	var ln net.Listener
	if err := topo.InNS(lbns, func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(portAddr, strconv.Itoa(sshPort)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const banner = "SSH-2.0-dplb-kni-test\r\n"
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(15 * time.Second))
		if host, _, _ := net.SplitHostPort(c.RemoteAddr().String()); host != rs1Addr {
			served <- fmt.Errorf("the director's socket took a connection from %s, want rs1 (%s)", c.RemoteAddr(), rs1Addr)
			return
		}
		if _, err := io.WriteString(c, banner); err != nil {
			served <- err
			return
		}
		if _, err := io.Copy(c, c); err != nil {
			served <- fmt.Errorf("director echoing: %w", err)
			return
		}
		served <- c.(*net.TCPConn).CloseWrite()
	}()
	var conn net.Conn
	if err := topo.InNS(rs1.NS, func() (err error) {
		conn, err = net.DialTimeout("tcp4", net.JoinHostPort(portAddr, strconv.Itoa(sshPort)), 5*time.Second)
		return err
	}); err != nil {
		t.Fatalf("rs1 connecting to the director's %s:%d: %v", portAddr, sshPort, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(15 * time.Second))
	data := make([]byte, payload)
	rand.Read(data)
	br := bufio.NewReader(conn)
	if line, err := br.ReadString('\n'); err != nil || line != banner {
		t.Fatalf("rs1 read the director's banner %q: %v", line, err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := conn.Write(data)
		if err == nil {
			err = conn.(*net.TCPConn).CloseWrite()
		}
		sent <- err
	}()
	echo, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("rs1 reading the echo: %v (%d bytes)", err, len(echo))
	}
	if err := <-sent; err != nil {
		t.Fatalf("rs1 sending: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(echo, data) {
		t.Fatalf("rs1 sent %d bytes to the director and got %d back, not the same", len(data), len(echo))
	}

	// 4b. BGP over the dataplane port: lbd's speaker, on the host's TCP
	// stack, reaches the router at rs1 only through the kni; the session
	// (TCP MD5 signed) comes up and the router learns the VIP with the
	// port's address as next hop.
	vip := netip.PrefixFrom(e.nat.VIP, 32)
	var paths []string
	var bgpOut string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		bgpOut, _ = harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "--bgp")
		if paths, err = router.paths(vip); err == nil && slices.Equal(paths, []string{portAddr}) && strings.Contains(bgpOut, "established") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BGP through the kni: the router holds %v for %s (%v), want via %s; lbctl -L --bgp says:\n%s", paths, vip, err, portAddr, bgpOut)
		}
	}
	t.Logf("BGP through the kni: the router at rs1 learnt %s via %v", vip, paths)

	// 5. The counters: every segment of the echo went to the kernel, and
	// every one it sent left through the port (at most 1460 bytes each).
	minSegs := float64(payload / 1460)
	var toKernel, fromKernel float64
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(200 * time.Millisecond) { // counters are published periodically
		body = e.scrapeMetrics(t)
		for _, c := range []string{"to_kernel", "from_kernel"} {
			if _, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": "0", "counter": c}); !ok {
				t.Fatalf("/metrics has no lcore counter %s", c)
			}
		}
		toKernel = lcoreSum(body, "dplb_lcore_events_total", "counter", "to_kernel")
		fromKernel = lcoreSum(body, "dplb_lcore_events_total", "counter", "from_kernel")
		if toKernel >= minSegs && fromKernel >= minSegs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("to_kernel %v, from_kernel %v: want each at least %v (the %d bytes each way)", toKernel, fromKernel, minSegs, payload)
		}
	}
	if _, ok := metric(body, "dplb_lcore_drops_total", map[string]string{"lcore": "0", "reason": "kernel_full"}); !ok {
		t.Error("/metrics has no kernel_full drop counter")
	}
	full := lcoreSum(body, "dplb_lcore_drops_total", "reason", "kernel_full")
	t.Logf("to_kernel %v, from_kernel %v, kernel_full drops %v", toKernel, fromKernel, full)
	if lost, ok := metric(body, "dplb_kni_lost_total", nil); !ok || lost != 0 {
		t.Errorf("dplb_kni_lost_total %v (listed %v), want 0", lost, ok)
	}
	// The copies of those packets that reached the kernel's stack
	// straight from the port's veth were refused there.
	if n := rpFiltered(t, tp, lbns); n == 0 {
		t.Errorf("lbd's kernel refused no packet arriving on %s by its reverse path: did it take them from there?", e.nat.LANIf)
	} else {
		t.Logf("lbd's kernel refused %d packets arriving straight on %s (rp_filter)", n, e.nat.LANIf)
	}

	// 6. The interface is persistent, as a NIC: an upgrade (lbd execs
	// itself, its descriptors close) takes it up again with what the
	// operator put on it, and a stopped lbd leaves it without carrier.
	const operatorRoute = "10.99.0.0/24"
	if _, err := tp.Exec(lbns, "ip", "route", "add", operatorRoute, "via", rs1Addr, "dev", kni); err != nil {
		t.Fatal(err)
	}
	e.upgrade(t)
	if out, err := tp.Exec(lbns, "ping", "-c", "1", "-W", "2", rs1Addr); err != nil {
		t.Fatalf("after an upgrade, lbd's kernel cannot ping rs1 through %s: %v\n%s", kni, err, out)
	}
	if out, err := tp.Exec(lbns, "ip", "route", "show", operatorRoute); err != nil || !strings.Contains(out, kni) {
		t.Errorf("after an upgrade, the operator's route through %s is gone: %v %q", kni, err, out)
	}
	e.stopLBD(t)
	link, err = showLink(tp, lbns, kni)
	if err != nil {
		t.Fatalf("lbd stopped and %s went with it: %v", kni, err)
	}
	if slices.Contains(link.Flags, "LOWER_UP") || !slices.Contains(link.Flags, "NO-CARRIER") {
		t.Errorf("lbd stopped, but %s has a carrier: flags %v", kni, link.Flags)
	}
	if out, err := tp.Exec(lbns, "ping", "-c", "1", "-W", "1", rs1Addr); err == nil {
		t.Errorf("lbd stopped, but its kernel still reaches rs1: %s", out)
	}
}
