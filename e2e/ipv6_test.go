package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// IPv6 addresses of the client link (RFC 3849 documentation prefix).
const (
	v6WAN    = "2001:db8:2::1"
	v6Client = "2001:db8:2::2"
)

var ping6ReplyRE = regexp.MustCompile(`bytes from ([0-9a-f:]+): icmp_seq=(\d+)`)

// TestIPv6NeighbourDiscoveryAndPing: the client, with IPv6 on its link,
// resolves lbd's IPv6 port address by neighbour discovery (lbd answers
// the kernel's NS with an NA) and pings it; the kernel checks every
// checksum lbd computed over the IPv6 pseudo-header.
func TestIPv6NeighbourDiscoveryAndPing(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			c := nat.Client
			if _, err := tp.Exec(c.NS, "sysctl", "-q", "-w", "net.ipv6.conf."+c.If+".disable_ipv6=0"); err != nil {
				t.Fatal(err)
			}
			if _, err := tp.Exec(c.NS, "ip", "-6", "addr", "add", v6Client+"/64", "dev", c.If, "nodad"); err != nil {
				t.Fatal(err)
			}
		},
		configure: func(c *harness.Config) { c.WANAddr6 = v6WAN + "/64" },
	})
	pingV6(t, e, v6WAN)
	// The client learnt lbd's MAC for the address from lbd's NA.
	neigh, err := e.topo.Exec(e.nat.Client.NS, "ip", "-6", "neigh", "show", v6WAN)
	t.Logf("client's neighbour entry: %s", strings.TrimSpace(neigh))
	if err != nil || !strings.Contains(neigh, "lladdr") {
		t.Errorf("the client has no link-layer address for %s: %q %v", v6WAN, neigh, err)
	}
	e.stopLBD(t)
}

// pingV6 pings addr (lbd's port address or an IPv6 VIP) from the client
// five times and wants four replies from addr at least: the kernel checks
// the ICMPv6 checksum lbd updated over the pseudo-header.
func pingV6(t *testing.T, e *natEnv, addr string) {
	t.Helper()
	const count = 5
	out, err := e.topo.ExecContext(e.ctx, e.nat.Client.NS, "ping", "-6", "-n", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", addr)
	t.Logf("ping -6 %s:\n%s", addr, strings.TrimSpace(out))
	replies := 0
	for _, m := range ping6ReplyRE.FindAllStringSubmatch(out, -1) {
		if m[1] != addr {
			t.Errorf("echo reply from %s, want %s", m[1], addr)
			continue
		}
		replies++
	}
	if replies < count-1 {
		t.Errorf("%d echo replies of %d from %s (ping: %v)", replies, count, addr, err)
	}
}
