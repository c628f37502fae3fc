package e2e

import (
	"strings"
	"syscall"
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

	killed := time.Now()
	if err := a.lbd.Proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.ka.Kill()
	takeover, err := e.waitARP(b, 15*time.Second)
	if err != nil {
		t.Fatalf("failover: %v", err)
	}
	takeover = time.Since(killed)
	t.Logf("failover to the restarted node b: %v", takeover.Round(time.Millisecond))
	e.keepStreaming(t, fleet, "after failover to the restarted backup", killed, takeover)
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
