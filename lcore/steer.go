package lcore

import (
	"unsafe"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
)

// Reply steering (see owner.go for who owns what). A worker that receives
// a packet it does not own hands it to the owner through a single-producer
// single-consumer DPDK ring, one bulk enqueue per peer per burst; a full
// ring drops and counts.

// Handoff holds a worker's rings to and from its peers, indexed by worker
// id (nil for itself). Out[j] is single-producer (this worker) and
// single-consumer (worker j); In[j] is Out[this] of worker j.
type Handoff struct {
	Out []*ring.Ring
	In  []*ring.Ring
}

// clientEndpoint finds the client endpoint of a parsed packet, or ok
// false for packets that are no connection's (ARP, an echo to a VIP,
// malformed: handled where they arrive). A packet to a VIP comes from
// the client; any other comes from a real server (or the client's own
// side, for an ICMP error) and goes to the client. vips is every VIP
// the worker has been given since it started, so that removing a
// service does not move its remaining connections.
func clientEndpoint(d *desc, vips map[uint32]struct{}) (ip uint32, port uint16, ok bool) {
	k := &d.flow
	switch d.class {
	case classFlow:
		if _, toVIP := vips[k.dst]; toVIP {
			return k.src, k.sport, true
		}
		return k.dst, k.dport, true
	case classICMPError:
		// An error quotes a packet that left towards the client (source a
		// VIP) or towards a real server (source the client).
		if _, fromVIP := vips[k.src]; fromVIP {
			return k.dst, k.dport, true
		}
		return k.src, k.sport, true
	case classTunnelError:
		// The inner packet of our IPIP one came from the client.
		return k.src, k.sport, true
	case classEcho:
		// A server's ping beyond lbd (snat.go) steers by its destination
		// as the server's TCP and UDP do; one to a VIP is answered here.
		if _, toVIP := vips[k.dst]; toVIP {
			return 0, 0, false
		}
		return k.dst, k.dport, true
	case classEchoReply:
		// The answer to a SNAT'd ping comes to the SNAT address and the
		// identifier its worker chose as a local port (a probe's answer,
		// handled anywhere, goes by the same rule).
		return k.dst, k.dport, true
	}
	return 0, 0, false
}

// Owner is the worker (0..n-1) that owns record r's connection, by the
// rule clientEndpoint applies to its packets: the client endpoint's
// owner, a SNAT connection's destination's (its "client" is the real
// server that opened it, whose packets go to no VIP); a template's is
// worker 0 (the templates' table is shared).
func (r *SyncConn) Owner(n int) int {
	switch {
	case r.IPv6:
		return Owner6(&r.Six.Client, r.ClientPort, n)
	case r.IsSNAT():
		return Owner(r.VIP, r.VPort, n)
	case r.Template:
		return 0
	}
	return Owner(r.ClientIP, r.ClientPort, n)
}

// ownerOf is the worker that owns a parsed packet's connection, or -1
// when the packet is handled where it arrived.
func (w *Worker) ownerOf(d *desc) int {
	switch d.class {
	case classFlow6:
		return w.owner6(d)
	case classICMPError6, classTunError6:
		return w.ownerQuote6(d)
	}
	ip, port, ok := clientEndpoint(d, w.vips)
	if !ok {
		return -1
	}
	return Owner(ip, port, w.nworkers)
}

// flushHandoffs enqueues each peer's packets in one call; what a full ring
// does not take is dropped and counted.
func (w *Worker) flushHandoffs() {
	for j := range w.hout {
		q := &w.hout[j]
		if q.n == 0 {
			continue
		}
		sent := w.cfg.Handoff.Out[j].SPEnqueueBurst(mbufObjs(q.arr.Pkt[:q.n]))
		w.cnt.own[HandedOff] += uint64(sent)
		for _, m := range q.arr.Pkt[sent:q.n] {
			w.discard(m, DropHandoffFull)
		}
		q.n = 0
	}
}

// pollHandoffs handles what the peers handed over: packets finished
// elsewhere only to be transmitted here, and packets to process, parsed
// into the descriptor array as a received burst is.
func (w *Worker) pollHandoffs() int {
	got := 0
	for _, r := range w.cfg.Handoff.In {
		if r == nil {
			continue
		}
		n := r.SCDequeueBurst(mbufObjs(w.hin.Pkt))
		ds := w.descs[:0]
		for _, m := range w.hin.Pkt[:n] {
			if p := m.Port(); p&txMark != 0 {
				w.send(m, int(p&^txMark))
			} else {
				ds = ds[:len(ds)+1]
				d := &ds[len(ds)-1]
				parse(d, m, int(p&^steerMark))
				d.steered = p&steerMark != 0
			}
		}
		w.run(ds, false)
		w.cnt.own[HandedIn] += uint64(n)
		got += n
	}
	return got
}

// mbufObjs views a C array of mbuf pointers as ring objects (same memory).
func mbufObjs(p []*mbuf.Mbuf) ring.Objs {
	if len(p) == 0 {
		return nil
	}
	return unsafe.Slice((*unsafe.Pointer)(unsafe.Pointer(&p[0])), len(p))
}

// HandoffBacklog is how many packets wait in the rings from this worker to
// each peer (-1 for itself), for metrics. It reads the rings' counters (a
// cgo call each): not for the packet path.
func (w *Worker) HandoffBacklog() []int {
	out := make([]int, len(w.cfg.Handoff.Out))
	for j, r := range w.cfg.Handoff.Out {
		out[j] = -1
		if r != nil {
			out[j] = r.Count()
		}
	}
	return out
}
