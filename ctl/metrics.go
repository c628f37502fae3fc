package ctl

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
)

// collector reads the dataplane's published counters at scrape time, so
// metrics cost the lcores nothing.
type collector struct {
	dp    Dataplane
	ctl   *Controller
	rates *RateEstimator // nil: rates stay 0

	portPackets, portBytes, portErrors, portMissed, portNoMbuf *prometheus.Desc
	lcoreCounter, lcoreDrops, lcoreConns, jobRuns, jobSeconds  *prometheus.Desc
	jobSlow                                                    *prometheus.Desc
	lcoreConnCap, lcoreRing, lcoreDefense                      *prometheus.Desc
	mempoolInUse, kniLost                                      *prometheus.Desc
	svcConns, svcPackets, svcBytes, svcQuorum                  *prometheus.Desc
	rsConns, rsPackets, rsBytes, rsActive, rsInactive          *prometheus.Desc
	svcRate, rsRate                                            *prometheus.Desc
	probeRejected                                              *prometheus.Desc
	vipDraining                                                *prometheus.Desc
	snatConns, snatPackets, snatBytes, snatActive              *prometheus.Desc
}

// kernelLosses is the runtime's count of packets lost on the ports'
// kernel interfaces (lcore/runtime's kni.go); on is false without any.
type kernelLosses interface {
	KernelLost() (lost uint64, on bool)
}

func newCollector(dp Dataplane, ctl *Controller, rates *RateEstimator) *collector {
	d := prometheus.NewDesc
	svc := []string{"protocol", "vip", "port"}
	rs := []string{"protocol", "vip", "port", "server"}
	return &collector{
		dp: dp, ctl: ctl, rates: rates,
		portPackets:  d("dplb_port_packets_total", "Packets received (rx) and sent (tx) by a port, as the device counts them.", []string{"port", "dir"}, nil),
		portBytes:    d("dplb_port_bytes_total", "Bytes received (rx) and sent (tx) by a port.", []string{"port", "dir"}, nil),
		portErrors:   d("dplb_port_errors_total", "Erroneous packets received (rx) or failed transmissions (tx).", []string{"port", "dir"}, nil),
		portMissed:   d("dplb_port_rx_missed_total", "Packets the device dropped because its RX queues were full.", []string{"port"}, nil),
		portNoMbuf:   d("dplb_port_rx_nombuf_total", "RX mbuf allocation failures.", []string{"port"}, nil),
		kniLost:      d("dplb_kni_lost_total", "Packets lost between the lcores and the ports' kernel interfaces (kni): a failed write or read, no mbuf, a full ring to worker 0. Only with a kni port.", nil, nil),
		lcoreCounter: d("dplb_lcore_events_total", "Per-lcore counters (rx_packets, tx_packets, new_conns, arp_replies, ...).", []string{"lcore", "counter"}, nil),
		lcoreDrops:   d("dplb_lcore_drops_total", "Packets an lcore dropped, by reason.", []string{"lcore", "reason"}, nil),
		lcoreConns:   d("dplb_lcore_connections", "Entries in an lcore's connection table.", []string{"lcore"}, nil),
		lcoreConnCap: d("dplb_lcore_connection_capacity", "Capacity of an lcore's connection table.", []string{"lcore"}, nil),
		lcoreDefense: d("dplb_lcore_table_defense", "1 while an lcore's connection table is above a defense threshold (secure: short timeouts for embryonic entries; drop_entry: new connections evict embryonic and idle ones).", []string{"lcore", "defense"}, nil),
		lcoreRing:    d("dplb_lcore_ring_used", "Entries waiting in an lcore's rings: commands (to it), events and sync records (from it), handoff (from it to each peer).", []string{"lcore", "ring"}, nil),
		jobRuns:      d("dplb_lcore_job_runs_total", "Runs of an lcore's periodic job.", []string{"lcore", "job"}, nil),
		jobSlow:      d("dplb_lcore_job_slow_runs_total", "Runs of an lcore's periodic job that took 16.384 µs or more (a long loop iteration, as the perf report counts them).", []string{"lcore", "job"}, nil),
		jobSeconds:   d("dplb_lcore_job_seconds_total", "Time an lcore spent in a periodic job.", []string{"lcore", "job"}, nil),
		mempoolInUse: d("dplb_mempool_in_use", "Packet buffers taken out of the pool.", nil, nil),
		svcConns:     d("dplb_service_connections_total", "Connections scheduled for a virtual service.", svc, nil),
		svcPackets:   d("dplb_service_packets_total", "Packets of a virtual service, in (client to server) and out.", append(svc, "dir"), nil),
		svcBytes:     d("dplb_service_bytes_total", "Bytes of a virtual service, in (client to server) and out.", append(svc, "dir"), nil),
		svcQuorum:    d("dplb_service_quorum_up", "1 while the servers not down of a virtual service weigh its quorum (keepalived's; 1 by default: one server up), 0 when it is lost (the sorry server, if any, stands in).", svc, nil),
		rsConns:      d("dplb_real_server_connections_total", "Connections scheduled to a real server.", rs, nil),
		rsPackets:    d("dplb_real_server_packets_total", "Packets to (in) and from (out) a real server.", append(rs, "dir"), nil),
		rsBytes:      d("dplb_real_server_bytes_total", "Bytes to (in) and from (out) a real server.", append(rs, "dir"), nil),
		rsActive:     d("dplb_real_server_active_connections", "Connections in ESTABLISHED (ipvsadm's ActiveConn).", rs, nil),
		rsInactive:   d("dplb_real_server_inactive_connections", "Connections in other states (ipvsadm's InActConn).", rs, nil),
		svcRate: d("dplb_service_rate", "A virtual service's rates as IPVS's estimator computes them (lbctl -L --rate): "+
			"kind cps (connections/s), inpps, outpps (packets/s), inbps, outbps (bytes/s).", append(svc, "kind"), nil),
		vipDraining: d("dplb_vip_draining", "1 for a VIP no configured service has while connections to it go on "+
			"(a removed service's, or one a peer's records named; lbctl -L: VIP draining).", []string{"vip"}, nil),
		snatConns:     d("dplb_snat_connections_total", "Connections the real servers opened themselves through a SNAT rule (snat[]), by its source network.", []string{"protocol", "source"}, nil),
		snatPackets:   d("dplb_snat_packets_total", "Packets of a SNAT rule's connections, out (from the servers) and in (the answers).", []string{"protocol", "source", "dir"}, nil),
		snatBytes:     d("dplb_snat_bytes_total", "Bytes of a SNAT rule's connections, out (from the servers) and in (the answers).", []string{"protocol", "source", "dir"}, nil),
		snatActive:    d("dplb_snat_active_connections", "A SNAT rule's connections in ESTABLISHED (state active) or another state (inactive).", []string{"protocol", "source", "state"}, nil),
		probeRejected: d("dplb_probe_answers_rejected_total", "Answers to health probes through lbd that did not acknowledge the probe's random sequence number (not believed).", nil, nil),
		rsRate: d("dplb_real_server_rate", "A real server's rates as IPVS's estimator computes them (lbctl -L --rate): "+
			"kind cps (connections/s), inpps, outpps (packets/s), inbps, outbps (bytes/s).", append(rs, "kind"), nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	c.dp.PortStats(func(name string, s ethdev.Stats) {
		counter(c.portPackets, s.IPackets, name, "rx")
		counter(c.portPackets, s.OPackets, name, "tx")
		counter(c.portBytes, s.IBytes, name, "rx")
		counter(c.portBytes, s.OBytes, name, "tx")
		counter(c.portErrors, s.IErrors, name, "rx")
		counter(c.portErrors, s.OErrors, name, "tx")
		counter(c.portMissed, s.IMissed, name)
		counter(c.portNoMbuf, s.RxNoMbuf, name)
	})
	for _, w := range c.dp.Workers() {
		id := strconv.Itoa(w.ID())
		st := w.Stats()
		for s := lcore.Stat(0); int(s) < lcore.NumStats; s++ {
			switch {
			case s == lcore.Conns:
				gauge(c.lcoreConns, float64(st[s]), id)
			case s.IsDefense():
				gauge(c.lcoreDefense, float64(st[s]), id, s.Name())
			case s.IsDrop():
				counter(c.lcoreDrops, st[s], id, s.Name())
			default:
				counter(c.lcoreCounter, st[s], id, s.Name())
			}
		}
		gauge(c.lcoreConnCap, float64(w.ConnTableCap()), id)
		gauge(c.lcoreRing, float64(w.Commands().Len()), id, "commands")
		gauge(c.lcoreRing, float64(w.Events().Len()), id, "events")
		gauge(c.lcoreRing, float64(w.SyncOut().Len()), id, "sync")
		for j, n := range w.HandoffBacklog() {
			if n >= 0 {
				gauge(c.lcoreRing, float64(n), id, "handoff_to_"+strconv.Itoa(j))
			}
		}
		for _, j := range w.JobStats() {
			counter(c.jobRuns, j.Runs, id, j.Name)
			counter(c.jobSlow, j.Slow, id, j.Name)
			ch <- prometheus.MustNewConstMetric(c.jobSeconds, prometheus.CounterValue, float64(j.Nanos)/1e9, id, j.Name)
		}
	}
	gauge(c.mempoolInUse, float64(c.dp.MempoolInUse()))
	if k, ok := c.dp.(kernelLosses); ok {
		if lost, on := k.KernelLost(); on {
			counter(c.kniLost, lost)
		}
	}
	counter(c.probeRejected, c.ctl.probes.rejected.Load())
	v := c.ctl.view(nil) // raw counters: Prometheus counters never go back
	if c.rates != nil {
		c.rates.Fill(&v)
	}
	for _, vip := range v.DrainingVIPs {
		gauge(c.vipDraining, 1, vip.String())
	}
	rates := func(d *prometheus.Desc, r Rates, labels ...string) {
		for _, k := range [...]struct {
			kind string
			v    uint64
		}{{"cps", r.CPS}, {"inpps", r.InPPS}, {"outpps", r.OutPPS}, {"inbps", r.InBPS}, {"outbps", r.OutBPS}} {
			gauge(d, float64(k.v), append(labels, k.kind)...)
		}
	}
	for _, r := range c.ctl.snatStats() {
		proto, src := strings.ToUpper(r.proto), r.source.String()
		counter(c.snatConns, r.stats[lcore.DestConns], proto, src)
		// A rule's connection goes out from its "client" (the server).
		counter(c.snatPackets, r.stats[lcore.DestInPkts], proto, src, "out")
		counter(c.snatPackets, r.stats[lcore.DestOutPkts], proto, src, "in")
		counter(c.snatBytes, r.stats[lcore.DestInBytes], proto, src, "out")
		counter(c.snatBytes, r.stats[lcore.DestOutBytes], proto, src, "in")
		gauge(c.snatActive, float64(r.stats[lcore.DestActive]), proto, src, "active")
		gauge(c.snatActive, float64(r.stats[lcore.DestInactive]), proto, src, "inactive")
	}
	for i := range v.Services {
		s := &v.Services[i]
		vip := s.VIP()
		proto, addr, port := strings.ToUpper(s.Protocol()), vip.Addr().String(), strconv.Itoa(int(vip.Port()))
		rates(c.svcRate, s.Rates, proto, addr, port)
		counter(c.svcConns, s.Stats.Conns, proto, addr, port)
		counter(c.svcPackets, s.Stats.InPkts, proto, addr, port, "in")
		counter(c.svcPackets, s.Stats.OutPkts, proto, addr, port, "out")
		counter(c.svcBytes, s.Stats.InBytes, proto, addr, port, "in")
		counter(c.svcBytes, s.Stats.OutBytes, proto, addr, port, "out")
		quorum := 0.0
		if s.QuorumUp {
			quorum = 1
		}
		gauge(c.svcQuorum, quorum, proto, addr, port)
		s.each(func(r *ServerView) {
			server := r.Addr().String()
			counter(c.rsConns, r.Stats.Conns, proto, addr, port, server)
			counter(c.rsPackets, r.Stats.InPkts, proto, addr, port, server, "in")
			counter(c.rsPackets, r.Stats.OutPkts, proto, addr, port, server, "out")
			counter(c.rsBytes, r.Stats.InBytes, proto, addr, port, server, "in")
			counter(c.rsBytes, r.Stats.OutBytes, proto, addr, port, server, "out")
			gauge(c.rsActive, float64(r.Active), proto, addr, port, server)
			gauge(c.rsInactive, float64(r.Inactive), proto, addr, port, server)
			rates(c.rsRate, r.Rates, proto, addr, port, server)
		})
	}
}

// metricsHandler serves /metrics from a registry of its own (no globals).
func metricsHandler(dp Dataplane, ctl *Controller, mon *health.Monitor, rates *RateEstimator, syncd *connsync.Daemon, ann *announcer) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(dp, ctl, rates), health.NewCollector(mon), newHACollector(ctl), newLinkCollector(ctl), connsync.NewCollector(syncd), newBGPCollector(ann))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}
