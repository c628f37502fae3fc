package ctl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
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
}

// stepPeriod paces the control loop: events, neighbour aging, ARP requests.
const stepPeriod = 100 * time.Millisecond

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
	var err error
	if u.services, err = buildServices(svcs, c.dp.NumWorkers(), &u.ids); err != nil {
		return nil, err
	}
	u.snap = lcore.NewSnapshot(c.gen+1, c.ports, u.services, c.neigh.macs(), timeouts(t))
	return u, nil
}

// commit makes a prepared update the controller's state.
func (c *Controller) commit(u *update) {
	c.svcConf, c.services, c.timeouts, c.ids = u.svcConf, u.services, u.timeouts, u.ids
	c.gen = u.snap.Gen
	c.snap = u.snap
	c.cfg.Services, c.cfg.Timeouts = u.svcConf, u.timeouts
	c.neigh.setWanted(c.wantedNeighbours())
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
		}
	})
	reqs, aged := c.neigh.tick(now)
	for _, r := range reqs {
		if !c.dp.RequestARP(r.port, r.ip) {
			c.log.Warn("ARP request not sent: command ring full", zap.Stringer("ip", addrOf(r.ip)))
		}
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
		for _, d := range s.Dests {
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
			as.Servers = append(as.Servers, rs)
		}
		resp.Services = append(resp.Services, as)
	}
	return resp
}
