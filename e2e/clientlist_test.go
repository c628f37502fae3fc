package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// drops sums a drop reason over lbd's lcores.
func (e *natEnv) drops(t *testing.T, reason string) uint64 {
	t.Helper()
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, l := range resp.Lcores {
		n += l.DropsByReason[reason]
	}
	return n
}

// askHeld sends an HTTP request on the held connection c (its answer
// read through br) and returns the answer's status, or the error.
func askHeld(c net.Conn, br *bufio.Reader, host string) string {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", host); err != nil {
		return err.Error()
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err.Error()
	}
	return resp.Status
}

// TestClientListsByLbctl: DPVS's blklst and whtlst by lbctl on a running
// lbd with two workers. A blocked client gets no new connection (its
// SYNs dropped and counted, lbctl trace says why) while the connection
// it already had goes on; an allowlist that does not name it keeps it
// out, one that does lets it in; the lists are saved by -S and listed by
// --get-blklst and --get-whtlst; a wrong entry is refused and changes
// nothing.
func TestClientListsByLbctl(t *testing.T) {
	e := startNATWith(t, natOptions{configure: twoWorkers})
	e.warmUp(t)
	vip := e.nat.VIP.String() + ":80"
	client := e.nat.Client.Addr.Addr().String()
	port := 44000 + int(time.Now().UnixNano()%2000)
	held, with := e.heldConnection(t, vip, port)
	defer held.Close()
	if with.Conn == nil {
		t.Fatal("the held connection was not established")
	}
	br := bufio.NewReader(held)

	if _, errOut, code := e.lbctlRun(t, "", "--add-blklst", "-t", vip, "-k", "2001:db8::/48"); code == 0 ||
		!strings.Contains(errOut, "not in the VIP's family") {
		t.Fatalf("--add-blklst of an IPv6 prefix to an IPv4 service: exit %d: %s", code, errOut)
	}
	e.lbctlOK(t, "--add-blklst", "-t", vip, "-k", client)
	// The client's new connections fail; its SYNs are dropped and counted.
	for _, r := range e.get(t, e.url, 3, time.Second) {
		if r.Err == "" {
			t.Fatalf("request %d of a blocked client was answered by %s", r.I, r.Server())
		}
	}
	if n := e.drops(t, "client_blocked"); n == 0 {
		t.Error("no client_blocked drop counted")
	}
	tr := e.traceJSON(t, "-t", vip, "--client", client+":45999")
	if tr.Verdict.Drop != "client_blocked" || tr.Verdict.Why == "" {
		t.Errorf("trace of a blocked client's new connection: %+v", tr.Verdict)
	}
	// The connection it had goes on (its first request: the servers
	// close after one answer).
	if got := askHeld(held, br, e.nat.VIP.String()); got != "200 OK" {
		t.Fatalf("the held connection after the client was blocked: %q", got)
	}
	if out := e.lbctlOK(t, "--get-blklst"); !strings.Contains(out, client) {
		t.Errorf("--get-blklst does not list %s:\n%s", client, out)
	}
	if out := e.lbctlOK(t, "-S", "-n"); !strings.Contains(out, "--add-blklst -t "+vip+" -k "+client) {
		t.Errorf("-S does not save the blocklist:\n%s", out)
	}

	// Unblocked, then kept out by an allowlist that does not name it.
	e.lbctlOK(t, "--del-blklst", "-t", vip, "-k", client+"/32")
	if res := e.servedBy(t, e.url, 4); res["rs1"]+res["rs2"] != 4 {
		t.Errorf("after --del-blklst: answers %v", res)
	}
	e.lbctlOK(t, "--add-whtlst", "-t", vip, "-2", "198.18.0.0/15")
	before := e.drops(t, "client_not_allowed")
	for _, r := range e.get(t, e.url, 2, time.Second) {
		if r.Err == "" {
			t.Fatalf("request %d of a client off the allowlist was answered", r.I)
		}
	}
	if e.drops(t, "client_not_allowed") == before {
		t.Error("no client_not_allowed drop counted")
	}
	clientNet := e.nat.Client.Addr.Masked().String()
	e.lbctlOK(t, "--add-whtlst", "-t", vip, "--whtlst-address", clientNet)
	if res := e.servedBy(t, e.url, 4); res["rs1"]+res["rs2"] != 4 {
		t.Errorf("with the client's network allowed: answers %v", res)
	}
	if out := e.lbctlOK(t, "--get-whtlst", "-t", vip); !strings.Contains(out, "198.18.0.0/15") || !strings.Contains(out, clientNet) {
		t.Errorf("--get-whtlst:\n%s", out)
	}
	held.Close()
	e.stopLBD(t)
}
