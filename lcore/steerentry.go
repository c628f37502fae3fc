package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
)

// Steering entries: a FullNAT (or NAT64) connection whose local port
// another worker owns.
//
// A FullNAT connection lives on the worker that owns its client's
// endpoint, and its server's packets, addressed to LIP:lport, steer to the
// worker that owns that endpoint (owner.go). A connection scheduled here
// takes a port its own worker owns, so the two are one worker. A
// connection another director made (sync) or the previous lbd (handover)
// keeps its port, and when that director had another worker count or
// steering key, the port is most often another worker's here. That worker
// then holds a steering entry for it: a one-way entry keyed by the
// server's side, RIP:rport -> LIP:lport, that hands the server's packets
// (and ICMP errors about what lbd sent it) to the worker holding the
// connection, and that holds the port in its pool so no new connection is
// given it. The control plane makes one beside each such record
// (SyncConn.Steer). Its timeout is the record's state's, renewed by each
// packet it hands on and each record of the connection that arrives
// again; when it ends the port goes back to the pool. So the connection
// costs its server's packets one handoff, and no more than that: the
// connection itself is where every other connection is.
//
// A steering entry is never listed, synced nor handed over (the next lbd
// makes its own from the connection's record), and is not counted in the
// worker's connections. A fragmented datagram of the server's reaches the
// entry's worker as its owner (frag.go: its first fragment's endpoint is
// the local one); the first fragment makes that worker pass the datagram
// on, and the connection's worker takes the fragments so marked
// (desc.steered) as their owner, in an entry of its own (fragKey.steered:
// it may be the datagram's home too, whose entry named the other).

// flagSteer (a caller bit of conn.Conn.Flags) marks a steering entry. Its
// RIP field holds the worker that holds the connection (a one-way entry's
// RIP is not part of its key).
const flagSteer uint8 = 1 << 3

// installSteer makes (or renews) the steering entry of record r, a
// FullNAT or NAT64 connection whose local port this worker owns and whose
// connection worker r.SteerTo holds. Refusals are counted as the
// connection's own would be: local_port_taken when its port is held,
// conflict when a connection of this worker has the key.
func (w *Worker) installSteer(b *SyncBatch, r *SyncConn) {
	rip := r.RIP // the IPv4 server of a FullNAT connection, or of a NAT64 one
	if !r.HasExt || r.Fwd != fwd.FullNAT || rip == 0 || r.SteerTo < 0 || r.SteerTo >= w.nworkers || r.SteerTo == w.cfg.ID {
		b.Invalid++
		return
	}
	lip, lport := r.Ext.LIP, r.Ext.LPort
	p := w.lpools[lip]
	if p == nil {
		return // a peer director's address (insertReserved): its packets never come here
	}
	if id, _, found := w.table.Lookup(r.Proto, rip, r.RPort, lip, lport); found {
		c := w.table.Get(id)
		if c.Flags&flagSteer == 0 || c.RIP != uint32(r.SteerTo) {
			b.Conflict++ // a connection here uses the same endpoints
			return
		}
		c.State = r.State // a later record of the connection: renewed
		w.table.Touch(c, conn.Reply, w.now, &w.snap.Timeouts)
		return
	}
	if !p.reserve(lport) {
		b.LocalPort++
		return
	}
	c := conn.Conn{ClientIP: rip, ClientPort: r.RPort, VIP: lip, VPort: lport, RIP: uint32(r.SteerTo),
		Proto: r.Proto, State: r.State, Flags: conn.FlagOneWay | flagSteer}
	w.steerInserted(b, p, lport)(w.table.Insert(&c))
}

// steerInserted returns what follows a steering entry's insert: the
// entry's timeout started and counted, or the port back in p and the
// refusal counted.
func (w *Worker) steerInserted(b *SyncBatch, p *lportPool, lport uint16) func(uint32, error) {
	return func(id uint32, err error) {
		if err != nil {
			p.put(lport)
			syncedInserted(b, err)
			return
		}
		w.table.Touch(w.table.Get(id), conn.Reply, w.now, &w.snap.Timeouts)
		w.steers++
	}
}

// steer hands a packet of steering entry c's connection to the worker
// that holds it, renewing the entry. A fragment's datagram follows it
// (fragOnward).
func (w *Worker) steer(d *desc, c *conn.Conn) exit {
	w.table.Touch(c, conn.Reply, w.now, &w.snap.Timeouts)
	w.cnt.own[Steered]++
	// The connection's worker counts it received, as after a handoff.
	w.cnt.own[RxPackets]--
	w.cnt.own[RxBytes] -= uint64(d.m.PktLen())
	if d.frag != fragNone {
		w.cnt.own[Fragments]--
	}
	return steerTo(int(c.RIP))
}

// endSteer is a steering entry's end: its port goes back to the pool
// (an IPv6 entry's to its IPv6 local address's).
func (w *Worker) endSteer(id uint32, c *conn.Conn) {
	p := w.lpools[c.VIP]
	if a := w.table.Addrs6(id); a != nil {
		p = w.lpools6[a.VIP]
	}
	if p != nil {
		p.put(c.VPort)
	}
	w.steers--
}

// installSteer6 is installSteer for an FNAT66 record: the IPv6 entry
// RIP:rport -> LIP:lport (its addresses beside it, its worker in RIP).
func (w *Worker) installSteer6(b *SyncBatch, r *SyncConn) {
	if !r.HasExt || r.Fwd != fwd.FullNAT || r.Six.LIP.IsUnspecified() || r.Six.RIP.IsUnspecified() ||
		r.SteerTo < 0 || r.SteerTo >= w.nworkers || r.SteerTo == w.cfg.ID {
		b.Invalid++
		return
	}
	lport := r.Ext.LPort
	p := w.lpools6[r.Six.LIP]
	if p == nil {
		return // a peer director's address (insertReserved6)
	}
	if id, _, found := w.table.Lookup6(r.Proto, &r.Six.RIP, r.RPort, &r.Six.LIP, lport); found {
		c := w.table.Get(id)
		if c.Flags&flagSteer == 0 || c.RIP != uint32(r.SteerTo) {
			b.Conflict++
			return
		}
		c.State = r.State
		w.table.Touch(c, conn.Reply, w.now, &w.snap.Timeouts)
		return
	}
	if !p.reserve(lport) {
		b.LocalPort++
		return
	}
	c := conn.Conn{ClientPort: r.RPort, VPort: lport, Proto: r.Proto, State: r.State, Flags: conn.FlagOneWay | flagSteer}
	id, err := w.table.Insert6(&c, &conn.Addrs6{Client: r.Six.RIP, VIP: r.Six.LIP})
	if err == nil {
		// Its worker, in the RIP a one-way entry's key leaves out (Insert6
		// folded the addresses' zero server into it).
		w.table.Get(id).RIP = uint32(r.SteerTo)
	}
	w.steerInserted(b, p, lport)(id, err)
}
