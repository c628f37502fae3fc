package connsync

import (
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// maxPeers bounds the senders tracked one by one. Only a configured peer,
// a destination, or a sender whose MAC was right gets an entry; the rest
// (garbage, forgeries, anything past the bound) count under OtherPeer, so
// a flood from many addresses cannot grow the table or the metrics.
const maxPeers = 64

// OtherPeer is the label of drops from senders not tracked by name.
const OtherPeer = "other"

// peer is one director's counters and, for senders, its replay window
// (the window belongs to the receive goroutine).
type peer struct {
	name string

	sent, sendErrors, received, records atomic.Uint64
	bulkServed, bulkEnds, hellos        atomic.Uint64
	dropped                             [numReasons]atomic.Uint64
	lastRecord                          atomic.Int64          // unix ns when its newest records arrived
	hello                               atomic.Pointer[Hello] // its newest hello; nil: none, or it said forget

	window Window
}

// PeerStats is a copy of one peer's counters.
type PeerStats struct {
	Peer       string
	Sent       uint64 // messages sent to it
	SendErrors uint64
	Received   uint64 // messages accepted from it
	Records    uint64 // records in them
	BulkServed uint64 // bulk requests from it answered with a dump
	BulkEnds   uint64 // bulk dumps it finished for us
	Hellos     uint64 // hellos accepted from it
	Dropped    map[string]uint64
	LastRecord time.Time // zero: none yet
}

type peers struct {
	mu     sync.Mutex
	byAddr map[netip.Addr]*peer
	other  *peer
	self   map[netip.Addr]bool // this director's addresses, as its looped-back messages came from them
}

func newPeers() *peers {
	return &peers{byAddr: map[netip.Addr]*peer{}, other: &peer{name: OtherPeer}}
}

// get returns a's entry, making one when create and there is room; else
// the shared OtherPeer entry.
func (ps *peers) get(a netip.Addr, create bool) *peer {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.byAddr[a]; p != nil {
		return p
	}
	if !create || len(ps.byAddr) >= maxPeers {
		return ps.other
	}
	p := &peer{name: a.String()}
	ps.byAddr[a] = p
	return p
}

func (ps *peers) stats() []PeerStats {
	ps.mu.Lock()
	all := make([]*peer, 0, len(ps.byAddr)+1)
	for _, p := range ps.byAddr {
		all = append(all, p)
	}
	ps.mu.Unlock()
	all = append(all, ps.other)
	out := make([]PeerStats, 0, len(all))
	for _, p := range all {
		s := PeerStats{Peer: p.name, Sent: p.sent.Load(), SendErrors: p.sendErrors.Load(),
			Received: p.received.Load(), Records: p.records.Load(),
			BulkServed: p.bulkServed.Load(), BulkEnds: p.bulkEnds.Load(), Hellos: p.hellos.Load(), Dropped: map[string]uint64{}}
		for _, r := range Reasons() {
			s.Dropped[r.String()] = p.dropped[r].Load()
		}
		if ns := p.lastRecord.Load(); ns != 0 {
			s.LastRecord = time.Unix(0, ns)
		}
		out = append(out, s)
	}
	return out
}

// resetWindows forgets every sender's boot id and sequences; no receive
// goroutine runs.
func (ps *peers) resetWindows() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byAddr {
		p.window = Window{}
	}
	ps.other.window = Window{}
}

// Hello is what a peer's newest hello said, and when it came.
type Hello struct {
	Boot      uint64       // the peer's boot id
	At        time.Time    // when it was received
	Leaving   bool         // its lbd stops
	TakesOver bool         // it takes dead peers' addresses over (a candidate)
	LIPs      []netip.Addr // its own FullNAT local addresses, sorted
	seeded    bool         // from a handover or a peers message, not heard from the peer
}

// PeerHello is a peer and its newest hello.
type PeerHello struct {
	Peer netip.Addr
	Hello
}

// Hellos lists the peers whose masters said hello (and not forget since)
// while the backup mode runs, with the newest hello of each.
func (d *Daemon) Hellos() []PeerHello {
	d.peers.mu.Lock()
	defer d.peers.mu.Unlock()
	var out []PeerHello
	for a, p := range d.peers.byAddr {
		if h := p.hello.Load(); h != nil {
			out = append(out, PeerHello{Peer: a, Hello: *h})
		}
	}
	return out
}

// SeedHellos gives the backup the hellos the lbd before this one held
// (a restart's or an upgrade's handover), for the peers none has come
// from yet, so that a peer that died before this lbd started is known,
// dead, and its addresses are taken over again. It does nothing unless
// the backup mode runs (a stopped backup holds no hellos). The caller
// sets each hello's At: the time its patience counts from.
func (d *Daemon) SeedHellos(hellos []PeerHello) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seed(hellos)
}

// seed is SeedHellos without the start and stop lock (the receive
// goroutine's way, for a peers message): hellos for this director's own
// addresses are skipped, and a peer seeded already with the same boot id
// gets the local addresses listed again added (a peer's records may
// come in several messages).
func (d *Daemon) seed(hellos []PeerHello) int {
	if !d.modes.Load().backup {
		return 0
	}
	seeded := 0
	for _, h := range hellos {
		if d.peers.isSelf(h.Peer) {
			continue
		}
		p := d.peers.get(h.Peer, true)
		if p == d.peers.other {
			continue
		}
		hello := h.Hello
		hello.LIPs = slices.Clone(h.LIPs)
		hello.seeded = true
		for {
			old := p.hello.Load()
			if old != nil && (!old.seeded || old.Boot != hello.Boot) {
				break // heard from it, or seeded from another of its lives
			}
			if old != nil {
				merged := *old
				merged.LIPs = mergeLIPs(old.LIPs, hello.LIPs)
				if p.hello.CompareAndSwap(old, &merged) {
					break
				}
				continue
			}
			if p.hello.CompareAndSwap(nil, &hello) {
				seeded++
				break
			}
		}
	}
	return seeded
}

// noteSelf records a for isSelf.
func (ps *peers) noteSelf(a netip.Addr) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.self[a] && len(ps.self) < maxPeers {
		if ps.self == nil {
			ps.self = map[netip.Addr]bool{}
		}
		ps.self[a] = true
	}
}

// isSelf reports whether a is one of this director's addresses, as its
// own messages looped back told (multicast).
func (ps *peers) isSelf(a netip.Addr) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.self[a]
}

// mergeLIPs is the sorted union of local address lists a and b.
func mergeLIPs(a, b []netip.Addr) []netip.Addr {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// sendPeers sends a bulk dump's requester (at to) the peers this
// director's backup holds hellos from, but the requester's own, as many
// whole peers a message as fit: kind 8 with their IPv4 local addresses,
// then kind 11 with their IPv6 ones.
func (d *Daemon) sendPeers(r *running, to netip.Addr, dests []netip.AddrPort) {
	var all []PeerHello
	for _, h := range d.Hellos() {
		if h.Peer != to {
			all = append(all, h)
		}
	}
	now := time.Now()
	for _, k := range []Kind{KindPeers, KindPeers6} {
		var peers []PeerHello
		for _, p := range all {
			if peerRecords(k, &p) > 0 {
				p.LIPs = slices.DeleteFunc(slices.Clone(p.LIPs), func(a netip.Addr) bool { return !lipFamily(k, a) })
				peers = append(peers, p)
			}
		}
		fit := r.fit[k]
		for len(peers) > 0 {
			n, records := 0, 0
			for n < len(peers) && (n == 0 || records+peerRecords(k, &peers[n]) <= fit) {
				records += peerRecords(k, &peers[n])
				n++
			}
			batch := peers[:n]
			peers = peers[n:]
			if records > fit { // one peer with more addresses than a message holds
				p := batch[0]
				for len(p.LIPs) > 0 {
					part := p
					part.LIPs = p.LIPs[:min(len(p.LIPs), fit)]
					p.LIPs = p.LIPs[len(part.LIPs):]
					d.sendPeerBatch(r, k, []PeerHello{part}, dests, now)
				}
				continue
			}
			d.sendPeerBatch(r, k, batch, dests, now)
		}
	}
}

func (d *Daemon) sendPeerBatch(r *running, k Kind, batch []PeerHello, dests []netip.AddrPort, now time.Time) {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	d.seq++
	h := Header{Kind: k, SyncID: d.modes.Load().masterID, Boot: d.boot, Seq: d.seq}
	d.out = d.enc.AppendPeers(d.out[:0], h, batch, now)
	d.transmit(r, dests, true)
}

// forgetHellos drops every peer's hello (the backup mode stopped).
func (ps *peers) forgetHellos() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.byAddr {
		p.hello.Store(nil)
	}
}
