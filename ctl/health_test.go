package ctl

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// switchable is a health checker whose verdict per server the test sets.
type switchable struct {
	mu   sync.Mutex
	down map[string]bool
}

func (s *switchable) set(addr string, down bool) {
	s.mu.Lock()
	s.down[addr] = down
	s.mu.Unlock()
}

func (s *switchable) check(_ context.Context, t health.Target) (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down[t.Addr.Addr().String()] {
		return false, "connect: connection refused"
	}
	return true, ""
}

const healthConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    sorry_server: 198.51.100.99:80
    health: {type: tcp, interval: 100ms, timeout: 50ms, rise: 1, fall: 1, on_failure: expire}
    servers:
      - {address: 198.51.100.11, weight: 4}
      - {address: 198.51.100.12, weight: 4}
`

// firstServiceWeights is the weights of the snapshot's first service's
// dests, in order (the sorry server last while it stands in).
func firstServiceWeights(c *Controller) []int32 {
	var w []int32
	for _, d := range c.Snapshot().Services[0].Dests {
		w = append(w, d.Weight)
	}
	return w
}

// switchedHealth gives c a health monitor whose verdicts the test sets
// through the returned switchable.
func switchedHealth(t *testing.T, c *Controller) *switchable {
	sw := &switchable{down: map[string]bool{}}
	runHealth(t, c, health.Plain(sw.check))
	return sw
}

// runHealth gives c a running health monitor that probes with check.
func runHealth(t *testing.T, c *Controller, check health.Checker) {
	mon := health.New(zap.NewNop(), c.HealthChanged, health.WithChecker(check))
	ctx, cancel := context.WithCancel(context.Background())
	go mon.Run(ctx)
	t.Cleanup(func() {
		mon.Close()
		cancel()
	})
	c.SetHealth(mon)
}

func TestHealthDrivesWeights(t *testing.T) {
	c, _, _ := controllerFor(t, healthConfig)
	sw := switchedHealth(t, c)

	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	weights := func() []int32 { return firstServiceWeights(c) }
	rs1 := c.Snapshot().Services[0].Dests[0].ID

	sw.set("198.51.100.11", true)
	waitFor("rs1 down", func() bool { w := weights(); return len(w) == 2 && w[0] == 0 && w[1] == 4 })
	if !c.Snapshot().DestExpired(rs1) {
		t.Fatal("on_failure: expire did not mark rs1's connections")
	}
	resp := c.view(nil).Response()
	if rs := resp.Services[0].Servers[0]; rs.Health != "down" || rs.HealthReason != "connect: connection refused" {
		t.Fatalf("listing shows %q %q", rs.Health, rs.HealthReason)
	}

	// Both down: the sorry server stands in.
	sw.set("198.51.100.12", true)
	waitFor("sorry server", func() bool { return len(weights()) == 3 })
	sorry := c.Snapshot().Services[0].Dests[2]
	if sorry.Addr != ip4(198, 51, 100, 99) || sorry.Port != 80 || sorry.Weight != 1 {
		t.Fatalf("sorry dest %+v", sorry)
	}
	if rs := c.view(nil).Response().Services[0].Servers[2]; rs.Health != "sorry" {
		t.Fatalf("sorry server listed as %q", rs.Health)
	}

	// Recovery: back to the configured weights, the sorry server gone.
	sw.set("198.51.100.11", false)
	sw.set("198.51.100.12", false)
	waitFor("recovery", func() bool { w := weights(); return len(w) == 2 && w[0] == 4 && w[1] == 4 })
	if c.Snapshot().DestExpired(rs1) {
		t.Fatal("a recovered server's connections are still being ended")
	}
}

const passiveConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    health: {passive: true}
    servers:
      - {address: 198.51.100.11, weight: 3}
      - {address: 198.51.100.12, weight: 3}
`

// TestPassiveHealth: a server whose new connections mostly never reach
// ESTABLISHED for two windows is held out, then let back in.
func TestPassiveHealth(t *testing.T) {
	c, f, _ := controllerFor(t, passiveConfig)
	rs1, rs2 := c.Snapshot().Services[0].Dests[0].ID, c.Snapshot().Services[0].Dests[1].ID
	t0 := time.Unix(1000, 0)
	window := func(i int, rs1New, rs1Est uint64) {
		d := f.dest[rs1]
		d[lcore.DestConns] += rs1New
		d[lcore.DestEstablished] += rs1Est
		f.dest[rs1] = d
		e := f.dest[rs2] // rs2 answers everything
		e[lcore.DestConns] += 50
		e[lcore.DestEstablished] += 50
		f.dest[rs2] = e
		c.step(t0.Add(time.Duration(i) * passiveWindow))
	}
	weights := func() (int32, int32) {
		d := c.Snapshot().Services[0].Dests
		return d[0].Weight, d[1].Weight
	}
	window(0, 0, 0)  // first sample
	window(1, 40, 2) // bad
	if w1, _ := weights(); w1 != 3 {
		t.Fatal("suspect after one bad window")
	}
	window(2, 40, 1) // bad again: suspect
	if w1, w2 := weights(); w1 != 0 || w2 != 3 {
		t.Fatalf("weights %d/%d after two bad windows, want 0/3", w1, w2)
	}
	window(3, 0, 0) // held out: no attempts
	window(4, 0, 0)
	if w1, _ := weights(); w1 != 0 {
		t.Fatal("let back in too early")
	}
	window(6, 0, 0) // past the hold
	if w1, _ := weights(); w1 != 3 {
		t.Fatalf("rs1 weight %d after the hold, want 3", w1)
	}
}

const feedbackConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    feedback: {type: http, interval: 100ms, timeout: 50ms, smoothing: 0, hysteresis_percent: 5}
    servers:
      - {address: 198.51.100.11, weight: 100}
      - {address: 198.51.100.12, weight: 100}
`

// TestFeedbackDrivesWeights: a busy server's reported load lowers its
// weight in the lcores' snapshot; an idle one keeps its configured weight.
func TestFeedbackDrivesWeights(t *testing.T) {
	c, _, _ := controllerFor(t, feedbackConfig)
	var mu sync.Mutex
	load := map[string]float64{"198.51.100.11": 80, "198.51.100.12": 0}
	fb := feedback.New(zap.NewNop(), c.FeedbackChanged, feedback.WithProber(func(_ context.Context, t feedback.Target) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		return load[t.Addr.Addr().String()], nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go fb.Run(ctx)
	defer fb.Close()
	c.SetFeedback(fb)
	deadline := time.Now().Add(5 * time.Second)
	for {
		d := c.Snapshot().Services[0].Dests
		if d[0].Weight == 20 && d[1].Weight == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weights %d/%d, want 20/100 (loads 80%% and 0%%)", d[0].Weight, d[1].Weight)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProbeThroughLBD: a via-lbd check asks the dataplane for a SYN and
// reads the answer the lcores report.
func TestProbeThroughLBD(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"), Check: conf.HealthCheck{Type: "tcp", Via: "lbd"}}
	for _, tc := range []struct {
		answer lcore.ProbeResult
		ok     bool
		reason string
	}{
		{lcore.ProbeOpen, true, ""},
		{lcore.ProbeRefused, false, "connect: connection refused (through lbd)"},
	} {
		f.probeMu.Lock()
		f.probes = nil
		f.probeMu.Unlock()
		done := make(chan [2]any)
		go func() {
			ok, reason := c.probeThroughLBD(context.Background(), target)
			done <- [2]any{ok, reason}
		}()
		var sent lcore.Event
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			f.probeMu.Lock()
			n := len(f.probes)
			if n > 0 {
				sent = f.probes[0]
			}
			f.probeMu.Unlock()
			if n > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no probe sent")
			}
		}
		if sent.IP != ip4(198, 51, 100, 11) || sent.DstPort != 80 || sent.SrcPort < lcore.ProbePortFirst {
			t.Fatalf("probe %+v", sent)
		}
		sent.Result = tc.answer
		c.probes.deliver(sent)
		got := <-done
		if got[0] != tc.ok || got[1] != tc.reason {
			t.Errorf("answer %d: got %v %q, want %v %q", tc.answer, got[0], got[1], tc.ok, tc.reason)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ok, reason := c.ProbeTCP(ctx, target); ok || reason != "timeout after 1s (through lbd)" {
		t.Errorf("unanswered probe: %v %q", ok, reason)
	}
	testProbeResentWithoutMAC(t, c, target, func() (lcore.Event, bool) { return probeSentNow(f) },
		func(sent lcore.Event) lcore.Event { sent.Result = lcore.ProbeOpen; return sent }, "")
}

// testProbeResentWithoutMAC: a probe of target that the dataplane could
// not send for want of the server's MAC (ProbeNotSent) is sent again,
// the same, while its timeout lasts, and the answer to a later one
// decides it; a server whose MAC never comes fails with that reason.
// poll takes the packet sent last, if any, as the event that reports it
// (its key and Ack the probe's); answer makes the server's answer to it,
// which makes the check say want ("" for a pass).
func testProbeResentWithoutMAC(t *testing.T, c *Controller, target health.Target, poll func() (lcore.Event, bool), answer func(sent lcore.Event) lcore.Event, want string) {
	t.Helper()
	next := func() lcore.Event {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			if ev, ok := poll(); ok {
				return ev
			}
			if time.Now().After(deadline) {
				t.Fatal("no probe sent")
			}
		}
	}
	run := func(ctx context.Context) chan [2]any {
		done := make(chan [2]any, 1)
		go func() {
			ok, reason := c.probeThroughLBD(ctx, target)
			done <- [2]any{ok, reason}
		}()
		return done
	}
	notSent := func(ev lcore.Event) lcore.Event {
		ev.Result = lcore.ProbeNotSent
		return ev
	}
	for _, ok := poll(); ok; _, ok = poll() { // what earlier probes sent
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := run(ctx)
	first := next()
	c.probes.deliver(notSent(first))
	again := next()
	if again.SrcPort != first.SrcPort || again.Ack != first.Ack || again.IP != first.IP || again.IP6 != first.IP6 {
		t.Fatalf("after no MAC, sent %+v, then %+v", first, again)
	}
	c.probes.deliver(answer(again))
	if got := <-done; got[0] != (want == "") || got[1] != want {
		t.Errorf("the answer to the probe sent again: %v %q, want %q", got[0], got[1], want)
	}
	// Never a MAC: sent again and again, and when the time is up (once
	// the probe has taken the last ProbeNotSent), failed for that.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = run(ctx)
	for i := 0; i < 3; i++ {
		c.probes.deliver(notSent(next()))
	}
	for deadline := time.Now().Add(2 * time.Second); probesPending(&c.probes) != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the probe does not take its answers")
		}
	}
	cancel()
	if got := <-done; got[0] != false || got[1] != "probe not sent: no route or no MAC for the server" {
		t.Errorf("no MAC for the whole timeout: %v %q", got[0], got[1])
	}
}

// probesPending counts the answers delivered to probes in flight and not
// taken yet.
func probesPending(p *probeState) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, w := range p.waiters {
		n += len(w.ch)
	}
	return n
}

// probeSentNow takes the probe the fake dataplane recorded last, if any.
func probeSentNow(f *fakeDataplane) (lcore.Event, bool) {
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	n := len(f.probes)
	if n == 0 {
		return lcore.Event{}, false
	}
	ev := f.probes[n-1]
	f.probes = nil
	return ev, true
}

// TestProbeThroughLBD6: a via-lbd check of an IPv6 server asks for a
// probe to its IPv6 address; only an answer from that address counts.
func TestProbeThroughLBD6(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("[fd00:1::11]:80"), Check: conf.HealthCheck{Type: "tcp", Via: "lbd"}}
	done := make(chan bool)
	go func() {
		ok, _ := c.probeThroughLBD(context.Background(), target)
		done <- ok
	}()
	sent := probeSent(t, f)
	if sent.IP6 != hdr.Addr6From(netip.MustParseAddr("fd00:1::11")) || sent.IP != 0 || sent.DstPort != 80 || sent.SrcPort < lcore.ProbePortFirst {
		t.Fatalf("probe %+v", sent)
	}
	other := sent
	other.IP6 = hdr.Addr6From(netip.MustParseAddr("fd00:1::12"))
	other.Result = lcore.ProbeOpen
	c.probes.deliver(other) // another server's answer on the same ports
	select {
	case <-done:
		t.Fatal("another address's answer was taken for the server's")
	case <-time.After(50 * time.Millisecond):
	}
	sent.Result = lcore.ProbeOpen
	c.probes.deliver(sent)
	if !<-done {
		t.Fatal("the server's own answer did not pass the check")
	}
}

// probeSent waits for the next probe the fake dataplane records.
func probeSent(t *testing.T, f *fakeDataplane) lcore.Event {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		f.probeMu.Lock()
		if n := len(f.probes); n > 0 {
			ev := f.probes[n-1]
			f.probes = nil
			f.probeMu.Unlock()
			return ev
		}
		f.probeMu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no probe sent")
		}
	}
}

// TestSpoofedProbeAnswersChangeNothing: an answer that does not
// acknowledge the probe's random sequence number, or names another source
// port, is not the server's: the check goes on waiting for the real one.
// Probes leave from random source ports with random sequence numbers.
func TestSpoofedProbeAnswersChangeNothing(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"), Check: conf.HealthCheck{Type: "tcp", Via: "lbd"}}
	for _, genuine := range []lcore.ProbeResult{lcore.ProbeRefused, lcore.ProbeOpen} {
		f.probeMu.Lock()
		f.probes = nil
		f.probeMu.Unlock()
		done := make(chan bool)
		go func() {
			ok, _ := c.probeThroughLBD(context.Background(), target)
			done <- ok
		}()
		sent := probeSent(t, f)
		spoofed := lcore.ProbeOpen + lcore.ProbeRefused - genuine // the other answer
		for _, ev := range []lcore.Event{
			{Kind: lcore.EvProbe, IP: sent.IP, DstPort: 80, SrcPort: sent.SrcPort, Result: spoofed, Ack: sent.Ack + 1},
			{Kind: lcore.EvProbe, IP: sent.IP, DstPort: 80, SrcPort: sent.SrcPort, Result: spoofed},
			{Kind: lcore.EvProbe, IP: sent.IP, DstPort: 80, SrcPort: sent.SrcPort + 1, Result: spoofed, Ack: sent.Ack},
		} {
			c.probes.deliver(ev)
		}
		sent.Result = genuine
		c.probes.deliver(sent)
		if ok := <-done; ok != (genuine == lcore.ProbeOpen) {
			t.Fatalf("after spoofed %v answers and a genuine %v, the check says ok=%v", spoofed, genuine, ok)
		}
	}
	if n := c.probes.rejected.Load(); n != 4 {
		t.Fatalf("%d answers rejected, want 4 (one spoofed source port matches no probe)", n)
	}
	// Random source ports and sequence numbers, not a counter.
	var ports []uint16
	seqs := map[uint32]bool{}
	for i := 0; i < 20; i++ {
		go c.probeThroughLBD(context.Background(), target)
		sent := probeSent(t, f)
		ports, seqs[sent.Ack] = append(ports, sent.SrcPort), true
		sent.Result = lcore.ProbeRefused
		c.probes.deliver(sent)
	}
	steps := 0
	for i := 1; i < len(ports); i++ {
		if ports[i] == ports[i-1]+1 {
			steps++
		}
	}
	if steps > 2 || len(seqs) < 19 {
		t.Fatalf("probe source ports %v (%d steps of one), %d distinct sequence numbers", ports, steps, len(seqs))
	}
}

const healthConfig6 = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, address6: 2001:db8::1/64, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, address6: fd00:1::1/64, role: server}
services:
  - protocol: tcp
    vip: 2001:db8::10
    port: 80
    sorry_server: "[fd00:1::99]:8080"
    health: {type: tcp, interval: 100ms, timeout: 50ms, rise: 1, fall: 1}
    servers:
      - {address: fd00:1::11, weight: 4}
`

// TestHealthSorryServer6: an IPv6 service's sorry server is resolved
// before it is needed and, once its server is down, stands in as an IPv6
// NAT destination (NAT66), listed as sorry; it goes when the server is
// back.
func TestHealthSorryServer6(t *testing.T) {
	c, _, _ := controllerFor(t, healthConfig6)
	sorryAddr := hdr.Addr6From(netip.MustParseAddr("fd00:1::99"))
	if _, ok := c.wantedNeighbours6()[sorryAddr]; !ok {
		t.Fatalf("the sorry server is not among the IPv6 neighbours to resolve: %v", c.wantedNeighbours6())
	}
	sw := switchedHealth(t, c)
	dests := func() []sched.Dest { return c.Snapshot().Services[0].Dests }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: dests %+v", what, dests())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	sw.set("fd00:1::11", true)
	waitFor("sorry server", func() bool { return len(dests()) == 2 })
	sorry := dests()[1]
	if sorry.Addr6 != sorryAddr || sorry.Port != 8080 || sorry.Weight != 1 || sorry.Fwd != fwd.NAT {
		t.Fatalf("sorry dest %+v, want [fd00:1::99]:8080 by nat, weight 1", sorry)
	}
	if rs := c.view(nil).Response().Services[0].Servers[1]; rs.Health != "sorry" || rs.Address != "fd00:1::99" || rs.Port != 8080 {
		t.Fatalf("sorry server listed as %s port %d %q", rs.Address, rs.Port, rs.Health)
	}

	sw.set("fd00:1::11", false)
	waitFor("recovery", func() bool { d := dests(); return len(d) == 1 && d[0].Weight == 4 })
}

// segmentSent waits for the next probe segment the fake dataplane records.
func segmentSent(t *testing.T, f *fakeDataplane) lcore.Command {
	t.Helper()
	return commandSent(t, f, lcore.CmdProbeSegment)
}

// commandSent waits for the next command of kind the fake dataplane
// records for worker 0.
func commandSent(t *testing.T, f *fakeDataplane, kind lcore.CommandKind) lcore.Command {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		if cmd, ok := commandSentNow(t, f, kind); ok {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v sent", kind)
		}
	}
}

// commandSentNow takes the first command of kind the fake dataplane
// recorded for worker 0, if any.
func commandSentNow(t *testing.T, f *fakeDataplane, kind lcore.CommandKind) (lcore.Command, bool) {
	t.Helper()
	f.cmdMu.Lock()
	defer f.cmdMu.Unlock()
	for i, sc := range f.commands {
		if sc.cmd.Kind == kind {
			f.commands = append(f.commands[:i:i], f.commands[i+1:]...)
			if sc.worker != 0 {
				t.Fatalf("%v sent by worker %d", kind, sc.worker)
			}
			return sc.cmd, true
		}
	}
	return lcore.Command{}, false
}

// TestHTTPProbeThroughLBD: an HTTP check through lbd opens the connection
// with a SYN from the upper half of the probe ports, sends the request in
// one segment once the server's SYN-ACK is in, and judges the status line
// at the start of the answer; an answer that does not acknowledge the
// request is not believed, and a probe that times out resets the server's
// side.
func TestHTTPProbeThroughLBD(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"),
		Check: conf.HealthCheck{Type: "http", Via: "lbd", Path: "/health", ExpectStatus: "200-299"}}
	const serverISN = 5000
	for _, tc := range []struct {
		answer string
		flags  uint8
		ok     bool
		reason string
	}{
		{"HTTP/1.1 200 OK\r\nContent-Le", hdr.TCPFlagACK | hdr.TCPFlagPSH, true, ""},
		{"HTTP/1.0 204 No Content\r\n\r\n", hdr.TCPFlagACK | hdr.TCPFlagPSH | hdr.TCPFlagFIN, true, ""},
		{"HTTP/1.1 503 Service Unavaila", hdr.TCPFlagACK | hdr.TCPFlagPSH, false, "HTTP status 503, want 200-299 (through lbd)"},
		{"", hdr.TCPFlagACK | hdr.TCPFlagFIN, false, "connection closed without an answer (through lbd)"},
		{"SSH-2.0-OpenSSH_9.2p1", hdr.TCPFlagACK | hdr.TCPFlagPSH, false, `no HTTP status line at the answer's start: "SSH-2.0-OpenSSH_9.2p1" (through lbd)`},
		{"HTTP/1.1 2x0 OK", hdr.TCPFlagACK | hdr.TCPFlagPSH, false, `no HTTP status code at the answer's start: "HTTP/1.1 2x0 OK" (through lbd)`},
	} {
		done := make(chan [2]any)
		go func() {
			ok, reason := c.probeThroughLBD(context.Background(), target)
			done <- [2]any{ok, reason}
		}()
		syn := probeSent(t, f)
		if syn.IP != ip4(198, 51, 100, 11) || syn.DstPort != 80 || syn.SrcPort < lcore.HTTPProbePortFirst || syn.SrcPort >= lcore.ProbePortFirst+lcore.ProbePorts {
			t.Fatalf("SYN %+v", syn)
		}
		synAck := syn
		synAck.Result, synAck.Seq = lcore.ProbeOpen, serverISN
		c.probes.deliver(synAck)
		req := segmentSent(t, f)
		want := "GET /health HTTP/1.0\r\nHost: 198.51.100.11:80\r\nUser-Agent: dplb-health\r\nConnection: close\r\n\r\n"
		if req.IP != syn.IP || req.SrcPort != syn.SrcPort || req.DstPort != 80 || req.Flags != hdr.TCPFlagACK|hdr.TCPFlagPSH ||
			req.Seq != syn.Ack || req.Ack != serverISN+1 || string(req.Payload) != want {
			t.Fatalf("request %+v %q", req, req.Payload)
		}
		answer := lcore.Event{Kind: lcore.EvProbe, IP: syn.IP, DstPort: 80, SrcPort: syn.SrcPort, Result: lcore.ProbeData,
			Seq: serverISN + 1, Ack: req.Seq + uint32(len(req.Payload)), Flags: tc.flags, DataLen: uint8(len(tc.answer))}
		copy(answer.Data[:], tc.answer)
		spoofed := answer
		spoofed.Ack++ // acknowledges what was never sent
		spoofed.DataLen = uint8(copy(spoofed.Data[:], "HTTP/1.1 200 OK"))
		rejected := c.probes.rejected.Load()
		c.probes.deliver(spoofed)
		if c.probes.rejected.Load() != rejected+1 {
			t.Fatal("an answer that acknowledges nothing sent was not rejected")
		}
		c.probes.deliver(answer)
		got := <-done
		if got[0] != tc.ok || got[1] != tc.reason {
			t.Errorf("answer %q: got %v %q, want %v %q", tc.answer, got[0], got[1], tc.ok, tc.reason)
		}
	}

	// Unanswered after the handshake: a timeout, and an RST for the server.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan string)
	go func() {
		_, reason := c.ProbeHTTP(ctx, target)
		done <- reason
	}()
	syn := probeSent(t, f)
	syn.Result, syn.Seq = lcore.ProbeOpen, serverISN
	c.probes.deliver(syn)
	req := segmentSent(t, f)
	if reason := <-done; reason != "timeout after 1s (through lbd)" {
		t.Errorf("unanswered request: %q", reason)
	}
	if rst := segmentSent(t, f); rst.Flags != hdr.TCPFlagRST || rst.Seq != req.Seq+uint32(len(req.Payload)) {
		t.Errorf("after the timeout: %+v", rst)
	}

	// A server whose socket went away between its SYN-ACK and the request
	// answers the request with a RST that has no ACK, only the sequence
	// number the request acknowledged (RFC 793 3.4): that one, and no
	// other, ends the probe.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done = make(chan string)
	go func() {
		_, reason := c.probeThroughLBD(ctx, target)
		done <- reason
	}()
	syn = probeSent(t, f)
	synAck := syn
	synAck.Result, synAck.Seq = lcore.ProbeOpen, serverISN
	c.probes.deliver(synAck)
	segmentSent(t, f)
	rst := lcore.Event{Kind: lcore.EvProbe, IP: syn.IP, DstPort: 80, SrcPort: syn.SrcPort, Result: lcore.ProbeRefused,
		Seq: serverISN + 2, Flags: hdr.TCPFlagRST}
	rejected := c.probes.rejected.Load()
	c.probes.deliver(rst)
	if c.probes.rejected.Load() != rejected+1 {
		t.Fatal("a RST without ACK off the server's sequence number was not rejected")
	}
	rst.Seq = serverISN + 1
	c.probes.deliver(rst)
	if reason := <-done; reason != "connection reset by the server (through lbd)" {
		t.Errorf("the server's RST to the request: %q", reason)
	}
	if c.probes.rejected.Load() != rejected+1 {
		t.Error("the server's RST to the request was rejected")
	}

	// A SYN that finds no MAC goes again.
	testProbeResentWithoutMAC(t, c, target, func() (lcore.Event, bool) { return probeSentNow(f) },
		func(sent lcore.Event) lcore.Event { sent.Result = lcore.ProbeRefused; return sent }, "connect: connection refused (through lbd)")
}

// TestUDPProbeThroughLBD: a UDP check through lbd has worker 0 send the
// check's datagram from a random probe port; the reply passes when its
// start holds expect, a port unreachable fails it, an answer of another
// protocol on the same ports is not the reply, and silence is a timeout.
func TestUDPProbeThroughLBD(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:53"),
		Check: conf.HealthCheck{Type: "udp", Via: "lbd", Send: "ping", Expect: "pong"}}
	for _, tc := range []struct {
		result lcore.ProbeResult
		reply  string
		ok     bool
		reason string
	}{
		{lcore.ProbeData, "..pong..", true, ""},
		{lcore.ProbeData, "nope", false, `reply does not contain "pong" in its first 64 bytes (through lbd)`},
		{lcore.ProbeRefused, "", false, "port unreachable (through lbd)"},
	} {
		done := make(chan [2]any)
		go func() {
			ok, reason := c.probeThroughLBD(context.Background(), target)
			done <- [2]any{ok, reason}
		}()
		sent := commandSent(t, f, lcore.CmdProbeDatagram)
		if sent.IP != ip4(198, 51, 100, 11) || sent.DstPort != 53 || sent.SrcPort < lcore.ProbePortFirst ||
			sent.SrcPort >= lcore.ProbePortFirst+lcore.ProbePorts || string(sent.Payload) != "ping" {
			t.Fatalf("datagram %+v", sent)
		}
		ev := lcore.Event{Kind: lcore.EvProbe, Proto: hdr.ProtoUDP, IP: sent.IP, DstPort: 53, SrcPort: sent.SrcPort, Result: tc.result,
			DataLen: uint8(len(tc.reply))}
		copy(ev.Data[:], tc.reply)
		other := ev
		other.Proto, other.Result = hdr.ProtoTCP, lcore.ProbeRefused // a TCP answer on the same ports
		c.probes.deliver(other)
		c.probes.deliver(ev)
		got := <-done
		if got[0] != tc.ok || got[1] != tc.reason {
			t.Errorf("%v %q: got %v %q, want %v %q", tc.result, tc.reply, got[0], got[1], tc.ok, tc.reason)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ok, reason := c.ProbeUDP(ctx, target); ok || reason != "no reply within 1s (through lbd)" {
		t.Errorf("unanswered probe: %v %q", ok, reason)
	}
	testProbeResentWithoutMAC(t, c, target, func() (lcore.Event, bool) {
		cmd, ok := commandSentNow(t, f, lcore.CmdProbeDatagram)
		if ok && string(cmd.Payload) != "ping" {
			t.Fatalf("datagram %+v", cmd)
		}
		return lcore.Event{Kind: lcore.EvProbe, Proto: hdr.ProtoUDP, IP: cmd.IP, DstPort: cmd.DstPort, SrcPort: cmd.SrcPort}, ok
	}, func(sent lcore.Event) lcore.Event {
		sent.Result, sent.DataLen = lcore.ProbeData, uint8(copy(sent.Data[:], "pong"))
		return sent
	}, "")
}

// TestICMPProbeThroughLBD: an ICMP check through lbd has worker 0 send an
// echo request with an identifier from the probe range; only the echo
// reply that carries the request's sequence number passes it, and
// silence is a timeout.
func TestICMPProbeThroughLBD(t *testing.T) {
	c, f := newTestController(t)
	target := health.Target{Addr: netip.MustParseAddrPort("[fd00:1::11]:80"), Check: conf.HealthCheck{Type: "icmp", Via: "lbd"}}
	done := make(chan [2]any)
	go func() {
		ok, reason := c.probeThroughLBD(context.Background(), target)
		done <- [2]any{ok, reason}
	}()
	sent := commandSent(t, f, lcore.CmdProbeEcho)
	if sent.IP6 != hdr.Addr6From(netip.MustParseAddr("fd00:1::11")) || sent.IP != 0 || sent.SrcPort < lcore.ProbePortFirst ||
		sent.SrcPort >= lcore.ProbePortFirst+lcore.ProbePorts || sent.Seq > 0xffff {
		t.Fatalf("echo request %+v", sent)
	}
	reply := lcore.Event{Kind: lcore.EvProbe, Proto: hdr.ProtoICMP, IP6: sent.IP6, SrcPort: sent.SrcPort, Ack: sent.Seq ^ 1, Result: lcore.ProbeData}
	rejected := c.probes.rejected.Load()
	c.probes.deliver(reply) // another sequence number: not the reply
	if c.probes.rejected.Load() != rejected+1 {
		t.Fatal("an echo reply with another sequence number was not rejected")
	}
	reply.Ack = sent.Seq
	c.probes.deliver(reply)
	if got := <-done; got[0] != true || got[1] != "" {
		t.Fatalf("the echo reply: %v %q", got[0], got[1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if ok, reason := c.ProbeICMP(ctx, target); ok || reason != "no echo reply within 1s (through lbd)" {
		t.Errorf("unanswered probe: %v %q", ok, reason)
	}
	testProbeResentWithoutMAC(t, c, target, func() (lcore.Event, bool) {
		cmd, ok := commandSentNow(t, f, lcore.CmdProbeEcho)
		return lcore.Event{Kind: lcore.EvProbe, Proto: hdr.ProtoICMP, IP6: cmd.IP6, SrcPort: cmd.SrcPort, Ack: cmd.Seq}, ok
	}, func(sent lcore.Event) lcore.Event {
		sent.Result = lcore.ProbeData
		return sent
	}, "")
}

// TestViaLBDLimitsFitTheDataplane: the configuration's bounds on checks
// through lbd (conf cannot import lcore) are the dataplane's: the longest
// UDP send and HTTP request it accepts fit one probe packet
// (lcore.MaxProbePayload), the longest UDP expect fits what a reply event
// keeps (lcore.ProbeDataLen), and one byte more is refused.
func TestViaLBDLimitsFitTheDataplane(t *testing.T) {
	cfg, err := conf.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	valid := func(h conf.HealthCheck) bool {
		cfg.Services[0].Health = h
		return cfg.Validate(nil) == nil
	}
	udp := conf.HealthCheck{Type: "udp", Via: "lbd", Send: strings.Repeat("s", lcore.MaxProbePayload), Expect: strings.Repeat("e", lcore.ProbeDataLen)}
	if !valid(udp) {
		t.Error("the longest UDP send and expect the dataplane takes are refused")
	}
	udp.Send += "s"
	if valid(udp) {
		t.Error("a UDP send longer than a probe packet is accepted")
	}
	udp.Send, udp.Expect = "s", udp.Expect+"e"
	if valid(udp) {
		t.Error("a UDP expect longer than a reply event keeps is accepted")
	}
	// The longest path and Host the configuration accepts (900 bytes
	// together), with either method whose request is longest.
	for _, method := range []string{"OPTIONS", "POST"} {
		h := conf.HealthCheck{Type: "http", Via: "lbd", Method: method, Path: "/" + strings.Repeat("p", 850), Host: strings.Repeat("h", 49)}
		if !valid(h) {
			t.Fatalf("%s: a path and Host of 900 bytes are refused", method)
		}
		target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"), Check: h}
		if n := len(httpProbeRequest(target)); n > lcore.MaxProbePayload {
			t.Errorf("%s: the longest accepted request is %d bytes, a probe packet holds %d", method, n, lcore.MaxProbePayload)
		}
		if h.Host += "h"; valid(h) {
			t.Errorf("%s: a path and Host of 901 bytes are accepted", method)
		}
	}
}

// TestProbePortQuarantine: a finished probe's source port is not used
// again for probeQuarantine while another is free, so the server's late
// segments of the old exchange (its FIN after the answer) find no probe
// and are not counted as rejected answers to a new one; with no other
// port free, the quarantined one is used rather than none.
func TestProbePortQuarantine(t *testing.T) {
	var p probeState
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"), Check: conf.HealthCheck{Type: "http", Via: "lbd"}}
	const first, count = 40000, 2
	k1, w1, done1 := p.start(target, hdr.ProtoTCP, first, count)
	done1()
	for i := 0; i < 20; i++ { // the random start would pick k1's port half the time
		k2, _, done2 := p.start(target, hdr.ProtoTCP, first, count)
		if k2.srcPort == k1.srcPort {
			t.Fatalf("probe %d took port %d, quarantined since the last probe ended", i, k2.srcPort)
		}
		// The old exchange's FIN arrives while the new probe waits.
		p.deliver(lcore.Event{Proto: hdr.ProtoTCP, IP: k1.ip, DstPort: k1.dstPort, SrcPort: k1.srcPort, Ack: w1.seq + 1 + 50, Result: lcore.ProbeData})
		if n := p.rejected.Load(); n != 0 {
			t.Fatalf("a late segment of the previous probe counted as %d rejected answers", n)
		}
		p.mu.Lock()
		delete(p.waiters, k2) // ended without quarantine: k1 stays the only quarantined port
		p.mu.Unlock()
		_ = done2
	}
	// Both ports quarantined: a probe still gets one, the port whose
	// probe ended first.
	k3, _, done3 := p.start(target, hdr.ProtoTCP, first, count)
	done3()
	k4, _, done4 := p.start(target, hdr.ProtoTCP, first, count)
	defer done4()
	if k3.srcPort == k1.srcPort || k4.srcPort != k1.srcPort {
		t.Fatalf("ports %d, then %d and %d with every port quarantined: want %d last", k1.srcPort, k3.srcPort, k4.srcPort, k1.srcPort)
	}
}

// TestRejectedProbeAnswersAreLogged: an answer to a probe in flight that
// does not acknowledge its sequence number is counted, and logged with
// what it carried at most once a minute; a genuine answer is not logged.
func TestRejectedProbeAnswersAreLogged(t *testing.T) {
	c, f := newTestController(t)
	core, logs := observer.New(zap.WarnLevel)
	c.log = zap.New(core)
	target := health.Target{Addr: netip.MustParseAddrPort("198.51.100.11:80"), Check: conf.HealthCheck{Type: "tcp", Via: "lbd"}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan bool)
	go func() {
		ok, _ := c.probeThroughLBD(ctx, target)
		done <- ok
	}()
	sent := probeSent(t, f)
	forged := sent
	forged.Result, forged.Ack, forged.Flags = lcore.ProbeRefused, sent.Ack+1000, hdr.TCPFlagRST|hdr.TCPFlagACK
	now := time.Now()
	f.events = []lcore.Event{forged, forged}
	c.step(now)
	f.events = []lcore.Event{forged}
	c.step(now.Add(30 * time.Second))
	lines := logs.FilterMessageSnippet("health probe answer rejected").All()
	if len(lines) != 1 || c.probes.rejected.Load() != 3 {
		t.Fatalf("%d lines for 3 rejected answers (counted %d), want 1", len(lines), c.probes.rejected.Load())
	}
	got := fmt.Sprint(lines[0].ContextMap())
	want := fmt.Sprintf("map[ack:%d probe_port:%d proto:6 rejected_total:1 result:refused seq:0 server:198.51.100.11 server_port:80 tcp_flags:20]", forged.Ack, sent.SrcPort)
	if got != want {
		t.Errorf("the line says %s, want %s", got, want)
	}
	f.events = []lcore.Event{forged}
	c.step(now.Add(61 * time.Second))
	if n := logs.FilterMessageSnippet("health probe answer rejected").Len(); n != 2 {
		t.Fatalf("%d lines after a minute, want 2", n)
	}
	sent.Result = lcore.ProbeOpen
	f.events = []lcore.Event{sent}
	c.step(now.Add(122 * time.Second))
	if !<-done || logs.FilterMessageSnippet("health probe answer rejected").Len() != 2 {
		t.Fatal("the genuine answer did not pass, or was logged")
	}
}

const quorumConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    sorry_server: 198.51.100.99:80
    quorum: 5
    hysteresis: 1
    health: {type: tcp, interval: 100ms, timeout: 50ms, rise: 1, fall: 1}
    servers:
      - {address: 198.51.100.11, weight: 2}
      - {address: 198.51.100.12, weight: 2}
      - {address: 198.51.100.13, weight: 2}
`

// TestHealthQuorum: keepalived's quorum with hysteresis. Three servers of
// weight 2, quorum 5, hysteresis 1: one down leaves 4, still within the
// hysteresis (lost below 4); two down leave 2: the quorum is lost, and
// the sorry server takes every new connection in place of the server
// left (weight 0; not down). One back makes 4: not yet (gained at 6);
// all back, the servers take over again. The metric follows.
func TestHealthQuorum(t *testing.T) {
	c, _, _ := controllerFor(t, quorumConfig)
	sw := switchedHealth(t, c)
	weights := func() []int32 { return firstServiceWeights(c) }
	waitWeights := func(what string, want ...int32) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !slices.Equal(weights(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: weights %v, want %v", what, weights(), want)
			}
		}
	}
	quorumUp := func() bool { return c.view(nil).Services[0].QuorumUp }
	if !quorumUp() {
		t.Fatal("three servers of weight 2 and quorum 5: lost at the start")
	}
	sw.set("198.51.100.11", true)
	waitWeights("one down: 4 left, within the hysteresis", 0, 2, 2)
	if !quorumUp() {
		t.Fatal("one down: the quorum is lost already")
	}
	sw.set("198.51.100.12", true)
	waitWeights("two down: the quorum lost, the sorry server in", 0, 0, 0, 1)
	if quorumUp() {
		t.Fatal("two down: the quorum still up")
	}
	if rs := c.view(nil).Response().Services[0].Servers; len(rs) != 4 || rs[2].Health != "up" || rs[3].Health != "sorry" {
		t.Fatalf("listing %+v: want the live server up (weight 0) and the sorry server standing in", rs)
	}
	sw.set("198.51.100.12", false)
	time.Sleep(300 * time.Millisecond) // three check intervals
	waitWeights("one back: 4, below quorum+hysteresis", 0, 0, 0, 1)
	sw.set("198.51.100.11", false)
	waitWeights("all back: the quorum gained, the sorry server out", 2, 2, 2)
	if !quorumUp() {
		t.Fatal("all back: the quorum still lost")
	}
}

const startDownConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    health: {type: tcp, interval: 100ms, timeout: 50ms, rise: 3, fall: 1, start_down: true}
    servers:
      - {address: 198.51.100.11, weight: 4}
      - {address: 198.51.100.12, weight: 4}
`

// TestHealthStartDown: with start_down the servers leave the snapshot
// lbd started with as soon as the monitor is attached, before any probe,
// and come in after rise passed probes; one whose probes fail never
// does. A server added later starts down too.
func TestHealthStartDown(t *testing.T) {
	c, _, _ := controllerFor(t, startDownConfig)
	if w := c.Snapshot().Services[0].Dests[0].Weight; w != 4 {
		t.Fatalf("before the monitor: weight %d (nothing is known yet)", w)
	}
	sw := &switchable{down: map[string]bool{"198.51.100.12": true}}
	mon := health.New(zap.NewNop(), c.HealthChanged, health.WithChecker(health.Plain(sw.check)))
	c.SetHealth(mon) // before Run: no probe can have passed
	weights := func() []int32 { return firstServiceWeights(c) }
	if w := weights(); !slices.Equal(w, []int32{0, 0}) {
		t.Fatalf("monitor attached, no probe yet: weights %v, want both down", w)
	}
	if rs := c.view(nil).Response().Services[0].Servers[0]; rs.Health != "down" || rs.HealthReason != health.StartDownReason {
		t.Errorf("listing %q %q, want down: %s", rs.Health, rs.HealthReason, health.StartDownReason)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go mon.Run(ctx)
	t.Cleanup(func() { mon.Close(); cancel() })
	for deadline := time.Now().Add(5 * time.Second); !slices.Equal(weights(), []int32{4, 0}); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("weights %v, want rs1 up after its probes passed, rs2 still down", weights())
		}
	}
	svcs, to := c.Services()
	svcs[0].Servers = append(svcs[0].Servers, conf.RealServer{Address: "198.51.100.13", Port: 80, Weight: 4, Forward: "nat"})
	if err := c.Apply(svcs, to); err != nil {
		t.Fatal(err)
	}
	if w := weights(); len(w) != 3 || w[2] != 0 {
		t.Errorf("a server added: weights %v, want it down until its probes pass", w)
	}
}

const exitWeightConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    quorum: 5
    sorry_server: 198.51.100.99:80
    health: {type: exec, command: [/bin/true], weight_from_exit: true, interval: 100ms, timeout: 50ms, rise: 1, fall: 1}
    servers:
      - {address: 198.51.100.11, weight: 4}
      - {address: 198.51.100.12, weight: 4}
`

// weighingChecker passes every probe, with the weight the test sets per
// server (-1: exit 0, none).
type weighingChecker struct {
	mu     sync.Mutex
	weight map[string]int
}

func (w *weighingChecker) check(_ context.Context, t health.Target) health.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	if v, ok := w.weight[t.Addr.Addr().String()]; ok {
		return health.Result{OK: true, Weight: v}
	}
	return health.Outcome(true, "")
}

func (w *weighingChecker) set(addr string, weight int) {
	w.mu.Lock()
	w.weight[addr] = weight
	w.mu.Unlock()
}

// waitServiceWeights waits until the first service's weights in c's
// snapshot are want; what says what the test is at in a failure.
func waitServiceWeights(t *testing.T, c *Controller, what string, want ...int32) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !slices.Equal(firstServiceWeights(c), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: weights %v, want %v", what, firstServiceWeights(c), want)
		}
	}
}

// TestHealthExitWeight: the weights a weight_from_exit check sets replace
// the configured ones in the snapshot and the listing, and the quorum
// counts them: two servers set to 1 weigh 2, below the quorum of 5, and
// the sorry server stands in.
func TestHealthExitWeight(t *testing.T) {
	c, _, _ := controllerFor(t, exitWeightConfig)
	wc := &weighingChecker{weight: map[string]int{}}
	runHealth(t, c, wc.check)
	waitWeights := func(what string, want ...int32) { t.Helper(); waitServiceWeights(t, c, what, want...) }
	waitWeights("exit 0: the configured weights", 4, 4)
	wc.set("198.51.100.11", 9)
	waitWeights("rs1 exits 11: weight 9", 9, 4)
	rs := c.view(nil).Response().Services[0].Servers[0]
	if rs.Weight != 9 || rs.ConfiguredWeight != 4 || rs.Probe == nil || rs.Probe.ExitWeight == nil || *rs.Probe.ExitWeight != 9 {
		t.Fatalf("listing: weight %d configured %d probe %+v, want 9, 4 and exit weight 9", rs.Weight, rs.ConfiguredWeight, rs.Probe)
	}
	wc.set("198.51.100.11", -1)
	time.Sleep(300 * time.Millisecond) // three probes exiting 0
	waitWeights("rs1 exits 0: its weight stays 9", 9, 4)
	wc.set("198.51.100.11", 1)
	wc.set("198.51.100.12", 1)
	waitWeights("both at 1: 2 is below the quorum of 5, the sorry server in", 0, 0, 1)
	wc.set("198.51.100.11", 4)
	waitWeights("5 again: the quorum back", 4, 1)
}

// TestHealthFileWeight: what a file check with a file_weight reads is
// added to the configured weight in the snapshot, the listing and the
// quorum (keepalived's FILE_CHECK weight), within 0..65535; a file check
// with weight 0 takes its server down while the file holds a number
// other than 0.
func TestHealthFileWeight(t *testing.T) {
	dir := t.TempDir()
	rs1, rs2 := filepath.Join(dir, "rs1"), filepath.Join(dir, "rs2")
	c, _, _ := controllerFor(t, fmt.Sprintf(`
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    quorum: 5
    sorry_server: 198.51.100.99:80
    health: {type: file, file: %s, file_weight: 2, interval: 100ms, timeout: 50ms, rise: 1, fall: 1}
    servers:
      - {address: 198.51.100.11, weight: 4}
      - {address: 198.51.100.12, weight: 4, health: {file: %s, file_weight: 0}}
`, rs1, rs2))
	runHealth(t, c, health.Check)
	waitWeights := func(what string, want ...int32) { t.Helper(); waitServiceWeights(t, c, what, want...) }
	write := func(file, v string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	waitWeights("no files: the configured weights", 4, 4)
	write(rs1, "3\n")
	waitWeights("rs1's file reads 3: 4 + 3*2", 10, 4)
	rs := c.view(nil).Response().Services[0].Servers[0]
	if rs.Weight != 10 || rs.ConfiguredWeight != 4 || rs.Probe == nil || rs.Probe.WeightDelta != 6 {
		t.Fatalf("listing: weight %d configured %d probe %+v, want 10, 4 and a weight delta of 6", rs.Weight, rs.ConfiguredWeight, rs.Probe)
	}
	write(rs1, "-1")
	waitWeights("rs1's file reads -1: 4 - 2", 2, 4)
	write(rs2, "1")
	waitWeights("rs2's file reads 1: down; rs1 weighs 2, below the quorum of 5: the sorry server in", 0, 0, 1)
	write(rs1, "40000")
	waitWeights("rs1 at its highest weight: the quorum back", 65535, 0)
	os.Remove(rs1)
	os.Remove(rs2)
	waitWeights("no files again: the configured weights", 4, 4)
}
