package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// traceJSON runs lbctl trace -o json and decodes its answer.
func (e *natEnv) traceJSON(t *testing.T, args ...string) *api.Trace {
	t.Helper()
	out := e.lbctlOK(t, append([]string{"trace", "-o", "json"}, args...)...)
	var resp api.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Trace == nil {
		t.Fatalf("lbctl trace %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return resp.Trace
}

// TestLbctlTrace traces a real connection through a two-worker lbd: the
// server a new connection would get (and does get: the dry pick moved no
// scheduler), its entry from both directions, and a drop with its reason.
func TestLbctlTrace(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		twoWorkers(c)
	}})
	e.warmUp(t)
	vip := e.nat.VIP.String() + ":80"
	client := e.nat.Client.Addr.Addr()
	port := 41000 + int(time.Now().UnixNano()%2000)
	cl := fmt.Sprintf("%s:%d", client, port)

	before := e.traceJSON(t, "-t", vip, "--client", cl)
	if before.Steering.Workers != 2 || before.Steering.Owner < 0 || before.Steering.Owner > 1 || before.Steering.Port != "wan" {
		t.Fatalf("steering %+v", before.Steering)
	}
	if before.Conn != nil || before.Decision == nil || !before.Decision.Predicted || before.Decision.Destination == "" ||
		before.Verdict.Drop != "" || before.Service == nil || len(before.Service.Servers) != 2 {
		t.Fatalf("before the connection: %+v", before)
	}

	// A real connection from that port, held open.
	c, with := e.heldConnection(t, vip, port)
	defer c.Close()

	// Its entry, found by the owner (the other worker has none): the
	// server is the one the dry pick named.
	if with.Conn == nil || with.Conn.State != "ESTABLISHED" || with.Conn.Destination != before.Decision.Destination ||
		with.Conn.ExpiresSecs == 0 || with.Conn.Direction != "client to server" || with.Steering.Owner != before.Steering.Owner {
		t.Fatalf("with the connection: %+v, conn %+v; the dry pick said %s", with, with.Conn, before.Decision.Destination)
	}
	if with.Verdict.Drop != "" || with.Verdict.To != before.Decision.Destination || with.Verdict.Port != "lan" || !with.Verdict.MAC {
		t.Fatalf("verdict %+v", with.Verdict)
	}
	back := e.traceJSON(t, "-t", vip, "--client", cl, "--reply", with.Conn.Destination)
	if back.Conn == nil || back.Conn.Direction != "server to client" || back.Verdict.To != cl || back.Verdict.Port != "wan" ||
		back.Steering.Port != "lan" {
		t.Fatalf("reply: %+v, conn %+v, verdict %+v", back, back.Conn, back.Verdict)
	}
	text := e.lbctlOK(t, "trace", "-t", vip, "--client", cl)
	for _, want := range []string{"Owner     lcore", "ESTABLISHED", "Verdict   forward to " + with.Conn.Destination} {
		if !strings.Contains(text, want) {
			t.Errorf("trace text lacks %q:\n%s", want, text)
		}
	}
	t.Logf("lbctl trace:\n%s", text)

	// A port of the VIP with no service: dropped, and why.
	none := e.traceJSON(t, "-t", e.nat.VIP.String()+":81", "--client", cl)
	if none.Service != nil || none.Verdict.Drop != "no_service" {
		t.Fatalf("no service: %+v", none.Verdict)
	}
	c.Close()
	e.stopLBD(t)
}

// heldConnection opens a TCP connection from the client's port to vip
// and holds it; it returns it with the trace of its entry once
// established (nil Conn if it never was).
func (e *natEnv) heldConnection(t *testing.T, vip string, port int) (net.Conn, *api.Trace) {
	t.Helper()
	client := e.nat.Client.Addr.Addr()
	var c net.Conn
	if err := topo.InNS(e.nat.Client.NS, func() error {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: client.AsSlice(), Port: port}, Timeout: 5 * time.Second}
		var err error
		c, err = d.Dial("tcp4", vip)
		return err
	}); err != nil {
		t.Fatalf("connect from %s:%d: %v", client, port, err)
	}
	cl := fmt.Sprintf("%s:%d", client, port)
	var with *api.Trace
	for i := 0; i < 50; i++ { // the client's ACK may still be on its way
		if with = e.traceJSON(t, "-t", vip, "--client", cl); with.Conn != nil && with.Conn.State == "ESTABLISHED" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, with
}

// TestLbctlTraceFullNAT: a FullNAT connection's reply goes to the local
// address and port, not to the client: traced by the server's address,
// it is found by that key, names the local endpoint, and goes back to
// the client out of the client port.
func TestLbctlTraceFullNAT(t *testing.T) {
	e := startFullNAT(t, false)
	e.warmUp(t)
	vip := e.nat.VIP.String() + ":80"
	port := 43000 + int(time.Now().UnixNano()%2000)
	cl := fmt.Sprintf("%s:%d", e.nat.Client.Addr.Addr(), port)
	c, with := e.heldConnection(t, vip, port)
	defer c.Close()
	if with.Conn == nil || with.Conn.State != "ESTABLISHED" || with.Conn.Local == "" {
		t.Fatalf("the FullNAT connection: %+v, conn %+v", with, with.Conn)
	}
	back := e.traceJSON(t, "-t", vip, "--client", cl, "--reply", with.Conn.Destination)
	if back.Conn == nil || back.Conn.OneWayOnly || back.Conn.Direction != "server to client" || back.Conn.Local != with.Conn.Local ||
		back.Verdict.To != cl || back.Verdict.Port != "wan" || back.Steering.Port != "lan" {
		t.Fatalf("reply: %+v, conn %+v, verdict %+v", back, back.Conn, back.Verdict)
	}
	text := e.lbctlOK(t, "trace", "-t", vip, "--client", cl, "--reply", with.Conn.Destination)
	if !strings.Contains(text, "from the local address "+with.Conn.Local) || strings.Contains(text, "do not pass through lbd") {
		t.Errorf("trace text:\n%s", text)
	}
	t.Logf("lbctl trace --reply:\n%s", text)
	c.Close()
	e.stopLBD(t)
}

// TestLbctlStagedChanges: -L --timeout, -R --dry-run and -S --diff
// against a running lbd, exiting as diff(1), and changing nothing.
func TestLbctlStagedChanges(t *testing.T) {
	e := startNAT(t)
	if out := e.lbctlOK(t, "-L", "--timeout"); out != "Timeout (tcp tcpfin udp): 900 60 300\n" {
		t.Errorf("-L --timeout: %q", out)
	}
	e.lbctlOK(t, "--set", "600", "0", "120")
	if out := e.lbctlOK(t, "-L", "--timeout"); out != "Timeout (tcp tcpfin udp): 600 60 120\n" {
		t.Errorf("-L --timeout after --set: %q", out)
	}
	saved := e.lbctlOK(t, "-S", "-n")
	if out, errOut, code := e.lbctlRun(t, saved, "-S", "--diff", "-"); code != 0 || out != "" {
		t.Errorf("-S --diff of its own save: exit %d %q %q", code, out, errOut)
	}
	rs1 := e.nat.Servers[0].Addr.Addr().String() + ":8080"
	svc := e.nat.VIP.String() + ":80"
	staged := "-e -t " + svc + " -r " + rs1 + " -w 5\n-A -u " + e.nat.VIP.String() + ":53 -s wrr\n"
	out, errOut, code := e.lbctlRun(t, staged, "-R", "--dry-run")
	want := "~ -a -t " + svc + " -r " + rs1 + " -m -w 5\n    -w 1 -> 5\n+ -A -u " + e.nat.VIP.String() + ":53 -s wrr\n"
	if code != 1 || out != want {
		t.Errorf("-R --dry-run: exit %d\n%s%s\nwant exit 1:\n%s", code, out, errOut, want)
	}
	if _, errOut, code := e.lbctlRun(t, "-A -t "+svc+"\n", "-R", "--dry-run"); code != 2 || !strings.Contains(errOut, "service already exists") {
		t.Errorf("-R --dry-run of a refused rule: exit %d %q", code, errOut)
	}
	if now := e.lbctlOK(t, "-S", "-n"); now != saved {
		t.Errorf("a dry run changed the rules:\n%s\nwas:\n%s", now, saved)
	}
	e.lbctlOK(t, "-e", "-t", svc, "-r", rs1, "-w", "3")
	out, _, code = e.lbctlRun(t, saved, "-S", "--diff", "-")
	if code != 1 || out != "~ -a -t "+svc+" -r "+rs1+" -m -w 1\n    -w 3 -> 1\n" {
		t.Errorf("-S --diff after an edit: exit %d\n%s", code, out)
	}
	e.stopLBD(t)
}
