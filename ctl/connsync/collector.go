package connsync

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector exports a daemon's counters at scrape time, per peer.
type collector struct {
	d                                         *Daemon
	running, sent, sendErrors, received, recs *prometheus.Desc
	dropped, lag, bulk, hellos                *prometheus.Desc
}

// NewCollector exports d's counters with the dplb_sync_ prefix; d may be
// nil (sync not configured): then nothing is exported.
func NewCollector(d *Daemon) prometheus.Collector {
	desc := prometheus.NewDesc
	peer := []string{"peer"}
	return &collector{d: d,
		running:    desc("dplb_sync_daemon_running", "1 while the master or backup sync daemon runs.", []string{"mode"}, nil),
		sent:       desc("dplb_sync_sent_total", "Sync messages sent to a peer (the multicast group, or a unicast peer).", peer, nil),
		sendErrors: desc("dplb_sync_send_errors_total", "Sync messages the kernel refused to send to a peer.", peer, nil),
		received:   desc("dplb_sync_received_total", "Sync messages accepted from a peer.", peer, nil),
		recs:       desc("dplb_sync_records_received_total", "Connection and template records accepted from a peer and handed to the workers.", peer, nil),
		dropped: desc("dplb_sync_dropped_total", "Sync messages dropped, by reason (length, magic, version, kind, malformed, mac, record, "+
			"syncid, replay, stale, self, mode, queue_full); peer \"other\" is every sender not proven by the shared key.", []string{"peer", "reason"}, nil),
		lag:    desc("dplb_sync_lag_seconds", "Time since the newest records from a peer arrived.", peer, nil),
		bulk:   desc("dplb_sync_bulk_total", "Whole-table transfers: served to a peer that asked, or received from it (bulk-end seen).", []string{"peer", "dir"}, nil),
		hellos: desc("dplb_sync_hellos_total", "Hellos (a master's heartbeat with its local addresses) accepted from a peer.", peer, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	if c.d == nil {
		return
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	m := c.d.modes.Load()
	for _, r := range []struct {
		mode string
		on   bool
	}{{"master", m.master}, {"backup", m.backup}} {
		v := 0.0
		if r.on {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, v, r.mode)
	}
	now := time.Now()
	for _, s := range c.d.Stats() {
		counter(c.sent, s.Sent, s.Peer)
		counter(c.sendErrors, s.SendErrors, s.Peer)
		counter(c.received, s.Received, s.Peer)
		counter(c.recs, s.Records, s.Peer)
		for reason, n := range s.Dropped {
			counter(c.dropped, n, s.Peer, reason)
		}
		counter(c.bulk, s.BulkServed, s.Peer, "served")
		counter(c.bulk, s.BulkEnds, s.Peer, "received")
		counter(c.hellos, s.Hellos, s.Peer)
		if !s.LastRecord.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, now.Sub(s.LastRecord).Seconds(), s.Peer)
		}
	}
}
