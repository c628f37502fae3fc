package topo_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds namespaces: skipped in -short mode")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	for _, tool := range []string{"ip", "ethtool", "sysctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found (run scripts/setup.sh)", tool)
		}
	}
}

// leftovers lists namespaces and root-namespace links carrying suffix.
func leftovers(t *testing.T, suffix string) []string {
	t.Helper()
	var left []string
	for _, args := range [][]string{{"ip", "netns", "list"}, {"ip", "-o", "link", "show"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, suffix) {
				left = append(left, line)
			}
		}
	}
	return left
}

// TestNATTopology builds the VS/NAT topology without lbd and checks what
// can be checked without it: links up, addresses and routes in place,
// offloads and IPv6 off, the real servers reach each other over the
// bridge, and Teardown leaves nothing behind.
func TestNATTopology(t *testing.T) {
	needRoot(t)
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	nshelper := filepath.Join(t.TempDir(), "nshelper")
	if err := harness.Build(root, "./e2e/nshelper", nshelper); err != nil {
		t.Fatal(err)
	}

	tp := topo.New(t)
	suffix := tp.Suffix()
	t.Cleanup(func() {
		tp.Teardown()
		tp.Teardown() // idempotent
		if left := leftovers(t, suffix); len(left) > 0 {
			t.Errorf("left after Teardown:\n%s", strings.Join(left, "\n"))
		}
	})
	nat, err := topo.BuildNAT(tp, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := harness.StartServers(tp, nat, nshelper, map[string]string{"rs2": ":8080,:21"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	exec1 := func(ns string, args ...string) string {
		t.Helper()
		out, err := tp.Exec(ns, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Links are up; the LB's ends are up and have no IPv4 address.
	for _, c := range []struct{ ns, ifc string }{
		{nat.Client.NS, nat.Client.If}, {nat.LBNS, nat.WANIf}, {nat.LBNS, nat.LANIf},
		{nat.Servers[0].NS, nat.Servers[0].If}, {nat.SwitchNS, nat.Bridge},
	} {
		out := exec1(c.ns, "ip", "-o", "link", "show", "dev", c.ifc)
		if !strings.Contains(out, ",UP") || !strings.Contains(out, "LOWER_UP") {
			t.Errorf("%s in %s is not up: %s", c.ifc, c.ns, out)
		}
	}
	for _, ifc := range []string{nat.WANIf, nat.LANIf} {
		if out := exec1(nat.LBNS, "ip", "-o", "addr", "show", "dev", ifc); strings.Contains(out, "inet") {
			t.Errorf("%s in the LB namespace has an address: %s", ifc, out)
		}
		if out := exec1(nat.LBNS, "ethtool", "-k", ifc); !strings.Contains(out, "tx-checksumming: off") ||
			!strings.Contains(out, "generic-segmentation-offload: off") ||
			!strings.Contains(out, "generic-receive-offload: off") ||
			!strings.Contains(out, "tcp-segmentation-offload: off") {
			t.Errorf("offloads still on for %s:\n%s", ifc, out)
		}
		if out := exec1(nat.LBNS, "sysctl", "-n", "net.ipv6.conf."+ifc+".disable_ipv6"); strings.TrimSpace(out) != "1" {
			t.Errorf("IPv6 not disabled on %s: %q", ifc, out)
		}
	}
	if out := exec1(nat.Client.NS, "ip", "-o", "addr", "show", "dev", nat.Client.If); !strings.Contains(out, "inet 192.0.2.2/24") || strings.Contains(out, "inet6") {
		t.Errorf("client address: %s", out)
	}
	for _, h := range append([]topo.Host{nat.Client}, nat.Servers...) {
		out := exec1(h.NS, "ip", "route", "show", "default")
		want := "default via 192.0.2.1"
		if h.Name != "client" {
			want = "default via 198.51.100.1"
		}
		if !strings.Contains(out, want) {
			t.Errorf("%s: default route %q, want %q", h.Name, out, want)
		}
	}

	// rs1 reaches rs2 over the bridge: ping, then HTTP on both ports.
	exec1(nat.Servers[0].NS, "ping", "-c", "2", "-W", "2", "-i", "0.2", "198.51.100.12")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, url := range []string{"http://198.51.100.12:8080/", "http://198.51.100.12:21/", "http://198.51.100.11:8080/"} {
		res, err := harness.Get(ctx, tp, nat.Servers[0].NS, nshelper, url, 3, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != "" {
				t.Errorf("%s from rs1: %s", url, r.Err)
				continue
			}
			if r.SeenClient() != r.Local {
				t.Errorf("%s: server saw %s, client end is %s", url, r.SeenClient(), r.Local)
			}
		}
		t.Logf("%s from rs1: %q via %s", url, res[0].Body, res[0].Remote)
	}
	// Nothing answers for the gateway or the VIP without lbd.
	res, err := harness.Get(ctx, tp, nat.Client.NS, nshelper, "http://192.0.2.100/", 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err == "" {
		t.Errorf("the VIP answered without lbd: %+v", res[0])
	}
}

// TestTeardownKillsLeftovers: a process that left its starter's process
// group (as vsftpd's session processes do) dies with its namespace.
func TestTeardownKillsLeftovers(t *testing.T) {
	needRoot(t)
	tp := topo.New(t)
	ns, err := tp.AddNS("left")
	if err != nil {
		t.Fatal(err)
	}
	// Its output elsewhere: a pipe it held open would keep its starter's
	// Wait from returning.
	if _, err := tp.Start(ns, &harness.Buffer{}, "sh", "-c", "setsid --fork sleep 300 </dev/null >/dev/null 2>&1"); err != nil {
		t.Fatal(err)
	}
	var pids []string
	for deadline := time.Now().Add(5 * time.Second); len(pids) == 0; time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, p := range strings.Fields(string(out)) {
			if comm, _ := os.ReadFile("/proc/" + p + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
				pids = append(pids, p)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the detached sleep never ran")
		}
	}
	tp.Teardown()
	for _, p := range pids {
		deadline := time.Now().Add(2 * time.Second)
		for {
			b, err := os.ReadFile("/proc/" + p + "/stat")
			if err != nil || strings.Contains(string(b), ") Z ") {
				break // gone, or dead and waiting for init to reap it
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %s outlived its namespace", p)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
