package lcore

import (
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
)

// persistent chooses the real server of a new connection to a persistent
// service, as IPVS's ip_vs_sched_persist: the client network's template
// (shared by all workers, see templates.go) names the server while it
// lives; without one, the scheduler chooses and a template is made. A
// template whose server was removed or made quiescent (weight 0) is
// re-pointed at a newly scheduled server (IPVS's
// expire_quiescent_template). It returns the dest index and the
// template's slot+1 (0 when no template could be stored: the connection is
// still served). The template comes pinned for the new connection: the
// caller hands the pin to the connection or gives it back
// (releaseTemplate).
func (w *Worker) persistent(svc *Service, proto uint8, src, vip uint32, vport uint16) (int, uint32) {
	t := w.tmpl
	key, sub := templateKey(src&svc.PersistMask, vip, vport, proto)
	now := w.now + w.tmplOff
	chosen := -1
	for attempt := 0; attempt < 8; attempt++ { // retried only when another worker got in between
		slot, v, free, empty := t.find(key, sub)
		if slot >= 0 {
			if !t.pin(slot, key, v) {
				continue // freed or changed since found: look again
			}
			s := &t.slots[slot]
			if idx := svc.destIndex(uint32(v&templateDest) - 1); idx >= 0 && svc.Dests[idx].Weight > 0 {
				s.expires.Store(now + svc.Persistence)
				return idx, uint32(slot) + 1
			}
			// Quiescent or gone: schedule again and re-point the template.
			if chosen < 0 {
				if chosen = svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt); chosen < 0 {
					t.unpin(slot)
					return -1, 0
				}
			}
			id := svc.Dests[chosen].ID
			if s.val.CompareAndSwap(v, v&^templateDest|uint64(id+1)) {
				t.persistent[uint32(v&templateDest)-1].Add(-1)
				t.persistent[id].Add(1)
				s.expires.Store(now + svc.Persistence)
				if w.snap.Sync.On && !svc.Key.IsIPv6() { // an IPv6 template is rebuilt from its connections
					w.syncTemplate(slot)
				}
				return chosen, uint32(slot) + 1
			}
			t.unpin(slot)
			continue // another worker changed it first: read it again
		}
		if chosen < 0 {
			if chosen = svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt); chosen < 0 {
				return -1, 0
			}
		}
		if free < 0 {
			if t.reclaim(key, now) {
				continue // an expired template made room
			}
			break
		}
		id := svc.Dests[chosen].ID
		if t.claim(free, key, empty, sub|uint64(id+1), now+svc.Persistence) {
			w.cnt.own[Templates]++
			if w.snap.Sync.On && !svc.Key.IsIPv6() { // an IPv6 template is rebuilt from its connections
				w.syncTemplate(free)
			}
			return chosen, uint32(free) + 1
		}
		// Another worker made a template there first: if it is this one,
		// the next look finds it and adopts its server.
	}
	w.cnt.own[TemplatesLost]++
	return chosen, 0
}

// templatePort is the port in the template of a connection to vport of
// svc: vport, or 0 for a port-zero service, whose client network has one
// template (one server) for every port, as IPVS's.
func templatePort(svc *Service, vport uint16) uint16 {
	if svc.Key.Port == 0 {
		return 0
	}
	return vport
}

// releaseTemplate gives back the pin persistent took when no connection
// was made after all.
func (w *Worker) releaseTemplate(tmpl uint32) {
	if tmpl != 0 {
		w.tmpl.unpin(int(tmpl - 1))
	}
}

// expireEntry is the connection table's expiry callback: it keeps the
// per-server gauges and the templates' counts right.
func (w *Worker) expireEntry(id uint32, c *conn.Conn) {
	if c.Flags&flagSteer != 0 {
		w.endSteer(id, c)
		return
	}
	if c.Flags&flagFTP != 0 {
		w.ftp.remove(id)
	}
	if c.Fwd == fwd.FullNAT {
		w.releaseLocalPort(id)
	}
	if c.Fwd == fwd.FullNAT || c.Flags&flagSeqAdj != 0 {
		w.dropHeld(id)
	}
	if c.Template != 0 {
		w.tmpl.slots[c.Template-1].controls.Add(-1)
	}
	w.countState(c.Dest, c.State, false)
}

// expireTemplates is worker 0's share of the shared table's upkeep: n
// slots per expire run (the whole table about once a second).
func (w *Worker) expireTemplates(n int) {
	t := w.tmpl
	t.expire(w.now+w.tmplOff, n, func(key, val uint64) int64 {
		// IPVS re-arms a template that controls connections, for the
		// service's persistence time (a second if the service went).
		vip, vport, proto := uint32(key), uint16(val>>48), uint8(val>>40)
		if si, ok := w.snap.service(vip, vport, proto); ok && w.snap.Services[si].Persistence > 0 {
			return w.snap.Services[si].Persistence
		}
		return int64(time.Second)
	})
}
