package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// bird2 as the router in front of the scale-out directors: eBGP with
// each of them, every path to a VIP merged into one multipath route in
// its kernel table (ECMP). The configuration is the one docs/deploy.md
// shows operators.

const (
	routerASN   = 65000
	directorASN = 65001
	// bgpPassword signs every session (TCP MD5, RFC 2385), as a router
	// facing directors would.
	bgpPassword = "dplb-scale-out"
)

// birdConfig is the router's bird.conf: one passive eBGP session per
// director (lbd dials), import every /32 they send, export nothing, and
// hand equal paths to the kernel as one ECMP route (merge paths).
func birdConfig(routerID netip.Addr, directors []netip.Addr) string {
	var b strings.Builder
	fmt.Fprintf(&b, `log stderr all;
router id %s;
protocol device { scan time 1; }
protocol kernel {
	ipv4 { import none; export all; };
	merge paths on;
}
protocol kernel {
	ipv6 { import none; export all; };
	merge paths on;
}
template bgp director {
	local %s as %d;
	passive on;
	password "%s";
	hold time 9;
	keepalive time 3;
	ipv4 {
		import where net.len = 32;
		export none;
	};
	ipv6 {
		import where net.len = 128;
		export none;
	};
}
`, routerID, routerID, routerASN, bgpPassword)
	for i, d := range directors {
		fmt.Fprintf(&b, "protocol bgp director_%c from director { neighbor %s as %d; }\n", 'a'+i, d, directorASN)
	}
	return b.String()
}

// bird is a running bird and its control socket.
type bird struct {
	ns, socket string
	proc       *topo.Proc
	log        *harness.Buffer
}

// startBird writes the configuration to dir and starts bird in ns.
func startBird(t *testing.T, tp *topo.Topo, ns, dir, config string) *bird {
	t.Helper()
	if _, err := exec.LookPath("bird"); err != nil {
		t.Skip("end-to-end scale-out test: bird not found (run scripts/setup.sh, it installs bird2)")
	}
	path := filepath.Join(dir, "bird.conf")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bird{ns: ns, socket: filepath.Join(dir, "bird.ctl"), log: &harness.Buffer{}}
	if out, err := exec.Command("bird", "-p", "-c", path).CombinedOutput(); err != nil {
		t.Fatalf("bird -p refuses the configuration: %v\n%s\n%s", err, out, config)
	}
	var err error
	b.proc, err = tp.Start(ns, b.log, "bird", "-f", "-c", path, "-s", b.socket, "-P", filepath.Join(dir, "bird.pid"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bird configuration:\n%s\nbird log (last 40 lines):\n%s", config, harness.Tail(b.log.String(), 40))
		}
	})
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := b.cmd("show status"); err == nil {
			return b
		}
	}
	t.Fatalf("bird never answered on %s; its log:\n%s", b.socket, b.log.String())
	return nil
}

// cmd runs one birdc command.
func (b *bird) cmd(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.socket}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

var viaRE = regexp.MustCompile(`via (\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f:]+)`)

// vias lists the next hops in text, sorted.
func vias(text string) []string {
	var out []string
	for _, m := range viaRE.FindAllStringSubmatch(text, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// birdPaths lists the next hops bird holds for prefix (one per director
// announcing it).
func (b *bird) paths(prefix netip.Prefix) ([]string, error) {
	out, err := b.cmd("show", "route", "for", prefix.String())
	if strings.Contains(out, "Network not found") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return vias(out), nil
}

// kernelNextHops lists the next hops of the router's kernel route to
// prefix: what it forwards with (ECMP when more than one).
func kernelNextHops(tp *topo.Topo, ns string, prefix netip.Prefix) ([]string, string, error) {
	family := "-4"
	if prefix.Addr().Is6() {
		family = "-6"
	}
	out, err := tp.Exec(ns, "ip", family, "route", "show", prefix.String())
	return vias(out), out, err
}
