package ctl

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Controller owns the service model and the neighbour table, builds the
// snapshots the lcores run on, and answers lbctl.
type Controller struct {
	dp    Dataplane
	log   *zap.Logger
	ports []lcore.PortInfo

	mu       sync.Mutex  // guards everything below (API handler vs. the loop)
	cfg      conf.Config // the running configuration (ports fixed, services as applied)
	svcConf  []conf.Service
	services []lcore.Service
	timeouts conf.Timeouts
	ids      destIDs
	neigh    *neighTable
	gen      uint64
	snap     *lcore.Snapshot
	health   *health.Monitor  // nil: no health checks
	feedback *feedback.Poller // nil: no dynamic weights
	ramping  bool             // some server is in its slow start: republish as its weight grows
	lastRamp time.Time
	passive  passiveState // passive health checking (see passive.go)
	probes   probeState   // health probes through lbd (see probe.go)
}

// stepPeriod paces the control loop: events, neighbour aging, ARP requests.
const stepPeriod = 20 * time.Millisecond

// NewController builds the first snapshot from the configuration; the
// ports' MAC addresses, MTUs and offloads come from the started devices.
func NewController(dp Dataplane, cfg conf.Config, hw []PortHW, log *zap.Logger) (*Controller, error) {
	c := &Controller{
		dp: dp, log: log, cfg: cfg, ports: portInfos(cfg.Ports, hw),
		neigh: newNeighTable(cfg.Neighbour.ReachableTime, cfg.Neighbour.StaleTime),
	}
	u, err := c.prepare(cfg.Services, cfg.Timeouts)
	if err != nil {
		return nil, err
	}
	c.commit(u)
	return c, nil
}

// update is a validated, built set of services waiting to be published.
type update struct {
	ramping  bool
	svcConf  []conf.Service
	services []lcore.Service
	timeouts conf.Timeouts
	ids      destIDs
	snap     *lcore.Snapshot
}

// prepare validates services and timeouts whole (against the running
// ports) and builds the snapshot that would run them; it changes nothing.
// The caller holds mu, or is the constructor.
func (c *Controller) prepare(svcs []conf.Service, t conf.Timeouts) (*update, error) {
	cfg := c.cfg
	cfg.Services, cfg.Timeouts = svcs, t
	if err := cfg.Validate(Schedulers()); err != nil {
		return nil, err
	}
	u := &update{svcConf: svcs, timeouts: t, ids: c.ids.clone()}
	now := time.Now()
	u.ramping = false
	b, err := buildServices(svcs, c.dp.NumWorkers(), &u.ids, func(s conf.Service, r conf.RealServer) serverState {
		st, ramping := c.serverState(s, r, now)
		u.ramping = u.ramping || ramping
		return st
	})
	if err != nil {
		return nil, err
	}
	u.services = b.services
	u.snap = lcore.NewSnapshot(c.gen+1, c.ports, u.services, c.neigh.macs(), timeouts(t))
	for _, id := range b.expire {
		u.snap.ExpireDest(id)
	}
	return u, nil
}

// serverState decides a real server's weight for the next snapshot: the
// configured one, scaled by dynamic feedback (the servers' reported load),
// ramped over slow start after a recovery, and 0 when a health check (or
// passive checking) finds it failed; ramping reports a slow start under way.
func (c *Controller) serverState(s conf.Service, r conf.RealServer, now time.Time) (st serverState, ramping bool) {
	key := healthKey(s, r)
	if c.passive.isSuspect(key) {
		return serverState{down: true}, false
	}
	w := r.Weight
	if c.feedback != nil {
		w = c.feedback.Weight(key, r.Weight)
	}
	st = serverState{weight: w}
	if c.health == nil {
		return st, false
	}
	hs, ok := c.health.State(key)
	if !ok {
		return st, false
	}
	check := s.HealthFor(r)
	if !hs.Up {
		return serverState{down: true, expire: check.OnFailure == conf.OnFailureExpire}, false
	}
	st.weight = health.EffectiveWeight(w, hs.UpSince, now, check.SlowStart)
	return st, st.weight < w
}

func healthKey(s conf.Service, r conf.RealServer) health.Key {
	vip := netip.AddrPortFrom(s.VIPAddr(), uint16(s.Port))
	return health.Key{Service: health.ServiceName(s.Protocol, vip), Addr: netip.AddrPortFrom(r.Addr(), uint16(r.Port))}
}

// SetHealth attaches the health monitor: its state decides weights from
// the next update on, and it follows every applied service set.
func (c *Controller) SetHealth(m *health.Monitor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.health = m
	m.Update(health.Targets(c.svcConf))
}

// HealthChanged is the monitor's callback: a server went down or came
// back, so the lcores get a snapshot with its new weight.
func (c *Controller) HealthChanged(ch health.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch.Up {
		c.log.Info("real server up", zap.String("service", ch.Target.Service), zap.Stringer("server", ch.Target.Addr), zap.String("reason", ch.Reason))
	} else {
		c.log.Warn("real server down", zap.String("service", ch.Target.Service), zap.Stringer("server", ch.Target.Addr), zap.String("reason", ch.Reason))
	}
	c.republish()
}

// republish rebuilds the snapshot from the current services (health or
// slow start changed a weight); the caller holds mu.
func (c *Controller) republish() {
	u, err := c.prepare(c.svcConf, c.timeouts)
	if err == nil {
		err = c.dp.Publish(u.snap)
	}
	if err != nil {
		c.log.Error("snapshot not rebuilt after a health change", zap.Error(err))
		return
	}
	c.commit(u)
}

// commit makes a prepared update the controller's state.
func (c *Controller) commit(u *update) {
	c.svcConf, c.services, c.timeouts, c.ids = u.svcConf, u.services, u.timeouts, u.ids
	c.gen = u.snap.Gen
	c.snap = u.snap
	c.cfg.Services, c.cfg.Timeouts = u.svcConf, u.timeouts
	c.ramping = u.ramping
	c.neigh.setWanted(c.wantedNeighbours())
	if c.health != nil {
		c.health.Update(health.Targets(u.svcConf))
	}
	if c.feedback != nil {
		c.feedback.Update(feedback.Targets(u.svcConf))
	}
}

// SetFeedback attaches the dynamic weight poller; it follows every applied
// service set.
func (c *Controller) SetFeedback(p *feedback.Poller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.feedback = p
	p.Update(feedback.Targets(c.svcConf))
}

// FeedbackChanged is the poller's callback: a server's load moved its
// weight, so the lcores get a snapshot with it.
func (c *Controller) FeedbackChanged() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.republish()
}

// Apply replaces the services and timeouts in one update: the new set is
// validated whole and built, then every lcore switches to it between two
// bursts. Connections in progress keep their real servers. On error nothing
// changes.
func (c *Controller) Apply(svcs []conf.Service, t conf.Timeouts) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, err := c.prepare(svcs, t)
	if err != nil {
		return err
	}
	if err := c.dp.Publish(u.snap); err != nil {
		return fmt.Errorf("lcores did not take the update: %w", err)
	}
	c.commit(u)
	c.log.Info("services applied", zap.Int("services", len(svcs)), zap.Uint64("generation", u.snap.Gen))
	return nil
}

// Services returns a copy of the configured services and timeouts, the
// base for edits (lbctl -A/-E/-D/-a/-e/-d) that go back through Apply.
func (c *Controller) Services() ([]conf.Service, conf.Timeouts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]conf.Service, len(c.svcConf))
	for i, s := range c.svcConf {
		s.Servers = append([]conf.RealServer(nil), s.Servers...)
		s.SchedFlags = append([]string(nil), s.SchedFlags...)
		out[i] = s
	}
	return out, c.timeouts
}

// wantedNeighbours are the next hops the services need: real servers
// (or their gateway) and every port's gateway.
func (c *Controller) wantedNeighbours() map[uint32]int {
	probe := lcore.NewSnapshot(0, c.ports, nil, nil, timeouts(c.timeouts))
	want := map[uint32]int{}
	for _, s := range c.services {
		for _, d := range s.Dests {
			if port, hop, ok := probe.Route(d.Addr); ok {
				want[hop] = port
			}
		}
	}
	for i, p := range c.ports {
		if p.Gateway != 0 {
			want[p.Gateway] = i
		}
	}
	for _, s := range c.svcConf { // sorry servers, before they are needed
		if ap, ok := s.SorryAddr(); ok {
			if port, hop, ok := probe.Route(ipv4(ap.Addr())); ok {
				want[hop] = port
			}
		}
	}
	return want
}

// Snapshot is the current snapshot.
func (c *Controller) Snapshot() *lcore.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap
}

// Run drives the control loop until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(stepPeriod)
	defer t.Stop()
	for {
		c.step(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step handles the workers' events, ages the neighbour table, sends ARP
// requests, and publishes a new snapshot when the neighbours changed.
func (c *Controller) step(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	c.dp.DrainEvents(func(ev lcore.Event) {
		switch ev.Kind {
		case lcore.EvNeighbour:
			if c.neigh.learn(ev.IP, ev.MAC, ev.Port, now) {
				changed = true
				c.log.Info("neighbour", zap.Stringer("ip", addrOf(ev.IP)), zap.String("mac", ev.MAC.String()),
					zap.String("port", c.ports[ev.Port].Name))
			}
		case lcore.EvNeighbourMiss:
			c.neigh.miss(ev.IP, ev.Port, now)
		case lcore.EvProbe:
			c.probes.deliver(ev)
		}
	})
	reqs, aged := c.neigh.tick(now)
	for _, r := range reqs {
		if !c.dp.RequestARP(r.port, r.ip) {
			c.log.Warn("ARP request not sent: command ring full", zap.Stringer("ip", addrOf(r.ip)))
		}
	}
	if c.observePassive(now) {
		c.republish()
		return
	}
	if c.ramping && now.Sub(c.lastRamp) >= time.Second {
		c.lastRamp = now
		c.republish()
		return
	}
	if changed || aged {
		c.gen++
		next := c.snap.WithNeighbours(c.gen, c.neigh.macs())
		if err := c.dp.Publish(next); err != nil {
			c.log.Error("snapshot not published", zap.Error(err))
			return
		}
		c.snap = next
	}
}

// list reports every service with its real servers and their counters,
// summed over the lcores (Ops serves it to lbctl, metrics scrape it).
func (c *Controller) list() api.Response {
	c.mu.Lock()
	defer c.mu.Unlock()
	var resp api.Response
	var conns uint64
	for i, ws := range c.dp.WorkerStats() {
		conns += ws[lcore.Conns]
		l := api.Lcore{ID: i, RxPackets: ws[lcore.RxPackets], TxPackets: ws[lcore.TxPackets],
			HandedOff: ws[lcore.HandedOff], HandedIn: ws[lcore.HandedIn], Connections: ws[lcore.Conns]}
		l.BusyPercent, l.CyclesPerPacket = cycleAccounting(ws, c.dp.TSCHz())
		for s := lcore.Stat(0); int(s) < lcore.NumStats; s++ {
			if s.IsDrop() {
				l.Drops += ws[s]
			}
		}
		resp.Lcores = append(resp.Lcores, l)
	}
	resp.Info = &api.Info{ConnTableSize: c.dp.ConnCapacity(), Connections: conns}
	for i, s := range c.services {
		as := api.Service{
			Protocol: strings.ToUpper(c.svcConf[i].Protocol), VIP: addrOf(s.Key.VIP).String(), Port: s.Key.Port,
			Scheduler: c.svcConf[i].Scheduler, Servers: []api.RealServer{},
		}
		for j, d := range s.Dests {
			ds := c.dp.DestStats(d.ID)
			rs := api.RealServer{
				Address: addrOf(d.Addr).String(), Port: d.Port, Forward: forwardNames[d.Fwd], Weight: int(d.Weight),
				ActiveConns: ds[lcore.DestActive], InactiveConns: ds[lcore.DestInactive], PersistConns: ds[lcore.DestPersistent],
				Stats: api.Stats{
					Conns: ds[lcore.DestConns], InPkts: ds[lcore.DestInPkts], OutPkts: ds[lcore.DestOutPkts],
					InBytes: ds[lcore.DestInBytes], OutBytes: ds[lcore.DestOutBytes],
				},
			}
			as.Stats.Conns += rs.Stats.Conns
			as.Stats.InPkts += rs.Stats.InPkts
			as.Stats.OutPkts += rs.Stats.OutPkts
			as.Stats.InBytes += rs.Stats.InBytes
			as.Stats.OutBytes += rs.Stats.OutBytes
			if j < len(c.svcConf[i].Servers) && c.health != nil {
				if st, ok := c.health.State(healthKey(c.svcConf[i], c.svcConf[i].Servers[j])); ok {
					rs.Health = "up"
					if !st.Up {
						rs.Health = "down"
						rs.HealthReason = st.LastReason
					}
				}
			} else if j >= len(c.svcConf[i].Servers) {
				rs.Health = "sorry"
			}
			as.Servers = append(as.Servers, rs)
		}
		resp.Services = append(resp.Services, as)
	}
	return resp
}

// cycleAccounting derives an lcore's load and cost per packet from its
// counters: busy time over loop time, and busy cycles over the packets it
// processed (received from its queues or handed in by peers).
func cycleAccounting(ws lcore.Stats, tscHz uint64) (busyPercent, cyclesPerPacket float64) {
	if ws[lcore.LoopNanos] > 0 {
		busyPercent = 100 * float64(ws[lcore.BusyNanos]) / float64(ws[lcore.LoopNanos])
	}
	if pkts := ws[lcore.RxPackets]; pkts > 0 {
		cyclesPerPacket = float64(ws[lcore.BusyNanos]) * float64(tscHz) / 1e9 / float64(pkts)
	}
	return busyPercent, cyclesPerPacket
}

// maxListedConns bounds one connection listing (lbctl -c), so an answer
// stays a few megabytes whatever the table holds.
const maxListedConns = 20000

// connections lists the lcores' connections (ipvsadm -L -c), filtered by
// service and client.
func (c *Controller) connections(req api.Request) (api.Response, error) {
	var f lcore.ConnFilter
	if s := req.Service; s != nil {
		vip, err := netip.ParseAddr(s.VIP)
		if err != nil || !vip.Is4() {
			return api.Response{}, fmt.Errorf("-t/-u %s: not an IPv4 address", s.VIP)
		}
		f.VIP, f.VPort, f.Proto = ipv4(vip), uint16(s.Port), protocols[s.Protocol]
	}
	if req.Client != "" {
		a, err := netip.ParseAddr(req.Client)
		if err != nil || !a.Is4() {
			return api.Response{}, fmt.Errorf("--client %s: not an IPv4 address", req.Client)
		}
		f.Client = ipv4(a)
	}
	conns, truncated, err := c.dp.DumpConns(f, maxListedConns)
	if err != nil {
		return api.Response{}, err
	}
	resp := api.Response{ConnsTruncated: truncated}
	for _, ci := range conns {
		state := ci.State.String()
		if ci.Template {
			state = "NONE"
		}
		exp := ci.Expires / 1e9
		if exp < 0 {
			exp = 0
		}
		proto := "TCP"
		if ci.Proto == hdr.ProtoUDP {
			proto = "UDP"
		}
		resp.Conns = append(resp.Conns, api.Conn{
			Protocol: proto, State: state, Template: ci.Template, ExpiresSecs: uint64(exp),
			Client:      netip.AddrPortFrom(addrOf(ci.ClientIP), ci.ClientPort).String(),
			Virtual:     netip.AddrPortFrom(addrOf(ci.VIP), ci.VPort).String(),
			Destination: netip.AddrPortFrom(addrOf(ci.RIP), ci.RPort).String(),
		})
	}
	return resp, nil
}
