package ctl

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Health probes through lbd (health.via: lbd): for real servers reachable
// only through the DPDK ports, a TCP check is a SYN that worker 0 sends
// from the output port's address; the answer comes back as an lcore event
// that the control loop delivers here.
//
// Nobody on the wire may fake a result: each probe has a source port and
// an initial sequence number drawn from crypto/rand, and an answer counts
// only if it acknowledges that number (a SYN-ACK, or the RST|ACK a closed
// port sends, both carry ack = seq + 1). The lcores already dropped answers
// that came in on a port that does not lead to the server (probe_spoofed).

type probeKey struct {
	ip               uint32
	ip6              hdr.Addr6 // an IPv6 server's (ip 0)
	dstPort, srcPort uint16
}

type probeWaiter struct {
	seq uint32
	ch  chan lcore.ProbeResult
}

type probeState struct {
	mu      sync.Mutex
	waiters map[probeKey]probeWaiter
	// rejected counts answers to a probe in flight that did not acknowledge
	// its sequence number (dplb_probe_answers_rejected_total).
	rejected atomic.Uint64
}

func (p *probeState) deliver(ev lcore.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.waiters[probeKey{ev.IP, ev.IP6, ev.DstPort, ev.SrcPort}]
	if !ok {
		return // no probe in flight: late, or made up
	}
	if ev.Result != lcore.ProbeNotSent && ev.Ack != w.seq+1 {
		p.rejected.Add(1)
		return
	}
	select {
	case w.ch <- ev.Result:
	default:
	}
}

// random32 draws from crypto/rand: probe ports and sequence numbers must
// not be guessable from earlier ones.
func random32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's generator does not fail
	}
	return binary.LittleEndian.Uint32(b[:])
}

// ProbeTCP is a health.Checker for checks with via: lbd: it asks the
// dataplane for a SYN to the server and waits for its answer.
func (c *Controller) ProbeTCP(ctx context.Context, t health.Target) (bool, string) {
	addr := t.ProbeAddr()
	p := &c.probes
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = map[probeKey]probeWaiter{}
	}
	k := probeKey{ip: ipv4(addr.Addr()), ip6: ipv6(addr.Addr()), dstPort: addr.Port()}
	start := random32()
	for i := uint32(0); i < lcore.ProbePorts; i++ { // a random source port no probe in flight uses
		k.srcPort = lcore.ProbePortFirst + uint16((start+i)%lcore.ProbePorts)
		if _, busy := p.waiters[k]; !busy {
			break
		}
	}
	w := probeWaiter{seq: random32(), ch: make(chan lcore.ProbeResult, 1)}
	p.waiters[k] = w
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiters, k)
		p.mu.Unlock()
	}()
	if !c.dp.SendProbe(k.ip, k.ip6, k.dstPort, k.srcPort, w.seq) {
		return false, "probe not sent: lbd's command ring is full"
	}
	select {
	case r := <-w.ch:
		switch r {
		case lcore.ProbeOpen:
			return true, ""
		case lcore.ProbeRefused:
			return false, "connect: connection refused (through lbd)"
		}
		return false, "probe not sent: no route or no MAC for the server"
	case <-ctx.Done():
		timeout := t.Check.Effective().Timeout
		return false, fmt.Sprintf("timeout after %v (through lbd)", timeout)
	}
}

// checker probes through lbd the checks that ask for it, and from the
// host's stack the others.
func (c *Controller) checker(ctx context.Context, t health.Target) (bool, string) {
	if t.Check.Via == "lbd" {
		return c.ProbeTCP(ctx, t)
	}
	return health.Probe(ctx, t)
}
