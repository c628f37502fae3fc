package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestPortLinkDown: lbd on TAP ports, whose link follows the tap
// interface. The server port's link goes down: within a second lbctl
// --ha-check fails (keepalived's check: the master gives its role up),
// lbctl -L --links and lbctl -L say so, /metrics has it, the log names
// the port, and the console's summary leads with it, in red. Back up: the
// check passes, the console drops it, the change is counted twice, and
// datagrams are balanced through lbd again.
func TestPortLinkDown(t *testing.T) {
	var tlsDir string
	e := startFragNAT(t, false, func(c *harness.Config) {
		tlsDir = filepath.Join(filepath.Dir(c.Socket), "web")
		c.Web = consoleWeb(t, tlsDir, [3]string{"alice", "viewer", "alice-secret"})
	})
	sock := e.lbd.Config.Socket
	haCheck := func() (string, int) {
		out, err := exec.CommandContext(e.ctx, e.lbctl, "--socket", sock, "--ha-check").CombinedOutput()
		code := 0
		if x, ok := err.(*exec.ExitError); ok {
			code = x.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)), code
	}
	waitCheck := func(code int, want string) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			out, got := haCheck()
			if got == code && out == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("lbctl --ha-check: exit %d %q, want exit %d %q", got, out, code, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	lbctl := func(args ...string) string {
		t.Helper()
		out, err := exec.CommandContext(e.ctx, e.lbctl, append([]string{"--socket", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("lbctl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	if per := e.bigRound(t, 53, 10); len(per) != 2 {
		t.Fatalf("before: answers %v, want both servers", per)
	}
	waitCheck(0, "master: every port's link is up")
	console := openConsole(t, e.ctx, e.lbNS, tlsDir)
	console.login("alice", "alice-secret")
	const summary = `document.getElementById("summary")`
	console.poll("the summary, every link up", summary+`.textContent.startsWith("1 service;") && !`+summary+`.classList.contains("failed")`)

	if _, err := e.topo.Exec(e.lbNS, "ip", "link", "set", "dtap1", "down"); err != nil {
		t.Fatal(err)
	}
	waitCheck(1, "master: link down on lan")
	links := lbctl("-L", "--links")
	t.Logf("lbctl -L --links with lan down:\n%s", links)
	if !strings.Contains(links, "\nlan          server  down") || !strings.Contains(links, "\nwan          client  up") {
		t.Errorf("lbctl -L --links:\n%s", links)
	}
	if list := lbctl("-L", "-n"); !strings.Contains(list, "Link down: lan") {
		t.Errorf("lbctl -L does not say lan is down:\n%s", list)
	}
	if m := e.scrape(t); !strings.Contains(m, `dplb_port_link_up{port="lan"} 0`) || !strings.Contains(m, `dplb_port_link_up{port="wan"} 1`) {
		t.Errorf("metrics with lan down lack dplb_port_link_up 0 for lan, 1 for wan")
	}
	if !strings.Contains(e.lbd.Log.String(), "port link down") {
		t.Error("the log does not say lan's link went down")
	}
	console.poll("the summary leads with lan's link down", summary+`.textContent.startsWith("link down: lan; 1 service;") && `+summary+`.classList.contains("failed")`)

	if _, err := e.topo.Exec(e.lbNS, "ip", "link", "set", "dtap1", "up"); err != nil {
		t.Fatal(err)
	}
	waitCheck(0, "master: every port's link is up")
	console.poll("the summary, lan's link back", summary+`.textContent.startsWith("1 service;") && !`+summary+`.classList.contains("failed")`)
	if m := e.scrape(t); !strings.Contains(m, `dplb_port_link_changes_total{port="lan"} 2`) {
		t.Errorf("metrics do not count lan's two changes")
	}
	if per := e.bigRound(t, 53, 10); len(per) != 2 {
		t.Errorf("after the link came back: answers %v, want both servers", per)
	}
	e.stop(t)
}
