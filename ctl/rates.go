package ctl

import (
	"context"
	"sync"
	"time"

	"github.com/dplb/dplb/lcore"
)

// EstimatorPeriod is how often the rate estimator samples the counters,
// as IPVS's estimation timer (2*HZ).
const EstimatorPeriod = 2 * time.Second

// estimator is IPVS's struct ip_vs_estimator: the counters at the last
// sample and the smoothed rates, scaled: cps, inpps and outpps by 2^10,
// inbps and outbps by 2^5 (net/netfilter/ipvs/ip_vs_est.c).
type estimator struct {
	last               Counters // last_conns, last_inpkts, ...
	cps, inpps, outpps int64
	inbps, outbps      int64
	sampled            bool // last holds a sample
}

// sample is ip_vs_est.c's estimation_timer for one estimator, given the
// cumulative counters now, 2 seconds after the last sample:
//
//	rate = (conns - last_conns) << 9;     /* scaled by 2^10, but divided 2 seconds */
//	e->cps += ((s64)rate - (s64)e->cps) >> 2;
//	...
//	rate = (inbytes - last_inbytes) << 4; /* scaled by 2^5, but divided 2 seconds */
//	e->inbps += ((s64)rate - (s64)e->inbps) >> 2;
//
// The shift of a negative difference is arithmetic, as the kernel's.
// The first sample only records the counters (ip_vs_start_estimator). A
// counter that went backwards (the dataplane's cannot) counts as 0.
func (e *estimator) sample(s Counters) {
	if !e.sampled {
		e.last, e.sampled = s, true
		return
	}
	d := s.Minus(e.last)
	avg := func(a *int64, delta uint64, shift uint) {
		*a += (int64(delta<<shift) - *a) >> 2
	}
	avg(&e.cps, d.Conns, 9)
	avg(&e.inpps, d.InPkts, 9)
	avg(&e.outpps, d.OutPkts, 9)
	avg(&e.inbps, d.InBytes, 4)
	avg(&e.outbps, d.OutBytes, 4)
	e.last = s
}

// rates is ip_vs_read_estimator: the averages unscaled, rounded.
func (e *estimator) rates() Rates {
	pps := func(v int64) uint64 { return uint64(v+0x1FF) >> 10 }
	bps := func(v int64) uint64 { return uint64(v+0xF) >> 5 }
	return Rates{CPS: pps(e.cps), InPPS: pps(e.inpps), OutPPS: pps(e.outpps), InBPS: bps(e.inbps), OutBPS: bps(e.outbps)}
}

// zero is ip_vs_zero_estimator: the averages restart from 0 and the next
// sample counts from the counters now.
func (e *estimator) zero(now Counters) {
	*e = estimator{last: now, sampled: true}
}

// RateEstimator estimates the rates of every service and real server
// from their cumulative counters, as IPVS's estimator does (ip_vs_est.c).
// lbd runs it every EstimatorPeriod (Run); Fill adds its rates to a view.
//
// The dataplane's counters belong to real servers, and a service's are
// their sum over its current servers, which drops when a server leaves.
// A service's estimator is therefore fed the sum of its servers'
// increments since the previous sample (a server's first sample only
// records its counters), so that its input only grows, as an IPVS
// service's own counters do. A service or server that disappears loses
// its estimator; one that appears starts from zero rates, like a new
// IPVS estimator.
type RateEstimator struct {
	view func() View // the raw view (no baselines)

	mu       sync.Mutex
	services map[lcore.ServiceKey]*serviceEstimator
	servers  map[destKey]*estimator
}

// serviceEstimator is a service's estimator and its input: the
// accumulated increments of its servers.
type serviceEstimator struct {
	estimator
	total Counters
}

// NewRateEstimator estimates rates from view's counters.
func NewRateEstimator(view func() View) *RateEstimator {
	return &RateEstimator{view: view, services: map[lcore.ServiceKey]*serviceEstimator{}, servers: map[destKey]*estimator{}}
}

// Run samples now and every EstimatorPeriod until ctx ends.
func (r *RateEstimator) Run(ctx context.Context) {
	t := time.NewTicker(EstimatorPeriod)
	defer t.Stop()
	for {
		r.sample(r.view())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample feeds one view's counters to the estimators.
func (r *RateEstimator) sample(v View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seenSvc := make(map[lcore.ServiceKey]bool, len(r.services))
	seen := make(map[destKey]bool, len(r.servers))
	for i := range v.Services {
		s := &v.Services[i]
		seenSvc[s.Key] = true
		se := r.services[s.Key]
		if se == nil {
			se = &serviceEstimator{}
			r.services[s.Key] = se
		}
		s.each(func(rv *ServerView) {
			seen[rv.key] = true
			e := r.servers[rv.key]
			if e == nil {
				e = &estimator{}
				r.servers[rv.key] = e
			} else {
				se.total = se.total.Plus(rv.Stats.Minus(e.last))
			}
			e.sample(rv.Stats)
		})
		se.sample(se.total)
	}
	for k := range r.services {
		if !seenSvc[k] {
			delete(r.services, k)
		}
	}
	for k := range r.servers {
		if !seen[k] {
			delete(r.servers, k)
		}
	}
}

// Fill sets the Rates of v's services and servers; those not sampled yet
// keep zero rates.
func (r *RateEstimator) Fill(v *View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range v.Services {
		s := &v.Services[i]
		if e := r.services[s.Key]; e != nil {
			s.Rates = e.rates()
		}
		s.each(func(rv *ServerView) {
			if e := r.servers[rv.key]; e != nil {
				rv.Rates = e.rates()
			}
		})
	}
}

// Zero restarts the rates of a service (s from a raw view) and of its
// servers, as ipvsadm -Z does (ip_vs_zero_estimator).
func (r *RateEstimator) Zero(s *ServiceView) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.services[s.Key]; e != nil {
		e.zero(e.total)
	}
	s.each(func(rv *ServerView) {
		if e := r.servers[rv.key]; e != nil {
			e.zero(rv.Stats)
		}
	})
}
