package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// TestContinuityStormFourWorkers: nothing but the death of its own real
// server may break an established connection. 500 long-lived TCP streams
// through VS/NAT on four workers each carry 100 KiB over about 20 s while
// lbd's control API takes a storm of edits to other services, the kind
// that change how lbd places connections on its lcores: persistent
// services added and removed, their netmask changed, NAT servers added to
// and removed from a DR-only service, and reloads of the configuration
// file. Every stream must deliver its last byte, intact, with no reset and
// no stall; lbd must then exit with no mbuf in use.
//
// The report names every way a stream broke (reset, stall, early close,
// corruption), with examples, and lbd's drop counters, which say where
// the packets of stranded connections went (not_syn, no_conn: the lcore
// that received them does not hold the connection).
func TestContinuityStormFourWorkers(t *testing.T) {
	const streams = 500
	const dport = 9000
	var drVIP string
	e := startNATWith(t, natOptions{
		setup: func(t *testing.T, tp *topo.Topo, nat *topo.NAT) {
			startStreamServers(t, dport, nat.Servers[0].NS, nat.Servers[1].NS)
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
			vip, rs1, rs2 := c.Services[0].VIP, c.Services[0].Servers[0].Address, c.Services[0].Servers[1].Address
			drVIP = vip
			c.Services = append(c.Services,
				harness.Service{VIP: vip, Port: dport, Scheduler: "rr", Servers: []harness.Server{
					{Address: rs1, Port: dport, Weight: 1}, {Address: rs2, Port: dport, Weight: 1}}},
				// DR-only: its connections may stay where the NIC put them,
				// until it gains a NAT server.
				harness.Service{VIP: vip, Port: 81, Scheduler: "rr", Servers: []harness.Server{
					{Address: rs1, Port: 81, Weight: 1, Forward: "dr"}}},
			)
		},
	})
	e.warmUp(t)
	addr := net.JoinHostPort(e.nat.VIP.String(), fmt.Sprint(dport))
	rs1, rs2 := e.nat.Servers[0].Addr.Addr().String(), e.nat.Servers[1].Addr.Addr().String()

	// The streams, all established before the storm.
	spec := streamSpec{total: 100 << 10, chunk: 1 << 10, interval: 200 * time.Millisecond, stall: 10 * time.Second}
	var results tally
	var wg sync.WaitGroup
	var dialMu sync.Mutex
	var dialFailed []string
	var dials sync.WaitGroup
	for i := range streams {
		dials.Go(func() {
			c, r := dialStream(e.ctx, e.nat.Client.NS, addr, spec, 10*time.Second)
			if c == nil {
				dialMu.Lock()
				dialFailed = append(dialFailed, fmt.Sprintf("stream %d: %v", i, r))
				dialMu.Unlock()
				return
			}
			wg.Go(func() { results.add(readStream(c, r, spec)) })
		})
		if i%50 == 49 {
			dials.Wait() // 50 handshakes at a time
		}
	}
	dials.Wait()
	if len(dialFailed) > 0 {
		t.Errorf("%d of %d streams never connected (before any edit): %v", len(dialFailed), streams, dialFailed[:min(5, len(dialFailed))])
	}
	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()

	// The storm, until the streams end (about 20 s).
	ops := continuityOps(drVIP, rs1, rs2, dport)
	applied, refused := 0, 0
	var firstRefusal error
	t0 := time.Now()
storm:
	for i := 0; ; i++ {
		select {
		case <-streamsDone:
			break storm
		case <-time.After(60 * time.Millisecond):
		}
		if time.Since(t0) > 40*time.Second {
			break // the streams' stall timeouts end them before this
		}
		req := ops[i%len(ops)]
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		_, err := api.Call(ctx, e.cfg.Socket, req)
		cancel()
		var re *api.RemoteError
		switch {
		case err == nil:
			applied++
		case errors.As(err, &re):
			refused++ // a step of the cycle that a reload made moot
			if firstRefusal == nil {
				firstRefusal = fmt.Errorf("%s %s %s: %w", req.Op, specString(req.Service), serverString(req.Server), err)
			}
		default:
			t.Fatalf("control API: %s: %v", req.Op, err)
		}
	}
	stormTook := time.Since(t0)
	select {
	case <-streamsDone:
	case <-time.After(30 * time.Second):
		t.Fatal("streams still running 30 s after the storm")
	}

	body := e.scrapeMetrics(t)
	drops := dropsByReason(body)
	t.Logf("storm: %d edits applied, %d refused (first: %v) in %v", applied, refused, firstRefusal, stormTook.Round(time.Millisecond))
	t.Logf("lbd drops: %s; handed_off %.0f", nonZero(drops), counterSum(body, "handed_off"))
	t.Logf("streams: %s", results.summary())
	if applied < 100 {
		t.Errorf("only %d edits applied during the streams: the storm did not happen", applied)
	}
	if n := results.broken(); n != 0 {
		t.Errorf("%d of %d established streams broke during the storm of edits (lbd dropped %.0f not_syn and %.0f no_conn packets: "+
			"packets of established connections reached an lcore that does not hold them): %s",
			n, streams-len(dialFailed), drops["not_syn"], drops["no_conn"], results.summary())
	}
	e.stopLBD(t)
}

// continuityOps is one cycle of the storm: each edit is valid after the
// ones before it, and the reload at the end puts the file's services back
// (the busy service, the DR-only one and VIP:80).
func continuityOps(vip, rs1, rs2 string, rsPort int) []api.Request {
	u32 := func(v uint32) *uint32 { return &v }
	str := func(s string) *string { return &s }
	svc := func(proto string, port int) *api.ServiceSpec {
		return &api.ServiceSpec{Protocol: proto, VIP: vip, Port: port}
	}
	persistent := func(proto string, port int, secs uint32, mask string) *api.ServiceSpec {
		s := svc(proto, port)
		s.Persistence, s.Netmask = u32(secs), str(mask)
		return s
	}
	netmask := func(port int, mask string) *api.ServiceSpec {
		s := svc("tcp", port)
		s.Netmask = str(mask)
		return s
	}
	nat := func(addr string) *api.ServerSpec {
		return &api.ServerSpec{Address: addr, Port: rsPort, Forward: str("nat")}
	}
	return []api.Request{
		{Op: api.OpAddService, Service: persistent("tcp", 82, 300, "255.255.255.0")},
		{Op: api.OpAddServer, Service: svc("tcp", 82), Server: nat(rs1)},
		{Op: api.OpAddServer, Service: svc("tcp", 81), Server: nat(rs2)}, // the DR-only service gains a NAT server
		{Op: api.OpEditService, Service: netmask(82, "255.255.0.0")},
		{Op: api.OpAddService, Service: persistent("udp", 53, 60, "255.255.255.255")},
		{Op: api.OpEditService, Service: netmask(82, "255.255.255.255")},
		{Op: api.OpDeleteServer, Service: svc("tcp", 81), Server: nat(rs2)}, // DR-only again
		{Op: api.OpDeleteService, Service: svc("tcp", 82)},
		{Op: api.OpDeleteService, Service: svc("udp", 53)},
		{Op: api.OpAddService, Service: persistent("tcp", 83, 120, "255.255.255.0")},
		{Op: api.OpAddServer, Service: svc("tcp", 83), Server: nat(rs2)},
		{Op: api.OpAddServer, Service: svc("tcp", 81), Server: nat(rs1)},
		{Op: api.OpReload},
	}
}
