package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
)

// Data riding on the cookie's ACK. The ACK that proves a cookie becomes,
// in place, the SYN to the real server; when it also carries the
// client's first bytes, those must wait for the server's SYN-ACK like any
// later segment (hold). So the SYN is built in a spare mbuf instead and
// the ACK itself is held. Spares are allocated by the expire job (control
// work, a cgo call each), a few per worker and only while a snapshot has
// a SYN proxy, so the packet path never allocates; with no spare or no
// free held slot the data is dropped (synproxy_data_dropped) and the
// client's retransmission brings it again.

// synSpares is how many spare mbufs a worker keeps for such SYNs.
const synSpares = 4

// refillSynSpares tops the spares up (expire job); with no SYN proxy in
// the snapshot it gives them back.
func (w *Worker) refillSynSpares() {
	if !w.snap.hasSynProxy {
		for ; w.nspare > 0; w.nspare-- {
			w.synSpare[w.nspare-1].Free()
			w.synSpare[w.nspare-1] = nil
		}
		return
	}
	for w.nspare < synSpares {
		m, err := mbuf.Alloc(w.cfg.Pool)
		if err != nil {
			w.cnt.own[MbufAllocFailed]++
			return
		}
		w.synSpare[w.nspare] = m
		w.nspare++
	}
}

// freeSynSpares frees the spares (the worker stops).
func (w *Worker) freeSynSpares() {
	for ; w.nspare > 0; w.nspare-- {
		w.synSpare[w.nspare-1].Free()
		w.synSpare[w.nspare-1] = nil
	}
}

// sendSYNHoldingData sends the SYN for a proxied connection from a spare
// mbuf and holds the client's packet d (the cookie's ACK, with data) until
// the server answers. false: no spare or no held slot, nothing done.
func (w *Worker) sendSYNHoldingData(d *desc, c *conn.Conn, id uint32, x *conn.Ext, window uint16) bool {
	if w.nspare == 0 || !w.hold(id, d) {
		return false
	}
	w.nspare--
	m := w.synSpare[w.nspare]
	w.synSpare[w.nspare] = nil
	sd := &w.synDesc
	*sd = desc{m: m, in: d.in, owner: -1}
	if m.SetLen(l3) != nil {
		w.leave(m, d.in, drop(DropNoHeadroom))
		return true // the held segment brings the SYN again when the client retransmits
	}
	copy(m.Data(), d.m.Data()[:l3]) // the Ethernet header: leave rewrites its addresses
	w.cnt.own[SynProxyHeld]++
	w.leave(m, d.in, w.sendSYN(sd, c, id, x, window))
	return true
}

// holdFirstData holds a pending connection's client segment with data;
// false when one is held for it already or no slot is free.
func (w *Worker) holdFirstData(id uint32, d *desc) bool {
	if !w.hold(id, d) {
		return false
	}
	w.cnt.own[SynProxyHeld]++
	return true
}
