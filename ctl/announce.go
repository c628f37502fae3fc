package ctl

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/bgp"
)

// The announcer decides which VIPs lbd's BGP speaker announces
// (docs/design.md, "Scale-out over BGP"): a VIP while lbd forwards, is
// neither drained (lbctl drain) nor stopping (SIGTERM), every port's
// link is up (link.go: a director that cannot reach its clients or
// servers must not draw their flows), and, with
// bgp.require_live_server, one of the VIP's services has a real server
// that is not down and has a weight above 0. A removed service's VIP
// stays announced while its connections drain (vipdrain.go).

// announceEvery is how often the announcer compares what is announced
// with what should be; drain, undrain, stop and a port's link change act
// at once.
const announceEvery = time.Second

// Reasons a VIP is withheld.
const (
	withheldDraining = "draining"
	withheldStopping = "stopping"
	withheldNoServer = "no live server"
	withheldLinkDown = "port link down"
	withheldNoNH6    = "no IPv6 next hop"
)

// announcer drives the speaker from the controller's view.
type announcer struct {
	sp   *bgp.Speaker
	cfg  conf.BGP
	ctl  *Controller
	log  *zap.Logger
	kick chan struct{}
	// nextHop6 is the IPv6 VIPs' next hop; invalid: they are withheld.
	nextHop6 netip.Addr

	mu       sync.Mutex
	draining bool
	stopping bool
	withheld []api.BGPWithheld // as of the last round
}

func newAnnouncer(sp *bgp.Speaker, cfg conf.BGP, c *Controller, log *zap.Logger) *announcer {
	return &announcer{sp: sp, cfg: cfg, ctl: c, log: log, kick: make(chan struct{}, 1), nextHop6: sp.NextHop6()}
}

// wanted splits the VIPs of v into those to announce and those withheld,
// with the reason.
func (a *announcer) wanted(v View) (want []netip.Addr, withheld []api.BGPWithheld) {
	a.mu.Lock()
	draining, stopping := a.draining, a.stopping
	a.mu.Unlock()
	live := map[netip.Addr]bool{}
	for i := range v.Services {
		s := &v.Services[i]
		vip := s.VIP().Addr()
		if _, ok := live[vip]; !ok {
			live[vip] = false
		}
		for _, r := range s.Servers { // not the sorry server: it stands in for none
			if r.Health != Down && r.Weight > 0 {
				live[vip] = true
			}
		}
	}
	for _, vip := range v.DrainingVIPs { // its connections go on (vipdrain.go)
		live[vip] = false
	}
	linkDown := len(api.LinksDown(v.Links)) > 0
	vips := make([]netip.Addr, 0, len(live))
	for vip := range live {
		vips = append(vips, vip)
	}
	slices.SortFunc(vips, netip.Addr.Compare)
	for _, vip := range vips {
		reason := ""
		switch {
		case stopping:
			reason = withheldStopping
		case draining:
			reason = withheldDraining
		case linkDown:
			reason = withheldLinkDown
		case a.cfg.RequireLiveServer && !live[vip]:
			reason = withheldNoServer
		case vip.Is6() && !a.nextHop6.IsValid():
			reason = withheldNoNH6
		}
		if reason == "" {
			want = append(want, vip)
		} else {
			withheld = append(withheld, api.BGPWithheld{VIP: vip.String(), Reason: reason})
		}
	}
	return want, withheld
}

// round announces and withdraws what the view asks for now.
func (a *announcer) round(ctx context.Context) {
	want, withheld := a.wanted(a.ctl.view(nil))
	a.mu.Lock()
	a.withheld = withheld
	a.mu.Unlock()
	if err := a.sp.Announce(ctx, want); err != nil {
		a.log.Warn("bgp", zap.Error(err))
	}
}

// run keeps the announcements up to date until ctx ends.
func (a *announcer) run(ctx context.Context) {
	t := time.NewTicker(announceEvery)
	defer t.Stop()
	for {
		a.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.kick:
		}
	}
}

// poke has the announcer compare at once (a port's link changed); it
// never blocks.
func (a *announcer) poke() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// setDrain drains (withdraws every VIP) or undrains lbd, and returns
// once the speaker has been told.
func (a *announcer) setDrain(ctx context.Context, on bool) {
	a.mu.Lock()
	a.draining = on
	a.mu.Unlock()
	a.round(ctx)
}

// stop withdraws every VIP for good (SIGTERM).
func (a *announcer) stop(ctx context.Context) {
	a.mu.Lock()
	a.stopping = true
	a.mu.Unlock()
	a.round(ctx)
}

// status is lbctl -L --bgp.
func (a *announcer) status(ctx context.Context) (*api.BGP, error) {
	peers, err := a.sp.Peers(ctx)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	out := &api.BGP{ASN: uint32(a.cfg.ASN), RouterID: a.cfg.RouterID, NextHop: a.sp.NextHop().String(),
		Draining: a.draining, Stopping: a.stopping, Withheld: slices.Clone(a.withheld),
		Peers: []api.BGPPeer{}, Announced: []string{}}
	a.mu.Unlock()
	for _, p := range peers {
		out.Peers = append(out.Peers, api.BGPPeer{Address: p.Address, ASN: p.ASN, State: p.State, Since: p.Since,
			HoldTime: p.HoldTime, Advertised: p.Advertised})
	}
	if a.nextHop6.IsValid() {
		out.NextHop6 = a.nextHop6.String()
	}
	for _, vip := range a.sp.Announced() {
		out.Announced = append(out.Announced, netip.PrefixFrom(vip, vip.BitLen()).String())
	}
	return out, nil
}

// bgpCollector exports the sessions and announcements to /metrics.
type bgpCollector struct {
	a                                   *announcer
	up, announced, draining, advertised *prometheus.Desc
}

func newBGPCollector(a *announcer) *bgpCollector {
	d := prometheus.NewDesc
	return &bgpCollector{a: a,
		up:         d("dplb_bgp_session_up", "1 while the BGP session with the peer is established.", []string{"peer"}, nil),
		advertised: d("dplb_bgp_peer_advertised_prefixes", "Prefixes sent to the peer and not withdrawn.", []string{"peer"}, nil),
		announced:  d("dplb_bgp_prefixes_announced", "VIPs this lbd announces now (each a /32, an IPv6 one a /128).", nil, nil),
		draining:   d("dplb_bgp_draining", "1 while lbd is drained (lbctl drain) or stopping: it announces no VIP.", nil, nil),
	}
}

func (c *bgpCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *bgpCollector) Collect(ch chan<- prometheus.Metric) {
	if c.a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := c.a.status(ctx)
	if err != nil {
		return
	}
	for _, p := range st.Peers {
		up := 0.0
		if p.State == "established" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, p.Address)
		ch <- prometheus.MustNewConstMetric(c.advertised, prometheus.GaugeValue, float64(p.Advertised), p.Address)
	}
	ch <- prometheus.MustNewConstMetric(c.announced, prometheus.GaugeValue, float64(len(st.Announced)))
	drained := 0.0
	if st.Draining || st.Stopping {
		drained = 1
	}
	ch <- prometheus.MustNewConstMetric(c.draining, prometheus.GaugeValue, drained)
}

// bgpVerb serves lbctl drain, undrain and -L --bgp.
func (o *Ops) bgpVerb(who api.Author, req api.Request) (api.Response, error) {
	if o.ann == nil {
		return api.Response{}, errors.New("BGP is off: set bgp.asn and bgp.peers in the configuration")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	switch req.Op {
	case api.OpDrain, api.OpUndrain:
		o.ann.setDrain(ctx, req.Op == api.OpDrain)
		o.log.Info("bgp: "+req.Op+"ed", authorFields(who)...)
	}
	st, err := o.ann.status(ctx)
	if err != nil {
		return api.Response{}, err
	}
	return api.Response{BGP: st}, nil
}
