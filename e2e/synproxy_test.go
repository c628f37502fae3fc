package e2e

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// passiveOpens is the number of TCP connections a namespace's kernel
// accepted (Tcp PassiveOpens in /proc/net/snmp): every SYN a server
// answered counts.
func passiveOpens(t *testing.T, tp *topo.Topo, ns string) int {
	t.Helper()
	return int(procNetCounter(t, tp, ns, "snmp", "Tcp", "PassiveOpens"))
}

// procNetCounter reads one counter of ns's kernel from /proc/net/FILE
// (snmp, netstat): the value under name in the section's second line.
func procNetCounter(t *testing.T, tp *topo.Topo, ns, file, section, name string) uint64 {
	t.Helper()
	out, err := tp.Exec(ns, "cat", "/proc/net/"+file)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != section+":" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == name && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no %s %s in %s's /proc/net/%s", section, name, ns, file)
	return 0
}

// synBulkPort is the SYN-proxied NAT service of the bulk transfer (the
// real servers' stream servers on the same port).
const synBulkPort = 9000

// TestSynProxyFlood: with the SYN proxy on a NAT service (VIP:80) and a
// FullNAT one (VIP:81), on two workers, spoofed SYN floods to both make
// no connection entry and reach no real server, while a real client's
// requests through both all succeed. Then requests riding on the
// handshake's ACK are all held, and a 4 MiB transfer through a third
// SYN-proxied service runs with window scaling and timestamps spliced.
func TestSynProxyFlood(t *testing.T) {
	e := startNATWith(t, natOptions{setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
		for _, h := range nat.Servers {
			startStreamServers(t, synBulkPort, h.NS)
		}
	}, configure: func(c *harness.Config) {
		twoWorkers(c)
		c.Services[0].SynProxy = true
		fn := c.Services[0]
		fn.Port, fn.LocalAddresses = 81, fullNATLocal
		fn.Servers = append([]harness.Server(nil), fn.Servers...)
		for i := range fn.Servers {
			fn.Servers[i].Forward = "fullnat"
		}
		c.Services = append(c.Services, fn)
		bulk := c.Services[0]
		bulk.Port = synBulkPort
		bulk.Servers = append([]harness.Server(nil), bulk.Servers...)
		for i := range bulk.Servers {
			bulk.Servers[i].Port = synBulkPort
		}
		c.Services = append(c.Services, bulk)
	}})
	warm := e.warmUp(t)
	urlFN := "http://" + e.nat.VIP.String() + ":81/"
	warm = append(warm, e.get(t, urlFN, 2, 5*time.Second)...)
	opensBefore := 0
	for _, h := range e.nat.Servers {
		opensBefore += passiveOpens(t, e.topo, h.NS)
	}

	type flood struct {
		sent int
		err  error
	}
	done := make(chan flood, 2)
	for _, port := range []uint16{80, 81} {
		go func() {
			n, err := synFlood(e.nat.Client.NS, netip.MustParsePrefix("10.78.0.0/16"), e.nat.VIP, port, 10000, 2500, 15*time.Second)
			done <- flood{n, err}
		}()
	}
	// The real client, while the floods run.
	ok := 0
	for _, url := range []string{e.url, urlFN} {
		for _, r := range e.get(t, url, 100, 5*time.Second) {
			if r.Err != "" {
				t.Errorf("%s request %d during the flood: %s", url, r.I, r.Err)
				continue
			}
			ok++
		}
	}
	sent := 0
	for range 2 {
		f := <-done
		if f.err != nil {
			t.Fatal(f.err)
		}
		sent += f.sent
	}
	opens := -opensBefore
	for _, h := range e.nat.Servers {
		opens += passiveOpens(t, e.topo, h.NS)
	}
	body := e.scrapeMetrics(t)
	cookies, valid := counterSum(body, "syn_cookies_sent"), counterSum(body, "syn_cookies_valid")
	newConns := counterSum(body, "new_conns")
	t.Logf("%d spoofed SYNs sent; lbd: syn_cookies_sent %.0f, syn_cookies_valid %.0f, new_conns %.0f; servers accepted %d connections during the flood; %d requests succeeded",
		sent, cookies, valid, newConns, opens, ok)
	if sent < 10000 {
		t.Errorf("only %d SYNs were sent", sent)
	}
	if cookies < float64(sent)/2 {
		t.Errorf("lbd answered %.0f SYNs with cookies of %d sent", cookies, sent)
	}
	// Only the real client's connections: the warm-up's and the 200.
	if real := float64(len(warm) + 200); newConns > real || valid > real {
		t.Errorf("new_conns %.0f, syn_cookies_valid %.0f: more than the real client's %.0f", newConns, valid, real)
	}
	if opens > 200 {
		t.Errorf("the servers accepted %d connections during the flood for 200 real ones", opens)
	}

	// Clients whose request rides on the handshake's ACK: every one is
	// answered, each request held until the server's SYN-ACK, none
	// deferred to a retransmission.
	heldBefore, deferredBefore := counterSum(body, "synproxy_held"), counterSum(body, "synproxy_deferred")
	const eager = 20
	for _, port := range []int{80, 81} {
		addr := net.JoinHostPort(e.nat.VIP.String(), strconv.Itoa(port))
		for i := range eager {
			if err := eagerRequest(e.nat.Client.NS, addr); err != nil {
				t.Errorf("port %d, request %d sent with the handshake's ACK: %v", port, i, err)
			}
		}
	}
	body = e.scrapeMetrics(t)
	held, deferred := counterSum(body, "synproxy_held")-heldBefore, counterSum(body, "synproxy_deferred")-deferredBefore
	t.Logf("requests on the handshake's ACK: synproxy_held +%.0f, synproxy_deferred +%.0f for %d requests", held, deferred, 2*eager)
	// Every request must be held; a deferral on top is a retransmitted
	// ACK (the machine was slow), which the client sends again, not a loss.
	if held < 2*eager {
		t.Errorf("synproxy_held +%.0f, synproxy_deferred +%.0f: want every one of the %d requests held", held, deferred, 2*eager)
	}
	e.bulkThroughSynProxy(t, e.nat.VIP.String())
	e.stopLBD(t)
}

// bulkThroughSynProxy moves 4 MiB from a real server to the client
// through the SYN-proxied service vip:synBulkPort (64 KiB every 10 ms):
// every byte intact, the client's kernel shows the proxy's window scale
// (7), and the sending server's shows a send window past 64 KiB (the
// client's scaled windows reach it rescaled right). Timestamps are
// checked by the unit tests: this kernel's ss does not list them.
func (e *natEnv) bulkThroughSynProxy(t *testing.T, vip string) {
	t.Helper()
	addr := net.JoinHostPort(vip, strconv.Itoa(synBulkPort))
	spec := streamSpec{total: 4 << 20, chunk: 64 << 10, interval: 10 * time.Millisecond, stall: 10 * time.Second}
	c, r := dialStream(e.ctx, e.nat.Client.NS, addr, spec, 5*time.Second)
	if c == nil {
		t.Fatalf("bulk transfer: %v", r)
	}
	done := make(chan streamResult, 1)
	go func() { done <- readStream(c, r, spec) }()
	client, _ := e.topo.Exec(e.nat.Client.NS, "ss", "-tin", "dst", addr)
	wnd := regexp.MustCompile(`snd_wnd:(\d+)`)
	largest, server := 0, ""
	for waiting := true; waiting; {
		select {
		case r = <-done:
			waiting = false
		case <-time.After(50 * time.Millisecond):
		}
		for _, h := range e.nat.Servers {
			out, _ := e.topo.Exec(h.NS, "ss", "-tin", "sport", "= :"+strconv.Itoa(synBulkPort))
			for _, m := range wnd.FindAllStringSubmatch(out, -1) {
				if v, _ := strconv.Atoi(m[1]); v > largest {
					largest, server = v, strings.TrimSpace(out)
				}
			}
		}
	}
	t.Logf("bulk transfer of %d bytes: %+v; the client's ss -tin:\n%s\nthe server's, at its largest send window (%d):\n%s",
		spec.total, r, strings.TrimSpace(client), largest, server)
	if r.kind != "" || r.got != spec.total {
		t.Errorf("bulk transfer through the SYN proxy: %d of %d bytes, %v", r.got, spec.total, r.err)
	}
	if !strings.Contains(client, "wscale:7,") {
		t.Errorf("the client's connection does not show the proxy's window scale 7:\n%s", client)
	}
	if largest <= 65535 {
		t.Errorf("the sending server's largest send window was %d: not past 64 KiB", largest)
	}
}

// eagerRequest sends an HTTP request on the handshake's own ACK: with
// TCP_QUICKACK off before connect (pingpong mode), Linux delays that ACK
// to carry the first data written right after connect. It reads the
// whole answer and wants a 200.
func eagerRequest(ns, addr string) error {
	var c net.Conn
	err := topo.InNS(ns, func() error {
		d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK, 0)
			}); err != nil {
				return err
			}
			return serr
		}}
		network := "tcp4"
		if strings.HasPrefix(addr, "[") {
			network = "tcp6"
		}
		var err error
		c, err = d.Dial(network, addr)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\nHost: vip\r\n\r\n"); err != nil {
		return err
	}
	answer, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.0 200") && !strings.HasPrefix(string(answer), "HTTP/1.1 200") {
		return fmt.Errorf("answer %q", harness.Tail(string(answer), 2))
	}
	return nil
}
