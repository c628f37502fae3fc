package ctl

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// TestLinksPolled: the controller reads the ports' links every linkPoll,
// counts each change, names the down ports to lbctl and /metrics, and a
// master announces its addresses on a port whose link came back.
func TestLinksPolled(t *testing.T) {
	c, f := newHAController(t, "master", 1)
	t0 := time.Now()
	f.linkErr = true // unread: taken as up
	c.step(t0)
	if down := api.LinksDown(c.Links()); len(down) != 0 {
		t.Fatalf("links down when unread: %v", down)
	}
	f.linkErr = false
	c.links.last = time.Time{}
	c.step(t0)
	if down := api.LinksDown(c.Links()); len(down) != 0 {
		t.Fatalf("links down at start: %v", down)
	}
	changes := 0
	c.OnLinkChange(func() { changes++ })
	f.linksDown = []bool{false, true} // lan
	c.step(t0.Add(linkPoll / 2))
	if down := api.LinksDown(c.Links()); len(down) != 0 {
		t.Fatalf("read again before linkPoll: %v", down)
	}
	c.step(t0.Add(linkPoll))
	if down := api.LinksDown(c.Links()); !slices.Equal(down, []string{"lan"}) {
		t.Fatalf("links down %v, want lan", down)
	}
	links := c.Links()
	if links[1].Up || links[1].Changes != 1 || !links[1].Since.Equal(t0.Add(linkPoll)) || links[1].Role != "server" ||
		!links[0].Up || links[0].Changes != 0 || links[0].Role != "client" || links[0].SpeedMbps != 10000 {
		t.Fatalf("links %+v", links)
	}
	if got := c.view(nil); !slices.Equal(api.LinksDown(got.Links), []string{"lan"}) {
		t.Errorf("the view's links %+v", got.Links)
	}
	if up := linkMetrics(t, c); up["lan"] != 0 || up["wan"] != 1 {
		t.Errorf("dplb_port_link_up %v", up)
	}

	// Back up: a master announces the addresses on that port (the
	// floating gateway address is lan's).
	before := len(f.sent())
	f.linksDown = nil
	c.step(t0.Add(2 * linkPoll))
	if down := api.LinksDown(c.Links()); len(down) != 0 || c.Links()[1].Changes != 2 {
		t.Fatalf("after the link came back: down %v, %+v", down, c.Links()[1])
	}
	if changes != 2 {
		t.Errorf("the change hook ran %d times, want 2", changes)
	}
	var announced []uint32
	for _, s := range f.sent()[before:] {
		if s.cmd.Kind == lcore.CmdAnnounce {
			if s.cmd.Port != 1 {
				t.Errorf("announced on port %d, want lan's only", s.cmd.Port)
			}
			announced = append(announced, s.cmd.IP)
		}
	}
	if !slices.Contains(announced, ipv4(netip.MustParseAddr("198.51.100.253"))) {
		t.Errorf("announced %v on the link's return, want the floating address", announced)
	}
}

// linkMetrics reads dplb_port_link_up by port.
func linkMetrics(t *testing.T, c *Controller) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newLinkCollector(c))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	up := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "dplb_port_link_up" {
			continue
		}
		for _, m := range mf.GetMetric() {
			up[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	return up
}

// TestLinkDownAtStart: a port down at the first read is down (the check
// fails) but not counted as a change, and its return is one.
func TestLinkDownAtStart(t *testing.T) {
	c, f := newHAController(t, "backup", 1)
	f.linksDown = []bool{true}
	t0 := time.Now()
	c.step(t0)
	if l := c.Links()[0]; l.Up || l.Changes != 0 || !slices.Equal(api.LinksDown(c.Links()), []string{"wan"}) {
		t.Fatalf("wan down at start: %+v, down %v", l, api.LinksDown(c.Links()))
	}
	f.linksDown = nil
	c.step(t0.Add(linkPoll))
	if l := c.Links()[0]; !l.Up || l.Changes != 1 {
		t.Fatalf("wan up after: %+v", l)
	}
}
