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
// through lbd on four workers, half over VS/NAT and half over VS/DR, each
// carry 100 KiB over about 20 s while lbd's control API takes a storm of
// edits that change how lbd places connections on its lcores: persistent
// services added and removed, their netmask changed, NAT servers added to
// and removed from the DR-only service that carries the DR streams, and
// reloads of the configuration file. Every stream must deliver its last
// byte, intact, with no reset and no stall; lbd must then exit with no
// mbuf in use.
//
// The report names every way a stream broke (reset, stall, early close,
// corruption), per method, with examples, and lbd's drop counters, which
// say where the packets of stranded connections went (not_syn, no_conn:
// the lcore that received them does not hold the connection).
//
// The topology is VS/DR's (the client behind a router, lbd and the
// servers on one segment); the servers route replies from their own
// address (VS/NAT) through lbd and replies from the VIP (VS/DR) through
// the router.
func TestContinuityStormFourWorkers(t *testing.T) {
	const perMethod = 250
	const natPort, drPort = 9000, 9001
	e, dir := newEnv(t)
	l := buildNATAndDR(t, e, natPort, drPort)
	port := harness.AFPacketPort(0, harness.LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both")
	port.Device += ",qpairs=4"
	cfg := harness.BaseConfig(e.topo.Suffix(), dir, port)
	cfg.Workers = []int{0, 1, 0, 1}
	cfg.ConnTableSize = 65536
	rs1, rs2 := l.Servers[0].Addr.Addr().String(), l.Servers[1].Addr.Addr().String()
	cfg.Services = []harness.Service{
		{VIP: e.vip, Port: natPort, Scheduler: "rr", Servers: []harness.Server{
			{Address: rs1, Port: natPort, Weight: 1, Forward: "nat"}, {Address: rs2, Port: natPort, Weight: 1, Forward: "nat"}}},
		// DR-only until the storm gives it a NAT server.
		{VIP: e.vip, Port: drPort, Scheduler: "rr", Servers: []harness.Server{
			{Address: rs1, Port: drPort, Weight: 1, Forward: "dr"}, {Address: rs2, Port: drPort, Weight: 1, Forward: "dr"}}},
	}
	e.startLBD(t, cfg, dir)
	socket := e.lbd.Config.Socket
	natAddr := net.JoinHostPort(e.vip, fmt.Sprint(natPort))
	drAddr := net.JoinHostPort(e.vip, fmt.Sprint(drPort))
	e.warmStreams(t, natAddr)
	e.warmStreams(t, drAddr)

	// The streams, all established before the storm.
	spec := streamSpec{total: 100 << 10, chunk: 1 << 10, interval: 200 * time.Millisecond, stall: 10 * time.Second}
	results := map[string]*tally{"nat": {}, "dr": {}}
	var wg sync.WaitGroup
	var dialMu sync.Mutex
	var dialFailed []string
	var dials sync.WaitGroup
	for i := range 2 * perMethod {
		method, addr := "nat", natAddr
		if i%2 == 1 {
			method, addr = "dr", drAddr
		}
		dials.Go(func() {
			c, r := dialStream(e.ctx, e.client.NS, addr, spec, 10*time.Second)
			if c == nil {
				dialMu.Lock()
				dialFailed = append(dialFailed, fmt.Sprintf("%s stream %d: %v", method, i, r))
				dialMu.Unlock()
				return
			}
			wg.Go(func() { results[method].add(readStream(c, r, spec)) })
		})
		if i%50 == 49 {
			dials.Wait() // 50 handshakes at a time
		}
	}
	dials.Wait()
	if len(dialFailed) > 0 {
		t.Errorf("%d of %d streams never connected (before any edit): %v", len(dialFailed), 2*perMethod, dialFailed[:min(5, len(dialFailed))])
	}
	streamsDone := make(chan struct{})
	go func() { wg.Wait(); close(streamsDone) }()

	// The storm, until the streams end (about 20 s). For its first 12 s
	// (longer than a stall) the DR-only service has a NAT server and
	// persistent services come and go; then every kind of edit cycles,
	// reloads included.
	dualStart, churn, cycle := continuityOps(e.vip, rs1, rs2, natPort, drPort)
	const phaseOne = 12 * time.Second
	applied, refused := 0, 0
	var firstRefusal error
	t0 := time.Now()
	var inChurn, inCycle int
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
		var req api.Request
		switch {
		case i == 0:
			req = dualStart
		case time.Since(t0) < phaseOne:
			req = churn[inChurn%len(churn)]
			inChurn++
		default:
			req = cycle[inCycle%len(cycle)]
			inCycle++
		}
		ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
		_, err := api.Call(ctx, socket, req)
		cancel()
		var re *api.RemoteError
		switch {
		case err == nil:
			applied++
		case errors.As(err, &re):
			refused++
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

	body := e.scrape(t)
	drops := dropsByReason(body)
	t.Logf("storm: %d edits applied, %d refused (first: %v) in %v", applied, refused, firstRefusal, stormTook.Round(time.Millisecond))
	t.Logf("lbd drops: %s; handed_off %.0f", nonZero(drops), counterSum(body, "handed_off"))
	broken := 0
	for _, m := range []string{"nat", "dr"} {
		t.Logf("%s streams: %s", m, results[m].summary())
		broken += results[m].broken()
	}
	if applied < 100 {
		t.Errorf("only %d edits applied during the streams: the storm did not happen", applied)
	}
	if refused > 0 {
		t.Errorf("%d edits refused (first: %v): the storm's script is out of step with lbd", refused, firstRefusal)
	}
	if broken != 0 {
		t.Errorf("%d of %d established streams broke during the storm of edits (VS/NAT: %d, VS/DR: %d; lbd dropped %.0f not_syn "+
			"and %.0f no_conn packets: packets of established connections reached an lcore that does not hold them)",
			broken, 2*perMethod-len(dialFailed), results["nat"].broken(), results["dr"].broken(), drops["not_syn"], drops["no_conn"])
	}
	e.stop(t)
}

// continuityOps returns the storm's edits: the one that gives the
// DR-only service a NAT server (it stays until the first reload); a churn
// of persistent services, each step valid after the ones before; and a
// cycle of every kind of edit that starts and ends with a reload, which
// puts the file's two services back.
func continuityOps(vip, rs1, rs2 string, natPort, drPort int) (dualStart api.Request, churn, cycle []api.Request) {
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
		return &api.ServerSpec{Address: addr, Port: natPort, Forward: str("nat")}
	}
	dualStart = api.Request{Op: api.OpAddServer, Service: svc("tcp", drPort), Server: nat(rs1)}
	churn = []api.Request{
		{Op: api.OpAddService, Service: persistent("tcp", 82, 300, "255.255.255.0")},
		{Op: api.OpAddServer, Service: svc("tcp", 82), Server: nat(rs1)},
		{Op: api.OpEditService, Service: netmask(82, "255.255.0.0")},
		{Op: api.OpAddService, Service: persistent("udp", 53, 60, "255.255.255.255")},
		{Op: api.OpEditService, Service: netmask(82, "255.255.255.255")},
		{Op: api.OpDeleteService, Service: svc("tcp", 82)},
		{Op: api.OpDeleteService, Service: svc("udp", 53)},
	}
	cycle = []api.Request{
		{Op: api.OpReload},
		{Op: api.OpAddService, Service: persistent("tcp", 82, 300, "255.255.255.0")},
		{Op: api.OpAddServer, Service: svc("tcp", 82), Server: nat(rs1)},
		{Op: api.OpAddServer, Service: svc("tcp", drPort), Server: nat(rs2)}, // the DR-only service gains a NAT server
		{Op: api.OpEditService, Service: netmask(82, "255.255.0.0")},
		{Op: api.OpAddService, Service: persistent("udp", 53, 60, "255.255.255.255")},
		{Op: api.OpEditService, Service: netmask(82, "255.255.255.255")},
		{Op: api.OpDeleteServer, Service: svc("tcp", drPort), Server: nat(rs2)}, // DR-only again
		{Op: api.OpDeleteService, Service: svc("tcp", 82)},
		{Op: api.OpDeleteService, Service: svc("udp", 53)},
		{Op: api.OpAddService, Service: persistent("tcp", 83, 120, "255.255.255.0")},
		{Op: api.OpAddServer, Service: svc("tcp", 83), Server: nat(rs2)},
		{Op: api.OpAddServer, Service: svc("tcp", drPort), Server: nat(rs1)},
		{Op: api.OpReload},
	}
	return dualStart, churn, cycle
}

// buildNATAndDR builds VS/DR's topology (the client behind a router, lbd
// and two servers on one segment) for a VS/NAT and a VS/DR service at
// once: the servers route replies from their own address (VS/NAT)
// through lbd and replies from the VIP (VS/DR) through the router, and
// run stream servers on the given ports.
func buildNATAndDR(t *testing.T, e *lbEnv, streamPorts ...int) *topo.DR {
	t.Helper()
	l := e.buildLVS(t, false)
	for _, h := range l.Servers {
		for _, args := range [][]string{
			{"ip", "route", "replace", "default", "via", l.LBAddr.Addr().String()},
			{"ip", "rule", "add", "from", e.vip, "table", "100"},
			{"ip", "route", "add", "default", "via", l.Router.LBAddr.Addr().String(), "table", "100"},
		} {
			if _, err := e.topo.Exec(h.NS, args...); err != nil {
				t.Fatal(err)
			}
		}
		for _, port := range streamPorts {
			startStreamServers(t, port, h.NS)
		}
	}
	return l
}
