package e2e

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestUpgradeKeepsLbctlEdits: edits made with lbctl (a server added, a
// weight, a blocklist) survive lbctl upgrade when lbd.yaml was not
// edited, and a connection to the server lbctl added goes on across it
// (without the running table handed over, the new lbd would know no
// such server and refuse the connection as no_dest).
func TestUpgradeKeepsLbctlEdits(t *testing.T) {
	e := startNATWith(t, natOptions{listen: map[string]string{"rs2": ":8080,:8081"}})
	e.warmUp(t)
	vip := e.nat.VIP.String() + ":80"
	rs2 := e.nat.Servers[1].Addr.Addr().String()
	e.lbctlOK(t, "-a", "-t", vip, "-r", rs2+":8081", "-m", "-w", "5")
	e.lbctlOK(t, "-e", "-t", vip, "-r", e.nat.Servers[0].Addr.Addr().String()+":8080", "-w", "2")
	e.lbctlOK(t, "--add-blklst", "-t", vip, "-k", "198.18.0.0/15")
	var held net.Conn
	base := 46000 + int(time.Now().UnixNano()%1000)
	for i := 0; i < 30 && held == nil; i++ {
		c, tr := e.heldConnection(t, vip, base+i)
		if tr.Conn != nil && tr.Conn.Destination == rs2+":8081" {
			held = c
		} else {
			c.Close()
		}
	}
	if held == nil {
		t.Fatal("no connection went to the server lbctl added")
	}
	defer held.Close()
	before := e.lbctlOK(t, "-S", "-n")

	ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.lbctl, "--socket", e.cfg.Socket, "upgrade", "--binary", e.lbdPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "lbd upgraded") {
		t.Fatalf("lbctl upgrade: %v: %s", err, out)
	}
	if after := e.lbctlOK(t, "-S", "-n"); after != before {
		t.Errorf("the table after the upgrade:\n%s\nwant the one lbctl made:\n%s", after, before)
	}
	if !strings.Contains(e.log.String(), "kept the running table of the lbd before") {
		t.Error("the new lbd did not log that it kept lbctl's edits")
	}
	if got := askHeld(held, bufio.NewReader(held), e.nat.VIP.String()); got != "200 OK" {
		t.Fatalf("the connection to the server lbctl added, after the upgrade: %q", got)
	}
	held.Close()
	e.stopLBD(t)
}
