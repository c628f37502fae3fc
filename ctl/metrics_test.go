package ctl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dplb/dplb/lcore"
)

// TestMetricsReadTheView: the collector needs only the Dataplane
// interface, and reports the view's raw counters (a -Z does not make a
// Prometheus counter go back).
func TestMetricsReadTheView(t *testing.T) {
	o, c, f := newTestOps(t)
	web := c.Snapshot().Services[0]
	f.dest[web.Dests[1].ID] = lcore.DestStats{lcore.DestConns: 7, lcore.DestActive: 2}
	do(o, rule(t, "-Z"))
	got := collected(t, f, c, func(name string) bool {
		return name == "dplb_real_server_connections_total" || name == "dplb_service_connections_total"
	})
	want := map[string]float64{
		"dplb_real_server_connections_total{port=80,protocol=TCP,server=198.51.100.11:80,vip=203.0.113.100}":   0,
		"dplb_real_server_connections_total{port=80,protocol=TCP,server=198.51.100.12:8000,vip=203.0.113.100}": 7,
		"dplb_real_server_connections_total{port=21,protocol=TCP,server=198.51.100.12:21,vip=203.0.113.100}":   0,
		"dplb_service_connections_total{port=80,protocol=TCP,vip=203.0.113.100}":                               7,
		"dplb_service_connections_total{port=21,protocol=TCP,vip=203.0.113.100}":                               0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics\n got %v\nwant %v", got, want)
	}
	if got := do(o, rule(t, "-L -n --stats")).Services[0].Stats.Conns; got != 0 {
		t.Errorf("lbctl's listing after -Z: %d connections, want 0", got)
	}
}

// collected gathers the controller's metrics whose name keep takes, each
// keyed name{label=value,...} (labels sorted by name), counters and
// gauges alike.
func collected(t *testing.T, f *fakeDataplane, c *Controller, keep func(name string) bool) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(f, c, nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !keep(mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return got
}
