package e2e

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// passiveOpens is the number of TCP connections a namespace's kernel
// accepted (Tcp PassiveOpens in /proc/net/snmp): every SYN a server
// answered counts.
func passiveOpens(t *testing.T, tp *topo.Topo, ns string) int {
	t.Helper()
	out, err := tp.Exec(ns, "cat", "/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "PassiveOpens" && i < len(f) {
				v, _ := strconv.Atoi(f[i])
				return v
			}
		}
	}
	t.Fatalf("no Tcp PassiveOpens in %s's /proc/net/snmp", ns)
	return 0
}

// TestSynProxyFlood: with the SYN proxy on a NAT service (VIP:80) and a
// FullNAT one (VIP:81), on two workers, spoofed SYN floods to both make
// no connection entry and reach no real server, while a real client's
// requests through both all succeed.
func TestSynProxyFlood(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Workers = []int{0, 1}
		c.Ports = []harness.Port{
			harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
			harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
		}
		for i := range c.Ports {
			c.Ports[i].Device += ",qpairs=2"
		}
		c.Services[0].SynProxy = true
		fn := c.Services[0]
		fn.Port, fn.LocalAddresses = 81, fullNATLocal
		fn.Servers = append([]harness.Server(nil), fn.Servers...)
		for i := range fn.Servers {
			fn.Servers[i].Forward = "fullnat"
		}
		c.Services = append(c.Services, fn)
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
	e.stopLBD(t)
}
