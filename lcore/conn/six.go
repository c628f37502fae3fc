package conn

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/dplb/dplb/lcore/hdr"
)

// IPv6 connections live in the same table as IPv4's, in the same 64-byte
// entries: the entry's ClientIP, VIP and RIP hold 32-bit folds of the
// IPv6 addresses (Fold6), which the index hashes and filters on as for
// IPv4, and the full addresses sit in a side array indexed like the
// entries (64 bytes an entry, allocated by EnableSix only on lcores whose
// snapshots have IPv6 services). A lookup confirms a folded match against
// the side array, and only for entries marked indexedSix; an IPv4 lookup
// skips them. State machine, timeouts, expiry and the flood defense are
// the IPv4 ones, unchanged.

// Addrs6 are an IPv6 connection's addresses: LIP is the local address
// of a FullNAT connection to an IPv6 server (FNAT66), else zero.
type Addrs6 struct {
	Client, VIP, RIP, LIP hdr.Addr6
}

// Addrs6Size is what an IPv6 connection costs beyond its 64-byte entry:
// one cache line, aligned as the entries are.
const Addrs6Size = 64

// indexedSix marks an entry whose addresses are folds of Addrs6.
const indexedSix uint8 = 1 << 3

// foldKey keys Fold6, drawn once per process: the folds are shared by
// every lcore's table and the persistence templates, and a sender who
// cannot predict them cannot make addresses that fold alike.
var foldKey = [2]uint64{rand.Uint64(), rand.Uint64()}

// Fold6 is the 32-bit form of an IPv6 address that the table and the
// persistence templates use in place of an IPv4 address. Distinct
// addresses may fold alike: a lookup confirms against the full address.
func Fold6(a *hdr.Addr6) uint32 {
	h0 := binary.BigEndian.Uint64(a[:8])
	h1 := binary.BigEndian.Uint64(a[8:])
	h := (h0 ^ foldKey[0]) * mulA
	h ^= h >> 32
	h = (h ^ h1 ^ foldKey[1]) * mulB
	h ^= h >> 29
	h *= mulC
	h ^= h >> 32
	return uint32(h)
}

// EnableSix allocates the IPv6 address array (once; later calls do
// nothing). Control work: Addrs6Size bytes per entry.
func (t *Table) EnableSix() {
	if t.six == nil {
		t.six = make([]Addrs6, len(t.entries))
	}
}

// HasSix reports whether EnableSix was called.
func (t *Table) HasSix() bool { return t.six != nil }

// IsIPv6 reports whether the entry is an IPv6 connection (its address
// fields are folds; Table.Addrs6 has the addresses).
func (c *Conn) IsIPv6() bool { return c.indexed&indexedSix != 0 }

// Addrs6 returns a live IPv6 entry's addresses, or nil.
func (t *Table) Addrs6(id uint32) *Addrs6 {
	if t.six == nil || id >= uint32(len(t.entries)) || t.entries[id].indexed&(indexedLive|indexedSix) != indexedLive|indexedSix {
		return nil
	}
	return &t.six[id]
}

// Lookup6 is Lookup for an IPv6 packet.
func (t *Table) Lookup6(proto uint8, src *hdr.Addr6, srcPort uint16, dst *hdr.Addr6, dstPort uint16) (id uint32, dir Dir, ok bool) {
	if t.six == nil {
		return 0, 0, false
	}
	s, d := Fold6(src), Fold6(dst)
	return t.find6(hashKey(&t.seed, proto, s, srcPort, d, dstPort), proto, src, s, srcPort, dst, d, dstPort)
}

func (t *Table) find6(h uint32, proto uint8, src *hdr.Addr6, s uint32, srcPort uint16, dst *hdr.Addr6, d uint32, dstPort uint16) (uint32, Dir, bool) {
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := t.slots[i]
		if sl.empty() {
			return 0, 0, false
		}
		if sl.hash != h {
			continue
		}
		id, dir := sl.id(), sl.dir()
		e := &t.entries[id]
		if e.indexed&indexedSix == 0 {
			continue // IPv4
		}
		a := &t.six[id]
		if dir == Reply && e.indexed&indexedLocal != 0 {
			// FNAT66's RIP:RPort -> LIP:LPort (the folds in the entry
			// and its extension); a NAT64 entry's reply key is IPv4's.
			if e.indexed&indexedLocal6 != 0 && t.ext[id].matchesReply(e, proto, s, srcPort, d, dstPort) &&
				*src == a.RIP && *dst == a.LIP {
				return id, dir, true
			}
			continue
		}
		if !e.matches(dir, proto, s, srcPort, d, dstPort) {
			continue
		}
		if dir == Original && *src == a.Client && *dst == a.VIP ||
			dir == Reply && *src == a.RIP && *dst == a.Client {
			return id, dir, true
		}
	}
}

// Insert6 is Insert for an IPv6 connection: c's ClientIP, VIP and RIP are
// set to the folds of a's, and a is kept beside the entry. Errors as
// Insert's, and ErrNoSix.
func (t *Table) Insert6(c *Conn, a *Addrs6) (uint32, error) {
	return t.insert6(c, a, nil, insertPlain6)
}

// Insert6Ext enters a NAT64 connection: an IPv6 client and VIP (their
// folds in c, a beside the entry; a.RIP unused) and an IPv4 real server
// c.RIP reached from the local address x.LIP:x.LPort, whose replies are
// an IPv4 lookup of RIP:RPort -> LIP:LPort, as FullNAT's. Errors as
// InsertExt's and Insert6's.
func (t *Table) Insert6Ext(c *Conn, a *Addrs6, x *Ext) (uint32, error) {
	if x == nil {
		return 0, ErrNilConn
	}
	return t.insert6(c, a, x, insertNAT64)
}

// Insert6Full enters a FullNAT connection to an IPv6 server (FNAT66):
// an IPv6 client, VIP, real server and local address (their folds in c
// and x.LIP, a beside the entry), whose replies are the IPv6 lookup of
// RIP:RPort -> LIP:LPort. Errors as Insert6Ext's.
func (t *Table) Insert6Full(c *Conn, a *Addrs6, x *Ext) (uint32, error) {
	if x == nil {
		return 0, ErrNilConn
	}
	x.LIP = Fold6(&a.LIP)
	return t.insert6(c, a, x, insertFull6)
}

// Insert6Seq is Insert6 for a NAT66 connection with an extension x (a
// SYN proxy's sequence deltas): its keys are Insert6's, x.LIP and
// x.LPort are unused. Errors as Insert6's, and ErrNoExt.
func (t *Table) Insert6Seq(c *Conn, a *Addrs6, x *Ext) (uint32, error) {
	if x == nil {
		return 0, ErrNilConn
	}
	return t.insert6(c, a, x, insertPlain6)
}

// How insert6 keys an IPv6 connection's replies.
type insert6Kind uint8

const (
	insertPlain6 insert6Kind = iota // RIP:RPort -> client (NAT66), or none (DR, TUN)
	insertNAT64                     // IPv4's RIP:RPort -> LIP:LPort
	insertFull6                     // IPv6's RIP:RPort -> LIP:LPort (FNAT66)
)

// insert6 enters an IPv6 connection, c's addresses set to the folds of
// a's (but an IPv4 server's for NAT64); with an extension x, its Reply
// key is as kind says.
func (t *Table) insert6(c *Conn, a *Addrs6, x *Ext, kind insert6Kind) (uint32, error) {
	switch {
	case c == nil || a == nil:
		return 0, ErrNilConn
	case t.six == nil:
		return 0, ErrNoSix
	case x != nil && t.ext == nil:
		return 0, ErrNoExt
	}
	c.ClientIP, c.VIP = Fold6(&a.Client), Fold6(&a.VIP)
	if kind != insertNAT64 {
		c.RIP = Fold6(&a.RIP)
	}
	if len(t.free) == 0 {
		return 0, ErrFull
	}
	hOrig := hashKey(&t.seed, c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort)
	if _, _, ok := t.find6(hOrig, c.Proto, &a.Client, c.ClientIP, c.ClientPort, &a.VIP, c.VIP, c.VPort); ok {
		return 0, ErrExists
	}
	local := kind != insertPlain6 && x != nil
	twoWay := c.Flags&FlagOneWay == 0 || local
	var hReply uint32
	switch {
	case local && kind == insertNAT64:
		// The reply key is IPv4's: RIP:RPort -> LIP:LPort.
		hReply = hashKey(&t.seed, c.Proto, c.RIP, c.RPort, x.LIP, x.LPort)
		if _, _, ok := t.find(hReply, c.Proto, c.RIP, c.RPort, x.LIP, x.LPort); ok {
			return 0, ErrExists
		}
	case local:
		hReply = hashKey(&t.seed, c.Proto, c.RIP, c.RPort, x.LIP, x.LPort)
		if _, _, ok := t.find6(hReply, c.Proto, &a.RIP, c.RIP, c.RPort, &a.LIP, x.LIP, x.LPort); ok {
			return 0, ErrExists
		}
	case twoWay:
		if a.Client == a.RIP && c.ClientPort == c.RPort && a.VIP == a.Client && c.VPort == c.ClientPort {
			return 0, ErrExists
		}
		hReply = hashKey(&t.seed, c.Proto, c.RIP, c.RPort, c.ClientIP, c.ClientPort)
		if _, _, ok := t.find6(hReply, c.Proto, &a.RIP, c.RIP, c.RPort, &a.Client, c.ClientIP, c.ClientPort); ok {
			return 0, ErrExists
		}
	}
	id := t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	e := &t.entries[id]
	*e = *c
	e.indexed = indexedLive | indexedSix
	e.marks = markFresh
	e.hashOrig, e.hashReply = hOrig, hReply
	t.due[id] = dueBound(e.Expires)
	t.six[id] = *a
	if x != nil {
		t.ext[id] = *x
		e.indexed |= indexedExt
		if local {
			e.indexed |= indexedLocal
		}
		if local && kind == insertFull6 {
			e.indexed |= indexedLocal6
		}
	}
	t.place(hOrig, makeRef(id, Original))
	if twoWay {
		e.indexed |= indexedReply
		t.place(hReply, makeRef(id, Reply))
	}
	return id, nil
}
