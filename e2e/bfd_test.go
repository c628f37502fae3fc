package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// serverBFDConfig is a real server's bird.conf: a BFD session with lbd's
// management address, as an operator would run bird (or FRR's bfdd) on a
// server that lbd checks by BFD.
func serverBFDConfig(server, lbd string) string {
	return serverBFDAuthConfig(server, lbd, "")
}

// serverBFDAuthConfig is serverBFDConfig with bird's interface options
// auth (its authentication and password) added.
func serverBFDAuthConfig(server, lbd, auth string) string {
	// A router id is an IPv4 address, whatever the session's family.
	return fmt.Sprintf(`log stderr all;
router id 192.0.2.250;
protocol device { scan time 1; }
protocol bfd {
	interface "*" { interval 100 ms; multiplier 3; %s };
	neighbor %s local %s;
}
`, auth, lbd, server)
}

// TestHealthBFD: a bfd check (keepalived's BFD_CHECK) of rs1, with bird's
// BFD on rs1 as the server's side; rs2 is not checked. With no BFD on
// rs1 yet, rs1 goes down once the session's start-up grace ends; bird
// started brings the session up on both sides and rs1 back; bird killed
// (no AdminDown: a dead server) takes rs1 out after the detection time,
// and the requests go to rs2; bird started again brings rs1 back; lbd
// stopping says AdminDown, and bird's session goes down at once.
func TestHealthBFD(t *testing.T) {
	e, rs1NS, lbdAddr := startBFD(t, "{type: bfd, bfd_interval: 100ms, bfd_multiplier: 50, interval: 200ms, timeout: 100ms, rise: 1, fall: 1}")
	rs1 := e.cfg.Services[0].Servers[0].Address
	if reason := waitHealth(t, e, rs1, "down"); reason != "bfd: no answer from the server" {
		t.Errorf("rs1 without BFD: reason %q", reason)
	}

	b := startBird(t, e.topo, rs1NS, t.TempDir(), serverBFDConfig(rs1, lbdAddr))
	waitHealth(t, e, rs1, "up")
	out, err := b.cmd("show", "bfd", "sessions")
	if err != nil || !strings.Contains(out, lbdAddr) || !strings.Contains(out, "Up") {
		t.Fatalf("rs1 up, but bird's BFD sessions say (%v):\n%s", err, out)
	}
	e.warmUp(t)
	if got := servedBy(t, e, "rs1's session up", 20); got["rs1"] == 0 || got["rs2"] == 0 {
		t.Fatalf("rs1's session up: %v, want requests on both", got)
	}

	if err := b.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if reason := waitHealth(t, e, rs1, "down"); reason != "bfd: session Down: control detection time expired" {
		t.Errorf("rs1 down: reason %q", reason)
	}
	t.Logf("rs1 down %s after bird died (detection 300ms, a probe every 200ms)", time.Since(start).Round(time.Millisecond))
	if got := servedBy(t, e, "rs1's bird dead", 20); got["rs2"] != 20 {
		t.Fatalf("rs1's bird dead: %v, want every request on rs2", got)
	}

	b = startBird(t, e.topo, rs1NS, t.TempDir(), serverBFDConfig(rs1, lbdAddr))
	waitHealth(t, e, rs1, "up")

	// lbd stopping says AdminDown: bird's session is down at once, not
	// after the 5 s (50 x 100ms) bfd_multiplier asks it to wait.
	e.stopLBD(t)
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out, err := b.cmd("show", "bfd", "sessions")
		if err == nil && strings.Contains(out, lbdAddr) && !strings.Contains(out, "Up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after lbd stopped, bird's BFD sessions say (%v):\n%s", err, out)
		}
	}
}

// startBFD runs lbd with a management link and the service's rs1
// checked by health (rs2 unchecked), and returns rs1's namespace and
// lbd's management address, the BFD session's far end for bird on rs1.
func startBFD(t *testing.T, health string) (e *natEnv, rs1NS, lbdAddr string) {
	t.Helper()
	e = startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			addMgmtLink(t, tp, nat)
			rs1NS = nat.Servers[0].NS
		},
		configure: func(c *harness.Config) {
			s := &c.Services[0]
			s.Health = health
			s.Servers[1].Health = "{type: none, start_down: false}"
		},
	})
	return e, rs1NS, strings.Split(mgmtAddr, "/")[0]
}

// TestHealthBFD6: the bfd check over IPv6: an IPv6 service's rs1 checked
// by BFD from the LB host's IPv6 management address, bird's BFD on rs1
// answering. Its session comes up, and bird killed takes rs1 out after
// the detection time.
func TestHealthBFD6(t *testing.T) {
	var rs1NS string
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			rs1NS = nat.Servers[0].NS
		},
		configure: func(c *harness.Config) {
			c.WANAddr6, c.LANAddr6 = v6WAN+"/64", v6LAN+"/64"
			svc := harness.Service{VIP: v6VIP, Port: 80, Scheduler: "rr",
				Health: "{type: bfd, bfd_interval: 100ms, interval: 200ms, timeout: 100ms, rise: 1, fall: 1, start_down: true}"}
			for i := range 2 {
				svc.Servers = append(svc.Servers, harness.Server{Address: v6Server(i), Port: 8080, Weight: 1})
			}
			svc.Servers[1].Health = "{type: none, start_down: false}"
			c.Services = append(c.Services, svc)
		},
	})
	b := startBird(t, e.topo, rs1NS, t.TempDir(), serverBFDConfig(v6Server(0), v6Mgmt))
	// start_down: up only once the session is.
	waitHealth6(t, e, 80, v6Server(0), "up")
	out, err := b.cmd("show", "bfd", "sessions")
	if err != nil || !strings.Contains(out, v6Mgmt) || !strings.Contains(out, "Up") {
		t.Fatalf("rs1 up, but bird's BFD sessions say (%v):\n%s", err, out)
	}
	if err := b.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitHealth6(t, e, 80, v6Server(0), "down")
	if rs := server6(t, e, 80, v6Server(0)); rs == nil || rs.HealthReason != "bfd: session Down: control detection time expired" {
		t.Errorf("rs1 down: %+v, want the detection time's reason", rs)
	}
	e.stopLBD(t)
}

// TestHealthBFDAuth: a bfd check with meticulous keyed SHA1
// authentication (bfd_auth) against bird's BFD on rs1. With another
// password on bird's side rs1 stays down and the reason says the digests
// differ; with the same one the session comes up on both sides.
func TestHealthBFDAuth(t *testing.T) {
	e, rs1NS, lbdAddr := startBFD(t, "{type: bfd, bfd_interval: 100ms, interval: 200ms, timeout: 100ms, rise: 1, fall: 1, start_down: true, "+
		"bfd_auth: meticulous-keyed-sha1, bfd_key_id: 3, bfd_password: dplb-bfd}")
	rs1 := e.cfg.Services[0].Servers[0].Address
	bird := func(password string) string {
		return fmt.Sprintf("authentication meticulous keyed sha1; password %q { id 3; };", password)
	}
	b := startBird(t, e.topo, rs1NS, t.TempDir(), serverBFDAuthConfig(rs1, lbdAddr, bird("not-dplb")))
	const want = "bfd: the server's digest does not match bfd_password"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		h, reason := serverHealth(t, e, rs1)
		if h == "up" {
			t.Fatalf("rs1 up with another password on bird's side")
		}
		if reason == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rs1 %s (%q), want down for %q", h, reason, want)
		}
	}
	if err := b.proc.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.proc.Wait(5 * time.Second)
	b = startBird(t, e.topo, rs1NS, t.TempDir(), serverBFDAuthConfig(rs1, lbdAddr, bird("dplb-bfd")))
	waitHealth(t, e, rs1, "up")
	out, err := b.cmd("show", "bfd", "sessions")
	if err != nil || !strings.Contains(out, lbdAddr) || !strings.Contains(out, "Up") {
		t.Fatalf("rs1 up, but bird's BFD sessions say (%v):\n%s", err, out)
	}
	e.stopLBD(t)
}
