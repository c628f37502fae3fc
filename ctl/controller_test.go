package ctl

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// fakeDataplane records what the controller asks of the lcores.
type fakeDataplane struct {
	traceRes  lcore.TraceResult // what a worker answers a trace
	traced    []lcore.TraceFlow
	published []*lcore.Snapshot
	arps      []arpRequest
	events    []lcore.Event
	dest      map[uint32]lcore.DestStats
	conns     []lcore.ConnInfo
	probeMu   sync.Mutex // SendProbe runs on the checker's goroutine
	probes    []lcore.Event
	failFull  bool
	stats     []lcore.Stats // the workers' counters; nil: a few connections
	linksDown []bool        // by port: its link is down (else up)
	linkErr   bool          // PortLink fails

	workers  int        // 0: two
	cmdMu    sync.Mutex // SendCommand runs on the sync receiver's and the announcer's goroutines
	commands []sentCommand
	syncOut  []lcore.SyncConn // what the workers' sync rings hold
	// install, if set, plays a worker installing a batch; nil leaves
	// batches undone.
	install func(worker int, b *lcore.SyncBatch)
}

// sentCommand is a command pushed to one worker.
type sentCommand struct {
	worker int
	cmd    lcore.Command
}

func (f *fakeDataplane) NumWorkers() int {
	if f.workers > 0 {
		return f.workers
	}
	return 2
}
func (f *fakeDataplane) SendCommand(worker int, cmd lcore.Command) bool {
	f.cmdMu.Lock()
	defer f.cmdMu.Unlock()
	if f.failFull || worker < 0 || worker >= f.NumWorkers() {
		return false
	}
	f.commands = append(f.commands, sentCommand{worker, cmd})
	if cmd.Kind == lcore.CmdSyncInstall && f.install != nil {
		f.install(worker, cmd.Sync)
	}
	return true
}
func (f *fakeDataplane) sent() []sentCommand {
	f.cmdMu.Lock()
	defer f.cmdMu.Unlock()
	return append([]sentCommand(nil), f.commands...)
}
func (f *fakeDataplane) SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn {
	buf = append(buf, f.syncOut...)
	f.syncOut = nil
	return buf
}
func (f *fakeDataplane) Publish(s *lcore.Snapshot) error {
	f.published = append(f.published, s)
	return nil
}
func (f *fakeDataplane) RequestARP(port int, ip uint32) bool {
	f.arps = append(f.arps, arpRequest{port, ip})
	return !f.failFull
}
func (f *fakeDataplane) DrainEvents(fn func(lcore.Event)) {
	for _, e := range f.events {
		fn(e)
	}
	f.events = nil
}
func (f *fakeDataplane) WorkerStats() []lcore.Stats {
	if f.stats != nil {
		return f.stats
	}
	var a, b lcore.Stats
	a[lcore.Conns], b[lcore.Conns] = 3, 4
	return []lcore.Stats{a, b}
}
func (f *fakeDataplane) DestStats(id uint32) lcore.DestStats { return f.dest[id] }
func (f *fakeDataplane) ConnCapacity() uint64                { return 2048 }
func (f *fakeDataplane) TSCHz() uint64                       { return 2e9 }

// SendProbe records the event a genuine answer to the probe would make
// (its Ack is the probe's sequence number + 1).
func (f *fakeDataplane) SendProbe(ip uint32, ip6 hdr.Addr6, dst, src uint16, seq uint32) bool {
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	f.probes = append(f.probes, lcore.Event{Kind: lcore.EvProbe, IP: ip, IP6: ip6, DstPort: dst, SrcPort: src, Ack: seq + 1})
	return true
}
func (f *fakeDataplane) PortStats(func(string, ethdev.Stats)) {}
func (f *fakeDataplane) PortLink(i int) (ethdev.Link, error) {
	if f.linkErr {
		return ethdev.Link{}, errors.New("no link")
	}
	if i < len(f.linksDown) && f.linksDown[i] {
		return ethdev.Link{}, nil
	}
	return ethdev.Link{Up: true, SpeedMbps: 10000, FullDuplex: true}, nil
}
func (f *fakeDataplane) MempoolInUse() int        { return 0 }
func (f *fakeDataplane) Workers() []*lcore.Worker { return nil }
func (f *fakeDataplane) DumpConns(filter lcore.ConnFilter, max int) ([]lcore.ConnInfo, bool, error) {
	var out []lcore.ConnInfo
	for _, c := range f.conns {
		if (filter.VIP == 0 || c.VIP == filter.VIP) && (filter.Client == 0 || c.ClientIP == filter.Client) &&
			(filter.LIP == 0 || c.LIP == filter.LIP) && (filter.LIP6.IsUnspecified() || c.LIP6 == filter.LIP6) && len(out) < max {
			out = append(out, c)
		}
	}
	return out, len(out) < len(f.conns) && len(out) == max, nil
}

const testConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server, gateway: 198.51.100.254}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    servers:
      - {address: 198.51.100.11, port: 80, weight: 1}
      - {address: 198.51.100.12, port: 8000, weight: 2}
  - protocol: tcp
    vip: 203.0.113.100
    port: 21
    servers:
      - {address: 198.51.100.12}
`

func newTestController(t *testing.T) (*Controller, *fakeDataplane) {
	t.Helper()
	c, f, _ := controllerFor(t, testConfig)
	return c, f
}

// controllerFor is a controller on a fake dataplane for a configuration
// in YAML, with two ports.
func controllerFor(t *testing.T, text string) (*Controller, *fakeDataplane, conf.Config) {
	t.Helper()
	cfg, err := conf.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDataplane{dest: map[uint32]lcore.DestStats{}}
	c, err := NewController(f, cfg, []lcore.PortInfo{{MAC: hdr.MAC{2, 0, 0, 0, 0, 1}, MTU: 1500}, {MAC: hdr.MAC{2, 0, 0, 0, 0, 2}, MTU: 1500}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return c, f, cfg
}

func TestFirstSnapshot(t *testing.T) {
	c, _ := newTestController(t)
	s := c.Snapshot()
	if s.Gen != 1 || len(s.Services) != 2 || len(s.Ports) != 2 {
		t.Fatalf("snapshot gen %d services %d ports %d", s.Gen, len(s.Services), len(s.Ports))
	}
	web := s.Services[0]
	if len(web.Scheds) != 2 {
		t.Fatalf("want one scheduler per worker, got %d", len(web.Scheds))
	}
	if web.Dests[0].ID == web.Dests[1].ID || s.Services[1].Dests[0].ID == web.Dests[1].ID {
		t.Fatal("dest ids are not distinct per (service, server)")
	}
	if web.Dests[1].Port != 8000 || web.Dests[1].Weight != 2 || s.Services[1].Dests[0].Port != 21 {
		t.Fatalf("dests %+v %+v", web.Dests, s.Services[1].Dests)
	}
	if s.Timeouts.For(3) == 0 {
		t.Fatal("timeouts not set")
	}
	if p := s.Ports[1]; p.Addr != ip4(198, 51, 100, 1) || p.Mask != 0xFFFFFF00 || p.Net != ip4(198, 51, 100, 0) || p.Gateway != ip4(198, 51, 100, 254) || p.FacesClients {
		t.Fatalf("lan port %+v", p)
	}
}

func ip4(a, b, c, d byte) uint32 { return uint32(a)<<24 | uint32(b)<<16 | uint32(c)<<8 | uint32(d) }

func TestStepResolvesAndPublishesNeighbours(t *testing.T) {
	c, f := newTestController(t)
	now := time.Unix(100, 0)
	c.step(now)
	want := map[uint32]bool{ip4(198, 51, 100, 11): true, ip4(198, 51, 100, 12): true, ip4(198, 51, 100, 254): true}
	if len(f.arps) != 3 {
		t.Fatalf("ARP requests %v, want the two servers and the gateway", f.arps)
	}
	for _, r := range f.arps {
		if !want[r.ip] || r.port != 1 {
			t.Fatalf("unexpected request %+v", r)
		}
	}
	if len(f.published) != 0 {
		t.Fatal("published without a change")
	}
	mac := hdr.MAC{2, 0, 0, 0, 0, 11}
	f.events = []lcore.Event{{Kind: lcore.EvNeighbour, Port: 1, IP: ip4(198, 51, 100, 11), MAC: mac}}
	c.step(now.Add(stepPeriod))
	if len(f.published) != 1 {
		t.Fatalf("published %d snapshots, want 1", len(f.published))
	}
	s := f.published[0]
	if s.Gen != 2 || s.Neigh[ip4(198, 51, 100, 11)] != mac || len(s.Services) != 2 {
		t.Fatalf("snapshot gen %d neigh %v", s.Gen, s.Neigh)
	}
	if c.Snapshot() != s {
		t.Fatal("controller does not hold the published snapshot")
	}
}

func TestListSumsServers(t *testing.T) {
	c, f := newTestController(t)
	web := c.Snapshot().Services[0]
	f.dest[web.Dests[0].ID] = lcore.DestStats{lcore.DestConns: 10, lcore.DestInPkts: 50, lcore.DestOutPkts: 40,
		lcore.DestInBytes: 5000, lcore.DestOutBytes: 9000, lcore.DestActive: 2, lcore.DestInactive: 8}
	f.dest[web.Dests[1].ID] = lcore.DestStats{lcore.DestConns: 20, lcore.DestInPkts: 100, lcore.DestActive: 1, lcore.DestInactive: 19}
	resp := c.view(nil).Response()
	if resp.Info.Connections != 7 || resp.Info.ConnTableSize != 2048 {
		t.Fatalf("info %+v", resp.Info)
	}
	s := resp.Services[0]
	if s.VIP != "203.0.113.100" || s.Port != 80 || s.Protocol != "TCP" || s.Scheduler != "rr" {
		t.Fatalf("service %+v", s)
	}
	if s.Stats != (api.Stats{Conns: 30, InPkts: 150, OutPkts: 40, InBytes: 5000, OutBytes: 9000}) {
		t.Fatalf("service stats %+v", s.Stats)
	}
	r := s.Servers[0]
	if r.Address != "198.51.100.11" || r.Forward != "Masq" || r.ActiveConns != 2 || r.InactiveConns != 8 || r.Weight != 1 {
		t.Fatalf("server %+v", r)
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	c, f := newTestController(t)
	svcs, to := c.Services()
	before := c.Snapshot()

	// A bad edit is refused with the field named; nothing is published.
	bad, _ := c.Services()
	bad[0].Servers[1].Weight = -1
	err := c.Apply(bad, to)
	if err == nil || err.Error() != "services[0].servers[1].weight: -1 is out of range 0..65535" {
		t.Fatalf("Apply(bad) = %v", err)
	}
	if c.Snapshot() != before || len(f.published) != 0 {
		t.Fatal("a refused update changed the state")
	}
	if got, _ := c.Services(); got[0].Servers[1].Weight != 2 {
		t.Fatal("the caller's copy aliases the controller's services")
	}

	// A good edit (a third server) is published as the next generation;
	// existing servers keep their ids, so their counters continue.
	svcs[0].Servers = append(svcs[0].Servers, conf.RealServer{Address: "198.51.100.13", Port: 80, Weight: 1, Forward: "nat"})
	if err := c.Apply(svcs, to); err != nil {
		t.Fatal(err)
	}
	if len(f.published) != 1 || f.published[0].Gen != before.Gen+1 || c.Snapshot() != f.published[0] {
		t.Fatalf("published %d snapshots", len(f.published))
	}
	web := c.Snapshot().Services[0]
	if len(web.Dests) != 3 || web.Dests[0].ID != before.Services[0].Dests[0].ID || web.Dests[1].ID != before.Services[0].Dests[1].ID {
		t.Fatalf("dests after apply: %+v", web.Dests)
	}
	// The new server is now resolved by ARP.
	f.arps = nil
	c.step(time.Unix(500, 0))
	found := false
	for _, r := range f.arps {
		found = found || r.ip == ip4(198, 51, 100, 13)
	}
	if !found {
		t.Fatalf("no ARP request for the new server: %v", f.arps)
	}
}

func TestCycleAccounting(t *testing.T) {
	var ws lcore.Stats
	ws[lcore.LoopNanos], ws[lcore.BusyNanos], ws[lcore.RxPackets] = 10e9, 2.5e9, 50e6
	busy, cpp := cycleAccounting(ws, 2e9)
	// 2.5 s busy of 10 s; 2.5 s at 2 GHz over 50 M packets = 100 cycles each.
	if busy != 25 || cpp != 100 {
		t.Fatalf("busy %v%%, %v cycles/packet; want 25%%, 100", busy, cpp)
	}
	if b, c := cycleAccounting(lcore.Stats{}, 2e9); b != 0 || c != 0 {
		t.Fatalf("an idle lcore: %v %v", b, c)
	}
}
