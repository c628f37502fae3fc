package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var pingReplyRE = regexp.MustCompile(`bytes from ([0-9.]+): icmp_seq=(\d+)`)

// pingVIP pings vip from ns with count echo requests of size bytes of
// data and requires that at least count-1 are answered (the first may
// wait for ARP), all from the VIP, none duplicated or damaged.
func (e *lbEnv) pingVIP(t *testing.T, ns, vip string, size string) {
	t.Helper()
	const count = 5
	// ping exits 1 when replies are missing: the output says which.
	out, err := e.topo.ExecContext(e.ctx, ns, "ping", "-n", "-c", strconv.Itoa(count), "-i", "0.2", "-W", "2", "-s", size, vip)
	t.Logf("ping -s %s %s:\n%s", size, vip, strings.TrimSpace(out))
	replies := 0
	for _, m := range pingReplyRE.FindAllStringSubmatch(out, -1) {
		if m[1] != vip {
			t.Errorf("echo reply from %s, want %s", m[1], vip)
			continue
		}
		replies++
	}
	if replies < count-1 {
		t.Errorf("%d echo replies from %s of %d requests (ping: %v)", replies, vip, count, err)
	}
	for _, bad := range []string{"DUP!", "wrong data", "bad checksum", "Bad ICMP"} {
		if strings.Contains(out, bad) {
			t.Errorf("ping reports %q", bad)
		}
	}
}

// TestNATPingVIP: the LB answers ICMP echo to the VIP itself (VS/NAT).
func TestNATPingVIP(t *testing.T) {
	n := startNAT(t)
	e := &lbEnv{ctx: n.ctx, topo: n.topo}
	vip := n.nat.VIP.String()
	e.pingVIP(t, n.nat.Client.NS, vip, "56")
	e.pingVIP(t, n.nat.Client.NS, vip, "1400")
	n.stopLBD(t)
}

// TestDRPingVIP: in VS/DR the LB answers ICMP echo to the VIP, and its
// reply reaches the client through the LB's gateway (the router).
func TestDRPingVIP(t *testing.T) {
	e := startLVS(t, false, "tcp", 80)
	e.pingVIP(t, e.client.NS, e.vip, "56")
	e.stop(t)
}
