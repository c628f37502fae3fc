package lcore

import (
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// IP fragments are forwarded one by one, never reassembled: the first
// fragment (offset 0, with the ports) takes the connection's decision as
// any packet does, and the later ones (no ports) follow the decision
// remembered under the datagram's key (source, destination, IP ID,
// protocol). Every fragment keeps its size, so no mbuf is chained,
// allocated or refragmented, and the real server (or the client)
// reassembles as its kernel does.
//
// Two steps reach the owner whatever the NIC's RSS did. A fragment goes
// first to the datagram's home worker, a keyed hash of its key (which
// every fragment carries); the home learns the owner from the first
// fragment's client endpoint (the ownership rule, owner.go) and passes
// every fragment of the datagram on to it, in order, on the SPSC ring; the
// owner remembers the first fragment's flow and sends the later ones the
// same way. Later fragments that reach the home before the first wait
// there, bounded, until it comes or the datagram times out.

// FragLimits bounds a worker's fragment state.
type FragLimits struct {
	Datagrams int           // datagrams remembered at once (the table's size)
	Held      int           // later fragments waiting for their first one
	Timeout   time.Duration // a datagram's life from its first fragment seen here
}

// DefaultFragLimits are used when Config.Fragments is zero (Datagrams and
// Timeout also when either alone is; Held 0 holds nothing).
var DefaultFragLimits = FragLimits{Datagrams: 4096, Held: 256, Timeout: 5 * time.Second}

// fragment kinds in desc.frag.
const (
	fragNone  = iota
	fragFirst // offset 0 and more to come: carries the ports
	fragLater // offset > 0: no ports
)

// maxHeldPerDatagram bounds what one datagram may hold of the pool while
// its first fragment is missing (a 64 KiB datagram is 45 fragments of 1480).
const maxHeldPerDatagram = 48

const fragWays = 4 // entries per bucket of the table

// fragKey names a datagram. The IPv6 identification is 32 bits, hence id's
// width; an IPv6 key (v6) holds folds of its addresses, which sit whole in
// the table's side array (frag6.go). steered keys the entry of a datagram
// a steering entry passed here (steerentry.go), apart from this worker's
// entry as its home. Both fit in the padding: 16 bytes.
type fragKey struct {
	src, dst uint32
	id       uint32
	proto    uint8
	v6       bool
	steered  bool
}

// fragEntry is one datagram's remembered decision.
type fragEntry struct {
	key     fragKey
	used    bool
	owner   int16   // the worker its fragments go to; -1 until the first fragment is seen
	steered bool    // owner holds the connection, as a steering entry here said: its fragments go marked (desc.steered)
	doomed  uint16  // a Stat: the first fragment was dropped for the datagram's sake (fragment_shifted, fragment_no_checksum) or as to_local, and so are the later ones (to the kernel with it on a kni port)
	nheld   uint8   // fragments held for it (home worker, before the first)
	held    int32   // first held slot, -1 for none
	flow    flowKey // the first fragment's flow (owner)
	seen    uint32  // fragment payload bytes seen here
	total   uint32  // the datagram's payload length, once its last fragment is seen
	endConn uint32  // a one-packet connection (id+1) that ends with the datagram (onepacket.go)
	expires int64
}

// fragTable is a worker's fragment state: a set-associative table (a
// bucket of four entries per hash, nothing chained, nothing allocated
// after construction) and the held fragments, linked by slot index.
type fragTable struct {
	entries  []fragEntry
	addrs6   []fragAddrs6 // an IPv6 entry's addresses, by the entry's index
	cur      fragAddrs6   // the addresses of the IPv6 fragment being keyed
	mask     uint32       // buckets - 1
	timeout  int64
	held     []*mbuf.Mbuf
	heldNext []int32
	freeSlot int32 // first free held slot, -1 for none
	sweep    int   // where the expiry sweep goes on
}

func newFragTable(lim FragLimits) *fragTable {
	if lim == (FragLimits{}) {
		lim = DefaultFragLimits
	}
	if lim.Datagrams <= 0 {
		lim.Datagrams = DefaultFragLimits.Datagrams
	}
	lim.Held = max(lim.Held, 0)
	if lim.Timeout <= 0 {
		lim.Timeout = DefaultFragLimits.Timeout
	}
	buckets := 1
	for buckets*fragWays < lim.Datagrams {
		buckets *= 2
	}
	t := &fragTable{
		entries: make([]fragEntry, buckets*fragWays), addrs6: make([]fragAddrs6, buckets*fragWays),
		mask: uint32(buckets - 1), timeout: int64(lim.Timeout),
		held: make([]*mbuf.Mbuf, lim.Held), heldNext: make([]int32, lim.Held),
	}
	for i := range t.heldNext {
		t.heldNext[i] = int32(i + 1)
	}
	t.freeSlot = -1
	if lim.Held > 0 {
		t.freeSlot, t.heldNext[lim.Held-1] = 0, -1
	}
	return t
}

// A fragment's datagram key is its addresses (for IPv6 their folds, the
// addresses going to fragTable.cur), IP ID and protocol.

// fragHash is keyed with the secret steering key, so a sender cannot aim
// its datagrams at one worker or one bucket.
func fragHash(k fragKey) uint32 {
	return endpointHash(k.src, uint16(k.id)) ^ endpointHash(k.dst^uint32(k.proto), uint16(k.id>>16))
}

// fragHome is the worker every fragment of a datagram meets at.
func (w *Worker) fragHome(k fragKey) int {
	if w.nworkers <= 1 {
		return 0
	}
	return int(fragHash(k) % uint32(w.nworkers))
}

// findFrag returns the datagram's entry, making it if it is new; nil with
// a drop reason when its bucket holds four live datagrams. An IPv6 key's
// addresses are in t.cur.
func (w *Worker) findFrag(k fragKey) (*fragEntry, Stat) {
	t := w.frags
	b := int(fragHash(k)&t.mask) * fragWays
	free := -1
	for i := b; i < b+fragWays; i++ {
		e := &t.entries[i]
		switch {
		case e.used && e.expires <= w.now:
			w.removeFrag(e, DropFragTimeout)
			fallthrough
		case !e.used:
			if free < 0 {
				free = i
			}
		case e.key == k && (!k.v6 || t.addrs6[i] == t.cur):
			return e, 0
		}
	}
	if free < 0 {
		return nil, DropFragTableFull
	}
	if k.v6 {
		t.addrs6[free] = t.cur
	}
	e := &t.entries[free]
	*e = fragEntry{key: k, used: true, owner: -1, held: -1, expires: w.now + t.timeout}
	return e, 0
}

// account adds a fragment (n bytes of data at off, more to follow or not)
// to what its datagram has seen here and reports whether the datagram is
// now whole (duplicates may say so early; a later fragment then finds no
// entry and is dropped, as a reassembler would).
func (e *fragEntry) account(off, n uint32, more bool) bool {
	e.seen += n
	if !more {
		e.total = off + n
	}
	return e.total != 0 && e.seen >= e.total
}

// fragGeometry is an IPv4 fragment's data offset and length, and whether
// more follow.
func fragGeometry(ip hdr.IPv4) (off, n uint32, more bool) {
	return uint32(ip.FragmentOffset()), uint32(len(ip.Payload())), ip.Flags()&hdr.IPv4FlagMoreFragments != 0
}

// removeFrag forgets a datagram; what it still held is dropped under why.
func (w *Worker) removeFrag(e *fragEntry, why Stat) {
	t := w.frags
	for s := e.held; s >= 0; {
		next := t.heldNext[s]
		w.discard(t.held[s], why)
		t.held[s], t.heldNext[s], t.freeSlot = nil, t.freeSlot, s
		s = next
	}
	e.used, e.held, e.nheld = false, -1, 0
	if e.endConn != 0 {
		w.endOnePacket(e.endConn-1, &e.flow)
		e.endConn = 0
	}
}

// hold keeps a later fragment until its datagram's first one arrives.
func (w *Worker) holdFrag(e *fragEntry, d *desc) exit {
	t := w.frags
	if e.nheld >= maxHeldPerDatagram || t.freeSlot < 0 {
		return drop(DropFragHeldFull)
	}
	s := t.freeSlot
	t.freeSlot = t.heldNext[s]
	d.m.SetPort(uint16(d.in)) // kept with the fragment: its input port
	t.held[s], t.heldNext[s] = d.m, -1
	if e.held < 0 {
		e.held = s
	} else { // appended, so that they leave in the order they came
		last := e.held
		for t.heldNext[last] >= 0 {
			last = t.heldNext[last]
		}
		t.heldNext[last] = s
	}
	e.nheld++
	w.cnt.own[FragmentsHeld]++
	return exit{kind: exitKept}
}

// fragment takes a fragment through its two steps (home, then owner).
func (w *Worker) fragment(d *desc, steer bool) exit {
	var k fragKey
	var off, n uint32
	var more bool
	if d.class == classFlow6 || d.class == classFragment6 {
		k, off, n, more = w.frags.fragInfo6(d)
	} else {
		ip := d.ip()
		k = fragKey{src: d.flow.src, dst: d.flow.dst, id: uint32(ip.ID()), proto: d.flow.proto}
		off, n, more = fragGeometry(ip)
	}
	home, me := w.fragHome(k), w.cfg.ID
	if steer && home != me {
		return handOff(home)
	}
	k.steered = d.steered
	e, why := w.findFrag(k)
	if e == nil {
		return drop(why)
	}
	whole := e.account(off, n, more)
	if d.steered {
		// Passed on by a steering entry, first fragment first: this
		// worker holds the connection.
		e.owner = int16(me)
		if d.frag == fragFirst {
			e.flow = d.flow
		}
	} else if e.owner < 0 {
		switch {
		case home == me && d.frag == fragLater:
			x := w.holdFrag(e, d)
			if x.kind == exitDrop && e.nheld == 0 {
				w.removeFrag(e, DropFragOrphan)
			}
			return x
		case home == me:
			e.owner = int16(me)
			if w.nworkers > 1 {
				e.owner = int16(w.ownerOf(d))
			}
		case d.frag == fragLater: // the owner always gets the first fragment first
			w.removeFrag(e, DropFragOrphan)
			return drop(DropFragOrphan)
		default:
			e.owner = int16(me)
		}
		if d.frag == fragFirst {
			e.flow = d.flow
		}
	}
	x := w.fragOnward(d, e)
	if e.nheld > 0 { // the first fragment leaves before those that waited for it
		w.leave(d.m, d.in, x)
		w.releaseHeld(e)
		x = exit{kind: exitKept}
	}
	if whole {
		w.removeFrag(e, DropFragOrphan)
	}
	return x
}

// fragOnward is a fragment's exit once its datagram's owner is known.
func (w *Worker) fragOnward(d *desc, e *fragEntry) exit {
	if int(e.owner) != w.cfg.ID {
		if e.steered {
			return steerTo(int(e.owner))
		}
		return handOff(int(e.owner))
	}
	w.cnt.own[RxPackets]++
	w.cnt.own[RxBytes] += uint64(d.m.PktLen())
	w.cnt.own[Fragments]++
	v6 := d.class == classFlow6 || d.class == classFragment6
	switch {
	case d.frag == fragFirst && v6:
		x := w.forward6(d)
		e.endConn, w.onePacketFrag = w.onePacketFrag, 0
		if x.kind == exitDrop && x.why == DropToLocal {
			e.doomed = uint16(x.why) // the later ones follow it, to the kernel on a kni port
		}
		return x
	case d.frag == fragFirst:
		x := w.forward(d)
		e.endConn, w.onePacketFrag = w.onePacketFrag, 0
		switch {
		case x.kind == exitDrop && (x.why == DropFragShifted || x.why == DropFragNoChecksum || x.why == DropToLocal):
			// The later fragments share its fate: dropped, or given to
			// the kernel with it (to_local on a port with a kni).
			e.doomed = uint16(x.why)
		case x.kind == exitSteer: // the later fragments follow it
			e.owner, e.steered = int16(x.to), true
		}
		return x
	case e.doomed != 0:
		return drop(Stat(e.doomed))
	case v6:
		return w.forwardLater6(d, e.flow)
	}
	return w.forwardLater(d, e.flow)
}

// releaseHeld sends on the fragments that waited for the first one.
func (w *Worker) releaseHeld(e *fragEntry) {
	t := w.frags
	d := &w.fragDesc
	for s := e.held; s >= 0; {
		next := t.heldNext[s]
		m := t.held[s]
		t.held[s], t.heldNext[s], t.freeSlot = nil, t.freeSlot, s
		in := int(m.Port())
		parse(d, m, in)
		w.leave(m, in, w.fragOnward(d, e))
		s = next
	}
	e.held, e.nheld = -1, 0
}

// forwardLater sends a fragment without ports along its first fragment's
// connection: only the IPv4 header changes (the address VS/NAT rewrites,
// both addresses for FullNAT, the TTL; a NAT64 server's fragment becomes
// an IPv6 one, nat64.go); the transport checksum, in the first fragment,
// was updated there for the whole datagram.
func (w *Worker) forwardLater(d *desc, k flowKey) exit {
	id, dir, ok := w.table.Lookup(k.proto, k.src, k.sport, k.dst, k.dport)
	if !ok {
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	if c.Flags&flagSteer != 0 {
		return w.steer(d, c)
	}
	if w.snap.DestExpired(c.Dest) {
		return drop(DropDestDown) // the first fragment ended the connection
	}
	ip := d.ip()
	if ip.TTL() <= 1 {
		return drop(DropTTLExpired)
	}
	ds := &w.cnt.dest[c.Dest]
	if dir == conn.Original {
		ds[DestInPkts]++
		ds[DestInBytes] += uint64(d.m.PktLen())
	} else {
		ds[DestOutPkts]++
		ds[DestOutBytes] += uint64(d.m.PktLen())
	}
	if c.IsIPv6() { // a NAT64 server's reply
		return w.nat64In(d, c, id)
	}
	if c.Fwd != fwd.NAT && c.Fwd != fwd.FullNAT {
		return w.toRealServer(d, c, false)
	}
	towards := c.RIP
	if dir == conn.Reply {
		towards = c.ClientIP
	}
	x := w.route(towards)
	if x.kind != exitTransmit {
		return x
	}
	decTTL(ip)
	switch {
	case c.Fwd == fwd.FullNAT && dir == conn.Original:
		ip.SetSrcWithChecksumUpdate(w.table.Ext(id).LIP)
		ip.SetDstWithChecksumUpdate(c.RIP)
	case c.Fwd == fwd.FullNAT:
		ip.SetSrcWithChecksumUpdate(c.VIP)
		ip.SetDstWithChecksumUpdate(c.ClientIP)
	case dir == conn.Original:
		ip.SetDstWithChecksumUpdate(c.RIP)
	default:
		ip.SetSrcWithChecksumUpdate(c.VIP)
	}
	d.m.SetOlFlags(0)
	return x
}

// sweepFrags frees up to n entries' worth of expired datagrams (and what
// they hold), so a datagram whose first fragment never came does not keep
// its mbufs until its bucket is needed.
func (w *Worker) sweepFrags(n int) {
	t := w.frags
	for ; n > 0; n-- {
		e := &t.entries[t.sweep]
		if e.used && e.expires <= w.now {
			w.removeFrag(e, DropFragTimeout)
		}
		if t.sweep++; t.sweep == len(t.entries) {
			t.sweep = 0
		}
	}
}

// freeFrags drops every held fragment (the worker stops).
func (w *Worker) freeFrags() {
	for i := range w.frags.entries {
		if e := &w.frags.entries[i]; e.used {
			w.removeFrag(e, DropFragTimeout)
		}
	}
}
