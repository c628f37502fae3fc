package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
)

// TestRestartedBackupPullsTable: a restarted backup director pulls the
// whole connection table from its sync peer before it forwards. Two lbd
// nodes elected by keepalived (VS/NAT), 200 echo streams through the
// master (node a). Node b's lbd is stopped and started again (no state
// file): at once, before the master's periodic sync could have sent the
// streams again, it must hold an entry for every stream, pulled in bulk.
// Then the master dies: node b takes over with the pulled table and the
// streams go on.
func TestRestartedBackupPullsTable(t *testing.T) {
	e := newHAEnv(t, false)
	a, b := e.nodes[0], e.nodes[1]
	fleet := startEchoFleet(e.ctx, e.ha.Client.NS, e.vipEcho, haStreams, haChunk, haInterval, haStreamDead)
	if len(fleet.failed) > 0 {
		t.Errorf("%d of %d streams never connected through the master: %v", len(fleet.failed), haStreams, fleet.failed[:min(3, len(fleet.failed))])
	}
	defer func() {
		select {
		case <-fleet.stop:
		default:
			close(fleet.stop)
		}
	}()
	time.Sleep(2 * time.Second)
	live := liveStreams(fleet)

	if err := b.lbd.Stop(15 * time.Second); err != nil {
		t.Fatalf("stopping node b: %v", err)
	}
	e.startLBD(t, b)
	have, err := e.connections(b)
	resp, lerr := harnessList(e, b)
	handover := ""
	if lerr == nil && resp.Info != nil {
		handover = resp.Info.Handover
	}
	t.Logf("restarted node b holds %d connection entries for %d live streams as it answers; handover: %s", have, live, handover)
	if err != nil || have < uint64(live) {
		t.Errorf("restarted node b holds %d connection entries as it starts, want the %d live streams' (pulled from node a) (%v)", have, live, err)
	}
	if !strings.Contains(handover, "whole table pulled") {
		t.Errorf("restarted node b says %q of its start, want the whole table pulled from its sync peer", handover)
	}

	killed, takeover := e.killNode(t, a, b)
	t.Logf("failover to the restarted node b: %v", takeover.Round(time.Millisecond))
	e.keepStreaming(t, fleet, "after failover to the restarted backup", killed, takeover)
	t.Logf("node b's drops after the failover: %s", e.drops(b))
	fleet.finish()
	ty, longest := fleet.verdict(2*takeover + 1500*time.Millisecond)
	t.Logf("streams: %s (longest gap %v)", ty.summary(), longest.Round(time.Millisecond))
	if broken := ty.broken(); float64(haStreams-len(fleet.failed)-broken) < haMinSurvival*haStreams {
		t.Errorf("%d of %d streams broke across the restart of the backup and the failover to it", broken+len(fleet.failed), haStreams)
	}
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	if err := b.ka.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
}

func harnessList(e *haEnv, n *haNode) (api.Response, error) {
	return harness.LBCtlJSON(e.ctx, e.lbctl, n.lbd.Config.Socket)
}

// TestUpgradeMasterKeepsItsRole: lbctl upgrade of the master of an HA
// pair under 200 echo streams. keepalived made it master and started its
// master sync daemon at run time, and will not say so again: the new lbd
// must take both over from the handover (its configuration says backup),
// so it alone still answers ARP for the VIP, the streams go on, and
// connections opened after the upgrade still reach the backup by sync.
func TestUpgradeMasterKeepsItsRole(t *testing.T) {
	e := newHAEnv(t, false)
	a, b := e.nodes[0], e.nodes[1]
	fleet := startEchoFleet(e.ctx, e.ha.Client.NS, e.vipEcho, haStreams, haChunk, haInterval, haStreamDead)
	defer func() {
		select {
		case <-fleet.stop:
		default:
			close(fleet.stop)
		}
	}()
	time.Sleep(2 * time.Second)
	if s := e.haState(a); s != "master" {
		t.Fatalf("node a is %q before the upgrade, want master", s)
	}

	t0 := time.Now()
	out, err := exec.CommandContext(e.ctx, e.lbctl, "--socket", a.lbd.Config.Socket, "upgrade", "--binary", e.lbdPath).CombinedOutput()
	if err != nil {
		t.Fatalf("lbctl upgrade: %v: %s", err, out)
	}
	gap := time.Since(t0)
	t.Logf("lbctl upgrade (%v):\n%s", gap.Round(time.Millisecond), strings.TrimSpace(string(out)))
	if s := e.haState(a); s != "master" {
		t.Errorf("node a is %q after the upgrade, want master (as keepalived left it)", s)
	}
	daemons, err := harness.LBCtl(e.ctx, e.lbctl, a.lbd.Config.Socket, "-L", "--daemon")
	if err != nil || !strings.Contains(daemons, "master sync daemon") || strings.Contains(daemons, "backup sync daemon") {
		t.Errorf("node a's sync daemons after the upgrade: %q (%v), want the master's alone, as keepalived left them", daemons, err)
	}
	if _, err := e.waitARP(a, 5*time.Second); err != nil {
		t.Errorf("after the upgrade: %v", err)
	}
	e.keepStreaming(t, fleet, "after the master's upgrade", t0, gap)

	// Connections opened after the upgrade reach the backup by sync.
	live := liveStreams(fleet)
	more := startEchoFleet(e.ctx, e.ha.Client.NS, e.vipEcho, 50, haChunk, haInterval, haStreamDead)
	defer close(more.stop)
	have, err := e.waitConnections(b, uint64(live+len(more.streams)), 15*time.Second)
	t.Logf("node b holds %d entries for %d streams (%d opened after the upgrade)", have, live+len(more.streams), len(more.streams))
	if err != nil || have < uint64(live+len(more.streams)) {
		t.Errorf("node b holds %d entries, want %d: the upgraded master does not sync (%v)", have, live+len(more.streams), err)
	}
	fleet.finish()
	ty, longest := fleet.verdict(2*gap + 1500*time.Millisecond)
	t.Logf("streams: %s (longest gap %v)", ty.summary(), longest.Round(time.Millisecond))
	if broken := ty.broken(); broken > 0 {
		t.Errorf("%d of %d streams broke across the master's upgrade", broken, haStreams)
	}
}
