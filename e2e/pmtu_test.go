package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// Path-MTU discovery through lbd on four workers. A router namespace sits
// between the client and lbd; one of its links gets a smaller MTU than
// every host knows of (1280, the hosts keep 1500), so a full-sized
// segment with DF set makes the router send ICMP "fragmentation needed".
// That error must reach the sender of the segment through lbd, or TCP
// retransmits the same oversized segment until the transfer stalls.

const (
	pmtuPort  = 9000
	smallMTU  = 1280
	pmtuBytes = 1 << 20
	// Downloads per test, each needing its own ICMP error through lbd: with
	// four lcores, a dataplane that delivers only the errors landing on
	// the right lcore passes all eight by chance once in 65536 runs.
	pmtuRounds = 8
)

// startPMTU builds the VS/DR shape (tunnel false; the servers are made
// VS/NAT servers: their default route is lbd) or the VS/TUN one, runs the
// stream servers on pmtuPort, and starts lbd on four workers (a
// four-queue port) with one service VIP:pmtuPort over both servers.
func startPMTU(t *testing.T, tunnel bool) (*lbEnv, *topo.LVS) {
	t.Helper()
	e, dir := newEnv(t)
	fwd := "nat"
	if tunnel {
		fwd = "tun"
	}
	l := e.buildLVS(t, tunnel)
	for _, h := range l.Servers {
		if tunnel {
			d, err := harness.StartDecap(e.topo, h, e.nshelper, e.vip, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			e.decaps = append(e.decaps, d)
		} else if _, err := e.topo.Exec(h.NS, "ip", "route", "replace", "default", "via", l.LBAddr.Addr().String()); err != nil {
			t.Fatal(err) // NAT: replies go back through lbd
		}
		startStreamServers(t, pmtuPort, h.NS)
	}
	// Every "fragmentation needed" counts: no ICMP rate limit on the router.
	if err := e.topo.Sysctl(l.Router.NS, "net.ipv4.icmp_ratelimit", "0"); err != nil {
		t.Fatal(err)
	}
	port := harness.AFPacketPort(0, harness.LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both")
	port.Device += ",qpairs=4"
	cfg := harness.BaseConfig(e.topo.Suffix(), dir, port)
	cfg.Workers = []int{0, 1, 0, 1}
	cfg.ConnTableSize = 65536
	svc := harness.Service{VIP: e.vip, Port: pmtuPort, Scheduler: "rr"}
	for _, h := range l.Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: h.Addr.Addr().String(), Port: pmtuPort, Weight: 1, Forward: fwd})
	}
	cfg.Services = []harness.Service{svc}
	e.startLBD(t, cfg, dir)
	return e, l
}

// setMTU sets an interface's MTU in its namespace.
func setMTU(t *testing.T, e *lbEnv, ns, ifc string, mtu int) {
	t.Helper()
	if _, err := e.topo.Exec(ns, "ip", "link", "set", "dev", ifc, "mtu", strconv.Itoa(mtu)); err != nil {
		t.Fatal(err)
	}
}

// warm makes small transfers until two in a row succeed (ARP resolved
// everywhere), at most ten.
func (e *lbEnv) warmStreams(t *testing.T, addr string) {
	t.Helper()
	small := streamSpec{total: 1000, chunk: 1000, stall: 3 * time.Second}
	ok := 0
	for i := 0; i < 10 && ok < 2; i++ {
		c, r := dialStream(e.ctx, e.client.NS, addr, small, 3*time.Second)
		if c != nil {
			r = readStream(c, r, small)
		}
		if r.kind == "" {
			ok++
		} else {
			ok = 0
			t.Logf("warm-up %d failed (allowed): %v", i, r)
		}
	}
	if ok < 2 {
		t.Fatalf("warm-up: no two successive transfers from %s succeeded", addr)
	}
}

// pmtuDownloads fetches pmtuBytes from addr through the narrow link
// pmtuRounds times. Before each, the servers forget the path MTUs they
// learnt, so every download needs its own "fragmentation needed" to get
// through lbd, received by whichever lcore the router's packet hashes to.
// It stops at the first stall.
func (e *lbEnv) pmtuDownloads(t *testing.T, addr string) {
	t.Helper()
	big := streamSpec{total: pmtuBytes, chunk: 64 << 10, stall: 10 * time.Second}
	for i := range pmtuRounds {
		for _, h := range e.servers {
			if _, err := e.topo.Exec(h.NS, "ip", "route", "flush", "cache"); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		c, r := dialStream(e.ctx, e.client.NS, addr, big, 5*time.Second)
		if c != nil {
			r = readStream(c, r, big)
		}
		if r.kind != "" {
			t.Errorf("download %d of %d (1 MiB over a %d-byte link): %v", i+1, pmtuRounds, smallMTU, r)
			return
		}
		t.Logf("download %d: %d bytes in %v", i+1, r.got, time.Since(t0).Round(time.Millisecond))
	}
}

// icmpCounters logs and returns lbd's ICMP counters summed over the lcores.
func (e *lbEnv) icmpCounters(t *testing.T) (delivered, fragNeeded float64) {
	t.Helper()
	body := e.scrape(t)
	delivered, fragNeeded = counterSum(body, "icmp_errors"), counterSum(body, "icmp_frag_needed")
	t.Logf("lbd: icmp_errors %.0f icmp_frag_needed %.0f; drops: %s", delivered, fragNeeded, nonZero(dropsByReason(body)))
	return delivered, fragNeeded
}

// unreachablesIn reads how many ICMP "destination unreachable" messages
// (fragmentation needed among them) the kernel of ns has received.
func (e *lbEnv) unreachablesIn(t *testing.T, ns string) int {
	t.Helper()
	return int(procNetCounter(t, e.topo, ns, "snmp", "Icmp", "InDestUnreachs"))
}

// TestPMTUNATFourWorkers: 1 MiB downloads over VS/NAT through a router
// whose link to the client has MTU 1280. The router's "fragmentation
// needed" goes to the VIP; lbd must translate it (quoted addresses back to
// the real server's) and deliver it to the server, whichever of its four
// lcores receives it.
func TestPMTUNATFourWorkers(t *testing.T) {
	e, l := startPMTU(t, false)
	addr := net.JoinHostPort(e.vip, strconv.Itoa(pmtuPort))
	e.warmStreams(t, addr)
	setMTU(t, e, l.Router.NS, l.Router.ClientIf, smallMTU)
	e.pmtuDownloads(t, addr)
	if delivered, _ := e.icmpCounters(t); delivered == 0 {
		t.Error("lbd delivered no ICMP error: the path MTU was not discovered through it")
	}
	e.stop(t)
}

// TestPMTUTUNFourWorkers: VS/TUN through the same kind of router, both
// ways.
//
// Download: the servers answer the client directly through the router,
// from the VIP; the router's "fragmentation needed" goes to the VIP, that
// is to lbd, which must pass it in IPIP to the server holding the
// connection, whichever lcore receives it.
//
// Upload: the router's link to the servers has MTU 1280. lbd's own port
// (1500) cannot carry a full segment plus the IPIP header, so lbd answers
// "fragmentation needed" itself; the router then refuses the smaller
// IPIP packets and tells lbd, quoting lbd's IPIP header; lbd must turn that
// into "fragmentation needed" for the client with room for the IPIP
// header (IPVS does), or the upload stalls.
func TestPMTUTUNFourWorkers(t *testing.T) {
	e, l := startPMTU(t, true)
	addr := net.JoinHostPort(e.vip, strconv.Itoa(pmtuPort))
	e.warmStreams(t, addr)

	t.Run("download", func(t *testing.T) {
		setMTU(t, e, l.Router.NS, l.Router.ClientIf, smallMTU)
		defer setMTU(t, e, l.Router.NS, l.Router.ClientIf, 1500)
		before, _ := e.icmpCounters(t)
		var unreach []int
		for _, h := range e.servers {
			unreach = append(unreach, e.unreachablesIn(t, h.NS))
		}
		e.pmtuDownloads(t, addr)
		if after, _ := e.icmpCounters(t); after == before {
			t.Error("lbd passed no ICMP error to a server: the path MTU was not discovered through it")
		}
		for i, h := range e.servers {
			t.Logf("%s received %d ICMP unreachables", h.Name, e.unreachablesIn(t, h.NS)-unreach[i])
		}
	})
	t.Run("upload", func(t *testing.T) {
		setMTU(t, e, l.Router.NS, l.Router.ServerIf, smallMTU)
		defer setMTU(t, e, l.Router.NS, l.Router.ServerIf, 1500)
		unreach := e.unreachablesIn(t, e.client.NS)
		for i := range len(e.servers) {
			t0 := time.Now()
			r := upload(e.ctx, e.client.NS, addr, pmtuBytes, 10*time.Second)
			if r.kind != "" {
				t.Errorf("upload %d of 1 MiB through a %d-byte link to the servers: %v", i, smallMTU, r)
				break // the next would stall the same way
			}
			t.Logf("upload %d: %d bytes in %v", i, r.got, time.Since(t0).Round(time.Millisecond))
		}
		e.icmpCounters(t)
		out, _ := e.topo.Exec(e.client.NS, "ip", "route", "get", l.VIP.String())
		t.Logf("the client received %d ICMP unreachables; its route to the VIP: %s",
			e.unreachablesIn(t, e.client.NS)-unreach, strings.TrimSpace(out))
		// The router's 1280 reached the client as 1280 - 20 (the IPIP header).
		if want := "mtu " + strconv.Itoa(smallMTU-20); !strings.Contains(out, want) {
			t.Errorf("the client's route to the VIP has no %q: lbd did not pass the router's MTU on", want)
		}
	})
	e.stop(t)
}
