package e2e

import (
	"encoding/json"

	"github.com/dplb/dplb/e2e/topo"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
)

// TestNATTwoWorkers runs lbd with two worker lcores on two-queue
// af_packet ports (the kernel spreads flows over the queues by its own
// hash): every connection works, both lcores carry traffic, and replies
// arriving on the lcore that does not own their connection are handed
// to the one that does.
func TestNATTwoWorkers(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		twoWorkers(c)
	}})
	e.warmUp(t)
	got := map[string]int{}
	for _, r := range e.get(t, e.url, 200, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
		got[r.Server()]++
	}
	// rr runs per lcore, so the split is even within one per lcore.
	if d := got["rs1"] - got["rs2"]; d < -2 || d > 2 {
		t.Errorf("answers %v, want an even split", got)
	}
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Lcores) != 2 {
		t.Fatalf("lbctl lists %d lcores, want 2", len(resp.Lcores))
	}
	var handed uint64
	for _, l := range resp.Lcores {
		if l.RxPackets == 0 || l.TxPackets == 0 {
			t.Errorf("lcore %d carried no traffic: %+v", l.ID, l)
		}
		handed += l.HandedOff
	}
	if handed == 0 {
		t.Error("no packet was handed to its owner: the test did not exercise steering")
	}
	out, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "--per-lcore")
	t.Logf("lbctl -L -n --per-lcore:\n%s", out)
	e.stopLBD(t)
}

// TestNATChecksumOffload puts both of lbd's ports on net_tap, which
// checks checksums on RX and offers TX IPv4/TCP/UDP checksum offload (both
// in software): a segment the receiving tap found good leaves with its
// checksums left to the other tap (counted tx_checksum_offloaded), any
// other with incremental updates. Everything must arrive intact.
func TestNATChecksumOffload(t *testing.T) {
	var wanTap, lanTap string
	e := startNATWith(t, natOptions{
		configure: func(c *harness.Config) {
			suffix := c.FilePrefix[len(c.FilePrefix)-6:]
			wanTap, lanTap = "dtap"+suffix, "ltap"+suffix
			c.Ports = []harness.Port{
				{Name: "wan", Device: "net_tap0,iface=" + wanTap, Address: c.WANAddr, Role: "client"},
				{Name: "lan", Device: "net_tap1,iface=" + lanTap, Address: c.LANAddr, Role: "server"},
			}
		},
		// lbd made the taps in its namespace: wire each to its link.
		beforeUse: func(t *testing.T, e *natEnv) {
			wireTap(t, e.nat.LBNS, wanTap, e.nat.WANIf)
			wireTap(t, e.nat.LBNS, lanTap, e.nat.LANIf)
		},
	})
	if !strings.Contains(e.log.String(), `"tx_checksum_offload":true`) {
		t.Fatalf("the tap port does not offload checksums:\n%s", harness.Tail(e.log.String(), 20))
	}
	e.warmUp(t)
	for _, r := range e.get(t, e.url, 50, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d through the offloading port failed: %s", r.I, r.Err)
		}
	}
	if v, ok := metric(e.scrapeMetrics(t), "dplb_lcore_events_total", map[string]string{"lcore": "0", "counter": "tx_checksum_offloaded"}); !ok || v == 0 {
		t.Errorf("no packet left with offloaded checksums (tx_checksum_offloaded %v, %v)", v, ok)
	}
	e.stopLBD(t)
}

// wireTap waits for lbd to create a tap in namespace ns and makes it a
// wire to link: tc redirects every frame both ways, whatever its MAC (a
// bridge would take frames to the tap's MAC, which is lbd's, for its own).
func wireTap(t *testing.T, ns, tap, link string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for exec.Command("ip", "netns", "exec", ns, "ip", "link", "show", tap).Run() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("lbd did not create %s", tap)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, args := range [][]string{
		{"sysctl", "-qw", "net.ipv6.conf." + tap + ".disable_ipv6=1"},
		{"ip", "link", "set", tap, "up"},
		{"tc", "qdisc", "add", "dev", tap, "ingress"},
		{"tc", "filter", "add", "dev", tap, "ingress", "protocol", "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", link},
		{"tc", "qdisc", "add", "dev", link, "ingress"},
		{"tc", "filter", "add", "dev", link, "ingress", "protocol", "all", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", tap},
	} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// TestNATFourWorkers: four worker lcores (two per CPU) on four-queue
// af_packet ports; thousands of TCP connections, up to two thousand open
// at once, each carrying several messages: all succeed, none is split
// across real servers, every lcore works and packets are handed to their
// owners (the kernel's queue choice does not follow ours).
func TestNATFourWorkers(t *testing.T) {
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			_, _, nshelper := binaries(t)
			for _, h := range nat.Servers {
				var out harness.Buffer
				if _, err := tp.Start(h.NS, &out, nshelper, "echo", "-listen", ":9000", "-name", h.Name); err != nil {
					t.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for !strings.Contains(out.String(), "ready") {
					if time.Now().After(deadline) {
						t.Fatalf("echo server in %s not ready: %s", h.NS, out.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		},
		configure: func(c *harness.Config) {
			c.Workers = []int{0, 1, 0, 1}
			c.ConnTableSize = 65536
			c.Ports = []harness.Port{
				harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
				harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
			}
			for i := range c.Ports {
				c.Ports[i].Device += ",qpairs=4"
			}
			c.Services = append(c.Services, harness.Service{VIP: c.Services[0].VIP, Port: 9000, Scheduler: "rr",
				Servers: []harness.Server{{Address: c.Services[0].Servers[0].Address, Port: 9000, Weight: 1},
					{Address: c.Services[0].Servers[1].Address, Port: 9000, Weight: 1}}})
		},
	})
	e.warmUp(t)
	out, err := e.topo.Exec(e.nat.Client.NS, e.nshelper, "conns", "-addr", e.nat.VIP.String()+":9000",
		"-n", "4000", "-parallel", "2000", "-msgs", "3", "-pause", "300ms", "-timeout", "10s")
	var sum struct {
		OK, Failed, Split int
		Servers           map[string]int
		MaxConcurrent     int    `json:"max_concurrent"`
		FirstError        string `json:"first_error"`
	}
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("conns: %v %v: %s", err, jerr, out)
	}
	t.Logf("conns: %+v", sum)
	if sum.OK != 4000 || sum.Failed != 0 || sum.Split != 0 {
		t.Fatalf("%d connections ok, %d failed (%s), %d split across servers", sum.OK, sum.Failed, sum.FirstError, sum.Split)
	}
	if sum.MaxConcurrent < 1000 || sum.Servers["rs1"] < 1500 || sum.Servers["rs2"] < 1500 {
		t.Errorf("load not as intended: %+v", sum)
	}
	resp, err := harness.LBCtlJSON(e.ctx, e.lbctl, e.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	var handed uint64
	for _, l := range resp.Lcores {
		if l.RxPackets == 0 {
			t.Errorf("lcore %d received nothing", l.ID)
		}
		handed += l.HandedOff
	}
	if len(resp.Lcores) != 4 || handed == 0 {
		t.Errorf("%d lcores, %d packets handed off", len(resp.Lcores), handed)
	}
	text, _ := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "--per-lcore")
	t.Logf("lbctl -L -n --per-lcore:\n%s", text)
	e.stopLBD(t)
}

// TestNATFewerQueues: two workers, but the server-facing port keeps one
// queue (af_packet without qpairs): worker 1 does not poll it and hands
// what it sends there to worker 0. Everything still works.
func TestNATFewerQueues(t *testing.T) {
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		c.Workers = []int{0, 1}
		c.Ports = []harness.Port{
			harness.AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
			harness.AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
		}
		c.Ports[0].Device += ",qpairs=2"
	}})
	if !strings.Contains(e.log.String(), "fewer queues than workers") {
		t.Errorf("lbd did not say the lan port has fewer queues:\n%s", harness.Tail(e.log.String(), 20))
	}
	e.warmUp(t)
	for _, r := range e.get(t, e.url, 100, 5*time.Second) {
		if r.Err != "" {
			t.Fatalf("request %d: %s", r.I, r.Err)
		}
	}
	body := e.scrapeMetrics(t)
	if v, ok := metric(body, "dplb_lcore_events_total", map[string]string{"lcore": "1", "counter": "tx_handed_off"}); !ok || v == 0 {
		t.Errorf("worker 1 handed nothing to worker 0 to send (%v %v)", v, ok)
	}
	e.stopLBD(t)
}
