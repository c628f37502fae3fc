package ctl

import (
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
)

// The lbctl edge: the typed view and the configured services as the API's
// wire types.

// Response is the view as lbctl's listing (api.OpList).
func (v View) Response() api.Response {
	resp := api.Response{Info: &api.Info{ConnTableSize: v.ConnTableSize, Connections: v.Connections, Started: v.Started, Handover: v.Handover,
		LinksDown: api.LinksDown(v.Links)}}
	for _, a := range v.DrainingVIPs {
		resp.Info.DrainingVIPs = append(resp.Info.DrainingVIPs, a.String())
	}
	for _, l := range v.Lcores {
		al := api.Lcore{
			ID: l.ID, RxPackets: l.Stats[lcore.RxPackets], TxPackets: l.Stats[lcore.TxPackets], Drops: l.Drops(),
			HandedOff: l.Stats[lcore.HandedOff], HandedIn: l.Stats[lcore.HandedIn], Connections: l.Stats[lcore.Conns],
			BusyPercent: l.BusyPercent, CyclesPerPacket: l.CyclesPerPacket, DropsByReason: l.DropsByReason(),
		}
		loopAccounting(&al, l.Stats, l.Sched) // goruntime.go
		for _, j := range l.Jobs {
			al.Jobs = append(al.Jobs, api.LcoreJob{Name: j.Name, Runs: j.Runs, Seconds: float64(j.Nanos) / 1e9, SlowRuns: j.Slow})
		}
		resp.Lcores = append(resp.Lcores, al)
	}
	if len(v.Lcores) > 0 {
		resp.Runtime = readRuntime()
	}
	for i := range v.Services {
		s := &v.Services[i]
		as := serviceSettings(s.Conf)
		as.Stats, as.Rates = api.Stats(s.Stats), api.Rates(s.Rates)
		as.Servers = []api.RealServer{}
		s.each(func(r *ServerView) {
			rs := serverSettings(r.Conf)
			rs.Weight = r.Weight
			rs.ActiveConns, rs.InactiveConns, rs.PersistConns = r.Active, r.Inactive, r.Persistent
			rs.Health, rs.HealthReason = r.Health.String(), r.HealthReason
			rs.Stats, rs.Rates = api.Stats(r.Stats), api.Rates(r.Rates)
			v.fillChecks(&rs, r)
			as.Servers = append(as.Servers, rs)
		})
		resp.Services = append(resp.Services, as)
	}
	for _, r := range v.SNAT {
		ar := api.SNATRule{Protocol: strings.ToUpper(r.Protocol), Source: r.Source.String(),
			ActiveConns: r.Active, InactiveConns: r.Inactive, Stats: api.Stats(r.Stats)}
		for _, a := range r.Addresses {
			ar.Addresses = append(ar.Addresses, a.String())
		}
		resp.SNAT = append(resp.SNAT, ar)
	}
	return resp
}

// fillChecks adds what the health check, slow start and dynamic feedback
// say of r, with ages counted to the view's time.
func (v View) fillChecks(rs *api.RealServer, r *ServerView) {
	rs.ConfiguredWeight = r.Conf.Weight
	if ck := r.Check; ck != nil && !ck.LastProbe.IsZero() {
		rs.Probe = &api.Probe{At: ck.LastProbe, AgeSecs: max(0, v.At.Sub(ck.LastProbe).Seconds()), Passed: ck.LastPassed,
			PassedTotal: ck.Passed, FailedTotal: ck.Failed}
		if !ck.LastPassed {
			rs.Probe.Reason = ck.LastReason
		}
		if ck.ExitWeight >= 0 {
			w := ck.ExitWeight
			rs.Probe.ExitWeight = &w
		}
		rs.Probe.WeightDelta = ck.WeightDelta
	}
	if ramping, elapsed := r.Ramp(v.At); ramping {
		rs.SlowStart = &api.SlowStart{ElapsedSecs: elapsed.Seconds(), DurationSecs: r.SlowStart.Seconds(), TargetWeight: r.FeedbackWeight}
	}
	if fb := r.Feedback; fb != nil {
		f := &api.Feedback{Weight: r.FeedbackWeight, Load: fb.State.Load, Share: 1, LastError: fb.LastErr, Failures: fb.Failures}
		if fb.State.Samples > 0 {
			f.Share = fb.State.Share
		}
		if !fb.LastPoll.IsZero() {
			age := max(0, v.At.Sub(fb.LastPoll).Seconds())
			f.LastPollAgeSecs = &age
		}
		rs.Feedback = f
	}
}

// saved is the configured services as ipvsadm -S writes them (api.OpSave).
func saved(svcs []conf.Service) []api.Service {
	out := make([]api.Service, 0, len(svcs))
	for _, s := range svcs {
		as := serviceSettings(s)
		for _, r := range s.Servers {
			as.Servers = append(as.Servers, serverSettings(r))
		}
		out = append(out, as)
	}
	return out
}

// serviceSettings is a service's settings as ipvsadm shows them.
func serviceSettings(s conf.Service) api.Service {
	as := api.Service{
		Protocol: strings.ToUpper(s.Protocol), VIP: s.VIPAddr().String(), Port: uint16(s.Port),
		Scheduler: s.Scheduler, Persistence: uint32(s.Persistence / time.Second), SloppyTCP: s.SloppyTCP,
	}
	if s.Persistence != 0 && s.Netmask != "" && s.Netmask != "255.255.255.255" {
		as.Netmask = s.Netmask
	}
	if s.Persistence != 0 && s.VIPAddr().Is6() && s.PersistPrefixBits() != 128 {
		as.Netmask = strconv.Itoa(s.PersistPrefixBits()) // ipvsadm shows an IPv6 mask as a length
	}
	if len(s.SchedFlags) > 0 {
		as.SchedFlags = append([]string(nil), s.SchedFlags...)
	}
	as.SynProxy, as.OnePacket, as.QUIC = s.SynProxy, s.OnePacket, s.QUIC
	if len(s.LocalAddresses) > 0 {
		as.LocalAddresses = append([]string(nil), s.LocalAddresses...)
	}
	as.Blocklist, as.Allowlist = keptEntries(s.Blocklist), keptEntries(s.Allowlist)
	return as
}

// serverSettings is a real server's settings as ipvsadm shows them, with
// its configured weight.
func serverSettings(r conf.RealServer) api.RealServer {
	return api.RealServer{Address: r.Addr().String(), Port: uint16(r.Port), Forward: forwardNames[forwardMethods[r.Forward]],
		Weight: r.Weight, Upper: r.Upper, Lower: r.Lower}
}
