package ctl

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// EstimatorPeriod is how often the rate estimator samples the counters,
// as IPVS's estimation timer (2*HZ).
const EstimatorPeriod = 2 * time.Second

// estimator is IPVS's struct ip_vs_estimator: the counters at the last
// sample and the smoothed rates, scaled: cps, inpps and outpps by 2^10,
// inbps and outbps by 2^5 (net/netfilter/ipvs/ip_vs_est.c).
type estimator struct {
	last               api.Stats // last_conns, last_inpkts, ...
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
func (e *estimator) sample(s api.Stats) {
	if !e.sampled {
		e.last, e.sampled = s, true
		return
	}
	avg := func(a *int64, now, last uint64, shift uint) {
		rate := int64(sub(now, last) << shift)
		*a += (rate - *a) >> 2
	}
	avg(&e.cps, s.Conns, e.last.Conns, 9)
	avg(&e.inpps, s.InPkts, e.last.InPkts, 9)
	avg(&e.outpps, s.OutPkts, e.last.OutPkts, 9)
	avg(&e.inbps, s.InBytes, e.last.InBytes, 4)
	avg(&e.outbps, s.OutBytes, e.last.OutBytes, 4)
	e.last = s
}

// rates is ip_vs_read_estimator: the averages unscaled, rounded.
func (e *estimator) rates() api.Rates {
	pps := func(v int64) uint64 { return uint64(v+0x1FF) >> 10 }
	bps := func(v int64) uint64 { return uint64(v+0xF) >> 5 }
	return api.Rates{CPS: pps(e.cps), InPPS: pps(e.inpps), OutPPS: pps(e.outpps), InBPS: bps(e.inbps), OutBPS: bps(e.outbps)}
}

// zero is ip_vs_zero_estimator: the averages restart from 0 and the next
// sample counts from the counters now.
func (e *estimator) zero(now api.Stats) {
	*e = estimator{last: now, sampled: true}
}

// rateKey names a service (addr empty) or one of its real servers.
type rateKey struct {
	proto, vip string
	port       uint16
	addr       string
	rport      uint16
}

func serviceRateKey(s api.Service) rateKey {
	return rateKey{proto: strings.ToUpper(s.Protocol), vip: s.VIP, port: s.Port}
}

func serverRateKey(s api.Service, rs api.RealServer) rateKey {
	k := serviceRateKey(s)
	k.addr, k.rport = rs.Address, rs.Port
	return k
}

// Rates estimates the rates of every service and real server from their
// cumulative counters, as IPVS's estimator does (ip_vs_est.c). lbd runs
// it every EstimatorPeriod (Run); Fill adds its rates to a listing.
//
// The dataplane's counters belong to real servers, and a service's are
// their sum over its current servers, which drops when a server leaves.
// A service's estimator is therefore fed the sum of its servers'
// increments since the previous sample (a server's first sample only
// records its counters), so that its input only grows, as an IPVS
// service's own counters do. A service or server that disappears loses
// its estimator; one that appears starts from zero rates, like a new
// IPVS estimator.
type Rates struct {
	list func() api.Response // the raw listing (Controller.list)

	mu     sync.Mutex
	est    map[rateKey]*estimator
	totals map[rateKey]api.Stats // a service's accumulated increments, its estimator's input
}

// NewRates estimates rates from list's counters.
func NewRates(list func() api.Response) *Rates {
	return &Rates{list: list, est: map[rateKey]*estimator{}, totals: map[rateKey]api.Stats{}}
}

// Run samples now and every EstimatorPeriod until ctx ends.
func (r *Rates) Run(ctx context.Context) {
	t := time.NewTicker(EstimatorPeriod)
	defer t.Stop()
	for {
		r.sample(r.list())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample feeds one listing's counters to the estimators.
func (r *Rates) sample(resp api.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[rateKey]bool, len(r.est))
	for _, s := range resp.Services {
		sk := serviceRateKey(s)
		seen[sk] = true
		total := r.totals[sk]
		for _, rs := range s.Servers {
			k := serverRateKey(s, rs)
			seen[k] = true
			e := r.est[k]
			if e == nil {
				e = &estimator{}
				r.est[k] = e
			} else {
				total = addStats(total, diffStats(rs.Stats, e.last))
			}
			e.sample(rs.Stats)
		}
		r.totals[sk] = total
		e := r.est[sk]
		if e == nil {
			e = &estimator{}
			r.est[sk] = e
		}
		e.sample(total)
	}
	for k := range r.est {
		if !seen[k] {
			delete(r.est, k)
			delete(r.totals, k)
		}
	}
}

// Fill sets the Rates of resp's services and servers; those not sampled
// yet keep zero rates.
func (r *Rates) Fill(resp *api.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range resp.Services {
		s := &resp.Services[i]
		if e := r.est[serviceRateKey(*s)]; e != nil {
			s.Rates = e.rates()
		}
		for j := range s.Servers {
			if e := r.est[serverRateKey(*s, s.Servers[j])]; e != nil {
				s.Servers[j].Rates = e.rates()
			}
		}
	}
}

// Zero restarts the rates of the services listed in raw (a raw listing,
// Controller.list) and of their servers, as ipvsadm -Z does
// (ip_vs_zero_estimator).
func (r *Rates) Zero(raw []api.Service) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range raw {
		sk := serviceRateKey(s)
		if e := r.est[sk]; e != nil {
			e.zero(r.totals[sk])
		}
		for _, rs := range s.Servers {
			if e := r.est[serverRateKey(s, rs)]; e != nil {
				e.zero(rs.Stats)
			}
		}
	}
}

// diffStats is a - b, counter by counter; a counter that went backwards
// (it cannot, the dataplane's only grow) counts 0.
func diffStats(a, b api.Stats) api.Stats {
	return api.Stats{Conns: sub(a.Conns, b.Conns), InPkts: sub(a.InPkts, b.InPkts), OutPkts: sub(a.OutPkts, b.OutPkts),
		InBytes: sub(a.InBytes, b.InBytes), OutBytes: sub(a.OutBytes, b.OutBytes)}
}

func addStats(a, b api.Stats) api.Stats {
	return api.Stats{Conns: a.Conns + b.Conns, InPkts: a.InPkts + b.InPkts, OutPkts: a.OutPkts + b.OutPkts,
		InBytes: a.InBytes + b.InBytes, OutBytes: a.OutBytes + b.OutBytes}
}
