package ctl

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore"
)

// TestEstimator drives IPVS's estimator (ip_vs_est.c) with synthetic
// 2-second samples; the expected values are the kernel's integer
// arithmetic done by hand: avg += ((delta << 9) - avg) >> 2 for cps and
// pps (read as (avg + 0x1FF) >> 10), avg += ((delta << 4) - avg) >> 2 for
// bps (read as (avg + 0xF) >> 5), shifts of negatives arithmetic.
func TestEstimator(t *testing.T) {
	type step struct {
		add  Counters // counters added since the previous sample
		avg  int64    // the scaled average of the counter under test after it
		rate uint64   // the rate read after it
	}
	tests := []struct {
		name  string
		start estimator // state before the first step
		get   func(e *estimator, r Rates) (int64, uint64)
		steps []step
	}{
		{
			name: "100 connections/s then silence",
			get:  func(e *estimator, r Rates) (int64, uint64) { return e.cps, r.CPS },
			steps: []step{
				{add: Counters{Conns: 500}, avg: 0, rate: 0}, // first sample: counters recorded only
				{add: Counters{Conns: 200}, avg: 25600, rate: 25},
				{add: Counters{Conns: 200}, avg: 44800, rate: 44},
				{add: Counters{Conns: 200}, avg: 59200, rate: 58},
				{add: Counters{}, avg: 44400, rate: 43},
				{add: Counters{}, avg: 33300, rate: 33},
			},
		},
		{
			name: "1 MB/s in: bps scaled by 2^5",
			get:  func(e *estimator, r Rates) (int64, uint64) { return e.inbps, r.InBPS },
			steps: []step{
				{add: Counters{InBytes: 7}},
				{add: Counters{InBytes: 2_000_000}, avg: 8_000_000, rate: 250_000},
				{add: Counters{InBytes: 2_000_000}, avg: 14_000_000, rate: 437_500},
				{add: Counters{InBytes: 2_000_000}, avg: 18_500_000, rate: 578_125},
			},
		},
		{
			name: "small byte counts round up at half",
			get:  func(e *estimator, r Rates) (int64, uint64) { return e.outbps, r.OutBPS },
			steps: []step{
				{},
				{add: Counters{OutBytes: 3}, avg: 12, rate: 0},
				{add: Counters{OutBytes: 5}, avg: 29, rate: 1},
				{add: Counters{OutBytes: 7}, avg: 49, rate: 2},
			},
		},
		{
			name: "one packet per 2 s approaches 512 (0.5/s reads 0)",
			get:  func(e *estimator, r Rates) (int64, uint64) { return e.inpps, r.InPPS },
			steps: []step{
				{},
				{add: Counters{InPkts: 1}, avg: 128},
				{add: Counters{InPkts: 1}, avg: 224},
				{add: Counters{InPkts: 1}, avg: 296},
				{add: Counters{InPkts: 1}, avg: 350},
				{add: Counters{InPkts: 1}, avg: 390},
				{add: Counters{InPkts: 1}, avg: 420},
			},
		},
		{
			name:  "a small average decays to 0 through arithmetic shifts",
			start: estimator{sampled: true, outpps: 3},
			get:   func(e *estimator, r Rates) (int64, uint64) { return e.outpps, r.OutPPS },
			steps: []step{
				{avg: 2}, // 3 + (-3 >> 2) = 3 - 1
				{avg: 1},
				{avg: 0},
				{avg: 0},
			},
		},
		{
			name:  "a counter that went backwards counts 0",
			start: estimator{sampled: true, last: Counters{Conns: 1000}, cps: 4096},
			get:   func(e *estimator, r Rates) (int64, uint64) { return e.cps, r.CPS },
			steps: []step{
				{add: Counters{Conns: ^uint64(0) - 99}, avg: 3072, rate: 3}, // 1000 - 100
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.start
			now := e.last
			for i, s := range tt.steps {
				now = now.Plus(s.add)
				e.sample(now)
				avg, rate := tt.get(&e, e.rates())
				if avg != s.avg || rate != s.rate {
					t.Errorf("sample %d: scaled average %d, rate %d; want %d, %d", i, avg, rate, s.avg, s.rate)
				}
				if e.last != now {
					t.Errorf("sample %d: last = %+v, want %+v", i, e.last, now)
				}
			}
		})
	}
}

// TestEstimatorAllCounters checks that each counter has its own average
// with its own scale.
func TestEstimatorAllCounters(t *testing.T) {
	var e estimator
	e.sample(Counters{})
	e.sample(Counters{Conns: 200, InPkts: 2000, OutPkts: 4000, InBytes: 200_000, OutBytes: 4_000_000})
	want := Rates{CPS: 25, InPPS: 250, OutPPS: 500, InBPS: 25_000, OutBPS: 500_000}
	if got := e.rates(); got != want {
		t.Errorf("rates = %+v, want %+v", got, want)
	}
	e.zero(Counters{Conns: 7})
	e.sample(Counters{Conns: 7})
	if got := e.rates(); got != (Rates{}) {
		t.Errorf("rates after zero and an idle sample = %+v, want 0", got)
	}
}

func svcWith(port uint16, servers ...ServerView) ServiceView {
	k := lcore.ServiceKey{VIP: ip4(192, 0, 2, 100), Port: port, Proto: 6}
	for i := range servers {
		servers[i].key.svc = k
	}
	return ServiceView{Key: k, Servers: servers}
}

func rs(addr string, conns uint64) ServerView {
	return ServerView{key: destKey{addr: ipv4(netip.MustParseAddr(addr)), port: 8080}, Stats: Counters{Conns: conns}}
}

// TestRates follows services and servers through samples: a service's
// input is the sum of its servers' increments, so a server leaving does
// not make it fall; a server that appears starts from zero.
func TestRates(t *testing.T) {
	var raw View
	r := NewRateEstimator(func() View { return raw })
	read := func() View {
		v := View{Services: append([]ServiceView(nil), raw.Services...)}
		for i := range v.Services {
			v.Services[i].Servers = append([]ServerView(nil), v.Services[i].Servers...)
		}
		r.Fill(&v)
		return v
	}
	type want struct {
		svc uint64
		rs  map[string]uint64
	}
	check := func(step string, w want) {
		t.Helper()
		v := read()
		if len(v.Services) != 1 {
			t.Fatalf("%s: %d services", step, len(v.Services))
		}
		s := v.Services[0]
		if s.Rates.CPS != w.svc {
			t.Errorf("%s: service CPS %d, want %d", step, s.Rates.CPS, w.svc)
		}
		for _, x := range s.Servers {
			if a := x.Addr().Addr().String(); x.Rates.CPS != w.rs[a] {
				t.Errorf("%s: server %s CPS %d, want %d", step, a, x.Rates.CPS, w.rs[a])
			}
		}
	}

	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 1000), rs("198.51.100.12", 50))}
	r.sample(raw)
	check("first sample", want{0, nil})

	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 1200), rs("198.51.100.12", 250))}
	r.sample(raw)
	// Each server +200 in 2 s: 25600 -> 25; the service +400: 51200 -> 50.
	check("second sample", want{50, map[string]uint64{"198.51.100.11": 25, "198.51.100.12": 25}})

	// .12 leaves (its 250 connections leave the service's sum) and .13,
	// whose counters start at 9000 (a reused id), arrives.
	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 1400), rs("198.51.100.13", 9000))}
	r.sample(raw)
	// Service: +200 only: 51200 + (102400 - 51200) >> 2 = 64000 -> 62.
	// .11: 25600 + 19200 = 44800 -> 44; .13: first sample, 0.
	check("server replaced", want{62, map[string]uint64{"198.51.100.11": 44, "198.51.100.13": 0}})

	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 1400), rs("198.51.100.13", 9200))}
	r.sample(raw)
	// Service +200: 64000 + (102400 - 64000) >> 2 = 73600 -> 72.
	// .11 idle: 44800 - 11200 = 33600 -> 33; .13 +200: 25600 -> 25.
	check("after the replacement", want{72, map[string]uint64{"198.51.100.11": 33, "198.51.100.13": 25}})

	// -Z restarts the averages; the next sample counts from then.
	r.Zero(&raw.Services[0])
	check("zeroed", want{0, map[string]uint64{}})
	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 1400), rs("198.51.100.13", 9400))}
	r.sample(raw)
	check("after zero", want{25, map[string]uint64{"198.51.100.13": 25}})

	// A service that is deleted and added again starts over.
	raw.Services = nil
	r.sample(raw)
	if len(r.services) != 0 || len(r.servers) != 0 {
		t.Errorf("estimators left after every service went: %d, %d", len(r.services), len(r.servers))
	}
	raw.Services = []ServiceView{svcWith(80, rs("198.51.100.11", 5000))}
	r.sample(raw)
	check("re-added", want{0, nil})

	// Fill leaves services it never sampled at zero.
	v := View{Services: []ServiceView{svcWith(81, rs("198.51.100.11", 1))}}
	r.Fill(&v)
	if v.Services[0].Rates != (Rates{}) || v.Services[0].Servers[0].Rates != (Rates{}) {
		t.Errorf("unsampled service got rates %+v", v.Services[0])
	}
}
