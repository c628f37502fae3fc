package lcore

import (
	"time"

	"github.com/dplb/dplb/lcore/conn"
)

// protoTemplate marks a template's protocol in the connection table, so a
// template key never matches a packet (which carries 6 or 17).
const protoTemplate = 0x80

// persistent chooses the real server of a new connection to a persistent
// service, as IPVS's ip_vs_sched_persist: the client network's template
// names the server while it lives; without one, the scheduler chooses and
// a template is made. A template whose server was removed or made
// quiescent (weight 0) is re-pointed at a newly scheduled server (IPVS's
// expire_quiescent_template). It returns the dest index and the
// template's id+1 (0 when no template could be stored: the connection is
// still served).
//
// All connections of a client must reach the lcore holding its template:
// with one lcore that is given; with several, client traffic of persistent
// services is steered by client address (see docs/design.md).
func (w *Worker) persistent(svc *Service, si int32, proto uint8, src, vip uint32, vport uint16) (int, uint32) {
	cnet := src & svc.PersistMask
	tproto := proto | protoTemplate
	if tid, _, ok := w.table.Lookup(tproto, cnet, 0, vip, vport); ok {
		t := w.table.Get(tid)
		if idx := svc.destIndex(t.Dest); idx >= 0 && svc.Dests[idx].Weight > 0 {
			t.Expires = w.now + svc.Persistence
			return idx, tid + 1
		}
		// Quiescent or gone: schedule again and re-point the template.
		idx := svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
		if idx < 0 {
			return -1, 0
		}
		d := &svc.Dests[idx]
		w.cnt.dest[t.Dest][DestPersistent]--
		w.cnt.dest[d.ID][DestPersistent]++
		t.Dest, t.RIP, t.RPort, t.Fwd = d.ID, d.Addr, d.Port, d.Fwd
		t.Expires = w.now + svc.Persistence
		return idx, tid + 1
	}
	idx := svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
	if idx < 0 {
		return -1, 0
	}
	d := &svc.Dests[idx]
	t := conn.Conn{
		ClientIP: cnet, VIP: vip, VPort: vport, RIP: d.Addr, RPort: d.Port,
		Proto: tproto, State: conn.StateNone, Flags: conn.FlagOneWay | conn.FlagTemplate,
		Fwd: d.Fwd, Dest: d.ID, Service: uint32(si), Expires: w.now + svc.Persistence,
	}
	tid, err := w.table.Insert(&t)
	if err != nil {
		w.cnt.own[TemplatesLost]++
		return idx, 0
	}
	w.cnt.dest[d.ID][DestPersistent]++
	w.cnt.own[Templates]++
	return idx, tid + 1
}

// expireEntry is the connection table's expiry callback: it keeps a
// template alive while it controls connections, and keeps the per-server
// gauges and the templates' counts right.
func (w *Worker) expireEntry(_ uint32, c *conn.Conn) {
	if c.Flags&conn.FlagTemplate != 0 {
		if c.Controls > 0 {
			// IPVS re-arms a template that controls connections, for the
			// service's persistence time (a second if the service went).
			again := int64(time.Second)
			if si, ok := w.snap.service(c.VIP, c.VPort, c.Proto&^protoTemplate); ok && w.snap.Services[si].Persistence > 0 {
				again = w.snap.Services[si].Persistence
			}
			c.Expires = w.now + again
			return
		}
		w.cnt.dest[c.Dest][DestPersistent]--
		return
	}
	if c.Template != 0 {
		if t := w.table.Get(c.Template - 1); t != nil && t.Controls > 0 {
			t.Controls--
		}
	}
	w.countState(c.Dest, c.State, false)
}
