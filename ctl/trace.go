package ctl

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// trace answers lbctl trace: the owner of the flow (lcore.Owner of the
// client endpoint) looks at its own table and scheduler through its
// command ring; this turns its answer into lbctl's terms. Nothing
// changes, on the lcore or here.
func (c *Controller) trace(req api.Request) (api.Response, error) {
	s := req.Service
	if s == nil {
		return api.Response{}, errors.New("trace needs a service: -t|-u VIP:port")
	}
	if err := s.Check(); err != nil {
		return api.Response{}, fmt.Errorf("trace %w", err)
	}
	vip, _ := netip.ParseAddr(s.VIP)
	client, err := api.TraceEndpoint("--client", req.Client)
	if err != nil {
		return api.Response{}, err
	}
	if client.Addr().Is6() != vip.Is6() {
		return api.Response{}, fmt.Errorf("--client %s: not of the VIP's IP version (%s)", client, vip)
	}
	f := lcore.TraceFlow{Proto: protocols[s.Protocol], Client: ipv4(client.Addr()), ClientPort: client.Port(),
		VIP: ipv4(vip), VPort: uint16(s.Port), IPv6: vip.Is6(), Client6: ipv6(client.Addr()), VIP6: ipv6(vip)}
	from, to := client, netip.AddrPortFrom(vip, uint16(s.Port))
	if req.Reply != "" {
		rs, err := api.TraceEndpoint("--reply", req.Reply)
		if err != nil {
			return api.Response{}, err
		}
		if rs.Addr().Is6() && !vip.Is6() {
			return api.Response{}, fmt.Errorf("--reply %s: an IPv6 server of an IPv4 VIP (%s): lbd does not translate IPv4 clients to IPv6 servers", rs, vip)
		}
		// An IPv4 server of an IPv6 VIP is NAT64's: its reply is IPv4.
		f.Reply, f.RIP, f.RIP6, f.RPort = true, ipv4(rs.Addr()), ipv6(rs.Addr()), rs.Port()
		from, to = rs, client
	}
	res, err := c.dp.Trace(f)
	if err != nil {
		return api.Response{}, fmt.Errorf("trace: %w", err)
	}
	c.mu.Lock()
	snap, keyed := c.snap, c.cfg.Dataplane.SteeringKey != ""
	c.mu.Unlock()

	proto := "TCP"
	if f.Proto == hdr.ProtoUDP {
		proto = "UDP"
	}
	t := &api.Trace{
		Flow: fmt.Sprintf("%s %s -> %s", proto, from, to), Reply: f.Reply, Generation: res.Gen,
		Steering: api.TraceSteering{Owner: res.Worker, Workers: c.dp.NumWorkers(), Hash: lcore.SteeringHash(f.Client, f.ClientPort),
			Key: "per-boot", RSS: "software"},
		Table: api.TraceTable{Entries: res.TableLen, Capacity: res.TableCap},
	}
	if keyed {
		t.Steering.Key = "configured"
	}
	port, _, ok := snap.Route(ipv4(from.Addr()))
	if f.IPv6 {
		t.Steering.Hash = lcore.SteeringHash6(&f.Client6, f.ClientPort)
	}
	if from.Addr().Is6() {
		a := ipv6(from.Addr())
		port, _, ok = snap.Route6(&a)
	}
	if ok {
		t.Steering.Port = snap.Ports[port].Name
		if snap.Ports[port].RSS == lcore.RSSAlignedEndpoint {
			t.Steering.RSS = "aligned"
		}
	}
	if res.HasService {
		t.Service = traceService(*s, res)
	}
	var dest string // where the packet goes
	var method string
	if res.HasConn || res.OneWayOnly {
		ci := res.Conn
		tc := &api.TraceConn{Conn: api.Conn{Protocol: proto, State: ci.State.String(), ExpiresSecs: uint64(max(ci.Expires, 0) / 1e9),
			Client:      netip.AddrPortFrom(addrOfKey(ci.ClientIP, ci.Client6), ci.ClientPort).String(),
			Virtual:     netip.AddrPortFrom(addrOfKey(ci.VIP, ci.VIP6), ci.VPort).String(),
			Destination: netip.AddrPortFrom(addrOfKey(ci.RIP, ci.RIP6), ci.RPort).String()},
			Direction: "client to server", OneWayOnly: res.OneWayOnly, SYNReschedules: res.SYNReschedules}
		if ci.LIP != 0 { // FullNAT, NAT64: the server answers this endpoint
			tc.Local = netip.AddrPortFrom(addrOf(ci.LIP), ci.LPort).String()
		}
		if res.ConnDir == conn.Reply {
			tc.Direction = "server to client"
			dest = tc.Client
		} else {
			dest = tc.Destination
		}
		method = forwardNames[ci.Fwd]
		t.Conn = tc
	}
	if res.HasTemplate {
		tp := &api.TraceTemplate{ExpiresSecs: uint64(max(res.TemplateExpires, 0) / 1e9)}
		if res.TemplateDest >= 0 {
			tp.Destination = destName(res.Dests[res.TemplateDest])
		}
		t.Template = tp
	}
	if res.PickBy != "" {
		d := &api.TraceDecision{By: res.PickBy, Predicted: res.PickPredicted}
		if res.Pick >= 0 {
			d.Destination = destName(res.Dests[res.Pick])
			dest, method = d.Destination, forwardNames[res.Dests[res.Pick].Fwd]
		}
		t.Decision = d
	}
	t.Verdict = traceVerdict(res, snap, dest, method)
	if res.Drop == lcore.DropToLocal {
		if port, kni := c.kniOf(to.Addr()); kni != "" {
			t.Verdict = api.TraceVerdict{Kernel: kni, Port: port}
		}
	}
	switch {
	case res.OneWayOnly:
		t.Verdict.Note = "DR and TUN servers answer the client directly; lbd sees no reply"
	case t.Decision != nil && f.Proto == hdr.ProtoTCP && res.SynProxy:
		t.Verdict.Note = "the SYN proxy answers a SYN itself with a cookie SYN-ACK; this connection opens when the client's ACK proves the cookie"
	case t.Decision != nil && f.Proto == hdr.ProtoTCP && !res.SloppyTCP:
		t.Verdict.Note = "the packet traced is a SYN: a first packet without one is dropped (not_syn)"
	}
	return api.Response{Trace: t}, nil
}

// kniOf is the port whose own address (or floating one) a is and its
// kernel interface (ports[].kni): what lbd does not take of a packet
// to it goes to the kernel there. "", "" for none.
func (c *Controller) kniOf(a netip.Addr) (port, kni string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.cfg.Ports {
		own := false
		for _, pfx := range []string{p.Address, p.Address6} {
			if q, err := netip.ParsePrefix(pfx); err == nil && q.Addr() == a {
				own = true
			}
		}
		for _, f := range p.Floating {
			if q, err := netip.ParseAddr(f); err == nil && q == a {
				own = true
			}
		}
		if own && p.KNI != "" {
			return p.Name, p.KNI
		}
	}
	return "", ""
}

// traceService is the service and its servers as the owner sees them.
func traceService(s api.ServiceSpec, res lcore.TraceResult) *api.TraceService {
	ts := &api.TraceService{Name: s.String(), Scheduler: res.Scheduler, Persistence: uint32(res.Persistence / 1e9),
		SloppyTCP: res.SloppyTCP, SynProxy: res.SynProxy, Servers: []api.TraceServer{}}
	for _, d := range res.Dests {
		st := "available"
		switch {
		case d.Expired:
			st = "expiring: failed, its connections end"
		case d.Weight <= 0:
			st = "quiescent (weight 0): no new connections"
		case d.Upper > 0 && d.Active+d.Inactive >= d.Upper:
			st = "over its upper threshold (-x): no new connections"
		}
		ts.Servers = append(ts.Servers, api.TraceServer{Address: destName(d), Forward: forwardNames[d.Fwd], Weight: int(d.Weight),
			Upper: int(d.Upper), Active: d.Active, Inactive: d.Inactive, State: st})
	}
	return ts
}

func destName(d lcore.TraceDest) string {
	return netip.AddrPortFrom(addrOfKey(d.Addr, d.Addr6), d.Port).String()
}

// traceVerdict says what becomes of the packet.
func traceVerdict(res lcore.TraceResult, snap *lcore.Snapshot, dest, method string) api.TraceVerdict {
	if res.Drop != 0 {
		return api.TraceVerdict{Drop: res.Drop.Name(), Why: api.DropWords(res.Drop.Name())}
	}
	v := api.TraceVerdict{To: dest, Method: method, MAC: res.NextHopKnown}
	if res.OutPort >= 0 && res.OutPort < len(snap.Ports) {
		v.Port = snap.Ports[res.OutPort].Name
		v.Via = addrOfKey(res.NextHop, res.NextHop6).String()
	}
	return v
}
