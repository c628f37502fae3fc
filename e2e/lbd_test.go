package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestLBDRefusesBadConfig: an invalid configuration is refused before
// anything starts, with a message that names the field.
func TestLBDRefusesBadConfig(t *testing.T) {
	lbd, _, _ := binaries(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"negative weight", `
ports: [{name: wan, device: net_null0, address: 192.0.2.1/24}]
services:
  - {protocol: tcp, vip: 192.0.2.100, port: 80, servers: [{address: 192.0.2.11, weight: -3}]}
`, "services[0].servers[0].weight"},
		{"unknown scheduler", `
ports: [{name: wan, device: net_null0, address: 192.0.2.1/24}]
services:
  - {protocol: tcp, vip: 192.0.2.100, port: 80, scheduler: nope, servers: [{address: 192.0.2.11}]}
`, `services[0].scheduler: unknown scheduler "nope"`},
		{"misspelt key", `
ports: [{name: wan, device: net_null0, adress: 192.0.2.1/24}]
`, "ports[0].adress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, lbd, "-c", path).CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("lbd exited with %v, want exit status 2; output:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "EAL") {
				t.Fatalf("output does not name %q (or DPDK was started):\n%s", tc.want, out)
			}
		})
	}
}

// TestSecondLBDRefusesLiveSocket: a second lbd on the same control socket
// refuses to start and leaves the first one serving.
func TestSecondLBDRefusesLiveSocket(t *testing.T) {
	e := startNAT(t)
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.lbdPath, "-c", e.cfgPath).CombinedOutput()
	if err == nil {
		t.Fatalf("a second lbd started:\n%s", out)
	}
	if !strings.Contains(string(out), "control.socket") || !strings.Contains(string(out), "another lbd") {
		t.Fatalf("the refusal does not say why:\n%s", out)
	}
	if _, err := os.Stat(e.cfg.Socket); err != nil {
		t.Fatalf("the first lbd's socket is gone: %v", err)
	}
	if _, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n"); err != nil {
		t.Fatalf("the first lbd no longer answers: %v", err)
	}
	for _, r := range e.get(t, e.url, 3, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("request %d failed: %s", r.I, r.Err)
		}
	}
	e.stopLBD(t)
}
