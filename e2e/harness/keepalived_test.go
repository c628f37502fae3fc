package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteKeepalived: the shipped example and notify script take this
// director's settings, each in its one place, and the script is valid sh.
func TestWriteKeepalived(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := WriteKeepalived(root, dir, VRRPNode{RouterID: "dplb-b", Interface: "dp-mb-abc123", MgmtVIP: "10.255.0.254/24",
		Priority: 100, LBCtl: "/opt/lbctl", Socket: "/run/x/lbd.sock", SyncID: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "dplb-notify.sh")
	for _, want := range []string{"\trouter_id dplb-b\n", "\tinterface dp-mb-abc123\n", "\tpriority 100\n",
		"\t\t10.255.0.254/24 dev dp-mb-abc123\n", `notify_master "` + script + ` master"`, `notify_stop "` + script + ` stop"`, `script "` + script + ` check"`, "\t\tdplb_lbd\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("keepalived.conf lacks %q:\n%s", want, b)
		}
	}
	s, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nLBCTL=/opt/lbctl\n", "\nSOCKET=/run/x/lbd.sock\n", "\nSYNC_IF=dp-mb-abc123\n", "\nSYNC_ID=7\n",
		"\nLOG=" + filepath.Join(dir, "notify.log") + "\n"} {
		if !strings.Contains(string(s), want) {
			t.Errorf("dplb-notify.sh lacks %q", want)
		}
	}
	if out, err := exec.Command("sh", "-n", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n dplb-notify.sh: %v: %s", err, out)
	}
	// A script that does not run at all says how to use it.
	if out, err := exec.Command("sh", script, "sideways").CombinedOutput(); err == nil || !strings.Contains(string(out), "usage:") {
		t.Errorf("dplb-notify.sh sideways: %v: %s, want a usage error", err, out)
	}
}
