package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// The one exit. Every stage that takes a packet returns what is to become
// of it, an exit, and leave carries it out: transmit on a port, hand to the
// worker that owns it, drop under a named reason, or consume (the packet
// was for the dataplane itself, as an ARP reply, and is counted as such).
// Packets the worker makes (ARP requests, probes) leave the same way.

type exitKind uint8

const (
	exitDrop     exitKind = iota // free it, counted under a drop reason
	exitTransmit                 // queue it on a port, towards a next hop's MAC
	exitHandOff                  // pass it to the worker that owns it
	exitSteer                    // pass it to the worker that holds its connection, which a steering entry here named (steerentry.go)
	exitConsume                  // free it, counted under what consumed it
	exitKernel                   // pass it to the kernel interface of the port it came in on, counted under why (kernel.go)
	exitKept                     // nothing left to do: the stage kept it (a held fragment, a segment held for a proxied connection) or sent it itself
)

// exit is a packet's fate. Four scalar fields, so that it travels in
// registers (a [6]byte field would put it in memory at every return).
type exit struct {
	kind exitKind
	mac  uint64 // exitTransmit: the next hop's MAC, in the low 48 bits
	to   int    // exitTransmit: the port; exitHandOff, exitSteer: the worker
	why  Stat   // exitDrop, exitConsume: the counter
}

func transmit(port int, mac hdr.MAC) exit {
	m := uint64(mac[0])<<40 | uint64(mac[1])<<32 | uint64(mac[2])<<24 | uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5])
	return exit{kind: exitTransmit, to: port, mac: m}
}

func drop(why Stat) exit      { return exit{kind: exitDrop, why: why} }
func consume(why Stat) exit   { return exit{kind: exitConsume, why: why} }
func handOff(worker int) exit { return exit{kind: exitHandOff, to: worker} }
func steerTo(worker int) exit { return exit{kind: exitSteer, to: worker} }

// leave carries out a packet's exit; in is the port it arrived on.
func (w *Worker) leave(m *mbuf.Mbuf, in int, e exit) {
	switch e.kind {
	case exitTransmit:
		eth := hdr.Ethernet(m.Data())
		eth.SetSrc(w.snap.Ports[e.to].MAC)
		eth.SetDstPacked(e.mac) // the next hop's
		w.send(m, e.to)
	case exitHandOff:
		m.SetPort(uint16(in)) // the owner handles it as arrived on that port
		w.queueHandOff(m, e.to)
	case exitSteer:
		m.SetPort(steerMark | uint16(in))
		w.queueHandOff(m, e.to)
	case exitKernel:
		w.cnt.own[e.why]++
		w.toKernel(m, in)
	case exitKept:
	default:
		if e.why == DropToLocal && w.hasKernel(in) {
			w.toKernel(m, in)
			return
		}
		w.discard(m, e.why)
	}
}

// newFrame allocates an mbuf holding n zeroed bytes, or nil (counted) when
// the pool is empty. Control work: it makes a cgo call.
func (w *Worker) newFrame(n int) (*mbuf.Mbuf, []byte) {
	m, err := mbuf.Alloc(w.cfg.Pool)
	if err != nil {
		w.cnt.own[MbufAllocFailed]++
		return nil, nil
	}
	b, err := m.Append(n)
	if err != nil { // cannot happen with any sane data room
		m.Free()
		w.cnt.own[MbufAllocFailed]++
		return nil, nil
	}
	clear(b)
	return m, b
}

// hopCacheSize is how many next hops a worker's hopCache holds: the
// gateway, the real servers and, for clients on a port's own network,
// the clients. A slot is the hop's address modulo the size, so the
// hosts of a /24 never share one.
const hopCacheSize = 256

// hopCache holds next hops' MACs found in one snapshot's neighbour map,
// or learnt by the worker from its clients (w.neigh), so that a packet's
// route costs an array probe, not a map lookup: a slot is the last hop of
// its index found there. A learnt MAC is kept until its entry in w.neigh
// ages out, and forgotten when the worker learns the hop again
// (learnClient): it may have moved.
type hopCache struct {
	snap *Snapshot
	ent  [hopCacheSize]hopEntry
}

type hopEntry struct {
	hop   uint32
	mac   uint64 // packed as in exit; 0: empty
	until int64  // a learnt MAC's end (ns); 0: the snapshot's
}

// forget empties hop's slot if it holds hop.
func (c *hopCache) forget(hop uint32) {
	if e := &c.ent[hop%hopCacheSize]; e.hop == hop {
		*e = hopEntry{}
	}
}

// route finds the way to a destination: transmit on the output port to
// the next hop's MAC, or a drop for want of a route or a MAC. A missing MAC
// is reported to the control plane, which resolves it.
func (w *Worker) route(dst uint32) exit {
	snap := w.snap
	port, hop, ok := snap.Route(dst)
	if !ok {
		return drop(DropNoRoute)
	}
	if w.hops.snap != snap { // another snapshot: its neighbours may differ
		w.hops = hopCache{snap: snap}
	}
	hc := &w.hops.ent[hop%hopCacheSize]
	if hc.hop == hop && hc.mac != 0 && (hc.until == 0 || w.now < hc.until) {
		return exit{kind: exitTransmit, to: port, mac: hc.mac}
	}
	if mac, ok := snap.Neigh[hop]; ok {
		e := transmit(port, mac)
		if e.mac != 0 {
			*hc = hopEntry{hop: hop, mac: e.mac}
		}
		return e
	}
	if n := w.neigh.entry(hop, w.now); n != nil {
		e := transmit(port, n.mac)
		if e.mac != 0 {
			*hc = hopEntry{hop: hop, mac: e.mac, until: n.until}
		}
		return e
	}
	w.event(Event{Kind: EvNeighbourMiss, Port: port, IP: hop})
	return drop(DropNoNeighbour)
}

// discard counts a packet and queues it to be freed with the rest of the
// burst's (one cgo call, not one per packet).
func (w *Worker) discard(m *mbuf.Mbuf, why Stat) {
	w.cnt.own[why]++
	w.free.Pkt[w.nfree] = m
	w.nfree++
	if w.nfree == len(w.free.Pkt) {
		mbuf.FreeBulk(w.free.Pkt[:w.nfree])
		w.nfree = 0
	}
}

// send queues a finished packet for a port's TX queue, or for the worker
// that has one on a port this worker has none on.
func (w *Worker) send(m *mbuf.Mbuf, port int) {
	if pq := &w.cfg.Ports[port]; pq.NoQueue {
		m.SetPort(txMark | uint16(port))
		w.queueHandOff(m, pq.TxVia)
		w.cnt.own[TxHandedOff]++
		return
	}
	q := &w.tx[port]
	if q.n == len(q.arr.Pkt) {
		w.flushPort(port)
	}
	q.arr.Pkt[q.n] = m
	q.n++
	q.bytes += uint64(m.PktLen())
}

// txMark tags a packet handed over only to be transmitted; the mbuf's
// port field carries it with the output port's index (a packet handed
// over to be processed carries its input port's index). steerMark tags a
// packet a steering entry handed over (desc.steered): its receiver holds
// the connection whatever the steering rule says.
const (
	txMark    = 0x8000
	steerMark = 0x4000
)

// queueHandOff adds a packet to what goes to a peer at the end of the burst.
func (w *Worker) queueHandOff(m *mbuf.Mbuf, worker int) {
	q := &w.hout[worker]
	if q.n == len(q.arr.Pkt) {
		w.flushHandoffs()
	}
	q.arr.Pkt[q.n] = m
	q.n++
}

// flush sends every port's queue and frees the burst's discarded packets.
func (w *Worker) flush() {
	pending := 0
	for pi := range w.tx {
		w.txs.SetCount(pi, w.tx[pi].n)
		if w.tx[pi].n > 0 {
			pending++
		}
	}
	if pending > 0 {
		w.txs.Send() // every port's queue in one cgo call
		for pi := range w.tx {
			if w.tx[pi].n > 0 {
				w.sentPort(pi, w.txs.Sent(pi))
			}
		}
	}
	if w.nfree > 0 {
		mbuf.FreeBulk(w.free.Pkt[:w.nfree])
		w.nfree = 0
	}
}

// flushPort sends one port's queue (when it fills before the flush).
func (w *Worker) flushPort(pi int) {
	pq := &w.cfg.Ports[pi]
	w.sentPort(pi, pq.Port.TxBurst(pq.TxQueue, w.tx[pi].arr.Pkt[:w.tx[pi].n]))
}

// sentPort accounts for a port's queue of which the driver took sent
// packets: the rest are dropped (a full TX ring) and the queue emptied.
func (w *Worker) sentPort(pi, sent int) {
	q := &w.tx[pi]
	bytes := q.bytes
	if sent < q.n {
		unsent := q.arr.Pkt[sent:q.n]
		for _, m := range unsent {
			bytes -= uint64(m.PktLen())
		}
		w.cnt.own[DropTxFull] += uint64(len(unsent))
		mbuf.FreeBulk(unsent)
	}
	w.cnt.own[TxPackets] += uint64(sent)
	w.cnt.own[TxBytes] += bytes
	q.n, q.bytes = 0, 0
}
