package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// lbctlRun runs lbctl with stdin and returns stdout, stderr and the exit code.
func (e *natEnv) lbctlRun(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.lbctl, append([]string{"--socket", e.cfg.Socket}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("lbctl %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), code
}

// lbctlOK runs lbctl and fails the test unless it exits 0.
func (e *natEnv) lbctlOK(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := e.lbctlRun(t, "", args...)
	if code != 0 {
		t.Fatalf("lbctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// servedBy sends n requests to url and counts the answers per server; every
// request must succeed.
func (e *natEnv) servedBy(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, r := range e.get(t, url, n, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("%s: request %d failed: %s", url, r.I, r.Err)
			continue
		}
		got[r.Server()]++
	}
	return got
}

// TestLBCtlDrivesLBD edits a running lbd with lbctl while traffic flows:
// a service and servers added, a weight changed, a server removed, save,
// clear, restore, reload by lbctl and by SIGHUP, and refusals.
func TestLBCtlDrivesLBD(t *testing.T) {
	e := startNAT(t)
	e.warmUp(t)
	vip := e.nat.VIP.String()
	s1, s2 := e.nat.Servers[0], e.nat.Servers[1]
	rip1, rip2 := s1.Addr.Addr().String()+":8080", s2.Addr.Addr().String()+":8080"
	svc := vip + ":81"
	url81 := "http://" + svc + "/"

	// A new service with two servers, added by lbctl, serves at once.
	e.lbctlOK(t, "-A", "-t", svc, "-s", "rr")
	e.lbctlOK(t, "-a", "-t", svc, "-r", rip1, "-m", "-w", "1")
	e.lbctlOK(t, "-a", "-t", svc, "-r", rip2, "-m")
	if got := e.servedBy(t, url81, 10); got[s1.Name] != 5 || got[s2.Name] != 5 {
		t.Errorf("answers on :81 after -A/-a: %v, want 5 each", got)
	}

	// Refusals: exit 1, one line naming the argument, nothing changed.
	before := e.lbctlOK(t, "-S", "-n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-A", "-t", svc}, "lbctl: -A -t " + svc + ": service already exists\n"},
		{[]string{"-a", "-t", svc, "-r", rip1}, "lbctl: -a -t " + svc + " -r " + rip1 + ": server already exists\n"},
		{[]string{"-d", "-t", vip + ":82", "-r", rip1}, "lbctl: -d -t " + vip + ":82: service does not exist\n"},
		{[]string{"-e", "-t", svc, "-r", "198.51.100.250:8080", "-w", "2"}, "lbctl: -e -t " + svc + " -r 198.51.100.250:8080: server does not exist\n"},
	} {
		_, errOut, code := e.lbctlRun(t, "", tc.args...)
		if code != 1 || errOut != tc.want {
			t.Errorf("lbctl %s: exit %d, stderr %q; want exit 1, %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
	if _, errOut, code := e.lbctlRun(t, "", "-a", "-t", svc, "-r", rip1, "-w", "-1"); code != 2 || !strings.HasPrefix(errOut, "lbctl: -w -1: weight is negative\n") {
		t.Errorf("negative weight: exit %d, stderr %q; want a usage error", code, errOut)
	}
	if after := e.lbctlOK(t, "-S", "-n"); after != before {
		t.Errorf("refusals changed the rules:\n%s\nwas:\n%s", after, before)
	}

	// Weight 0 and removal while requests keep flowing: none fails.
	var wg sync.WaitGroup
	var during map[string]int
	wg.Go(func() {
		during = map[string]int{}
		for _, r := range e.get(t, url81, 60, 5*time.Second) {
			if r.Err != "" {
				t.Errorf("request %d during the edits failed: %s", r.I, r.Err)
			}
			during[r.Server()]++
		}
	})
	time.Sleep(200 * time.Millisecond)
	e.lbctlOK(t, "-e", "-t", svc, "-r", rip1, "-w", "0")
	wg.Wait()
	if during[s2.Name] == 0 {
		t.Errorf("answers while %s went to weight 0: %v", s1.Name, during)
	}
	_, errOut, code := e.lbctlRun(t, "", "-a", "-t", svc, "-r", rip1)
	if code != 1 || !strings.Contains(errOut, "server already exists") {
		t.Errorf("re-adding an existing server: exit %d %q", code, errOut)
	}
	e.lbctlOK(t, "-e", "-t", svc, "-r", rip1, "-w", "0")
	if got := e.servedBy(t, url81, 6); got[s2.Name] != 6 {
		t.Errorf("answers with %s at weight 0: %v, want all from %s", s1.Name, got, s2.Name)
	}
	wg.Go(func() {
		for _, r := range e.get(t, url81, 40, 5*time.Second) {
			if r.Err != "" {
				t.Errorf("request %d while a server was removed failed: %s", r.I, r.Err)
			}
		}
	})
	time.Sleep(200 * time.Millisecond)
	e.lbctlOK(t, "-e", "-t", svc, "-r", rip1, "-w", "1")
	e.lbctlOK(t, "-d", "-t", svc, "-r", rip2)
	wg.Wait()
	if got := e.servedBy(t, url81, 4); got[s1.Name] != 4 {
		t.Errorf("answers after removing %s: %v, want all from %s", s2.Name, got, s1.Name)
	}

	// -Z zeroes the listing's counters.
	e.lbctlOK(t, "-Z")
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.Services {
		if s.Stats.Conns != 0 {
			t.Errorf("after -Z: %s:%d has %d connections", s.VIP, s.Port, s.Stats.Conns)
		}
	}

	// Save, clear, restore: the same rules, and traffic again.
	saved := e.lbctlOK(t, "-S", "-n")
	list := e.lbctlOK(t, "-L", "-n")
	e.lbctlOK(t, "-C")
	if got := e.lbctlOK(t, "-S", "-n"); got != "" {
		t.Errorf("rules after -C: %q", got)
	}
	if _, errOut, code := e.lbctlRun(t, saved, "-R"); code != 0 {
		t.Fatalf("lbctl -R: exit %d: %s", code, errOut)
	}
	if got := e.lbctlOK(t, "-S", "-n"); got != saved {
		t.Errorf("rules after restore:\n%s\nsaved:\n%s", got, saved)
	}
	if got := e.lbctlOK(t, "-L", "-n"); got != list {
		t.Errorf("listing after restore:\n%s\nbefore:\n%s", got, list)
	}
	if got := e.servedBy(t, url81, 4); got[s1.Name] != 4 {
		t.Errorf("answers after restore: %v", got)
	}

	// A hand-written ipvsadm file, one line of which fails: nothing applied.
	hand := "-A -t " + vip + ":82 -s rr\n-a -t " + vip + ":82 -r " + rip1 + " -m -w 1\n-a -t " + vip + ":82 -r " + rip1 + " -m -w 1\n"
	_, errOut, code = e.lbctlRun(t, hand, "-R")
	if want := "lbctl: line 3: -a -t " + vip + ":82 -r " + rip1 + ": server already exists\n"; code != 1 || errOut != want {
		t.Errorf("restore with a bad line: exit %d %q, want 1 %q", code, errOut, want)
	}
	if got := e.lbctlOK(t, "-S", "-n"); got != saved {
		t.Errorf("a refused restore changed the rules:\n%s", got)
	}

	// reload: back to the file (VIP:80 only); an invalid file changes nothing.
	e.lbctlOK(t, "reload")
	if got := e.lbctlOK(t, "-S", "-n"); strings.Contains(got, ":81") || !strings.Contains(got, "-A -t "+vip+":80 -s rr") {
		t.Errorf("rules after reload:\n%s", got)
	}
	good, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	rules := e.lbctlOK(t, "-S", "-n")
	bad := strings.Replace(string(good), "weight: 1}", "weight: -1}", 1)
	if err := os.WriteFile(e.cfgPath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = e.lbctlRun(t, "", "reload")
	if code != 1 || !strings.Contains(errOut, "services[0].servers[0].weight: -1 is out of range 0..65535; nothing changed") {
		t.Errorf("reload of an invalid file: exit %d %q", code, errOut)
	}
	if got := e.lbctlOK(t, "-S", "-n"); got != rules {
		t.Errorf("an invalid reload changed the rules:\n%s", got)
	}
	for _, r := range e.get(t, e.url, 4, 5*time.Second) {
		if r.Err != "" {
			t.Errorf("request after the refused reload failed: %s", r.Err)
		}
	}

	// SIGHUP reloads as lbctl reload does.
	cfg := e.cfg
	cfg.Services = append([]harness.Service(nil), cfg.Services...)
	cfg.Services[0].Servers = append([]harness.Server(nil), cfg.Services[0].Servers...)
	cfg.Services[0].Servers[1].Weight = 3
	if err := os.WriteFile(e.cfgPath, []byte(cfg.YAML()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.lbd.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	want := "-a -t " + vip + ":80 -r " + rip2 + " -m -w 3\n"
	deadline := time.Now().Add(5 * time.Second)
	for got := ""; !strings.Contains(got, want); got = e.lbctlOK(t, "-S", "-n") {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload: rules\n%s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.stopLBD(t)
}
