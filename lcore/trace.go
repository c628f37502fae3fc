package lcore

import (
	"sync/atomic"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// Tracing one flow (lbctl trace). The worker that owns the flow answers,
// between two bursts, what it would do with the flow's next packet now:
// the connection entry, or the service, the real server a new connection
// would get and the drop reason, if any. It changes nothing: the entry
// is not touched, no template is made or pinned, and the scheduler's
// choice is a Preview on a copy of its state. Only the owner reads its
// table and its schedulers, as for every packet.

// TraceRequest asks the worker that owns a flow about its next packet. The
// control plane fills the flow, pushes a CmdTrace to the owner's command
// ring and waits for Done; the worker fills Result once, in its commands
// job, and never blocks.
type TraceRequest struct {
	TraceFlow

	Result TraceResult
	done   atomic.Bool
}

// TraceFlow is the flow traced: the client's packet to the VIP, or the
// real server's reply to the client.
type TraceFlow struct {
	Proto      uint8
	Client     uint32
	ClientPort uint16
	VIP        uint32
	VPort      uint16
	// Reply: the packet is the real server's answer, from RIP:RPort to the
	// client, instead of the client's packet to the VIP.
	Reply bool
	RIP   uint32
	RPort uint16
	// IPv6: an IPv6 service's flow, whose client, VIP and (for a reply)
	// real server are Client6, VIP6 and RIP6 (trace6.go).
	IPv6                bool
	Client6, VIP6, RIP6 hdr.Addr6
}

// Owner is the worker that owns the flow, of n.
func (f *TraceFlow) Owner(n int) int {
	if f.IPv6 {
		return Owner6(&f.Client6, f.ClientPort, n)
	}
	return Owner(f.Client, f.ClientPort, n)
}

// Done reports whether the worker answered; Result is then the caller's.
func (r *TraceRequest) Done() bool { return r.done.Load() }

// TraceResult is what the owner found. The packet traced is a SYN (for
// TCP) when there is no entry, a packet of the connection when there is.
type TraceResult struct {
	Worker   int    // the worker that answered
	Owner    int    // the owner by the steering function, as that worker computes it
	Gen      uint64 // the snapshot it answered from
	TableLen int    // entries in its connection table
	TableCap int

	HasConn bool
	Conn    ConnInfo
	ConnDir conn.Dir // the packet's direction in the entry
	// SYNReschedules: a client SYN on this entry would end it and open a
	// new connection, scheduled afresh (TIME_WAIT, CLOSE, or a one-way
	// connection in FIN_WAIT).
	SYNReschedules bool
	// OneWayOnly (a reply traced): no entry has the reply's key, but the
	// client's direction has one, in Conn: a DR or TUN connection, whose
	// replies bypass lbd.
	OneWayOnly bool

	HasService  bool
	Scheduler   string
	SloppyTCP   bool
	SynProxy    bool  // the service answers SYNs with cookies
	Persistence int64 // ns, 0: off
	Dests       []TraceDest

	// A persistent service's template for the client network, if one lives.
	HasTemplate     bool
	TemplateDest    int   // index in Dests, -1 when its server is gone
	TemplateExpires int64 // ns left
	// Pick is the index in Dests a new connection would get now, -1 for
	// none; PickBy says how: "template" (a persistence template names it)
	// or "scheduler" (a Preview of the owner's scheduler).
	Pick          int
	PickBy        string
	PickPredicted bool // false: the scheduler could not be previewed

	// Where the packet would go: the output port and next hop, and whether
	// the next hop's MAC is known.
	OutPort      int
	NextHop      uint32
	NextHop6     hdr.Addr6 // an IPv6 next hop (NextHop 0)
	NextHopKnown bool

	// Drop is the reason the packet would be dropped, 0 when it would be
	// forwarded. TableFull may be relieved by the table's flood defense
	// evicting an embryonic or idle entry first.
	Drop Stat
}

// TraceDest is a real server of the service with this worker's counts.
type TraceDest struct {
	sched.Dest
	Active, Inactive uint32 // this worker's connections to it
	Expired          bool   // its connections end at their next packet (on_failure: expire)
}

// SteeringHash is the Toeplitz hash, under the steering key, of a client
// endpoint: Owner is it modulo the number of workers.
func SteeringHash(clientIP uint32, clientPort uint16) uint32 {
	return endpointHash(clientIP, clientPort)
}

// trace answers r; control work, between bursts.
func (w *Worker) trace(r *TraceRequest) {
	if r.IPv6 {
		w.trace6(r)
		return
	}
	res := &r.Result
	*res = TraceResult{Worker: w.cfg.ID, Owner: Owner(r.Client, r.ClientPort, w.nworkers), Gen: w.snap.Gen,
		TableLen: w.table.Len(), TableCap: w.table.Cap(), Pick: -1, TemplateDest: -1, OutPort: -1}
	src, sport, dst, dport := r.Client, r.ClientPort, r.VIP, r.VPort
	if r.Reply {
		src, sport, dst, dport = r.RIP, r.RPort, r.Client, r.ClientPort
	}
	svc := (*Service)(nil)
	if si, ok := w.snap.service(r.VIP, r.VPort, r.Proto); ok {
		svc = &w.snap.Services[si]
		w.traceService(res, svc)
	}
	id, dir, ok := w.table.Lookup(r.Proto, src, sport, dst, dport)
	if !ok && r.Reply {
		id, dir, ok = w.traceLocalReply(res, r)
	}
	if ok {
		c := w.table.Get(id)
		res.HasConn, res.ConnDir, res.Conn = true, dir, connInfo(c, w.now)
		if x := w.table.Ext(id); x != nil && c.Fwd == fwd.FullNAT {
			res.Conn.LIP, res.Conn.LPort = x.LIP, x.LPort
		}
		res.SYNReschedules = c.Proto == hdr.ProtoTCP && dir == conn.Original && (c.State == conn.StateTimeWait ||
			c.State == conn.StateClose || c.State == conn.StateFinWait && c.Fwd.OneWay())
		if w.snap.DestExpired(c.Dest) {
			res.Drop = DropDestDown
			return
		}
		towards := c.RIP
		if (c.Fwd == fwd.NAT || c.Fwd == fwd.FullNAT) && dir == conn.Reply {
			towards = c.ClientIP
		}
		w.traceRoute(res, towards)
		return
	}
	// No entry: the packet would open a connection, as newConn does.
	if svc == nil || r.Reply {
		switch {
		case w.snap.IsVIP(dst):
			res.Drop = DropNoService
		case w.snap.isLocal(dst):
			res.Drop = DropToLocal
		default:
			res.Drop = DropNoConn
		}
		return
	}
	if svc.Clients != nil {
		if res.Drop = svc.Clients.admits(r.Client); res.Drop != 0 {
			return // the lists come before the scheduler, as in newConn
		}
	}
	w.tracePick(res, svc, r)
	switch {
	case res.Pick < 0 && res.PickPredicted:
		res.Drop = DropNoDest
	case res.TableLen >= res.TableCap:
		res.Drop = DropTableFull
	case res.Pick >= 0:
		w.traceRoute(res, res.Dests[res.Pick].Addr)
	}
}

// traceLocalReply finds the entry of a reply (r.Reply) that is not
// addressed to the client: a FullNAT or NAT64 server answers the local
// address and port, which the client's entry names, and the reply key
// is RIP:RPort -> LIP:LPort. A DR or TUN entry has no reply key at all:
// the client's is shown (OneWayOnly) and no entry found.
func (w *Worker) traceLocalReply(res *TraceResult, r *TraceRequest) (uint32, conn.Dir, bool) {
	var id uint32
	var ok bool
	if r.IPv6 {
		id, _, ok = w.table.Lookup6(r.Proto, &r.Client6, r.ClientPort, &r.VIP6, r.VPort)
	} else {
		id, _, ok = w.table.Lookup(r.Proto, r.Client, r.ClientPort, r.VIP, r.VPort)
	}
	if !ok {
		return 0, 0, false
	}
	c := w.table.Get(id)
	if x := w.table.Ext(id); x != nil && c.Fwd == fwd.FullNAT {
		return w.table.Lookup(r.Proto, r.RIP, r.RPort, x.LIP, x.LPort)
	}
	if r.IPv6 {
		res.Conn = w.connInfo6(id)
	} else {
		res.Conn = connInfo(c, w.now)
	}
	res.OneWayOnly = true
	return 0, 0, false
}

func connInfo(c *conn.Conn, now int64) ConnInfo {
	return ConnInfo{Proto: c.Proto, State: c.State, Fwd: c.Fwd, ClientIP: c.ClientIP, ClientPort: c.ClientPort,
		VIP: c.VIP, VPort: c.VPort, RIP: c.RIP, RPort: c.RPort, Expires: c.Expires - now}
}

// traceService lists a service's settings and servers.
func (w *Worker) traceService(res *TraceResult, svc *Service) {
	res.HasService, res.Scheduler, res.SloppyTCP, res.Persistence = true, svc.Scheduler, svc.SloppyTCP, svc.Persistence
	res.SynProxy = svc.SynProxy
	for _, d := range svc.Dests {
		res.Dests = append(res.Dests, TraceDest{Dest: d, Active: w.cnt.Active(d.ID), Inactive: w.cnt.Inactive(d.ID),
			Expired: w.snap.DestExpired(d.ID)})
	}
}

// tracePick finds the server a new connection would get: a live
// template's (persistence), else the scheduler's next pick, previewed.
func (w *Worker) tracePick(res *TraceResult, svc *Service, r *TraceRequest) {
	if svc.Persistence > 0 {
		key, sub := templateKey(r.Client&svc.PersistMask, r.VIP, templatePort(svc, r.VPort), r.Proto)
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
	f := sched.Flow{SrcIP: r.Client, SrcPort: r.ClientPort, DstIP: r.VIP, DstPort: r.VPort, Proto: r.Proto, Now: w.now}
	res.Pick, res.PickPredicted = sched.Preview(svc.Scheds[w.cfg.ID], &f, w.cnt)
	res.PickBy = "scheduler"
}

// traceRoute is route without its side effects (no neighbour-miss event).
func (w *Worker) traceRoute(res *TraceResult, dst uint32) {
	port, hop, ok := w.snap.Route(dst)
	if !ok {
		res.Drop = DropNoRoute
		return
	}
	res.OutPort, res.NextHop = port, hop
	if _, ok := w.snap.Neigh[hop]; ok {
		res.NextHopKnown = true
	} else if _, ok := w.neigh.lookup(hop, w.now); ok {
		res.NextHopKnown = true
	}
	if !res.NextHopKnown {
		res.Drop = DropNoNeighbour // lbd would ask ARP and drop this packet
	}
}
