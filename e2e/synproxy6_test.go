package e2e

import (
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// TestSynProxy6: the SYN proxy on an IPv6 service ([VIP]:80 by NAT66 to
// two real servers, two workers). A spoofed IPv6 SYN flood is answered
// with cookies and makes no connection entry nor reaches a real server,
// while the real client's requests all succeed and its servers see its
// own address. A NAT64 service behind the proxy ([VIP]:8064 to the
// servers' IPv4 addresses) answers too. Requests riding on the
// handshake's ACK are each held until the server answers, through both;
// a 4 MiB transfer through a third SYN-proxied service runs with window
// scaling spliced (bulkThroughSynProxy).
func TestSynProxy6(t *testing.T) {
	e := startNATWith(t, natOptions{
		listen: map[string]string{"rs1": "[::]:8080", "rs2": "[::]:8080"},
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			withIPv6(t, tp, nat)
			for _, h := range nat.Servers {
				startStreamServers6(t, synBulkPort, h.NS)
			}
		},
		configure: func(c *harness.Config) {
			twoWorkers(c)
			c.Ports[0].Address6, c.Ports[1].Address6 = v6WAN+"/64", v6LAN+"/64"
			svc := harness.Service{VIP: v6VIP, Port: 80, Scheduler: "rr", SynProxy: true}
			for i := range 2 {
				svc.Servers = append(svc.Servers, harness.Server{Address: v6Server(i), Port: 8080, Weight: 1})
			}
			bulk := svc
			bulk.Port, bulk.Servers = synBulkPort, append([]harness.Server(nil), svc.Servers...)
			for i := range bulk.Servers {
				bulk.Servers[i].Port = synBulkPort
			}
			// NAT64 behind the proxy: the servers' IPv4 addresses, from a
			// local address of their subnet.
			nat64 := harness.Service{VIP: v6VIP, Port: 8064, Scheduler: "rr", SynProxy: true, LocalAddresses: []string{lip64Addr}}
			for _, h := range c.Services[0].Servers {
				nat64.Servers = append(nat64.Servers, harness.Server{Address: h.Address, Port: 8080, Weight: 1, Forward: "fullnat"})
			}
			c.Services = append(c.Services, svc, bulk, nat64)
		},
	})
	url := "http://[" + v6VIP + "]/"
	e.warmUpURL(t, url)
	body := e.scrapeMetrics(t)
	newBefore, validBefore := counterSum(body, "new_conns"), counterSum(body, "syn_cookies_valid")
	opensBefore := 0
	for _, h := range e.nat.Servers {
		opensBefore += passiveOpens(t, e.topo, h.NS)
	}

	type flood struct {
		sent int
		err  error
	}
	done := make(chan flood, 1)
	go func() {
		n, err := synFlood(e.nat.Client.NS, netip.MustParsePrefix("2001:db8:78::/64"), netip.MustParseAddr(v6VIP), 80, 10000, 2500, 15*time.Second)
		done <- flood{n, err}
	}()
	const real = 100
	ok, servers := 0, map[string]int{}
	for _, r := range e.get(t, url, real, 5*time.Second) {
		switch {
		case r.Err != "" || r.Status != 200:
			t.Errorf("request %d during the flood: status %d %s", r.I, r.Status, r.Err)
		case !strings.Contains(r.Body, v6Client):
			t.Errorf("request %d: the server did not see the client's address %s: %q", r.I, v6Client, r.Body)
		default:
			ok++
			servers[r.Server()]++
		}
	}
	f := <-done
	if f.err != nil {
		t.Fatal(f.err)
	}
	opens := -opensBefore
	for _, h := range e.nat.Servers {
		opens += passiveOpens(t, e.topo, h.NS)
	}
	body = e.scrapeMetrics(t)
	cookies := counterSum(body, "syn_cookies_sent")
	newConns, valid := counterSum(body, "new_conns")-newBefore, counterSum(body, "syn_cookies_valid")-validBefore
	t.Logf("%d spoofed IPv6 SYNs sent; lbd: syn_cookies_sent %.0f, syn_cookies_valid +%.0f, new_conns +%.0f; servers accepted %d connections; %d requests succeeded (%v)",
		f.sent, cookies, valid, newConns, opens, ok, servers)
	if f.sent < 10000 {
		t.Errorf("only %d SYNs were sent", f.sent)
	}
	if cookies < float64(f.sent)/2 {
		t.Errorf("lbd answered %.0f SYNs with cookies of %d sent", cookies, f.sent)
	}
	if newConns > real || valid > real || newConns < real {
		t.Errorf("new_conns +%.0f, syn_cookies_valid +%.0f during the flood: want the real client's %d", newConns, valid, real)
	}
	if opens > real {
		t.Errorf("the servers accepted %d connections during the flood for %d real ones", opens, real)
	}
	if servers["rs1"] == 0 || servers["rs2"] == 0 {
		t.Errorf("requests spread %v, want both servers", servers)
	}

	// NAT64: the IPv4 servers see the local address.
	for _, r := range e.get(t, "http://["+v6VIP+"]:8064/", 20, 5*time.Second) {
		if r.Err != "" || r.Status != 200 || !strings.Contains(r.Body, lip64Addr) {
			t.Errorf("NAT64 request %d: status %d %s, body %q (want the local address %s)", r.I, r.Status, r.Err, r.Body, lip64Addr)
		}
	}

	heldBefore := counterSum(e.scrapeMetrics(t), "synproxy_held")
	const eager = 20
	for _, port := range []string{"80", "8064"} {
		addr := net.JoinHostPort(v6VIP, port)
		for i := range eager {
			if err := eagerRequest(e.nat.Client.NS, addr); err != nil {
				t.Errorf("port %s, request %d sent with the handshake's ACK: %v", port, i, err)
			}
		}
	}
	held := counterSum(e.scrapeMetrics(t), "synproxy_held") - heldBefore
	t.Logf("requests on the handshake's ACK: synproxy_held +%.0f for %d requests", held, 2*eager)
	if held < 2*eager {
		t.Errorf("synproxy_held +%.0f: want every one of the %d requests held", held, 2*eager)
	}
	e.bulkThroughSynProxy(t, v6VIP)
	e.stopLBD(t)
}
