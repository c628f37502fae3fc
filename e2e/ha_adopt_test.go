package e2e

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// adoptStreams is TestFailoverKeepsServersOnlyTheMasterHas's count of
// echo streams (rr: half of them to the server the backup lacks).
const adoptStreams = 100

// adoptFNATStreams are its streams to the FullNAT service the backup lacks.
const adoptFNATStreams = 20

// TestFailoverKeepsServersOnlyTheMasterHas: the backup's table lacks a
// real server the master has (an operator removed it there with lbctl,
// or added it on the master alone), and a whole service (the FullNAT one,
// behind the SYN proxy). The backup still holds the connections synced to
// that server, kept as draining (IPVS enters such a synced connection
// without a destination), and those of the service, kept as a removed
// service, so when the master dies they all go on through the backup,
// while its new connections go to the servers it has.
func TestFailoverKeepsServersOnlyTheMasterHas(t *testing.T) {
	e := newHAEnv(t, false)
	a, b := e.nodes[0], e.nodes[1]
	rs1, rs2 := e.ha.Servers[0], e.ha.Servers[1]
	vip := e.ha.VIP.String()
	for _, svc := range [][2]int{{haEchoPort, haEchoPort}, {haHTTPPort, 8080}} {
		args := []string{"-d", "-t", net.JoinHostPort(vip, strconv.Itoa(svc[0])), "-r", net.JoinHostPort(rs2.Addr.Addr().String(), strconv.Itoa(svc[1]))}
		if out, err := harness.LBCtl(e.ctx, e.lbctl, b.lbd.Config.Socket, args...); err != nil {
			t.Fatalf("node b: lbctl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	fnat := net.JoinHostPort(vip, strconv.Itoa(haFNATPort))
	if out, err := harness.LBCtl(e.ctx, e.lbctl, b.lbd.Config.Socket, "-D", "-t", fnat); err != nil {
		t.Fatalf("node b: lbctl -D -t %s: %v: %s", fnat, err, out)
	}

	fnatFleet := startFleet(t, e.ctx, e.ha.Client.NS, fnat, adoptFNATStreams, haInterval)

	fleet := e.startStreams(t, adoptStreams, b) // b holds them all: half to the server it lacks
	listed, err := harness.LBCtl(e.ctx, e.lbctl, b.lbd.Config.Socket, "-L", "-c", "-n")
	if err != nil {
		t.Fatal(err)
	}
	toRS2 := strings.Count(listed, net.JoinHostPort(rs2.Addr.Addr().String(), strconv.Itoa(haEchoPort)))
	t.Logf("node b lists %d connections to %s", toRS2, rs2.Name)
	if toRS2 < adoptStreams/2 {
		t.Errorf("node b lists %d connections to %s, want the %d rr sent there", toRS2, rs2.Name, adoptStreams/2)
	}
	if !strings.Contains(b.lbd.Log.String(), "to real servers not configured here go on") {
		t.Error("node b did not log that it kept connections to a server it lacks")
	}

	killed, takeover := e.killNode(t, a, b)
	t.Logf("failover: node b alone answers ARP for the VIP %v after node a was killed", takeover.Round(time.Millisecond))
	e.checkMaster(t, "after failover", b)
	e.keepStreaming(t, fleet, "after failover", killed, takeover)
	e.keepStreaming(t, fnatFleet, "after failover (the service node b lacks)", killed, takeover)
	t.Logf("node b's drops after failover: %s", e.drops(b))

	// New connections: node b's servers only.
	res, err := harness.Get(e.ctx, e.topo, e.ha.Client.NS, e.helper, e.vipHTTP, 10, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != "" || r.Status != 200 || r.Server() != rs1.Name {
			t.Errorf("a new connection after the failover: status %d from %q (%s), want %s's answer", r.Status, r.Server(), r.Err, rs1.Name)
		}
	}

	maxStall := 2*takeover + 1500*time.Millisecond
	e.endStreams(t, fleet, maxStall, "the failover")
	e.endStreams(t, fnatFleet, maxStall, "the failover (the service node b lacks)")
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	if err := b.ka.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
}
