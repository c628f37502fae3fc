package ctl

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// The ports' links. A DPDK port is no kernel interface, so neither
// keepalived's track_interface nor the kernel's routes see its link go
// down; the controller reads each port's link state every linkPoll
// (rte_eth_link_get_nowait: a register read on a NIC, never a packet
// path call) and acts on a change:
//   - the log says which port went down or came back, and /metrics has
//     dplb_port_link_up and dplb_port_link_changes_total;
//   - lbctl --ha-check (keepalived's vrrp_script, deploy/keepalived)
//     fails while a port is down, so the director gives the master role
//     to its backup, which still reaches clients and servers;
//   - the BGP announcer withholds every VIP while a port is down, so the
//     routers send the flows to the other directors;
//   - a master announces its addresses on a port whose link came back
//     (gratuitous ARP, unsolicited NAs), as at a takeover: the switch
//     may have forgotten where they are.

// linkPoll is how often the ports' link state is read.
const linkPoll = 100 * time.Millisecond

// portLink is what the controller knows of one port's link.
type portLink struct {
	up      bool
	speed   uint32 // Mbps, as the driver reports it (0: unknown)
	since   time.Time
	changes uint64
}

// linkState is the controller's view of the ports' links; guarded by
// the controller's mu.
type linkState struct {
	ports []portLink // by port, configuration order; nil before the first poll
	last  time.Time  // the last poll
	// changed, when set, is told of every change (the BGP announcer, so
	// it withdraws or announces at once); it must not block.
	changed func()
}

// OnLinkChange makes fn be called (without blocking, under the
// controller's lock) whenever a port's link goes down or comes back.
func (c *Controller) OnLinkChange(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.links.changed = fn
}

// pollLinks reads the ports' links when linkPoll has passed and acts on
// changes; the caller holds mu.
func (c *Controller) pollLinks(now time.Time) {
	if now.Sub(c.links.last) < linkPoll {
		return
	}
	c.links.last = now
	first := c.links.ports == nil
	if first { // up until read otherwise, as Links says
		c.links.ports = make([]portLink, len(c.ports))
		for i := range c.links.ports {
			c.links.ports[i] = portLink{up: true, since: c.started}
		}
	}
	for i := range c.links.ports {
		l, err := c.dp.PortLink(i)
		if err != nil {
			continue // the state stays as last read
		}
		p := &c.links.ports[i]
		p.speed = l.SpeedMbps
		if l.Up == p.up {
			continue
		}
		name := c.ports[i].Name
		if first { // not a change: how it was when lbd started
			c.log.Warn("port link down at start: lbctl --ha-check fails and BGP withholds the VIPs until it is up", zap.String("port", name))
			p.up = false
			continue
		}
		switch {
		case l.Up:
			c.log.Info("port link up", zap.String("port", name), zap.Uint32("speed_mbps", l.SpeedMbps))
			p.changes++
			p.since = now
		default:
			c.log.Warn("port link down: lbctl --ha-check fails and BGP withdraws the VIPs until it is back", zap.String("port", name))
			p.changes++
			p.since = now
		}
		p.up = l.Up
		if c.links.changed != nil {
			c.links.changed()
		}
		if l.Up && !c.ha.backup {
			c.announcePort(i)
		}
	}
}

// announcePort has worker 0 send gratuitous ARP for the addresses a
// master announces on port i, and unsolicited NAs for its IPv6 ones;
// the caller holds mu.
func (c *Controller) announcePort(i int) {
	var targets []announceTarget
	for _, t := range c.announceTargets() {
		if t.port == i {
			targets = append(targets, t)
		}
	}
	c.announce(targets)
	if !c.ports[i].Addr6.IsUnspecified() &&
		!c.command(0, lcore.Command{Kind: lcore.CmdAnnounce6, Port: i}, time.Now().Add(100*time.Millisecond)) {
		c.ha.announceLost.Add(1)
	}
}

// Links lists the ports' links (up until the first poll says otherwise).
func (c *Controller) Links() []api.PortLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]api.PortLink, len(c.ports))
	for i, p := range c.ports {
		out[i] = api.PortLink{Port: p.Name, Role: c.cfg.Ports[i].Role, Up: true, Since: c.started}
		if i < len(c.links.ports) {
			l := c.links.ports[i]
			out[i].Up, out[i].SpeedMbps, out[i].Since, out[i].Changes = l.up, l.speed, l.since, l.changes
		}
	}
	return out
}

// linkCollector exports the ports' links to /metrics.
type linkCollector struct {
	ctl         *Controller
	up, changes *prometheus.Desc
}

func newLinkCollector(c *Controller) *linkCollector {
	d := prometheus.NewDesc
	return &linkCollector{
		ctl:     c,
		up:      d("dplb_port_link_up", "1 while the port's link is up, as its driver reports it (read every 100 ms).", []string{"port"}, nil),
		changes: d("dplb_port_link_changes_total", "Times the port's link went down or came back up since lbd started.", []string{"port"}, nil),
	}
}

func (l *linkCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(l, ch) }

func (l *linkCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range l.ctl.Links() {
		up := 0.0
		if p.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(l.up, prometheus.GaugeValue, up, p.Port)
		ch <- prometheus.MustNewConstMetric(l.changes, prometheus.CounterValue, float64(p.Changes), p.Port)
	}
}
