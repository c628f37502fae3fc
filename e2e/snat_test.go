package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// snatAddr is TestSNAT's SNAT address, on the client side's subnet.
const snatAddr = "192.0.2.60"

// TestSNAT: the VS/NAT servers route through lbd, and lbd's SNAT rule
// takes their own connections out (DPVS's SNAT mode, a Linux director's
// masquerading): a real server's TCP connection and UDP query to a host
// beyond lbd (the client's namespace) arrive from the SNAT address, and
// the answers come back. The TCP connection lives on across lbctl
// upgrade (the handover carries it, installed under the rule again).
func TestSNAT(t *testing.T) {
	waitBound(t)
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Extra += "snat:\n  - {source: 198.51.100.0/24, addresses: [" + snatAddr + "]}\n"
	}})
	host, rs := e.nat.Client, e.nat.Servers[0]
	hostAddr := host.Addr.Addr().String()

	// The host beyond lbd: a TCP line echo that prefixes each line with
	// the address the connection came from, and a UDP one.
	var ln net.Listener
	var pc net.PacketConn
	if err := topo.InNS(host.NS, func() (err error) {
		if ln, err = net.Listen("tcp4", hostAddr+":7000"); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", hostAddr+":7001")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				from, _, _ := net.SplitHostPort(c.RemoteAddr().String())
				s := bufio.NewScanner(c)
				for s.Scan() {
					fmt.Fprintf(c, "%s %s\n", from, s.Text())
				}
			}()
		}
	}()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(from.String()+" "+string(buf[:n])), from)
		}
	}()

	var tc, uc net.Conn
	if err := topo.InNS(rs.NS, func() (err error) {
		if tc, err = net.DialTimeout("tcp4", hostAddr+":7000", 5*time.Second); err != nil {
			return err
		}
		uc, err = net.Dial("udp4", hostAddr+":7001")
		return err
	}); err != nil {
		t.Fatalf("the real server connecting out through lbd: %v", err)
	}
	t.Cleanup(func() { tc.Close(); uc.Close() })
	lines := bufio.NewReader(tc)
	say := func(when, what string) {
		t.Helper()
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintln(tc, what); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		got, err := lines.ReadString('\n')
		if want := snatAddr + " " + what + "\n"; err != nil || got != want {
			t.Fatalf("%s: the host answered %q (%v), want %q: the connection must come from the SNAT address", when, got, err, want)
		}
	}
	say("the server's own TCP connection", "hello")

	uc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := uc.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := uc.Read(buf)
	if got := string(buf[:n]); err != nil || !strings.HasPrefix(got, snatAddr+":") || !strings.HasSuffix(got, " query") {
		t.Fatalf("the server's UDP query: the host answered %q (%v), want it from %s", got, err, snatAddr)
	}

	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c"); err != nil || !strings.Contains(out, hostAddr+":7000") {
		t.Errorf("lbctl -L -n -c does not list the server's connection to %s:7000 (%v):\n%s", hostAddr, err, out)
	}

	e.upgrade(t)
	say("after lbctl upgrade", "again")
	e.stopLBD(t)
}
