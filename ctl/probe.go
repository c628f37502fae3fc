package ctl

import (
	"context"
	"fmt"
	"sync"

	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
)

// Health probes through lbd (health.via: lbd): for real servers reachable
// only through the DPDK ports, a TCP check is a SYN that worker 0 sends
// from the output port's address; the answer comes back as an lcore event
// that the control loop delivers here.

type probeKey struct {
	ip               uint32
	dstPort, srcPort uint16
}

type probeState struct {
	mu      sync.Mutex
	next    uint16
	waiters map[probeKey]chan lcore.ProbeResult
}

func (p *probeState) deliver(ev lcore.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, ok := p.waiters[probeKey{ev.IP, ev.DstPort, ev.SrcPort}]; ok {
		select {
		case ch <- ev.Result:
		default:
		}
	}
}

// ProbeTCP is a health.Checker for checks with via: lbd: it asks the
// dataplane for a SYN to the server and waits for its answer.
func (c *Controller) ProbeTCP(ctx context.Context, t health.Target) (bool, string) {
	addr := t.ProbeAddr()
	if !addr.Addr().Is4() {
		return false, fmt.Sprintf("%s: not an IPv4 address", addr)
	}
	p := &c.probes
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = map[probeKey]chan lcore.ProbeResult{}
	}
	k := probeKey{ip: ipv4(addr.Addr()), dstPort: addr.Port()}
	for i := 0; i < lcore.ProbePorts; i++ { // a source port no probe in flight uses
		k.srcPort = lcore.ProbePortFirst + p.next%lcore.ProbePorts
		p.next++
		if _, busy := p.waiters[k]; !busy {
			break
		}
	}
	ch := make(chan lcore.ProbeResult, 1)
	p.waiters[k] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiters, k)
		p.mu.Unlock()
	}()
	if !c.dp.SendProbe(k.ip, k.dstPort, k.srcPort) {
		return false, "probe not sent: lbd's command ring is full"
	}
	select {
	case r := <-ch:
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
