package ctl

import (
	"net/netip"
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
)

// View is the balancer's state at one moment as typed values: the lcores,
// every service with its servers, their counters and rates. lbctl's
// listing and its JSON, the metrics and the web console all read it; each
// formats it at its own edge (Response, the metrics collector).
type View struct {
	At            time.Time // when it was read; probe and poll ages count to it
	Lcores        []LcoreView
	ConnTableSize uint64 // capacity of the connection tables
	Connections   uint64 // entries in use
	Services      []ServiceView
	Started       time.Time      // when this lbd started
	Handover      string         // what it made of a handover, "" when none
	Links         []api.PortLink // the dataplane ports' links
	// DrainingVIPs are VIPs no configured service has while connections
	// to them remain: a removed service's, or an adopted one's
	// (vipdrain.go).
	DrainingVIPs []netip.Addr
	// SNAT are the configuration's SNAT rules, one per protocol, with
	// their connections' counters (snat.go).
	SNAT []SNATView
}

// SNATView is one SNAT rule for one protocol: the servers' connections
// from Source leave from Addresses.
type SNATView struct {
	Protocol         string // "tcp", "udp" or "icmp"
	Source           netip.Prefix
	Addresses        []netip.Addr
	Active, Inactive uint64 // its connections in ESTABLISHED, and in another state
	Stats            Counters
}

// LcoreView is one worker's counters and what they say about its load.
type LcoreView struct {
	ID    int
	Stats lcore.Stats
	// Cycle accounting (VPP's show runtime): the share of time spent in
	// bursts that carried packets, and the CPU cycles per packet.
	BusyPercent, CyclesPerPacket float64
	// Sched is what the OS says of the worker's thread (threadSched).
	Sched ThreadSched
	// Jobs are the worker's periodic jobs' accumulated cost.
	Jobs []lcore.JobStat
}

// Drops sums the lcore's drops over every reason.
func (l LcoreView) Drops() uint64 {
	var n uint64
	for s := lcore.Stat(0); int(s) < lcore.NumStats; s++ {
		if s.IsDrop() {
			n += l.Stats[s]
		}
	}
	return n
}

// DropsByReason is the lcore's drops per reason, the reasons it never
// counted left out.
func (l LcoreView) DropsByReason() map[string]uint64 {
	m := map[string]uint64{}
	for s := lcore.Stat(0); int(s) < lcore.NumStats; s++ {
		if s.IsDrop() && l.Stats[s] > 0 {
			m[s.Name()] = l.Stats[s]
		}
	}
	return m
}

// ServiceView is a virtual service: its settings, its servers, the sum of
// their counters.
type ServiceView struct {
	Key     lcore.ServiceKey
	Conf    conf.Service // settings as configured
	Servers []ServerView // as configured, in order
	Sorry   *ServerView  // the sorry server while it stands in, else nil
	Stats   Counters     // the sum over Servers and Sorry
	// QuorumUp: the servers not down weigh the quorum (weights.go).
	QuorumUp bool
	Rates    Rates
}

// Protocol is "tcp" or "udp".
func (s *ServiceView) Protocol() string { return s.Conf.Protocol }

// VIP is the service's address and port.
func (s *ServiceView) VIP() netip.AddrPort {
	return netip.AddrPortFrom(addrOfKey(s.Key.VIP, s.Key.VIP6), s.Key.Port)
}

// each visits the servers, then the sorry server if it stands in.
func (s *ServiceView) each(fn func(*ServerView)) {
	for i := range s.Servers {
		fn(&s.Servers[i])
	}
	if s.Sorry != nil {
		fn(s.Sorry)
	}
}

// ServerView is a real server of a service.
type ServerView struct {
	key    destKey
	Conf   conf.RealServer // settings as configured (weight, thresholds, forwarding)
	Weight int             // the weight the lcores schedule with now
	// Connections now: ESTABLISHED (ipvsadm's ActiveConn), other states
	// (InActConn), persistence templates naming it.
	Active, Inactive, Persistent uint64
	Stats                        Counters
	Rates                        Rates
	Health                       Health
	HealthReason                 string // why a down server failed

	Check     *health.State    // what its health check knows; nil when none watches it
	SlowStart time.Duration    // its check's slow start, 0 = off
	Feedback  *feedback.Status // what dynamic feedback knows; nil when it does not poll it
	// FeedbackWeight is the configured weight as dynamic feedback scales
	// it (the configured one without feedback): what slow start ramps to.
	FeedbackWeight int
}

// Ramp reports whether the server is in its slow start at now, and for
// how long it has been.
func (r *ServerView) Ramp(now time.Time) (ramping bool, elapsed time.Duration) {
	if r.Check == nil || !r.Check.Up || r.Check.UpSince.IsZero() || r.SlowStart <= 0 || r.Health != Up {
		return false, 0
	}
	elapsed = now.Sub(r.Check.UpSince)
	return elapsed < r.SlowStart && r.FeedbackWeight > 1, elapsed
}

// Addr is the server's address and port.
func (r *ServerView) Addr() netip.AddrPort {
	return netip.AddrPortFrom(addrOfKey(r.key.addr, r.key.addr6), r.key.port)
}

// Health is what the health checks say of a server.
type Health uint8

const (
	Unchecked Health = iota // no check watches it
	Up
	Down
	SorryStandIn // the service's sorry server, standing in for failed servers
)

// String is the listing's word: "", "up", "down", "sorry".
func (h Health) String() string { return [...]string{"", "up", "down", "sorry"}[h] }

// Counters are cumulative traffic counters of a real server, or summed
// over a service's servers.
type Counters struct {
	Conns, InPkts, OutPkts, InBytes, OutBytes uint64
}

func countersOf(ds lcore.DestStats) Counters {
	return Counters{Conns: ds[lcore.DestConns], InPkts: ds[lcore.DestInPkts], OutPkts: ds[lcore.DestOutPkts],
		InBytes: ds[lcore.DestInBytes], OutBytes: ds[lcore.DestOutBytes]}
}

// Plus is a + b, counter by counter.
func (a Counters) Plus(b Counters) Counters {
	return Counters{a.Conns + b.Conns, a.InPkts + b.InPkts, a.OutPkts + b.OutPkts, a.InBytes + b.InBytes, a.OutBytes + b.OutBytes}
}

// Minus is a - b, counter by counter; a counter below its base (it
// cannot be: the dataplane's only grow) counts 0.
func (a Counters) Minus(b Counters) Counters {
	sub := func(x, y uint64) uint64 {
		if x < y {
			return 0
		}
		return x - y
	}
	return Counters{sub(a.Conns, b.Conns), sub(a.InPkts, b.InPkts), sub(a.OutPkts, b.OutPkts),
		sub(a.InBytes, b.InBytes), sub(a.OutBytes, b.OutBytes)}
}

// Rates are per-second rates as IPVS's estimator computes them (rates.go).
type Rates struct {
	CPS, InPPS, OutPPS, InBPS, OutBPS uint64
}

// baselines are per-server counters that a listing subtracts (-Z, and a
// server removed and added again starts from zero).
type baselines map[destKey]Counters

// view reads the lcores' counters into the typed view, each server's
// less its baseline (base may be nil).
func (c *Controller) view(base baselines) View {
	links := c.Links()
	c.mu.Lock()
	defer c.mu.Unlock()
	v := View{At: time.Now(), ConnTableSize: c.dp.ConnCapacity(), Started: c.started, Handover: c.handover, Links: links,
		DrainingVIPs: drainingVIPs(c.snap)}
	workers := c.dp.Workers()
	for i, ws := range c.dp.WorkerStats() {
		l := LcoreView{ID: i, Stats: ws}
		l.BusyPercent, l.CyclesPerPacket = cycleAccounting(ws, c.dp.TSCHz())
		if i < len(workers) && workers[i] != nil {
			l.Sched = threadSched(workers[i].ThreadID())
			l.Jobs = workers[i].JobStats()
		}
		v.Connections += ws[lcore.Conns]
		v.Lcores = append(v.Lcores, l)
	}
	for i := range c.services {
		s := &c.services[i]
		sv := ServiceView{Key: s.key, Conf: s.conf, QuorumUp: s.quorumUp}
		for j := range s.servers {
			sv.Servers = append(sv.Servers, c.serverView(s.conf, &s.servers[j], base))
		}
		if s.sorryActive {
			r := c.serverView(s.conf, s.sorry, base)
			r.Health, r.HealthReason = SorryStandIn, ""
			sv.Sorry = &r
		}
		sv.each(func(r *ServerView) { sv.Stats = sv.Stats.Plus(r.Stats) })
		v.Services = append(v.Services, sv)
	}
	v.SNAT = snatViews(c.snatStatsLocked())
	return v
}

// serverView reads one server of service s: its counters, its health
// check's and dynamic feedback's state; the caller holds mu.
func (c *Controller) serverView(s conf.Service, r *server, base baselines) ServerView {
	ds := c.dp.DestStats(r.id)
	rv := ServerView{
		key: r.key, Conf: r.conf, Weight: r.state.weight,
		Active: ds[lcore.DestActive], Inactive: ds[lcore.DestInactive], Persistent: ds[lcore.DestPersistent],
		Stats: countersOf(ds).Plus(c.carried[r.key]).Minus(base[r.key]), FeedbackWeight: r.conf.Weight,
	}
	if c.health != nil {
		if st, ok := c.health.State(r.health); ok {
			rv.Health = Up
			if !st.Up {
				rv.Health, rv.HealthReason = Down, st.LastReason
			}
			rv.Check, rv.SlowStart = &st, s.HealthFor(r.conf).SlowStart
		}
	}
	if c.feedback != nil {
		if st, ok := c.feedback.Status(r.health); ok {
			rv.Feedback = &st
			rv.FeedbackWeight = c.feedback.Weight(r.health, r.conf.Weight)
		}
	}
	return rv
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
