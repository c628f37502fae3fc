package e2e

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// snatAddr is TestSNAT's SNAT address, on the client side's subnet.
const snatAddr = "192.0.2.60"

// TestSNAT: the VS/NAT servers route through lbd, and lbd's SNAT rule
// takes their own connections out (DPVS's SNAT mode, a Linux director's
// masquerading): a real server's TCP connection, UDP query and ping to a
// host beyond lbd (the client's namespace) arrive from the SNAT address,
// and the answers come back. The TCP connection lives on across lbctl
// upgrade (the handover carries it, installed under the rule again).
func TestSNAT(t *testing.T) {
	waitBound(t)
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Extra += "snat:\n  - {source: 198.51.100.0/24, addresses: [" + snatAddr + "]}\n"
		// A network beyond the host, which routes to it (below).
		c.Ports = []harness.Port{harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
			harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server")}
		c.Ports[0].Routes = [][2]string{{"10.99.0.0/16", topo.NATClientAddr.Addr().String()}}
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
	go answerWithSource(pc)

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

	// The server's ping: the host sees the echo requests come from the
	// SNAT address, and its replies reach the server.
	var raw *icmp.PacketConn
	if err := topo.InNS(host.NS, func() (err error) {
		raw, err = icmp.ListenPacket("ip4:icmp", hostAddr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	pingFrom := make(chan string, 1)
	go func() {
		buf := make([]byte, 1500)
		for {
			raw.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, peer, err := raw.ReadFrom(buf)
			if err != nil {
				pingFrom <- "nothing: " + err.Error()
				return
			}
			if m, err := icmp.ParseMessage(1, buf[:n]); err == nil && m.Type == ipv4.ICMPTypeEcho {
				pingFrom <- peer.String()
				return
			}
		}
	}()
	if out, err := e.topo.ExecContext(e.ctx, rs.NS, "ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", hostAddr); err != nil || !strings.Contains(out, "3 received") {
		t.Fatalf("the server's ping of %s through lbd (%v):\n%s", hostAddr, err, out)
	}
	if from := <-pingFrom; from != snatAddr {
		t.Fatalf("the host saw the server's ping from %s, want the SNAT address %s", from, snatAddr)
	}
	// lbd's route to 10.99.0.0/16 is through the host, which routes on
	// (back to lbd: the packets never get that far): a ping there whose
	// TTL runs out at the host (traceroute -I's, mtr's) is answered with
	// time exceeded to the SNAT address, which lbd gives the server from
	// the host.
	for _, cmd := range [][]string{{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"ip", "route", "add", "10.99.0.0/16", "via", topo.NATWANAddr.Addr().String()}} {
		if out, err := e.topo.Exec(host.NS, cmd...); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	out, _ := e.topo.ExecContext(e.ctx, rs.NS, "ping", "-n", "-c", "1", "-t", "2", "-W", "2", "10.99.0.1")
	if want := "From " + hostAddr + " icmp_seq=1 Time to live exceeded"; !strings.Contains(out, want) {
		t.Fatalf("a ping whose TTL runs out beyond lbd: want %q from the server's ping:\n%s", want, out)
	}

	out, err = harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "-c")
	if err != nil || !strings.Contains(out, hostAddr+":7000") {
		t.Errorf("lbctl -L -n -c does not list the server's connection to %s:7000 (%v):\n%s", hostAddr, err, out)
	}
	if !strings.Contains(out, "ICMP") || !strings.Contains(out, hostAddr+":0") {
		t.Errorf("lbctl -L -n -c does not list the server's ping of %s:\n%s", hostAddr, out)
	}
	// The rules, after the services: the TCP connection is established,
	// the two pings' mappings are not.
	if out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n"); err != nil ||
		!strings.Contains(out, "\nSNAT TCP  198.51.100.0/24 from "+snatAddr+" active 1 inactive 0\n") ||
		!strings.Contains(out, "\nSNAT ICMP 198.51.100.0/24 from "+snatAddr+" active 0 inactive 2\n") {
		t.Errorf("lbctl -L -n does not list the SNAT rules with their connections (%v):\n%s", err, out)
	}

	e.upgrade(t)
	say("after lbctl upgrade", "again")
	e.stopLBD(t)
}

// answerWithSource answers each datagram pc receives with the address and
// port it came from, a space, and the datagram, until pc is closed: a
// host beyond lbd telling what a SNAT rule made of its peer.
func answerWithSource(pc net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		pc.WriteTo([]byte(from.String()+" "+string(buf[:n])), from)
	}
}
