package lcore

import (
	"encoding/binary"
	"unsafe"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/hdr"
)

// Reply steering. A connection belongs to one lcore, its owner: a
// function of the client's endpoint, the one address:port VS/NAT never
// changes, so that the client's packets and the real server's replies
// agree on it. (With persistent services, of the client's address under
// the widest persistence netmask, so that all of a client's connections
// meet its template.) An lcore that receives a packet it does not own
// hands it to the owner through a single-producer single-consumer DPDK
// ring, one bulk enqueue per peer per burst; a full ring drops and counts.

// Handoff holds a worker's rings to and from its peers, indexed by worker
// id (nil for itself). Out[j] is single-producer (this worker) and
// single-consumer (worker j); In[j] is Out[this] of worker j.
type Handoff struct {
	Out []*ring.Ring
	In  []*ring.Ring
}

// clientOf finds the client endpoint of a packet, or ok false for packets
// that are no connection's (ARP, echo, malformed: handled where they
// arrive). It reads only what handle validates again.
func clientOf(snap *Snapshot, data []byte) (ip uint32, port uint16, ok bool) {
	if len(data) < hdr.EthernetLen+hdr.IPv4MinLen || hdr.Ethernet(data).EtherType() != hdr.EtherTypeIPv4 {
		return 0, 0, false
	}
	iph := hdr.IPv4(data[hdr.EthernetLen:])
	hl := int(iph[0]&0x0f) * 4
	if hl < hdr.IPv4MinLen || len(iph) < hl+8 {
		return 0, 0, false
	}
	l4 := iph[hl:]
	src, dst := iph.Src(), iph.Dst()
	switch iph.Protocol() {
	case hdr.ProtoTCP, hdr.ProtoUDP:
		if snap.IsVIP(dst) {
			dport := binary.BigEndian.Uint16(l4[l4DstPort:])
			if si, ok := snap.service(dst, dport, iph.Protocol()); ok && snap.Services[si].localOnly {
				// DR/TUN only: no reply comes back, so the lcore the NIC's
				// RSS gives the flow keeps it; no handoff needed.
				return 0, 0, false
			}
			return src, binary.BigEndian.Uint16(l4[l4SrcPort:]), true
		}
		return dst, binary.BigEndian.Uint16(l4[l4DstPort:]), true
	case hdr.ProtoICMP:
		// An error quotes a packet that left towards the client (source a
		// VIP) or towards a real server (source the client).
		t := l4[0]
		if t != hdr.ICMPDestUnreachable && t != hdr.ICMPTimeExceeded && t != icmpParamProblem {
			return 0, 0, false
		}
		q := l4[hdr.ICMPLen:]
		if len(q) < hdr.IPv4MinLen {
			return 0, 0, false
		}
		qh := int(q[0]&0x0f) * 4
		if qh < hdr.IPv4MinLen || len(q) < qh+4 {
			return 0, 0, false
		}
		quoted := hdr.IPv4(q)
		if snap.IsVIP(quoted.Src()) {
			return quoted.Dst(), binary.BigEndian.Uint16(q[qh+l4DstPort:]), true
		}
		return quoted.Src(), binary.BigEndian.Uint16(q[qh+l4SrcPort:]), true
	}
	return 0, 0, false
}

// Owner is the lcore (0..n-1) that owns a client endpoint's connections.
func (s *Snapshot) Owner(clientIP uint32, clientPort uint16, n int) int {
	if s.steerByAddr {
		clientIP &= s.steerMask
		clientPort = 0
	}
	h := (clientIP * 0x9E3779B1) ^ (uint32(clientPort) * 0x85EBCA77)
	h ^= h >> 15
	h *= 0x2C1B3C6D
	h ^= h >> 12
	return int(uint64(h) * uint64(n) >> 32)
}

// steer hands a packet that arrived on port index in to its owner when
// that is another lcore; it reports whether it did. The port index
// travels in the mbuf's port field.
func (w *Worker) steer(m *mbuf.Mbuf, in int) bool {
	if w.snap.hwSteered {
		return false
	}
	ip, port, ok := clientOf(w.snap, m.Data())
	if !ok {
		return false
	}
	owner := w.snap.Owner(ip, port, w.nworkers)
	if owner == w.cfg.ID {
		return false
	}
	q := &w.hout[owner]
	m.SetPort(uint16(in))
	q.arr.Pkt[q.n] = m
	q.n++
	return true
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
			w.drop(m, DropHandoffFull)
		}
		q.n = 0
	}
}

// pollHandoffs handles what the peers handed over.
func (w *Worker) pollHandoffs() int {
	got := 0
	for _, r := range w.cfg.Handoff.In {
		if r == nil {
			continue
		}
		n := r.SCDequeueBurst(mbufObjs(w.hin.Pkt))
		for _, m := range w.hin.Pkt[:n] {
			if p := m.Port(); p&txMark != 0 {
				w.send(m, int(p&^txMark)) // finished: only to transmit
			} else {
				w.handle(m, int(p))
			}
		}
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

// txMark tags a packet handed over only to be transmitted; the mbuf's
// port field carries it with the output port's index (a packet handed
// over to be processed carries its input port's index).
const txMark = 0x8000

// handOffTx passes a finished packet to the worker that has a TX queue on
// a port this worker has none on.
func (w *Worker) handOffTx(m *mbuf.Mbuf, port, via int) {
	q := &w.hout[via]
	if q.n == len(q.arr.Pkt) {
		w.flushHandoffs()
	}
	m.SetPort(txMark | uint16(port))
	q.arr.Pkt[q.n] = m
	q.n++
	w.cnt.own[TxHandedOff]++
}
