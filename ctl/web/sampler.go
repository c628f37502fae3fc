package web

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
)

// Metrics of the total, of each service and of each real server.
var trafficMetrics = []string{"conns_per_s", "in_pps", "out_pps", "in_Bps", "out_Bps", "active", "inactive", "conns_total"}

// Event is something an operator wants to know happened.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // "health", "change", "edit", "reload", "drain"
	User string    `json:"user,omitempty"`
	Text string    `json:"text"`
}

// AuditEntry is one edit tried in the console, or made to lbd another way
// (lbctl, SIGHUP) as lbd's edit log has it.
type AuditEntry struct {
	Time   time.Time    `json:"time"`
	User   string       `json:"user"`
	Role   string       `json:"role,omitempty"` // the console user's role
	Via    string       `json:"via"`            // "console", "lbctl", "signal"
	Op     string       `json:"op"`
	Target string       `json:"target"`
	Result string       `json:"result"`            // "ok", "refused: <lbd's message>", "denied: viewer"
	Req    *api.Request `json:"request,omitempty"` // the console's request
}

const (
	maxEvents = 1000
	maxAudit  = 1000
)

// counters are the cumulative numbers a rate is derived from.
type counters struct{ conns, inPkts, outPkts, inBytes, outBytes float64 }

func countersOf(s api.Stats) counters {
	return counters{float64(s.Conns), float64(s.InPkts), float64(s.OutPkts), float64(s.InBytes), float64(s.OutBytes)}
}

// rate is (b-a)/dt, 0 when the counter went back (zeroed, re-added).
func rate(a, b, dt float64) float64 {
	if b < a || dt <= 0 {
		return 0
	}
	return (b - a) / dt
}

// drain is a server at weight 0 that the console removes once its active
// connections are gone.
type drain struct {
	user string
	svc  api.ServiceSpec
	srv  api.ServerSpec
}

// monitor samples lbd's listing once a second through the same requests
// lbctl sends, keeps the charts' series, and derives events.
type monitor struct {
	h   Handler
	log *zap.Logger

	mu       sync.Mutex
	round    int64
	last     api.Response // the last listing
	lastT    time.Time
	prev     map[string]counters
	entities map[string]*entity
	events   []Event
	audit    []AuditEntry
	drains   map[string]drain
	editSeq  uint64 // the last of lbd's edits taken into the events and audit
}

func newMonitor(h Handler, log *zap.Logger) *monitor {
	return &monitor{h: h, log: log, prev: map[string]counters{}, entities: map[string]*entity{}, drains: map[string]drain{}}
}

func serviceKey(s api.Service) string { return s.Protocol + " " + addrPort(s.VIP, s.Port) }

func serverKey(s api.Service, rs api.RealServer) string {
	return serviceKey(s) + " -> " + addrPort(rs.Address, rs.Port)
}

func addrPort(a string, p uint16) string { return a + ":" + strconv.Itoa(int(p)) }

func (m *monitor) event(kind, user, format string, args ...any) {
	m.events = append(m.events, Event{Time: time.Now(), Kind: kind, User: user, Text: fmt.Sprintf(format, args...)})
	if len(m.events) > maxEvents {
		m.events = m.events[len(m.events)-maxEvents:]
	}
}

// sample takes one listing and records it.
func (m *monitor) sample(ctx context.Context, now time.Time) {
	resp := m.h.Handle(ctx, api.Request{Version: api.Version, Op: api.OpList})
	if resp.Error != "" {
		m.log.Warn("console: listing refused", zap.String("error", resp.Error))
		return
	}
	edits := m.h.Handle(ctx, api.Request{Version: api.Version, Op: api.OpEdits})
	if edits.Error != "" {
		m.log.Warn("console: edit log refused", zap.String("error", edits.Error))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.round++
	dt := now.Sub(m.lastT).Seconds()
	first := m.lastT.IsZero()
	if !first {
		m.diff(m.last, resp)
	}
	var total counters
	var active, inactive float64
	for _, s := range resp.Services {
		c := countersOf(s.Stats)
		total.conns += c.conns
		total.inPkts += c.inPkts
		total.outPkts += c.outPkts
		total.inBytes += c.inBytes
		total.outBytes += c.outBytes
		var sa, si float64
		for _, rs := range s.Servers {
			sa += float64(rs.ActiveConns)
			si += float64(rs.InactiveConns)
			m.record("rs "+serverKey(s, rs), now, dt, countersOf(rs.Stats), float64(rs.ActiveConns), float64(rs.InactiveConns), nil)
		}
		active += sa
		inactive += si
		m.record("svc "+serviceKey(s), now, dt, c, sa, si, nil)
	}
	var fill float64
	if resp.Info != nil && resp.Info.ConnTableSize > 0 {
		fill = 100 * float64(resp.Info.Connections) / float64(resp.Info.ConnTableSize)
	}
	m.record("total", now, dt, total, active, inactive, []float64{fill})
	m.recordLcores(now, dt, resp.Lcores)
	m.recordDrops(now, dt, resp.Lcores)
	for k, e := range m.entities {
		if e.seen != m.round {
			delete(m.entities, k) // the service or server is gone
			delete(m.prev, k)
		}
	}
	m.last, m.lastT = resp, now
	m.takeEdits(edits)
}

// record adds a point of traffic metrics (and extra ones) to entity key.
func (m *monitor) record(key string, now time.Time, dt float64, c counters, active, inactive float64, extra []float64) {
	p, had := m.prev[key]
	m.prev[key] = c
	e := m.entities[key]
	if e == nil {
		metrics := trafficMetrics
		if extra != nil {
			metrics = append(append([]string(nil), trafficMetrics...), "table_fill_pct")
		}
		e = newEntity(metrics)
		m.entities[key] = e
	}
	e.seen = m.round
	if !had {
		return // a rate needs two samples
	}
	vals := []float64{rate(p.conns, c.conns, dt), rate(p.inPkts, c.inPkts, dt), rate(p.outPkts, c.outPkts, dt),
		rate(p.inBytes, c.inBytes, dt), rate(p.outBytes, c.outBytes, dt), active, inactive, c.conns}
	e.add(now, append(vals, extra...))
}

func (m *monitor) recordLcores(now time.Time, dt float64, lcores []api.Lcore) {
	if len(lcores) == 0 {
		return
	}
	e := m.entities["lcores"]
	if e == nil || len(e.metrics) != 5*len(lcores) {
		var metrics []string
		for _, l := range lcores {
			id := strconv.Itoa(l.ID)
			metrics = append(metrics, "busy_pct_"+id, "cycles_per_pkt_"+id, "handoffs_per_s_"+id, "drops_per_s_"+id, "rx_pps_"+id)
		}
		e = newEntity(metrics)
		m.entities["lcores"] = e
	}
	e.seen = m.round
	var vals []float64
	ok := true
	for _, l := range lcores {
		key := "lcore " + strconv.Itoa(l.ID)
		c := counters{conns: float64(l.HandedOff), inPkts: float64(l.Drops), outPkts: float64(l.RxPackets)}
		p, had := m.prev[key]
		m.prev[key] = c
		ok = ok && had
		vals = append(vals, l.BusyPercent, l.CyclesPerPacket, rate(p.conns, c.conns, dt), rate(p.inPkts, c.inPkts, dt), rate(p.outPkts, c.outPkts, dt))
	}
	if ok {
		e.add(now, vals)
	}
}

// recordDrops adds a point of drops per second by reason, summed over
// the lcores. A reason seen for the first time becomes a new metric,
// 0 in the points before.
func (m *monitor) recordDrops(now time.Time, dt float64, lcores []api.Lcore) {
	if len(lcores) == 0 {
		return
	}
	e := m.entities["drops"]
	if e == nil {
		e = newEntity(nil)
		m.entities["drops"] = e
	}
	e.seen = m.round
	sums := map[string]float64{}
	for _, l := range lcores {
		for reason, n := range l.DropsByReason {
			sums[reason] += float64(n)
		}
	}
	for _, reason := range slices.Sorted(maps.Keys(sums)) {
		e.grow("drops_per_s_" + reason)
	}
	// A reason missing from a listing has dropped nothing yet: its
	// counter was 0 then. Rates need a listing before.
	_, had := m.prev["drops"]
	m.prev["drops"] = counters{}
	vals := make([]float64, len(e.metrics))
	for i, name := range e.metrics {
		reason := strings.TrimPrefix(name, "drops_per_s_")
		key := "drop " + reason
		c := counters{conns: sums[reason]}
		p := m.prev[key]
		m.prev[key] = c
		vals[i] = rate(p.conns, c.conns, dt)
	}
	if had && len(vals) > 0 {
		e.add(now, vals)
	}
}

// diff turns what changed between two listings into events: servers going
// down and up, services and servers appearing and going (an edit by lbctl,
// a reload or the console's own).
func (m *monitor) diff(old, cur api.Response) {
	was := map[string]api.RealServer{}
	wasSvc := map[string]bool{}
	for _, s := range old.Services {
		wasSvc[serviceKey(s)] = true
		for _, rs := range s.Servers {
			was[serverKey(s, rs)] = rs
		}
	}
	isSvc := map[string]bool{}
	is := map[string]bool{}
	for _, s := range cur.Services {
		k := serviceKey(s)
		isSvc[k] = true
		if !wasSvc[k] {
			m.event("change", "", "service %s added", k)
		}
		for _, rs := range s.Servers {
			rk := serverKey(s, rs)
			is[rk] = true
			p, ok := was[rk]
			if !ok {
				m.event("change", "", "server %s added", rk)
			}
			switch {
			case p.Health != rs.Health && rs.Health == "down":
				m.event("health", "", "server %s is down: %s", rk, rs.HealthReason)
			case p.Health != rs.Health && rs.Health == "up":
				m.event("health", "", "server %s is up", rk)
			case p.Health != rs.Health && rs.Health == "sorry":
				m.event("health", "", "sorry server %s stands in", rk)
			}
		}
	}
	for k := range was {
		if !is[k] {
			m.event("change", "", "server %s removed", k)
		}
	}
	for k := range wasSvc {
		if !isSvc[k] {
			m.event("change", "", "service %s removed", k)
		}
	}
}

// series returns entity's series over window w ("10m", "1h", "24h").
func (m *monitor) series(entity, w string) (Series, error) {
	wi := -1
	for i, x := range windows {
		if x.Name == w {
			wi = i
		}
	}
	if wi < 0 {
		return Series{}, fmt.Errorf("window %q is not one of 10m, 1h, 24h", w)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entities[entity]
	if e == nil {
		return Series{}, fmt.Errorf("no series for %q", entity)
	}
	return e.series(entity, wi), nil
}

// entityNames lists what the charts can show, total first.
func (m *monitor) entityNames() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := []string{"total"}
	for _, s := range m.last.Services {
		names = append(names, "svc "+serviceKey(s))
		for _, rs := range s.Servers {
			names = append(names, "rs "+serverKey(s, rs))
		}
	}
	return names
}

// Run samples every period until ctx ends.
func (m *monitor) run(ctx context.Context, period time.Duration, tick func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	m.sample(ctx, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.sample(ctx, now)
			m.checkDrains(ctx)
			tick()
		}
	}
}
