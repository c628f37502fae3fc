package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// An active/backup pair of lbd directors, each in its own namespace with
// its own keepalived, around the topology topo.BuildHA builds.

const (
	haHTTPPort = 80   // short requests: who answers, how they balance
	haEchoPort = 9000 // the long-lived echo streams
	haFNATPort = 9001 // VS/NAT pair: the same echo servers through VS/FullNAT and the SYN proxy
	// haLocal is the FullNAT service's local address on the servers' segment.
	haLocal = "198.51.100.60"
	// haNAT64Port is the VS/NAT pair's NAT64 service on haVIP6 (with
	// IPv6): the IPv4 echo servers, from haLocal64.
	haNAT64Port = 9064
	// haLocal64 is the NAT64 service's IPv4 local address on the servers'
	// segment: like haLocal, the master's alone.
	haLocal64 = "198.51.100.64"
	// haFNAT66Port is the VS/NAT pair's FNAT66 service on haVIP6 (with
	// IPv6): the IPv6 echo servers by fullnat, from haLocal66 on the
	// servers' IPv6 segment (the master's alone).
	haFNAT66Port = 9066
	haLocal66    = "fd00:2::66"
	// haSNAT is the VS/NAT pair's SNAT address on the client side: the
	// servers' own connections to the client's haSNATPort leave from it
	// (the master's alone, like haLocal).
	haSNAT     = "192.0.2.61"
	haSNATPort = 9002
)

// haNode is one director.
type haNode struct {
	topo.HANode
	dir    string // its lbd's and keepalived's files
	lbd    *harness.LBD
	ka     *harness.Keepalived
	starts int
}

// haEnv is the pair, the client and the real servers.
type haEnv struct {
	ctx                    context.Context
	topo                   *topo.Topo
	ha                     *topo.HA
	nodes                  [2]*haNode
	root                   string
	lbdPath, lbctl, helper string
	keyFile                string
	vip                    *arpProbe // who answers for the VIP
	floating               *arpProbe // VS/NAT: who answers for the real servers' gateway
	lip64                  *arpProbe // VS/NAT with IPv6: who answers for the NAT64 service's local address
	vipHTTP, vipEcho       string
	vipFNAT                string            // VS/NAT pair: the FullNAT echo service
	six                    bool              // IPv6 too, an echo service on haVIP6
	taps                   bool              // lbd on TAP ports bridged to the node's links (haTapPorts)
	twoWorkerBackup        bool              // node b runs two workers, node a one (haBackupWorkers)
	ftp                    map[string]string // VS/NAT pair: vsftpd on the servers (their files' SHA-256 to their names), an FTP service on VIP:21
}

// newHAEnv builds the VS/DR (dr) or VS/NAT pair with two real servers,
// starts both lbd as backups and both keepalived, and waits until node a
// (priority 150) is master: it alone answers ARP for the VIP.
func newHAEnv(t *testing.T, dr bool) *haEnv {
	t.Helper()
	return newHAEnvWith(t, dr, false, false)
}

// newHAEnvWith is newHAEnv, with six IPv6 on the client's link, the
// router (VS/DR) and the servers' segment, and an IPv6 echo service on
// haVIP6 (withIPv6), with VS/NAT a NAT64 one too (nat64);
// with ftp (VS/NAT only) vsftpd on the real servers and an FTP service
// with the helper on VIP:21 (with six instead haVIP6:21, by NAT66).
func newHAEnvWith(t *testing.T, dr, six, ftp bool) *haEnv {
	t.Helper()
	return newHAEnvOn(t, dr, six, ftp, false)
}

// newHAEnvOn is newHAEnvWith, with taps each lbd's ports on TAP devices
// bridged to the node's links (haTapPorts) instead of af_packet ones: a
// TAP port's link follows its tap interface's state, which a test can
// set down.
func newHAEnvOn(t *testing.T, dr, six, ftp, taps bool) *haEnv {
	t.Helper()
	return newHAEnvWorkers(t, dr, six, ftp, taps, false)
}

// newHAEnvWorkers is newHAEnvOn, with twoWorkerBackup node b on two
// workers (VS/NAT only): each lbd draws its own steering key, so a FullNAT
// or NAT64 connection's local port is often another worker's on b than
// its client's, and b steers its server's packets (lcore/steerentry.go).
func newHAEnvWorkers(t *testing.T, dr, six, ftp, taps, twoWorkerBackup bool) *haEnv {
	t.Helper()
	lbdPath, lbctl, helper := binaries(t)
	if _, err := exec.LookPath("keepalived"); err != nil {
		t.Skip("end-to-end failover test: keepalived not found (run scripts/setup.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	tp := topo.New(t)
	t.Cleanup(tp.Teardown)
	h, err := topo.BuildHA(tp, 2, dr)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	e := &haEnv{ctx: ctx, topo: tp, ha: h, root: root, lbdPath: lbdPath, lbctl: lbctl, helper: helper, six: six, taps: taps,
		twoWorkerBackup: twoWorkerBackup && !dr}
	e.vipHTTP = "http://" + h.VIP.String() + "/"
	e.vipEcho = net.JoinHostPort(h.VIP.String(), strconv.Itoa(haEchoPort))
	e.vipFNAT = net.JoinHostPort(h.VIP.String(), strconv.Itoa(haFNATPort))
	dir := t.TempDir()
	e.keyFile = filepath.Join(dir, "sync.key")
	key := make([]byte, 32)
	rand.Read(key)
	if err := os.WriteFile(e.keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	httpListen := ":8080"
	if dr {
		httpListen = ":80"
		e.vip = &arpProbe{what: "the VIP", ns: h.Router.NS, ifc: h.Router.LBIf, src: unusedServerSide, target: h.VIP}
	} else {
		e.vip = &arpProbe{what: "the VIP", ns: h.Client.NS, ifc: h.Client.If, src: netip.MustParseAddr("192.0.2.250"), target: h.VIP}
		rs := h.Servers[0]
		e.floating = &arpProbe{what: "the floating gateway", ns: rs.NS, ifc: rs.If, src: unusedServerSide, target: h.Floating.Addr()}
		if six {
			e.lip64 = &arpProbe{what: "the NAT64 local address", ns: rs.NS, ifc: rs.If, src: unusedServerSide, target: netip.MustParseAddr(haLocal64)}
		}
	}
	if err := harness.StartHTTP(tp, h.Servers, helper, httpListen, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var rsNS []string
	for _, s := range h.Servers {
		rsNS = append(rsNS, s.NS)
	}
	startEchoServers(t, haEchoPort, rsNS...)
	if ftp {
		if _, err := exec.LookPath("vsftpd"); err != nil {
			t.Skip("FTP test: vsftpd not found (run scripts/setup.sh)")
		}
		e.ftp = map[string]string{}
		conf := vsftpdConf
		if six { // the FTP service is the IPv6 one (config)
			conf = strings.Replace(vsftpdConf, "listen=YES\nlisten_ipv6=NO\n", "listen=NO\nlisten_ipv6=YES\n", 1)
		}
		for _, s := range h.Servers {
			e.ftp[startVsftpdConf(t, tp, s, dir, conf)] = s.Name
		}
	}
	if six {
		e.withIPv6(t)
		startEchoServers6(t, haEchoPort, rsNS...)
	}

	for i, nd := range h.Nodes {
		n := &haNode{HANode: nd, dir: filepath.Join(dir, nd.Name)}
		if err := os.Mkdir(n.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		vipIf := nd.ClientIf
		if dr {
			vipIf = nd.ServerIf
		}
		serverMAC := func() (net.HardwareAddr, error) { return harness.LinkMAC(nd.NS, nd.ServerIf) }
		if e.taps { // the TAP ports' own MACs, not the links'
			ports := e.config(n).Ports
			e.vip.macs[i], _ = net.ParseMAC(haTapMAC(i, 0))
			serverMAC = func() (net.HardwareAddr, error) { return net.ParseMAC(haTapMAC(i, len(ports)-1)) }
		} else if e.vip.macs[i], err = harness.LinkMAC(nd.NS, vipIf); err != nil {
			t.Fatal(err)
		}
		if e.floating != nil {
			if e.floating.macs[i], err = serverMAC(); err != nil {
				t.Fatal(err)
			}
		}
		if e.lip64 != nil {
			e.lip64.macs[i] = e.floating.macs[i] // the same server port
		}
		e.nodes[i] = n
		e.startLBD(t, n)
	}
	for i, n := range e.nodes {
		e.startKeepalived(t, n, []int{150, 100}[i])
	}
	if _, err := e.waitARP(e.nodes[0], 20*time.Second); err != nil {
		t.Fatalf("node a never became master: %v", err)
	}
	return e
}

// config is node n's lbd configuration: it starts as a backup with its
// backup sync daemon on the management link; keepalived's notify script
// makes it master.
func (e *haEnv) config(n *haNode) harness.Config {
	h := e.ha
	var ports []harness.Port
	svc := func(port, rsPort int, fwd string) harness.Service {
		s := harness.Service{VIP: h.VIP.String(), Port: port, Scheduler: "rr"}
		for _, rs := range h.Servers {
			s.Servers = append(s.Servers, harness.Server{Address: rs.Addr.Addr().String(), Port: rsPort, Weight: 1, Forward: fwd})
		}
		return s
	}
	var services []harness.Service
	if h.DR {
		ports = []harness.Port{harness.AFPacketPort(0, harness.LVSPortName, n.ServerIf, n.ServerIP.String(), h.Gateway.String(), "both")}
		services = []harness.Service{svc(haHTTPPort, haHTTPPort, "dr"), svc(haEchoPort, haEchoPort, "dr")}
		if e.six {
			ports[0].Address6 = haNode6[n.Name] + "/64"
			services = append(services, e.echo6("dr"))
		}
	} else {
		lan := harness.AFPacketPort(1, "lan", n.ServerIf, n.ServerIP.String(), "", "server")
		lan.Floating = []string{h.Floating.Addr().String()}
		wan := harness.AFPacketPort(0, "wan", n.ClientIf, n.ClientIP.String(), "", "client")
		ports = []harness.Port{wan, lan}
		fnat := svc(haFNATPort, haEchoPort, "fullnat")
		fnat.LocalAddresses, fnat.SynProxy = []string{haLocal}, true
		services = []harness.Service{svc(haHTTPPort, 8080, "nat"), svc(haEchoPort, haEchoPort, "nat"), fnat}
		if e.six {
			ports[0].Address6, ports[1].Address6 = haNATWAN6[n.Name]+"/64", haNode6[n.Name]+"/64"
			ports[1].Floating = append(ports[1].Floating, haNATFloating6)
			// Both behind the SYN proxy: their connections fail over
			// with the proxy's deltas (as the IPv4 FullNAT service's).
			echo6, nat64 := e.echo6("nat"), e.nat64()
			echo6.SynProxy, nat64.SynProxy = true, true
			fnat66 := e.echo6("fullnat")
			fnat66.Port, fnat66.LocalAddresses = haFNAT66Port, []string{haLocal66}
			services = append(services, echo6, nat64, fnat66)
		}
		switch {
		case e.ftp != nil && e.six:
			ftp := e.echo6("nat")
			ftp.Port, ftp.Helper = 21, "ftp"
			for i := range ftp.Servers {
				ftp.Servers[i].Port = 21
			}
			services = append(services, ftp)
		case e.ftp != nil:
			ftp := svc(21, 21, "nat")
			ftp.Helper = "ftp"
			services = append(services, ftp)
		}
	}
	if e.taps {
		haTapPorts(ports, e.nodeIndex(n))
	}
	c := harness.BaseConfig(fmt.Sprintf("%s-%s%d", e.topo.Suffix(), n.Name, n.starts), n.dir, ports...)
	c.Services = services
	if e.twoWorkerBackup && n.Name == "b" {
		c.Workers = []int{0, 1}
	}
	c.ConnTableSize = 16384
	c.LogFormat = "json"
	c.HAState = "backup"
	c.Extra = fmt.Sprintf("sync:\n  backup: true\n  mcast_interface: %s\n  syncid: 1\n  key_file: %s\n", n.MgmtIf, e.keyFile)
	if !h.DR {
		c.Extra += fmt.Sprintf("snat:\n  - {source: %s, addresses: [%s], protocols: [tcp, udp]}\n", h.Servers[0].Addr.Masked(), haSNAT)
	}
	return c
}

// echo6 is the IPv6 echo service on haVIP6 over the servers' IPv6
// addresses, forwarded by fwd.
func (e *haEnv) echo6(fwd string) harness.Service {
	echo := harness.Service{VIP: haVIP6, Port: haEchoPort, Scheduler: "rr"}
	for i := range e.ha.Servers {
		echo.Servers = append(echo.Servers, harness.Server{Address: v6LVSServer(i), Port: haEchoPort, Weight: 1, Forward: fwd})
	}
	return echo
}

// nat64 is the VS/NAT pair's NAT64 service: haVIP6:haNAT64Port to the
// servers' IPv4 echo servers by fullnat from haLocal64.
func (e *haEnv) nat64() harness.Service {
	s := harness.Service{VIP: haVIP6, Port: haNAT64Port, Scheduler: "rr", LocalAddresses: []string{haLocal64}}
	for _, rs := range e.ha.Servers {
		s.Servers = append(s.Servers, harness.Server{Address: rs.Addr.Addr().String(), Port: haEchoPort, Weight: 1, Forward: "fullnat"})
	}
	return s
}

// The pairs' IPv6. VS/DR: the client behind the router as in the VS/DR
// tests, the nodes and servers on the router's segment. VS/NAT: the
// client and the nodes' client ports on 2001:db8:4::/64 with the VIP, the
// nodes' server ports and the servers on fd00:2::/64, the servers'
// gateway the nodes' floating haNATFloating6.
const (
	haVIP6         = "2001:db8:4::40"
	haNATClient6   = "2001:db8:4::7"
	haNATFloating6 = "fd00:2::fe"
)

var (
	haNode6   = map[string]string{"a": "fd00:2::1", "b": "fd00:2::2"}
	haNATWAN6 = map[string]string{"a": "2001:db8:4::1", "b": "2001:db8:4::2"}
)

// withIPv6 gives the pair's topology IPv6. VS/DR: the router holds the
// VIP on-link on the segment (whoever answers neighbour solicitations for
// it, the master, gets the client's packets; the new master's unsolicited
// NA moves it), the servers hold it on lo and answer the client through
// the router. VS/NAT: the VIP is on the client's link, the servers route
// through the floating gateway; the master answers neighbour
// solicitations for both and the new master's unsolicited NAs move them.
func (e *haEnv) withIPv6(t *testing.T) {
	t.Helper()
	h, six := e.ha, v6Setup{t, e.topo}
	if !h.DR {
		six.addr(h.Client.NS, h.Client.If, haNATClient6+"/64")
		// The bridges flood the solicited-node groups to the nodes' ports.
		for _, br := range []string{"brc", "brs"} {
			six.do(h.SwitchNS, "ip", "link", "set", e.topo.IfName(br), "type", "bridge", "mcast_snooping", "0")
		}
		for i, s := range h.Servers {
			six.addr(s.NS, s.If, v6LVSServer(i)+"/64")
			six.do(s.NS, "ip", "-6", "route", "add", "default", "via", haNATFloating6)
		}
		return
	}
	six.clientBehindRouter(h.Client, h.Router)
	six.do(h.Router.NS, "ip", "-6", "route", "add", haVIP6+"/128", "dev", h.Router.LBIf)
	// The bridge floods the solicited-node groups to the nodes' ports.
	six.do(h.SwitchNS, "ip", "link", "set", e.topo.IfName("brs"), "type", "bridge", "mcast_snooping", "0")
	for i, s := range h.Servers {
		six.addr(s.NS, s.If, v6LVSServer(i)+"/64")
		six.do(s.NS, "ip", "-6", "route", "add", "default", "via", v6LVSRouterSeg)
		six.do(s.NS, "sysctl", "-q", "-w", "net.ipv6.conf.lo.disable_ipv6=0")
		six.do(s.NS, "ip", "-6", "addr", "add", haVIP6+"/128", "dev", "lo", "nodad")
	}
}

// killNode kills node n's lbd and keepalived at once (its machine dies)
// and waits until node next alone answers ARP for the VIP; it returns
// when n was killed and how long the takeover took.
func (e *haEnv) killNode(t *testing.T, n, next *haNode) (time.Time, time.Duration) {
	t.Helper()
	killed := time.Now()
	if err := n.lbd.Proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	n.ka.Kill()
	if _, err := e.waitARP(next, 15*time.Second); err != nil {
		t.Fatalf("failover: %v", err)
	}
	return killed, time.Since(killed)
}

// startLBD starts node n's lbd (again) as a backup.
func (e *haEnv) startLBD(t *testing.T, n *haNode) {
	t.Helper()
	n.starts++
	cfg := e.config(n)
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", cfg.FilePrefix)) })
	lbd, err := harness.StartLBD(e.ctx, e.topo, n.NS, e.lbdPath, e.lbctl, cfg, n.dir, 30*time.Second)
	if lbd != nil {
		n.lbd = lbd
		start := n.starts
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("node %s lbd (start %d) configuration:\n%s", n.Name, start, cfg.YAML())
				t.Logf("node %s lbd (start %d) log (last 60 lines):\n%s", n.Name, start, harness.Tail(lbd.Log.String(), 60))
			}
		})
	}
	if err != nil {
		t.Fatalf("node %s: %v", n.Name, err)
	}
	if e.taps {
		links := []string{n.ClientIf, n.ServerIf}
		if e.ha.DR {
			links = []string{n.ServerIf}
		}
		for i, ifc := range links {
			tap := "dtap" + strconv.Itoa(i)
			kernelMAC := fmt.Sprintf("02:00:00:00:7b:%d%d", e.nodeIndex(n), i)
			if err := harness.BridgeTap(e.topo, n.NS, "br"+tap, tap, ifc, kernelMAC, 10*time.Second); err != nil {
				t.Fatalf("node %s: %v", n.Name, err)
			}
		}
	}
}

// haTapPorts puts node i's ports (in configuration order) on TAP devices
// dtap0, dtap1..., each with a fixed MAC (haTapMAC), to be bridged to
// the node's links once lbd runs (startLBD; a restarted lbd is not).
func haTapPorts(ports []harness.Port, node int) {
	for j := range ports {
		ports[j].Device = fmt.Sprintf("net_tap%d,iface=dtap%d,mac=%s", j, j, haTapMAC(node, j))
	}
}

// haTapMAC is node i's TAP port j's MAC.
func haTapMAC(node, port int) string { return fmt.Sprintf("02:00:00:00:7a:%d%d", node, port) }

// nodeIndex is n's place in the pair (0: node a).
func (e *haEnv) nodeIndex(n *haNode) int {
	if e.nodes[1] == n {
		return 1
	}
	return 0
}

// startKeepalived writes node n's keepalived files from the shipped
// example and starts it.
func (e *haEnv) startKeepalived(t *testing.T, n *haNode, priority int) {
	t.Helper()
	kdir := filepath.Join(n.dir, "keepalived")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := harness.WriteKeepalived(e.root, kdir, harness.VRRPNode{
		RouterID: "dplb-" + n.Name, Interface: n.MgmtIf, MgmtVIP: "10.255.0.254/24", Priority: priority,
		LBCtl: e.lbctl, Socket: n.lbd.Config.Socket, SyncID: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ka, err := harness.StartKeepalived(e.topo, n.NS, kdir)
	if err != nil {
		t.Fatal(err)
	}
	n.ka = ka
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node %s keepalived log (last 30 lines):\n%s", n.Name, harness.Tail(ka.Log.String(), 30))
			t.Logf("node %s notify script log:\n%s", n.Name, ka.NotifyLog())
		}
	})
}

// unusedServerSide is the sender of ARP probes on the server side: an
// address nobody holds.
var unusedServerSide = netip.MustParseAddr("198.51.100.250")

// arpProbe asks, from one namespace, who answers ARP for one of the
// addresses only the master must answer for.
type arpProbe struct {
	what    string
	ns, ifc string
	src     netip.Addr // the sender: an address nobody holds
	target  netip.Addr
	macs    [2]net.HardwareAddr // each node's port that may answer
}

// answerers asks once and names the nodes that answered ("?MAC" for a
// MAC that is no node's).
func (e *haEnv) answerers(p *arpProbe) ([]string, error) {
	macs, err := harness.ARPAnswers(p.ns, p.ifc, p.src, p.target, 150*time.Millisecond)
	var names []string
	for _, m := range macs {
		name := "?" + m.String()
		for i, n := range e.nodes {
			if m.String() == p.macs[i].String() {
				name = n.Name
			}
		}
		names = append(names, name)
	}
	return names, err
}

// waitOwner waits until n alone answers ARP for p's address and returns
// how long that took.
func (e *haEnv) waitOwner(p *arpProbe, n *haNode, timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	var last []string
	for time.Since(start) < timeout {
		names, err := e.answerers(p)
		if err != nil {
			return 0, err
		}
		if slices.Equal(names, []string{n.Name}) {
			return time.Since(start), nil
		}
		last = names
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("after %v ARP answers for %s (%s) come from %v, want node %s alone", timeout, p.what, p.target, last, n.Name)
}

// waitARP waits until n alone answers ARP for the VIP and returns how
// long that took.
func (e *haEnv) waitARP(n *haNode, timeout time.Duration) (time.Duration, error) {
	return e.waitOwner(e.vip, n, timeout)
}

// checkMaster checks that n is the master everywhere it shows: its
// keepalived, its lbd, and, in VS/NAT, the floating gateway's ARP answers
// (the VIP's were waited for).
func (e *haEnv) checkMaster(t *testing.T, when string, n *haNode) {
	t.Helper()
	if s := n.ka.State(); s != "MASTER" {
		t.Errorf("%s: node %s's keepalived is in state %q, want MASTER", when, n.Name, s)
	}
	if s := e.haState(n); s != "master" {
		t.Errorf("%s: node %s's lbctl --ha-state says %q, want master", when, n.Name, s)
	}
	if e.floating != nil {
		if _, err := e.waitOwner(e.floating, n, time.Second); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
}

// checkBackup checks that n's keepalived and lbd say backup.
func (e *haEnv) checkBackup(t *testing.T, when string, n *haNode) {
	t.Helper()
	if s := n.ka.State(); s != "BACKUP" {
		t.Errorf("%s: node %s's keepalived is in state %q, want BACKUP", when, n.Name, s)
	}
	if s := e.haState(n); s != "backup" {
		t.Errorf("%s: node %s's lbctl --ha-state says %q, want backup", when, n.Name, s)
	}
}

// connections is how many connection entries n's lbd holds.
func (e *haEnv) connections(n *haNode) (uint64, error) {
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, n.lbd.Config.Socket)
	if err != nil {
		return 0, err
	}
	if resp.Info == nil {
		return 0, fmt.Errorf("node %s: lbctl -L shows no info line", n.Name)
	}
	return resp.Info.Connections, nil
}

// waitConnections waits until n holds at least want entries and returns
// the last count.
func (e *haEnv) waitConnections(n *haNode, want uint64, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	for {
		have, err := e.connections(n)
		if err != nil || have >= want || time.Now().After(deadline) {
			return have, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// haState is what lbctl --ha-state says of n's lbd.
func (e *haEnv) haState(n *haNode) string {
	out, err := harness.LBCtl(e.ctx, e.lbctl, n.lbd.Config.Socket, "--ha-state")
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

// drops is n's lbd's drop counters by reason, for the report.
func (e *haEnv) drops(n *haNode) string {
	url := "http://" + n.lbd.Config.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.topo, n.NS, e.helper, url, 1, 3*time.Second)
	if err != nil || res[0].Err != "" {
		return fmt.Sprintf("metrics: %v %v", err, res)
	}
	return nonZero(dropsByReason(res[0].Body))
}

// steered is node n's count of server packets its steering entries
// handed to the worker holding their connection (the backup on two
// workers takes FullNAT and NAT64 connections whose local port another
// worker owns there).
func (e *haEnv) steered(t *testing.T, n *haNode) float64 {
	t.Helper()
	url := "http://" + n.lbd.Config.MetricsListen + "/metrics"
	res, err := harness.Get(e.ctx, e.topo, n.NS, e.helper, url, 1, 3*time.Second)
	if err != nil || res[0].Err != "" {
		t.Fatalf("node %s metrics: %v %v", n.Name, err, res)
	}
	return counterSum(res[0].Body, "steered")
}

// explainStreams logs what the live lbds list for each stream (client
// address:port): which real server and state each director holds (after
// the streams ended: their closing states).
func (e *haEnv) explainStreams(t *testing.T, locals []string) {
	t.Helper()
	for _, n := range e.nodes {
		select {
		case <-n.lbd.Proc.Done():
			continue // its lbd is dead
		default:
		}
		out, err := harness.LBCtl(e.ctx, e.lbctl, n.lbd.Config.Socket, "-L", "-c", "-n")
		if err != nil {
			t.Logf("node %s: %v", n.Name, err)
			continue
		}
		for _, local := range locals {
			var lines []string
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, local+" ") {
					lines = append(lines, strings.TrimSpace(line))
				}
			}
			t.Logf("node %s holds for stream %s: %q", n.Name, local, lines)
		}
	}
}

// explainQuiet logs, while streams are stalled, what the hosts' TCP says
// of them (retransmission timeout, backoff, retransmissions: ss -tin) and
// the hosts' ARP caches, to tell a lost path from a TCP timer.
func (e *haEnv) explainQuiet(t *testing.T, locals []string) {
	t.Helper()
	hosts := append([]topo.Host{e.ha.Client}, e.ha.Servers...)
	for _, h := range hosts {
		neigh, _ := e.topo.Exec(h.NS, "ip", "neigh", "show")
		t.Logf("%s's ARP cache:\n%s", h.Name, neigh)
		for _, local := range locals {
			port := local[strings.LastIndex(local, ":")+1:]
			filter := "sport = :" + port
			if h.NS != e.ha.Client.NS {
				filter = "dport = :" + port
			}
			out, _ := e.topo.Exec(h.NS, "ss", "-tin", filter)
			t.Logf("%s's TCP for stream %s:\n%s", h.Name, local, out)
		}
	}
}

// balance sends n short requests to the VIP and checks that every one
// succeeds and both real servers answer at least a quarter of them.
func (e *haEnv) balance(t *testing.T, when string, n int) {
	t.Helper()
	res, err := harness.Get(e.ctx, e.topo, e.ha.Client.NS, e.helper, e.vipHTTP, n, 3*time.Second)
	if err != nil {
		t.Errorf("%s: %v", when, err)
		return
	}
	by := map[string]int{}
	failed := 0
	var firstErr string
	for _, r := range res {
		if r.Err != "" || r.Status != 200 {
			failed++
			if firstErr == "" {
				firstErr = fmt.Sprintf("status %d: %s", r.Status, r.Err)
			}
			continue
		}
		by[r.Server()]++
	}
	t.Logf("%s: %d new connections answered by %v, %d failed", when, n, by, failed)
	if failed > 0 {
		t.Errorf("%s: %d of %d new connections failed (first: %s)", when, failed, n, firstErr)
	}
	for _, s := range e.ha.Servers {
		if by[s.Name] < n/4 {
			t.Errorf("%s: %s answered %d of %d new connections, want at least %d (round robin over two)", when, s.Name, by[s.Name], n, n/4)
		}
	}
}
