package lcore

import (
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// prefetch is the lookup stage of a burst: every flow packet's key hashed
// and its index cell prefetched, then the entries those cells name
// prefetched (but a bare SYN's), so that processing the burst in order
// finds them in the cache (conn/batch.go says why). It only warms the
// cache: the lookups stay where they were, in order.
func (w *Worker) prefetch(ds []desc) {
	hs := w.hashes[:len(ds)]
	w.foreseen = 0
	for i := range ds {
		d := &ds[i]
		if d.class != classFlow {
			continue
		}
		syn := bareSYN(d)
		if syn && w.findService(d) && w.answersWithCookie(d) {
			d.cookie = true // no lookup, so nothing to fetch
			continue
		}
		k := &d.flow
		hs[i] = w.table.Hash(k.proto, k.src, k.sport, k.dst, k.dport)
		d.hash, d.hashed = hs[i], true
		w.table.PrefetchCell(hs[i])
		if syn {
			w.prefetchReplyCells(d)
		}
	}
	for i := range ds {
		// A bare SYN's key is almost always new: it has no entry to
		// fetch, and reading its cell here would only wait for the line.
		if d := &ds[i]; d.class == classFlow && !bareSYN(d) {
			w.table.PrefetchEntry(hs[i])
		}
	}
}

// bareSYN reports whether d is a TCP segment with SYN and none of ACK,
// RST, FIN: a client opening a connection.
func bareSYN(d *desc) bool {
	return d.flow.proto == hdr.ProtoTCP && d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) == hdr.TCPFlagSYN
}

// maxReplyPrefetch bounds the real servers whose reply cells a SYN
// prefetches: each one but the scheduler's pick is a wasted fetch.
const maxReplyPrefetch = 4

// findService looks up the service of a SYN d and keeps it in d (d.svc),
// so that neither the SYN proxy nor newConn looks it up a second time.
// It reports whether there is one.
func (w *Worker) findService(d *desc) bool {
	k := &d.flow
	si, ok := w.snap.service(k.dst, k.dport, k.proto)
	if ok {
		d.svc = si + 1
	}
	return ok
}

// prefetchReplyCells warms the index cells a new VS/NAT connection's
// reply key (real server -> client) will probe when the SYN d (its
// service found by findService) opens it. With the table beyond the
// caches that probe was most of a new connection's cost, and no lookup
// of the burst touches it; which real server the key names is known only
// once the scheduler has chosen, and scheduling stays in packet order.
// A scheduler that can foretell its picks (foresee) names the one cell.
// Otherwise, for a service of at most maxReplyPrefetch real servers the
// cell of every one that can take the connection is prefetched (all but
// one wasted), and larger services get none. A retransmitted SYN of an
// existing connection wastes its fetch. DR and TUN index no reply key,
// FullNAT's is its local address's, and a SYN-proxied service's SYN
// makes no connection.
func (w *Worker) prefetchReplyCells(d *desc) {
	if d.svc == 0 {
		return
	}
	k := &d.flow
	svc := &w.snap.Services[d.svc-1]
	if svc.SynProxy {
		return // answered with a cookie: no connection, no reply key
	}
	dests := svc.Dests
	if idx, ok := w.foresee(d.svc-1, svc); ok {
		if rs := &dests[idx]; rs.Fwd == fwd.NAT {
			w.table.PrefetchCell(w.table.Hash(k.proto, rs.Addr, serverPort(rs, k.dport), k.src, k.sport))
		}
		return
	}
	if len(dests) > maxReplyPrefetch {
		return
	}
	for j := range dests {
		if rs := &dests[j]; rs.Fwd == fwd.NAT && rs.Weight > 0 {
			w.table.PrefetchCell(w.table.Hash(k.proto, rs.Addr, serverPort(rs, k.dport), k.src, k.sport))
		}
	}
}

// foreseeServices bounds the services of one burst whose SYNs foresee
// counts; the SYNs of any more fall back to prefetching every server's
// cell.
const foreseeServices = 4

// foresight counts the bare SYNs of one service in the burst so far; fs
// is its scheduler's Foresight, nil when it has none.
type foresight struct {
	svc  int32
	syns int
	fs   sched.Foresight
}

// foresee is the real server the scheduler of service si will choose for
// the burst's next SYN to it, if it can tell (sched.Foresight): the
// SYNs before this one each take a pick first. A persistent service's
// template may choose instead, so it is not foreseen. Called in packet
// order by the lookup stage, which resets w.foreseen for each burst.
func (w *Worker) foresee(si int32, svc *Service) (int, bool) {
	if svc.Persistence > 0 {
		return -1, false
	}
	i := 0
	for i < w.foreseen && w.foresight[i].svc != si {
		i++
	}
	if i == w.foreseen { // the service's first SYN in the burst
		if i == len(w.foresight) {
			return -1, false
		}
		fs, _ := svc.Scheds[w.cfg.ID].(sched.Foresight)
		w.foresight[i] = foresight{svc: si, fs: fs}
		w.foreseen++
	}
	f := &w.foresight[i]
	if f.fs == nil {
		return -1, false
	}
	k := f.syns
	f.syns++
	idx, ok := f.fs.Ahead(k)
	return idx, ok && idx >= 0 && idx < len(svc.Dests)
}
