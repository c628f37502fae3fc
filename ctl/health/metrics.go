package health

import "github.com/prometheus/client_golang/prometheus"

// Collector exports the Monitor's states to Prometheus at scrape time:
//
//	dplb_real_server_up{service,server}                 1 up, 0 down
//	dplb_health_checks_total{service,server,result}     probes, result "passed" or "failed"
//	dplb_health_state_changes_total{service,server,to}  changes, to "up" or "down"
//
// Only watched targets appear (servers without a check are up by
// definition); a target's counters start again when it is removed and
// added back. The daemon registers it.
type Collector struct {
	m                   *Monitor
	up, checks, changes *prometheus.Desc
}

// NewCollector returns a collector of m's states.
func NewCollector(m *Monitor) *Collector {
	labels := []string{"service", "server"}
	return &Collector{
		m:       m,
		up:      prometheus.NewDesc("dplb_real_server_up", "Whether a health-checked real server is in scheduling (1) or down (0).", labels, nil),
		checks:  prometheus.NewDesc("dplb_health_checks_total", "Health probes of a real server, by result (passed, failed).", append(labels, "result"), nil),
		changes: prometheus.NewDesc("dplb_health_state_changes_total", "Health state changes of a real server, by new state (up, down).", append(labels, "to"), nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.checks
	ch <- c.changes
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.m.States() {
		svc, srv := s.Target.Service, s.Target.Addr.String()
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, svc, srv)
		ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(s.Passed), svc, srv, "passed")
		ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(s.Failed), svc, srv, "failed")
		ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(s.WentUp), svc, srv, "up")
		ch <- prometheus.MustNewConstMetric(c.changes, prometheus.CounterValue, float64(s.WentDown), svc, srv, "down")
	}
}
