package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// trace6 is trace for an IPv6 service's flow: the same answers, from the
// IPv6 lookups (packet6.go) and without their effects.
func (w *Worker) trace6(r *TraceRequest) {
	res := &r.Result
	*res = TraceResult{Worker: w.cfg.ID, Owner: Owner6(&r.Client6, r.ClientPort, w.nworkers), Gen: w.snap.Gen,
		TableLen: w.table.Len(), TableCap: w.table.Cap(), Pick: -1, TemplateDest: -1, OutPort: -1}
	src, sport, dst, dport := &r.Client6, r.ClientPort, &r.VIP6, r.VPort
	if r.Reply {
		src, sport, dst, dport = &r.RIP6, r.RPort, &r.Client6, r.ClientPort
	}
	svc := (*Service)(nil)
	if si, ok := w.snap.service6(&r.VIP6, r.VPort, r.Proto); ok {
		svc = &w.snap.Services[si]
		w.traceService(res, svc)
	}
	id, dir, ok := w.table.Lookup6(r.Proto, src, sport, dst, dport)
	if !ok && r.Reply {
		// A NAT64 server's IPv4 reply (RIP, RPort) to the local endpoint.
		id, dir, ok = w.traceLocalReply(res, r)
	}
	if ok {
		c := w.table.Get(id)
		res.HasConn, res.ConnDir, res.Conn = true, dir, w.connInfo6(id)
		res.SYNReschedules = c.Proto == hdr.ProtoTCP && dir == conn.Original && (c.State == conn.StateTimeWait ||
			c.State == conn.StateClose || c.State == conn.StateFinWait && c.Fwd.OneWay())
		if w.snap.DestExpired(c.Dest) {
			res.Drop = DropDestDown
			return
		}
		a := w.table.Addrs6(id)
		switch {
		case c.Fwd == fwd.FullNAT && dir == conn.Reply: // NAT64, FNAT66: the server's reply, translated to the client
			w.traceRoute6(res, &a.Client)
		case isFNAT66(a): // the client's packet goes to an IPv6 server
			w.traceRoute6(res, &a.RIP)
		case c.Fwd == fwd.FullNAT: // NAT64: the client's packet goes to an IPv4 server
			w.traceRoute(res, c.RIP)
		case c.Fwd == fwd.NAT && dir == conn.Reply:
			w.traceRoute6(res, &a.Client)
		default:
			w.traceRoute6(res, &a.RIP)
		}
		return
	}
	if svc == nil || r.Reply {
		switch {
		case w.snap.IsVIP6(*dst):
			res.Drop = DropNoService
		case w.snap.isLocal6(*dst):
			res.Drop = DropToLocal
		default:
			res.Drop = DropNoConn
		}
		return
	}
	if svc.Clients != nil {
		if res.Drop = svc.Clients.admits6(&r.Client6); res.Drop != 0 {
			return // the lists come before the scheduler, as in newConn6
		}
	}
	w.tracePick6(res, svc, r)
	switch {
	case res.Pick < 0 && res.PickPredicted:
		res.Drop = DropNoDest
	case res.TableLen >= res.TableCap:
		res.Drop = DropTableFull
	case res.Pick >= 0 && res.Dests[res.Pick].Fwd == fwd.FullNAT && res.Dests[res.Pick].Addr6.IsUnspecified():
		w.traceRoute(res, res.Dests[res.Pick].Addr) // NAT64
	case res.Pick >= 0:
		w.traceRoute6(res, &res.Dests[res.Pick].Addr6)
	}
}

// connInfo6 lists an IPv6 entry as the dump does.
func (w *Worker) connInfo6(id uint32) ConnInfo {
	c, a := w.table.Get(id), w.table.Addrs6(id)
	ci := ConnInfo{Proto: c.Proto, State: c.State, Fwd: c.Fwd, IPv6: true, Client6: a.Client, ClientPort: c.ClientPort,
		VIP6: a.VIP, VPort: c.VPort, RIP6: a.RIP, RPort: c.RPort, Expires: c.Expires - w.now}
	switch x := w.table.Ext(id); {
	case x == nil || c.Fwd != fwd.FullNAT:
	case isFNAT66(a):
		ci.LIP6, ci.LPort = a.LIP, x.LPort
	default:
		ci.RIP, ci.LIP, ci.LPort = c.RIP, x.LIP, x.LPort
	}
	return ci
}

// tracePick6 is tracePick with newConn6's keys: the folds.
func (w *Worker) tracePick6(res *TraceResult, svc *Service, r *TraceRequest) {
	vip := conn.Fold6(&r.VIP6)
	if svc.Persistence > 0 {
		network := masked6(&r.Client6, &svc.PersistMask6)
		key, sub := templateKey(conn.Fold6(&network), vip, templatePort(svc, r.VPort), r.Proto)
		if slot, v, _, _ := w.tmpl.find(key, sub); slot >= 0 {
			res.HasTemplate = true
			res.TemplateDest = svc.destIndex(uint32(v&templateDest) - 1)
			res.TemplateExpires = w.tmpl.slots[slot].expires.Load() - (w.now + w.tmplOff)
			if i := res.TemplateDest; i >= 0 && svc.Dests[i].Weight > 0 {
				res.Pick, res.PickBy, res.PickPredicted = i, "template", true
				return
			}
		}
	}
	f := sched.Flow{SrcIP: conn.Fold6(&r.Client6), SrcPort: r.ClientPort, DstIP: vip, DstPort: r.VPort, Proto: r.Proto, Now: w.now}
	res.Pick, res.PickPredicted = sched.Preview(svc.Scheds[w.cfg.ID], &f, w.cnt)
	res.PickBy = "scheduler"
}

// traceRoute6 is route6 without its side effects.
func (w *Worker) traceRoute6(res *TraceResult, dst *hdr.Addr6) {
	port, hop, ok := w.snap.Route6(dst)
	if !ok {
		res.Drop = DropNoRoute
		return
	}
	res.OutPort, res.NextHop6 = port, hop
	if _, ok := w.snap.Neigh6[hop]; ok {
		res.NextHopKnown = true
	} else if _, ok := w.neigh6.lookup(&hop, w.now); ok {
		res.NextHopKnown = true
	}
	if !res.NextHopKnown {
		res.Drop = DropNoNeighbour
	}
}

// SteeringHash6 is SteeringHash for an IPv6 client endpoint.
func SteeringHash6(client *hdr.Addr6, port uint16) uint32 {
	return hash6With(&toeplitz6, client, port)
}

func hash6With(t *[18][256]uint32, client *hdr.Addr6, port uint16) uint32 {
	var h uint32
	for i, b := range client {
		h ^= t[i][b]
	}
	return h ^ t[16][byte(port>>8)] ^ t[17][byte(port)]
}
