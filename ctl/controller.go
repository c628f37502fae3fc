package ctl

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
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
	cfg   conf.Config // the fixed settings (ports...) updates are validated against

	mu       sync.Mutex // guards everything below (API handler vs. the loop)
	services []service  // the model, as the running snapshot has it
	timeouts conf.Timeouts
	ids      destIDs
	neigh    *neighTable
	neigh6   *neighTable6 // IPv6 neighbours (neighbour discovery), alike
	gen      uint64
	snap     *lcore.Snapshot
	health   *health.Monitor  // nil: no health checks
	feedback *feedback.Poller // nil: no dynamic weights
	ramping  bool             // some server is in its slow start: republish as its weight grows
	lastRamp time.Time
	// lastReclaim is when the loop last looked for draining ids whose
	// connections ended (then a republish frees them).
	lastReclaim time.Time
	passive     passiveState // passive health checking (see passive.go)
	probes      probeState   // health probes through lbd (see probe.go)
	conflicts   conflictLog  // hosts claiming our addresses (see neigh.go)
	// rejectLogged is when an answer to a health probe was last logged as
	// rejected: one line a minute, all counted.
	rejectLogged time.Time
	// carried are the counters a handover brought from the lbd before
	// this one (restart.go), added to the dataplane's in every view.
	carried  map[destKey]Counters
	started  time.Time // when the controller was made: lbd's start
	handover string    // what a handover at start gave, for the listing
	ha       haState   // master or backup, sync rules, install counts (see ha.go)
	// lipDrain are removed FullNAT local addresses connections may still
	// use (laddr.go).
	lipDrain map[netip.Addr]lipDrain
	// lipTaken are dead peers' local addresses this director took over,
	// each with the peer's sync address (takeover.go).
	lipTaken map[netip.Addr]netip.Addr
	// adoptHeld are the ids of servers adopted from a peer's records
	// (adopt.go), kept from reclaim until their connections are counted.
	adoptHeld map[uint32]time.Time
	// adoptRefused is when the log last said an adoption failed.
	adoptRefused time.Time
	links        linkState // the ports' links (link.go)
}

// stepPeriod paces the control loop: events, neighbour aging, ARP requests.
const stepPeriod = 20 * time.Millisecond

// NewController builds the first snapshot from cfg, which the caller has
// validated (conf.Load, then CheckSchedulers); hw describes the started
// ports (MAC addresses, MTUs, offloads).
func NewController(dp Dataplane, cfg conf.Config, hw []lcore.PortInfo, log *zap.Logger) (*Controller, error) {
	c := &Controller{
		dp: dp, log: log, cfg: cfg, ports: portInfos(cfg.Ports, hw), started: time.Now(),
		neigh:  newNeighTable(cfg.Neighbour.ReachableTime, cfg.Neighbour.StaleTime),
		neigh6: newNeighTableOf[hdr.Addr6](cfg.Neighbour.ReachableTime, cfg.Neighbour.StaleTime),
	}
	c.ha.backup = cfg.HA.IsBackup()
	u, err := c.build(cfg.Services, cfg.Timeouts)
	if err != nil {
		return nil, err
	}
	c.commit(u)
	return c, nil
}

// update is a built set of services waiting to be published.
type update struct {
	services []service
	timeouts conf.Timeouts
	ids      destIDs
	ramping  bool // some server is in its slow start
	snap     *lcore.Snapshot
	lipDrain map[netip.Addr]lipDrain
}

// validate checks services and timeouts whole, against the running
// ports.
func (c *Controller) validate(svcs []conf.Service, t conf.Timeouts) error {
	cfg := c.cfg
	cfg.Services, cfg.Timeouts = svcs, t
	return cfg.Validate(Schedulers())
}

// build makes the model of valid services and the snapshot that would
// run them, with each server's weight as the health checks, feedback and
// slow start have it now; it changes nothing. The caller holds mu, or is
// the constructor.
func (c *Controller) build(svcs []conf.Service, t conf.Timeouts) (*update, error) {
	return c.buildAdopting(svcs, t, nil)
}

// buildAdopting is build, with the servers adopt (not configured here)
// given ids and draining, as a removed server's (adoptPeerServers).
func (c *Controller) buildAdopting(svcs []conf.Service, t conf.Timeouts, adopt []destKey) (*update, error) {
	u := &update{timeouts: t, ids: c.ids.clone()}
	u.ids.reclaim(c.destInUse)
	prev := make(map[lcore.ServiceKey]*service, len(c.services))
	for i := range c.services {
		prev[c.services[i].key] = &c.services[i]
	}
	now := time.Now()
	used := map[destKey]bool{}
	var dps []lcore.Service
	var expire []uint32
	for i, sc := range svcs {
		field := fmt.Sprintf("services[%d]", i)
		s, err := newService(field, sc, &u.ids)
		if err != nil {
			return nil, err
		}
		if c.weigh(&s, prev[s.key], now) {
			u.ramping = true
		}
		ls, err := s.lcoreService(field, c.dp.NumWorkers(), prev[s.key])
		if err != nil {
			return nil, err
		}
		s.eachServer(func(r *server) {
			if r.state.expire {
				expire = append(expire, r.id)
			}
		})
		for _, r := range s.servers {
			used[r.key] = true
		}
		if s.sorry != nil {
			used[s.sorry.key] = true
		}
		u.services = append(u.services, s)
		dps = append(dps, ls)
	}
	for _, k := range adopt {
		if !used[k] {
			if _, err := u.ids.get(k); err != nil {
				return nil, err
			}
		}
	}
	snat, err := c.snatServices(&u.ids, used, c.dp.NumWorkers())
	if err != nil {
		return nil, err
	}
	dps = append(dps, snat...)
	u.ids.drain(used)
	dps = withDraining(dps, &u.ids)
	u.snap = lcore.NewSnapshot(c.gen+1, c.ports, dps, c.neigh.macs(), timeouts(t))
	u.snap.Neigh6 = c.neigh6.macs()
	u.lipDrain = c.nextLIPDrain(svcs)
	u.snap.KeepLIPs(lipsOf4(u.lipDrain))
	u.snap.KeepLIPs6(lipsOf6(u.lipDrain))
	u.snap.KeepLIPs(lipsOf4(c.lipTaken))
	u.snap.KeepLIPs6(lipsOf6(c.lipTaken))
	u.snap.Sync, u.snap.Backup = c.ha.sync, c.ha.backup
	u.snap.Counted = append(u.snap.Counted, u.ids.drainingIDs()...)
	u.snap.ResetDests = u.ids.resets()
	for _, id := range expire {
		u.snap.ExpireDest(id)
	}
	return u, nil
}

// destInUse reports whether connections or persistence templates on any
// lcore still name a real server's id (their published gauges).
func (c *Controller) destInUse(id uint32) bool {
	if until, held := c.adoptHeld[id]; held {
		if time.Now().Before(until) {
			return true
		}
		delete(c.adoptHeld, id)
	}
	ds := c.dp.DestStats(id)
	return ds[lcore.DestActive]+ds[lcore.DestInactive]+ds[lcore.DestPersistent] > 0
}

// publish hands an update to the lcores and makes it the controller's
// state. If they did not all take it, the ids it handed out drain like
// removed ones: some lcore may have connected to them.
func (c *Controller) publish(u *update) error {
	if err := c.dp.Publish(u.snap); err != nil {
		ids := u.ids
		ids.fresh = nil
		used := map[destKey]bool{}
		for i := range c.services {
			for _, r := range c.services[i].servers {
				used[r.key] = true
			}
			if c.services[i].sorry != nil {
				used[c.services[i].sorry.key] = true
			}
		}
		ids.drain(used)
		c.ids = ids
		return err
	}
	c.commit(u)
	return nil
}

// republish rebuilds the snapshot from the current services (health or
// slow start changed a weight); the caller holds mu.
func (c *Controller) republish() {
	u, err := c.build(c.serviceConfs(), c.timeouts)
	if err == nil {
		err = c.publish(u)
	}
	if err != nil {
		c.log.Error("snapshot not rebuilt", zap.Error(err))
	}
}

// commit makes a published (or first) update the controller's state.
func (c *Controller) commit(u *update) {
	c.services, c.timeouts, c.ids = u.services, u.timeouts, u.ids
	c.lipDrain = u.lipDrain
	c.logVIPDrains(u.snap)
	c.ids.fresh = nil
	c.gen = u.snap.Gen
	c.snap = u.snap
	c.ramping = u.ramping
	c.neigh.setWanted(c.wantedNeighbours())
	c.neigh6.setWanted(c.wantedNeighbours6())
	if c.health != nil {
		c.health.Update(health.Targets(c.serviceConfs()))
	}
	if c.feedback != nil {
		c.feedback.Update(feedback.Targets(c.serviceConfs()))
	}
}

// Apply replaces the services and timeouts in one update: the new set is
// validated whole and built, then every lcore switches to it between two
// bursts. Connections in progress keep their real servers. On error nothing
// changes.
func (c *Controller) Apply(svcs []conf.Service, t conf.Timeouts) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.validate(svcs, t); err != nil {
		return err
	}
	u, err := c.build(svcs, t)
	if err != nil {
		return err
	}
	if err := c.publish(u); err != nil {
		return fmt.Errorf("lcores did not take the update: %w", err)
	}
	c.log.Info("services applied", zap.Int("services", len(svcs)), zap.Uint64("generation", u.snap.Gen))
	return nil
}

// serviceConfs is the services as configured (shared with the model: the
// caller must not modify them).
func (c *Controller) serviceConfs() []conf.Service {
	out := make([]conf.Service, len(c.services))
	for i := range c.services {
		out[i] = c.services[i].conf
	}
	return out
}

// Services returns a copy of the configured services and timeouts, the
// base for edits (lbctl -A/-E/-D/-a/-e/-d) that go back through Apply.
func (c *Controller) Services() ([]conf.Service, conf.Timeouts) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.serviceConfs()
	for i := range out {
		out[i].Servers = append([]conf.RealServer(nil), out[i].Servers...)
		out[i].SchedFlags = append([]string(nil), out[i].SchedFlags...)
	}
	return out, c.timeouts
}

// wantedNeighbours are the next hops the services need: real servers and
// sorry servers (before they are needed), or their gateway, and every
// port's gateway.
func (c *Controller) wantedNeighbours() map[uint32]int {
	want := map[uint32]int{}
	for i := range c.services {
		s := &c.services[i]
		for _, r := range s.servers {
			if port, hop, ok := c.snap.Route(r.key.addr); ok {
				want[hop] = port
			}
		}
		if s.sorry != nil {
			if port, hop, ok := c.snap.Route(s.sorry.key.addr); ok {
				want[hop] = port
			}
		}
	}
	for _, k := range c.ids.draining { // their connections may go on (adopt.go)
		if k.addr == 0 {
			continue // an IPv6 server (wantedNeighbours6)
		}
		if port, hop, ok := c.snap.Route(k.addr); ok {
			want[hop] = port
		}
	}
	for i, p := range c.ports {
		if p.Gateway != 0 {
			want[p.Gateway] = i
		}
		for _, r := range p.Routes {
			want[r.Via] = i
		}
	}
	return want
}

// wantedNeighbours6 is wantedNeighbours for the IPv6 servers (sorry
// servers too) and gateways.
func (c *Controller) wantedNeighbours6() map[hdr.Addr6]int {
	want := map[hdr.Addr6]int{}
	wanted := func(r *server) {
		if r.key.addr6.IsUnspecified() {
			return
		}
		if port, hop, ok := c.snap.Route6(&r.key.addr6); ok {
			want[hop] = port
		}
	}
	for i := range c.services {
		s := &c.services[i]
		for j := range s.servers {
			wanted(&s.servers[j])
		}
		if s.sorry != nil {
			wanted(s.sorry)
		}
	}
	for _, k := range c.ids.draining {
		wanted(&server{key: k})
	}
	for i, p := range c.ports {
		if !p.Gateway6.IsUnspecified() {
			want[p.Gateway6] = i
		}
		for _, r := range p.Routes6 {
			want[r.Via] = i
		}
	}
	return want
}

// counters reads the dataplane's counters of a (service, server) pair,
// present or removed; false if it never had an id.
func (c *Controller) counters(k destKey) (Counters, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.ids.lookup(k)
	if !ok {
		return Counters{}, false
	}
	return countersOf(c.dp.DestStats(id)).Plus(c.carried[k]), true
}

// Snapshot is the current snapshot.
func (c *Controller) Snapshot() *lcore.Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap
}

// Run drives the control loop until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	go c.drainLoop(ctx)
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
		case lcore.EvNeighbour6:
			if c.neigh6.learn(ev.IP6, ev.MAC, ev.Port, now) {
				changed = true
				c.log.Info("neighbour", zap.Stringer("ip", ev.IP6), zap.String("mac", ev.MAC.String()),
					zap.String("port", c.ports[ev.Port].Name))
			}
		case lcore.EvNeighbourMiss6:
			c.neigh6.miss(ev.IP6, ev.Port, now)
		case lcore.EvProbe:
			if c.probes.deliver(ev) && now.Sub(c.rejectLogged) >= conflictLogEvery {
				c.rejectLogged = now
				c.logRejected(ev)
			}
		case lcore.EvAddressConflict:
			if c.conflicts.due(ev.IP, now) {
				c.log.Warn("address conflict: another host claims one of lbd's addresses in ARP (not learnt; counted arp_conflict)",
					zap.Stringer("ip", addrOf(ev.IP)), zap.String("mac", ev.MAC.String()), zap.String("port", c.ports[ev.Port].Name))
			}
		}
	})
	c.pollLinks(now)
	reqs, aged := c.neigh.tick(now)
	for _, r := range reqs {
		if !c.dp.RequestARP(r.port, r.ip) {
			c.log.Warn("ARP request not sent: command ring full", zap.Stringer("ip", addrOf(r.ip)))
		}
	}
	reqs6, aged6 := c.neigh6.tick(now)
	aged = aged || aged6
	for _, r := range reqs6 {
		// Worker 0 sends them, as it sends ARP requests.
		if !c.dp.SendCommand(0, lcore.Command{Kind: lcore.CmdSolicit, Port: r.port, IP6: r.ip}) {
			c.log.Warn("neighbour solicitation not sent: command ring full", zap.Stringer("ip", r.ip))
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
	if len(c.ids.draining) > 0 && now.Sub(c.lastReclaim) >= time.Second {
		// Free the ids whose connections ended, so the lcores stop
		// publishing their counters.
		c.lastReclaim = now
		for id := range c.ids.draining {
			if !c.destInUse(id) {
				c.republish()
				return
			}
		}
	}
	if changed || aged {
		c.gen++
		next := c.snap.WithNeighbours(c.gen, c.neigh.macs())
		next.Neigh6 = c.neigh6.macs()
		if err := c.dp.Publish(next); err != nil {
			c.log.Error("snapshot not published", zap.Error(err))
			return
		}
		c.snap = next
	}
}
