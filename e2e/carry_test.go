package e2e

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestUpgradeKeepsLbctlEdits: edits made with lbctl (a server added, a
// weight, a blocklist) survive lbctl upgrade when lbd.yaml was not
// edited, and a connection to the server lbctl added goes on across it
// (without the running table handed over, the new lbd would know no
// such server and refuse the connection as no_dest).
func TestUpgradeKeepsLbctlEdits(t *testing.T) {
	waitBound(t)
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

	e.upgrade(t)
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

// TestUpgradeAfterServerRemovedFromFile: a real server removed from
// lbd.yaml before lbctl upgrade is gone from the new lbd's table, yet
// the connection it had goes on across the upgrade (drained, as a
// reload would have drained it), and new connections go to the servers
// left.
func TestUpgradeAfterServerRemovedFromFile(t *testing.T) {
	e := startNAT(t)
	e.warmUp(t)
	vip := e.nat.VIP.String() + ":80"
	rs1, rs2 := e.nat.Servers[0].Addr.Addr().String(), e.nat.Servers[1].Addr.Addr().String()
	var held net.Conn
	base := 47000 + int(time.Now().UnixNano()%1000)
	for i := 0; i < 30 && held == nil; i++ {
		c, tr := e.heldConnection(t, vip, base+i)
		if tr.Conn != nil && strings.HasPrefix(tr.Conn.Destination, rs2+":") {
			held = c
		} else {
			c.Close()
		}
	}
	if held == nil {
		t.Fatal("no connection went to the second server")
	}
	defer held.Close()

	cfg := e.cfg
	cfg.Services = append([]harness.Service(nil), cfg.Services...)
	var left []harness.Server
	for _, s := range cfg.Services[0].Servers {
		if s.Address != rs2 {
			left = append(left, s)
		}
	}
	cfg.Services[0].Servers = left
	if err := os.WriteFile(e.cfgPath, []byte(cfg.YAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	e.upgrade(t)
	if table := e.lbctlOK(t, "-S", "-n"); strings.Contains(table, rs2) {
		t.Errorf("the server removed from the file is still in the table:\n%s", table)
	}
	if !strings.Contains(e.log.String(), "to real servers not configured here go on") {
		t.Error("the new lbd did not log that it kept the removed server's connections")
	}
	if got := askHeld(held, bufio.NewReader(held), e.nat.VIP.String()); got != "200 OK" {
		t.Fatalf("the connection to the removed server, after the upgrade: %q", got)
	}
	for _, r := range e.get(t, e.url, 6, 5*time.Second) {
		if r.Err != "" || r.Server() != e.nat.Servers[0].Name {
			t.Errorf("a new connection after the upgrade: %q %q, want the server left (%s)", r.Body, r.Err, rs1)
		}
	}
	held.Close()
	e.stopLBD(t)
}

// upgrade runs lbctl upgrade to the same binary and waits for it.
func (e *natEnv) upgrade(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.lbctl, "--socket", e.cfg.Socket, "upgrade", "--binary", e.lbdPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "lbd upgraded") {
		t.Fatalf("lbctl upgrade: %v: %s", err, out)
	}
}
