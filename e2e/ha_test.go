package e2e

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// Active/backup failover: two lbd directors elected by keepalived (VRRP
// on a management link, the shipped deploy/keepalived configuration and
// notify script), connection state synced from master to backup.
//
// A client holds 200 long-lived TCP connections echoing data both ways
// through the VIP. The master (node a) dies at once: kill -9 of its lbd
// and its keepalived, as when the machine dies. The backup (node b) must
// take over within 3 s (keepalived elects it, its lbd answers ARP for the
// VIP, node a's never will again), at least 99% of the connections must
// keep streaming (no reset, no stall longer than the outage allows, no
// corrupted byte) and new connections must balance over both real
// servers. Then node a's lbd starts again as a backup and syncs from node
// b; its keepalived starts and, with the higher priority, takes the
// master role back: the same must hold for the fail back. Last, node a's
// lbd alone dies: its keepalived, alive, must see it (the shipped lbd
// check) and give the role up, node b taking over within 3 s plus the
// check's second, the streams going on.
//
// With VS/NAT, 50 more streams go through a VS/FullNAT service behind the
// SYN proxy (a local address on the servers' segment, which moves with
// the master): their local ports and sequence deltas travel in extended
// sync records, and the same must hold for them. And 30 streams go the
// other way: a real server's own connections to an echo server on the
// client, out through the pair's SNAT rule (an address on the client
// side, which moves with the master too): synced as FullNAT connections
// whose server is their destination, installed under the backup's rule,
// they must go on as well; so must the other server's UDP exchange with
// the client through the rule, the client seeing it from the same
// address and port throughout (udpSNATFlow).
//
// A stall is allowed up to twice the outage plus 1.5 s: TCP doubles its
// retransmission timeout with every loss, so the first retransmission
// to get through can come up to one outage after the path is back.

const (
	haStreams     = 200
	haTakeover    = 3 * time.Second
	haCheck       = time.Second            // keepalived's lbd check: a second between runs
	haChunk       = 256                    // bytes each stream writes ...
	haInterval    = 100 * time.Millisecond // ... this often
	haStreamDead  = 20 * time.Second       // no echo for this long: lost
	haMinSurvival = 0.99
	haFNATStreams = 50
	haSNATStreams = 30
)

func TestFailoverNAT(t *testing.T) { testFailover(t, false) }

func TestFailoverDR(t *testing.T) { testFailover(t, true) }

// haStreams6 is TestFailoverDR6's and TestFailoverNAT6's count of IPv6
// echo streams.
const haStreams6 = 100

// TestFailoverDR6: IPv6 streams across a failover of the VS/DR pair. The
// backup holds their entries, synced with their addresses (kind 5) and
// entered under its own folds; when the master dies, the new master's
// unsolicited NA moves the IPv6 VIP in the router's neighbour cache and
// the streams go on through it.
func TestFailoverDR6(t *testing.T) { testFailover6(t, true) }

// TestFailoverNAT6: the same with the VS/NAT pair and a NAT66 service
// (both it and the NAT64 one below behind the SYN proxy: their entries
// fail over with the proxy's sequence deltas):
// the client on the directors' client link, the IPv6 servers routing
// through a floating IPv6 gateway on the directors' server ports. The new
// master's unsolicited NAs move both the VIP in the client's neighbour
// cache and the gateway in the servers'. Beside them, haNAT64Streams
// streams go to the same VIP through a NAT64 service, to the servers'
// IPv4 addresses from an IPv4 local address on their segment: the backup
// holds them from IPv6 sync records with their IPv4 server and local
// endpoint, the local address answers ARP on the master alone and the new
// master's gratuitous ARP moves it in the servers' caches, and they go on
// as the others do. And haFNAT66Streams go by FullNAT to the servers'
// IPv6 addresses from an IPv6 local address (FNAT66): the backup holds
// them from their own sync records (local address and port; on node b's
// two workers, a steering entry where the port is the other worker's),
// the new master's unsolicited NA moves the local address in the servers'
// neighbour caches, and they go on too.
func TestFailoverNAT6(t *testing.T) { testFailover6(t, false) }

// haNAT64Streams and haFNAT66Streams are TestFailoverNAT6's counts of
// NAT64 and FNAT66 echo streams.
const (
	haNAT64Streams  = 50
	haFNAT66Streams = 30
)

func testFailover6(t *testing.T, dr bool) {
	e := newHAEnvWorkers(t, dr, true, false, false, true)
	a, b := e.nodes[0], e.nodes[1]
	type fleet struct {
		what string
		n    int
		*echoFleet
	}
	fleets := []fleet{{"IPv6 streams", haStreams6, startEchoFleet(e.ctx, e.ha.Client.NS,
		net.JoinHostPort(haVIP6, strconv.Itoa(haEchoPort)), haStreams6, haChunk, haInterval, haStreamDead)}}
	if !dr {
		fleets = append(fleets, fleet{"NAT64 streams", haNAT64Streams, startEchoFleet(e.ctx, e.ha.Client.NS,
			net.JoinHostPort(haVIP6, strconv.Itoa(haNAT64Port)), haNAT64Streams, haChunk, haInterval, haStreamDead)},
			fleet{"FNAT66 streams", haFNAT66Streams, startEchoFleet(e.ctx, e.ha.Client.NS,
				net.JoinHostPort(haVIP6, strconv.Itoa(haFNAT66Port)), haFNAT66Streams, haChunk, haInterval, haStreamDead)})
	}
	live := 0
	for _, f := range fleets {
		defer func() {
			select {
			case <-f.stop:
			default:
				close(f.stop)
			}
		}()
		if len(f.failed) > 0 {
			t.Fatalf("%d of %d %s never connected through the master: %v", len(f.failed), f.n, f.what, f.failed[:min(3, len(f.failed))])
		}
		live += f.n
	}
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	for _, f := range fleets {
		if moving, ended := f.progressSince(t0); moving < len(f.streams) {
			t.Fatalf("before the failover only %d of %d %s move (%d ended)", moving, len(f.streams), f.what, ended)
		}
	}
	have, err := e.waitConnections(b, uint64(live), 10*time.Second)
	t.Logf("node b (backup) holds %d connection entries for %d streams (sync from node a)", have, live)
	if err != nil || have < uint64(live) {
		t.Errorf("node b holds %d connection entries, want the %d streams' (synced from the master) (%v)", have, live, err)
	}
	if e.lip64 != nil {
		if _, err := e.waitOwner(e.lip64, a, time.Second); err != nil {
			t.Errorf("before the failover: %v", err)
		}
	}

	killed, takeover := e.killNode(t, a, b)
	t.Logf("failover: node b alone answers ARP for the IPv4 VIP %v after node a was killed", takeover.Round(time.Millisecond))
	e.checkMaster(t, "after failover", b)
	if e.lip64 != nil {
		if _, err := e.waitOwner(e.lip64, b, time.Second); err != nil {
			t.Errorf("after failover: %v", err)
		}
	}
	for _, f := range fleets {
		e.keepStreaming(t, f.echoFleet, "after failover ("+f.what+")", killed, takeover)
	}
	t.Logf("node b's drops after failover: %s", e.drops(b))
	if !dr {
		if n := e.steered(t, b); n == 0 {
			t.Errorf("node b (two workers) steered no NAT64 server packet: its local ports all fell to their clients' workers?")
		} else {
			t.Logf("node b steered %.0f NAT64 server packets to their connections' workers", n)
		}
	}
	// The router (VS/DR) or the client (VS/NAT) reaches the IPv6 VIP at
	// node b's port now, and with VS/NAT the servers their gateway and
	// NAT64's local address.
	neigh := func(who, ns, family, target string, mac net.HardwareAddr) {
		out, err := e.topo.Exec(ns, "ip", family, "neigh", "show", target)
		t.Logf("the %s's neighbour entry for %s: %s", who, target, strings.TrimSpace(out))
		if err != nil || !strings.Contains(out, "lladdr "+mac.String()) {
			t.Errorf("the %s's neighbour entry for %s is not node b's port (%s): %q, %v", who, target, mac, out, err)
		}
	}
	if dr {
		neigh("router", e.ha.Router.NS, "-6", haVIP6, e.vip.macs[1])
	} else {
		neigh("client", e.ha.Client.NS, "-6", haVIP6, e.vip.macs[1])
		for _, s := range e.ha.Servers {
			neigh("server "+s.Name, s.NS, "-6", haNATFloating6, e.floating.macs[1])
			neigh("server "+s.Name, s.NS, "-4", haLocal64, e.lip64.macs[1])
		}
	}

	maxStall := 2*takeover + 1500*time.Millisecond
	for _, f := range fleets {
		f.finish()
		ty, longest := f.verdict(maxStall)
		if bad := f.stalled(maxStall, 3); len(bad) > 0 {
			e.explainStreams(t, bad)
		}
		n := len(f.streams) + len(f.failed)
		t.Logf("%s: %s (longest gap %v, allowed %v)", f.what, ty.summary(), longest.Round(time.Millisecond), maxStall.Round(time.Millisecond))
		if broken := ty.broken(); float64(n-len(f.failed)-broken) < haMinSurvival*float64(n) {
			t.Errorf("%d of %d %s broke across the failover, want at most %.0f%%", broken+len(f.failed), n, f.what, (1-haMinSurvival)*100)
		}
	}
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	if err := b.ka.Stop(10 * time.Second); err != nil { // node a's was killed
		t.Errorf("node b: %v", err)
	}
}

func testFailover(t *testing.T, dr bool) {
	e := newHAEnvWorkers(t, dr, false, false, false, true)
	a, b := e.nodes[0], e.nodes[1]
	e.checkMaster(t, "at start", a)
	e.checkBackup(t, "at start", b)
	// The shipped configuration's real-time VRRP process may run 200 ms
	// between blocking calls: at keepalived's default 10 ms the kernel
	// killed it on a loaded machine (deploy/keepalived/keepalived.conf).
	for _, n := range e.nodes {
		if soft, hard, err := n.ka.RealtimeLimit(); err != nil || soft != "100000" || hard != "200000" {
			t.Errorf("node %s: the VRRP process's RLIMIT_RTTIME is %s (soft) %s (hard), want 100000 200000 µs: %v", n.Name, soft, hard, err)
		}
	}

	fleet := startEchoFleet(e.ctx, e.ha.Client.NS, e.vipEcho, haStreams, haChunk, haInterval, haStreamDead)
	if len(fleet.failed) > 0 {
		t.Errorf("%d of %d streams never connected through the master: %v", len(fleet.failed), haStreams, fleet.failed[:min(3, len(fleet.failed))])
	}
	fleets := []*echoFleet{fleet}
	if !dr {
		fnat := startEchoFleet(e.ctx, e.ha.Client.NS, e.vipFNAT, haFNATStreams, haChunk, haInterval, haStreamDead)
		if len(fnat.failed) > 0 {
			t.Errorf("%d of %d FullNAT streams never connected through the master: %v", len(fnat.failed), haFNATStreams, fnat.failed[:min(3, len(fnat.failed))])
		}
		fleets = append(fleets, fnat)
		startEchoServers(t, haSNATPort, e.ha.Client.NS)
		snat := startEchoFleet(e.ctx, e.ha.Servers[0].NS, net.JoinHostPort(e.ha.Client.Addr.Addr().String(), strconv.Itoa(haSNATPort)),
			haSNATStreams, haChunk, haInterval, haStreamDead)
		if len(snat.failed) > 0 {
			t.Errorf("%d of %d SNAT streams (a server's own, to the client) never connected through the master: %v", len(snat.failed), haSNATStreams, snat.failed[:min(3, len(snat.failed))])
		}
		fleets = append(fleets, snat)
	}
	var udp *udpSNATFlow // a server's UDP exchange through SNAT, and the source the host sees
	var udpFrom string
	if !dr {
		udp = startUDPSNATFlow(t, e.ha.Servers[1].NS, e.ha.Client.NS, e.ha.Client.Addr.Addr().String(), haSNATPort)
	}
	live := 0
	for _, f := range fleets {
		live += len(f.streams)
		defer func() {
			select {
			case <-f.stop:
			default:
				close(f.stop)
			}
		}()
	}
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	if moving, ended := fleet.progressSince(t0); moving < len(fleet.streams) {
		t.Fatalf("before any failover only %d of %d streams move (%d ended): the pair does not forward", moving, live, ended)
	}
	if udp != nil {
		n, froms := udp.since(t0)
		if n == 0 || len(froms) != 1 || !strings.HasPrefix(froms[0], haSNAT+":") {
			t.Fatalf("before any failover the server's UDP flow through SNAT got %d answers, the host saw it from %v: want %s", n, froms, haSNAT)
		}
		udpFrom = froms[0]
		live++ // its entry, synced too
	}
	if have, err := e.connections(a); err != nil || have < uint64(live) {
		t.Errorf("node a (master) holds %d connection entries, want the %d streams' at least (%v)", have, live, err)
	}
	have, err := e.waitConnections(b, uint64(live), 10*time.Second)
	t.Logf("node b (backup) holds %d connection entries for %d streams (sync from node a)", have, live)
	if err != nil || have < uint64(live) {
		t.Errorf("node b holds %d connection entries, want the %d streams' (synced from the master) (%v)", have, live, err)
	}
	if udp != nil {
		// The UDP mapping itself: lbd hands out local ports in order, so
		// a backup without it could map the flow to the same port again
		// and the host would see no change.
		host := net.JoinHostPort(e.ha.Client.Addr.Addr().String(), strconv.Itoa(haSNATPort))
		out, err := harness.LBCtl(e.ctx, e.lbctl, b.lbd.Config.Socket, "-L", "-n", "-c")
		if err != nil || !strings.Contains(out, " "+host+" ") || !strings.Contains(out, "from "+udpFrom) {
			t.Errorf("node b does not hold the server's UDP mapping to %s from %s (%v):\n%s", host, udpFrom, err, out)
		}
	}

	// Failover: the master's machine dies.
	killed, takeover := e.killNode(t, a, b)
	t.Logf("failover: node b alone answers ARP for the VIP %v after node a was killed", takeover.Round(time.Millisecond))
	if takeover > haTakeover {
		t.Errorf("failover took %v, want at most %v", takeover.Round(time.Millisecond), haTakeover)
	}
	e.checkMaster(t, "after failover", b)
	if log := b.ka.NotifyLog(); !strings.Contains(log, "keepalived: master") {
		t.Errorf("node b's notify script never ran for master; its log:\n%s", log)
	}
	for _, f := range fleets {
		e.keepStreaming(t, f, "after failover", killed, takeover)
	}
	if udp != nil {
		checkUDPSNAT(t, udp, "after failover", killed, takeover, udpFrom)
	}
	t.Logf("node b's drops after failover: %s", e.drops(b))
	if !dr {
		if n := e.steered(t, b); n == 0 {
			t.Errorf("node b (two workers) steered no FullNAT server packet: its local ports all fell to their clients' workers?")
		} else {
			t.Logf("node b steered %.0f FullNAT server packets to their connections' workers", n)
		}
	}
	e.balance(t, "after failover", 20)

	// Node a comes back: its lbd as a backup that syncs from node b.
	e.startLBD(t, a)
	live = 0
	for _, f := range fleets {
		live += liveStreams(f)
	}
	have, err = e.waitConnections(a, uint64(live), 30*time.Second)
	t.Logf("restarted node a (backup) holds %d connection entries for %d live streams (sync from node b)", have, live)
	if err != nil || have < uint64(live) {
		t.Errorf("restarted node a holds %d connection entries, want the %d live streams' (synced from node b) (%v)", have, live, err)
	}

	// Fail back: node a's keepalived, priority 150, preempts node b's 100.
	switched := time.Now()
	e.startKeepalived(t, a, 150)
	failback, err := e.waitARP(a, 15*time.Second)
	if err != nil {
		t.Fatalf("fail back: %v", err)
	}
	t.Logf("fail back: node a alone answers ARP for the VIP %v after its keepalived started", failback.Round(time.Millisecond))
	if failback > haTakeover {
		t.Errorf("fail back took %v, want at most %v", failback.Round(time.Millisecond), haTakeover)
	}
	e.checkMaster(t, "after fail back", a)
	e.checkBackup(t, "after fail back", b)
	for _, f := range fleets {
		e.keepStreaming(t, f, "after fail back", switched, failback)
	}
	if udp != nil {
		checkUDPSNAT(t, udp, "after fail back", switched, failback, udpFrom)
	}
	t.Logf("node a's drops after fail back: %s", e.drops(a))
	e.balance(t, "after fail back", 20)

	// node a's lbd alone dies: its keepalived lives on and must give the
	// master role up when its lbd check fails twice (a second apart).
	crashed := time.Now()
	if err := a.lbd.Proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := e.waitARP(b, 15*time.Second); err != nil {
		t.Fatalf("after node a's lbd died: %v", err)
	}
	crash := time.Since(crashed)
	t.Logf("node a's lbd died, its keepalived lives: node b alone answers ARP for the VIP %v later", crash.Round(time.Millisecond))
	if crash > haTakeover+haCheck {
		t.Errorf("node b took over %v after node a's lbd died, want at most %v (%v and keepalived's lbd check)",
			crash.Round(time.Millisecond), haTakeover+haCheck, haTakeover)
	}
	e.checkMaster(t, "after node a's lbd died", b)
	if s := a.ka.State(); s != "FAULT" {
		t.Errorf("node a's keepalived is in state %q after its lbd died, want FAULT", s)
	}
	for _, f := range fleets {
		e.keepStreaming(t, f, "after node a's lbd died", crashed, crash)
	}
	if udp != nil {
		checkUDPSNAT(t, udp, "after node a's lbd died", crashed, crash, udpFrom)
	}
	t.Logf("node b's drops after node a's lbd died: %s", e.drops(b))

	maxStall := 2*max(takeover, failback, crash) + 1500*time.Millisecond
	for i, f := range fleets {
		f.finish()
		ty, longest := f.verdict(maxStall)
		if bad := f.stalled(maxStall, 3); len(bad) > 0 {
			e.explainStreams(t, bad)
		}
		what := []string{"streams", "FullNAT streams", "SNAT streams"}[i]
		n := len(f.streams) + len(f.failed)
		t.Logf("%s: %s (longest gap %v, allowed %v)", what, ty.summary(), longest.Round(time.Millisecond), maxStall.Round(time.Millisecond))
		if broken := ty.broken(); float64(n-len(f.failed)-broken) < haMinSurvival*float64(n) {
			t.Errorf("%d of %d %s broke across failover and fail back, want at most %.0f%%", broken+len(f.failed), n, what, (1-haMinSurvival)*100)
		}
	}
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	for _, n := range []*haNode{a, b} {
		if err := n.ka.Stop(10 * time.Second); err != nil {
			t.Errorf("node %s: %v", n.Name, err)
		}
	}
}

// keepStreaming waits until the outage that began at since and lasted
// outage is surely over for TCP, then checks that at least 99% of the
// streams have had an echo since.
func (e *haEnv) keepStreaming(t *testing.T, f *echoFleet, when string, since time.Time, outage time.Duration) {
	t.Helper()
	recovered := since.Add(2*outage + 1500*time.Millisecond)
	time.Sleep(time.Until(recovered) + time.Second)
	moving, ended := f.progressSince(recovered)
	n := len(f.streams) + len(f.failed)
	t.Logf("%s: %d of %d streams moving, %d ended", when, moving, n, ended)
	if float64(moving) < haMinSurvival*float64(n) {
		t.Errorf("%s: only %d of %d streams moving %v after the switch (%d ended)", when, moving, n,
			time.Since(since).Round(time.Millisecond), ended)
		e.explainQuiet(t, f.quiet(recovered, 3))
	}
}

// liveStreams counts the streams that have not ended.
func liveStreams(f *echoFleet) int {
	_, ended := f.progressSince(time.Now())
	return len(f.streams) - ended
}

// startStreams starts n echo streams to the VIP's echo service through
// the master, checks that all of them move, and that backup holds their
// entries (synced); the streams stop when the test ends.
func (e *haEnv) startStreams(t *testing.T, n int, backup *haNode) *echoFleet {
	t.Helper()
	fleet := startFleet(t, e.ctx, e.ha.Client.NS, e.vipEcho, n, haInterval)
	t0 := time.Now()
	time.Sleep(2 * time.Second)
	if moving, ended := fleet.progressSince(t0); moving < n {
		t.Fatalf("at the start only %d of %d streams move (%d ended)", moving, n, ended)
	}
	have, err := e.waitConnections(backup, uint64(n), 10*time.Second)
	t.Logf("node %s (backup) holds %d connection entries for %d streams", backup.Name, have, n)
	if err != nil || have < uint64(n) {
		t.Errorf("node %s holds %d connection entries, want the %d streams' (synced from the master) (%v)", backup.Name, have, n, err)
	}
	return fleet
}

// endStreams stops the streams and checks that at least 99% of them
// never stalled longer than maxStall nor broke.
func (e *haEnv) endStreams(t *testing.T, fleet *echoFleet, maxStall time.Duration, across string) {
	t.Helper()
	fleet.finish()
	ty, longest := fleet.verdict(maxStall)
	if bad := fleet.stalled(maxStall, 3); len(bad) > 0 {
		e.explainStreams(t, bad)
	}
	n := len(fleet.streams) + len(fleet.failed)
	t.Logf("streams: %s (longest gap %v, allowed %v)", ty.summary(), longest.Round(time.Millisecond), maxStall.Round(time.Millisecond))
	if broken := ty.broken(); float64(n-len(fleet.failed)-broken) < haMinSurvival*float64(n) {
		t.Errorf("%d of %d streams broke across %s, want at most %.0f%%", broken+len(fleet.failed), n, across, (1-haMinSurvival)*100)
	}
}
