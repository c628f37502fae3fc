package conn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"unsafe"
)

// MaxCapacity bounds New: 2^26 entries is 4 GiB of entries plus 2 GiB of
// index for one lcore, far past any sane per-core table.
const MaxCapacity = 1 << 26

// Errors returned by the table; test with errors.Is.
var (
	ErrFull     = errors.New("conn: table full")
	ErrExists   = errors.New("conn: connection key already present")
	ErrCapacity = errors.New("conn: capacity out of range")
	ErrNilConn  = errors.New("conn: nil connection")
)

// slotsPerEntry sizes the index at twice the number of keys a full table
// holds (two per entry), so the index is at most half full and linear
// probing stays short. Because the entry array fills first, ErrFull always
// means "no free entry"; the index can never be the limit.
const slotsPerEntry = 4

// slot is one index cell. ref is 0 for an empty cell, otherwise
// (entry id + 1) << 1 | Dir. hash is the key's 32-bit hash: its low bits
// give the home cell (needed by backward-shift deletion) and all of it
// filters candidates before the entry's cache line is touched.
type slot struct {
	hash uint32
	ref  uint32
}

func makeRef(id uint32, d Dir) uint32 { return (id+1)<<1 | uint32(d) }

func (s slot) id() uint32  { return s.ref>>1 - 1 }
func (s slot) dir() Dir    { return Dir(s.ref & 1) }
func (s slot) empty() bool { return s.ref == 0 }

// Table is one lcore's connection table: a fixed array of entries with a
// free list, indexed by an open-addressing hash of each entry's Original
// key and (unless FlagOneWay) its Reply key. Insert never evicts: when the
// table is full it fails and the caller counts the drop. Under a Defense
// (defense.go), Relieve evicts embryonic and idle entries before the table
// gets there.
//
// A Table is not safe for concurrent use; it belongs to one lcore.
type Table struct {
	entries []Conn   // pointer-free, in huge pages outside the Go heap when large (mem.go)
	ext     []Ext    // nil until EnableExt; indexed like entries (ext.go)
	six     []Addrs6 // nil until EnableSix; indexed like entries (six.go)
	free    []uint32 // stack of free entry ids
	slots   []slot   // the index, power-of-two length
	mask    uint32   // len(slots) - 1
	seed    [2]uint64
	cursor  uint32 // next entry Expire examines
	// due holds, per entry, a lower bound of its Expires in units of
	// 2^dueShift ns (about a second): the expiry sweep reads these 4
	// bytes, not the entry's 64, and looks at an entry only once its
	// bound has come (a sweep over a large table is memory-bound). Touch
	// lowers a bound (a state with a shorter timeout) but never raises
	// it, so a packet writes nothing more; the sweep raises it when it
	// finds the entry not yet due. A free entry's is dueNever.
	due    []uint32
	mapped int // bytes of entries and index outside the Go heap (mem.go)

	defense          Defense
	dropAt, secureAt int    // Defense thresholds in entries, 0 = off
	hand             uint32 // next entry Relieve examines
	evictions        uint64
	shortTimeouts    uint64
}

// New returns a table for capacity connections (rounded up to a power of
// two) with a hash seed from the runtime's OS-seeded ChaCha8 source, so no
// sender can predict it.
func New(capacity int) (*Table, error) {
	return NewWithSeed(capacity, rand.Uint64())
}

// NewWithSeed is New with a chosen hash seed, for reproducible tests and
// benchmarks. Production code should use New: a known seed lets a sender
// craft colliding tuples.
func NewWithSeed(capacity int, seed uint64) (*Table, error) {
	if capacity <= 0 || capacity > MaxCapacity {
		return nil, fmt.Errorf("conn: capacity %d not in [1, %d]: %w", capacity, MaxCapacity, ErrCapacity)
	}
	n := 1
	for n < capacity {
		n <<= 1
	}
	t := &Table{
		free: make([]uint32, n),
		mask: uint32(n*slotsPerEntry - 1),
	}
	t.entries = hugeSlice[Conn](n, t) // mem.go
	t.slots = hugeSlice[slot](n*slotsPerEntry, t)
	t.due = hugeSlice[uint32](n, t)
	for i := range t.due {
		t.due[i] = dueNever
	}
	// Pop order 0, 1, 2, ... keeps a young table's live entries together.
	for i := range t.free {
		t.free[i] = uint32(n - 1 - i)
	}
	state := seed
	t.seed[0] = splitmix64(&state)
	t.seed[1] = splitmix64(&state)
	return t, nil
}

// Len is the number of live connections.
func (t *Table) Len() int { return len(t.entries) - len(t.free) }

// Cap is the number of connections the table can hold.
func (t *Table) Cap() int { return len(t.entries) }

// Lookup finds the connection a packet belongs to from the packet's own
// 5-tuple and tells which direction the packet travels.
func (t *Table) Lookup(proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) (id uint32, dir Dir, ok bool) {
	h := hashKey(&t.seed, proto, srcIP, srcPort, dstIP, dstPort)
	return t.find(h, proto, srcIP, srcPort, dstIP, dstPort)
}

// LookupHashed is Lookup with the key's Hash already computed.
func (t *Table) LookupHashed(h uint32, proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) (id uint32, dir Dir, ok bool) {
	return t.find(h, proto, srcIP, srcPort, dstIP, dstPort)
}

func (t *Table) find(h uint32, proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) (uint32, Dir, bool) {
	// Terminates: the index is never more than half full (slotsPerEntry).
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		s := t.slots[i]
		if s.empty() {
			return 0, 0, false
		}
		if s.hash != h {
			continue
		}
		id, d := s.id(), s.dir()
		e := &t.entries[id]
		if d == Reply && e.indexed&indexedLocal != 0 {
			if e.indexed&indexedLocal6 == 0 && t.ext[id].matchesReply(e, proto, srcIP, srcPort, dstIP, dstPort) {
				return id, d, true
			}
			continue
		}
		// An IPv6 entry's fields are folds: never an IPv4 packet's (six.go).
		if e.matches(d, proto, srcIP, srcPort, dstIP, dstPort) && e.indexed&indexedSix == 0 {
			return id, d, true
		}
	}
}

// matches reports whether the packet tuple is this entry's key in direction d.
func (c *Conn) matches(d Dir, proto uint8, srcIP uint32, srcPort uint16, dstIP uint32, dstPort uint16) bool {
	if c.Proto != proto {
		return false
	}
	if d == Original {
		return srcIP == c.ClientIP && srcPort == c.ClientPort && dstIP == c.VIP && dstPort == c.VPort
	}
	return srcIP == c.RIP && srcPort == c.RPort && dstIP == c.ClientIP && dstPort == c.ClientPort
}

// Insert copies c into a free entry and indexes its Original key and,
// unless c.Flags has FlagOneWay, its Reply key. It returns ErrFull when no
// entry is free (checked first; nothing is ever evicted) and ErrExists when
// either key is already present or the two keys are the same tuple; on
// error the table is unchanged.
func (t *Table) Insert(c *Conn) (id uint32, err error) {
	if c == nil {
		return 0, ErrNilConn
	}
	return t.insert(c, nil)
}

// InsertHashed is Insert with the Hash of c's Original key (client ->
// VIP) already computed.
func (t *Table) InsertHashed(c *Conn, hOrig uint32) (id uint32, err error) {
	if c == nil {
		return 0, ErrNilConn
	}
	if len(t.free) == 0 {
		return 0, ErrFull
	}
	return t.insertHashed(c, nil, hOrig)
}

// insert is Insert, and InsertExt when x is not nil.
func (t *Table) insert(c *Conn, x *Ext) (id uint32, err error) {
	// Fullness first: under a SYN flood it is the cheap, common refusal.
	if len(t.free) == 0 {
		return 0, ErrFull
	}
	return t.insertHashed(c, x, hashKey(&t.seed, c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort))
}

// insertHashed is insert once the table is known not full, with c's
// Original key hashed.
func (t *Table) insertHashed(c *Conn, x *Ext, hOrig uint32) (id uint32, err error) {
	if _, _, ok := t.find(hOrig, c.Proto, c.ClientIP, c.ClientPort, c.VIP, c.VPort); ok {
		return 0, ErrExists
	}
	twoWay := c.Flags&FlagOneWay == 0 || x != nil
	var hReply uint32
	if twoWay {
		// The Reply key goes to the client, or with an extension to the
		// local address.
		rIP, rPort := c.ClientIP, c.ClientPort
		if x != nil {
			rIP, rPort = x.LIP, x.LPort
		}
		if c.ClientIP == c.RIP && c.ClientPort == c.RPort && c.VIP == rIP && c.VPort == rPort {
			return 0, ErrExists // both keys are one tuple: directions would be ambiguous
		}
		hReply = hashKey(&t.seed, c.Proto, c.RIP, c.RPort, rIP, rPort)
		if _, _, ok := t.find(hReply, c.Proto, c.RIP, c.RPort, rIP, rPort); ok {
			return 0, ErrExists
		}
	}

	id = t.free[len(t.free)-1]
	t.free = t.free[:len(t.free)-1]
	e := &t.entries[id]
	*e = *c
	e.indexed = indexedLive
	e.marks = markFresh
	e.hashOrig = hOrig
	e.hashReply = hReply
	t.due[id] = dueBound(e.Expires)
	if x != nil {
		t.ext[id] = *x
		e.indexed |= indexedExt | indexedLocal
	}
	t.place(hOrig, makeRef(id, Original))
	if twoWay {
		e.indexed |= indexedReply
		t.place(hReply, makeRef(id, Reply))
	}
	return id, nil
}

// place puts a reference in the first empty cell of its probe run.
func (t *Table) place(h, ref uint32) {
	i := h & t.mask
	for !t.slots[i].empty() {
		i = (i + 1) & t.mask
	}
	t.slots[i] = slot{hash: h, ref: ref}
}

// Get returns the entry for id, or nil if id is not a live connection. The
// pointer stays valid until Delete(id).
func (t *Table) Get(id uint32) *Conn {
	if id >= uint32(len(t.entries)) {
		return nil
	}
	e := &t.entries[id]
	if e.indexed&indexedLive == 0 {
		return nil
	}
	return e
}

// Delete removes connection id from the index and frees its entry. Deleting
// a free or out-of-range id does nothing.
func (t *Table) Delete(id uint32) {
	e := t.Get(id)
	if e == nil {
		return
	}
	t.unplace(e.hashOrig, makeRef(id, Original))
	if e.indexed&indexedReply != 0 {
		t.unplace(e.hashReply, makeRef(id, Reply))
	}
	if e.indexed&indexedExt != 0 {
		t.ext[id] = Ext{}
	}
	if e.indexed&indexedSix != 0 {
		t.six[id] = Addrs6{}
	}
	*e = Conn{}
	t.due[id] = dueNever
	t.free = append(t.free, id) // within capacity: never reallocates
}

// unplace removes ref from the index by backward-shift deletion: later
// cells of the run move back into the hole when that does not carry them
// before their home cell, so no tombstones accumulate and lookups never
// need more probes than at insertion time.
func (t *Table) unplace(h, ref uint32) {
	mask := t.mask
	i := h & mask
	for t.slots[i].ref != ref {
		i = (i + 1) & mask
	}
	for j := i; ; {
		j = (j + 1) & mask
		s := t.slots[j]
		if s.empty() {
			break
		}
		// s may fill the hole at i when i lies cyclically in [home, j).
		home := s.hash & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = s
			i = j
		}
	}
	t.slots[i] = slot{}
}

// Expire examines at most budget entries, starting where the previous call
// stopped and wrapping at Cap, and deletes those with Expires <= now,
// calling onExpire (if non-nil) on each just before its removal. It returns
// the number removed. onExpire may keep an entry by moving its Expires
// past now (a persistence template that still controls connections). An lcore
// calls it every few iterations with a small budget, so no call stops the
// world unless budget >= Cap.
//
// onExpire must not Insert or Delete. Create it once (for example a method
// value stored in a field) and pass the same func on every call: a func
// literal built per call may allocate.
func (t *Table) Expire(now int64, budget int, onExpire func(id uint32, c *Conn)) int {
	n := uint32(len(t.entries))
	if budget > int(n) {
		budget = int(n)
	}
	removed := 0
	cursor := t.cursor
	nowDue := dueBound(now)
	// A batch at a time, in three steps whose misses overlap: the bounds
	// (dense, read in order) name the entries whose time may have come,
	// and their lines are prefetched; those found due have their index
	// cells prefetched; then they are removed. Due entries lie scattered
	// (the free list hands out ids in no order), so one at a time each
	// would cost the entry's miss and then its cells', back to back.
	var maybe [expireBatch]uint32
	n0 := 0
	for ; budget > 0; budget-- {
		id := cursor
		cursor = (cursor + 1) & (n - 1) // len(entries) is a power of two
		if t.due[id] > nowDue {
			continue // not due yet, nor free: its entry unread
		}
		prefetch(unsafe.Pointer(&t.entries[id]))
		maybe[n0] = id
		if n0++; n0 == expireBatch {
			removed += t.expireMaybe(maybe[:n0], now, onExpire)
			n0 = 0
		}
	}
	removed += t.expireMaybe(maybe[:n0], now, onExpire)
	t.cursor = cursor
	return removed
}

// expireMaybe removes those of the entries ids (their lines prefetched)
// that are due, and raises the bounds of those that are not.
func (t *Table) expireMaybe(ids []uint32, now int64, onExpire func(id uint32, c *Conn)) int {
	var due [expireBatch]uint32
	nd := 0
	for _, id := range ids {
		e := &t.entries[id]
		if e.indexed&indexedLive == 0 {
			continue
		}
		if e.Expires > now {
			t.due[id] = dueBound(e.Expires) // its packets moved it on
			continue
		}
		t.prefetchUnplace(e.hashOrig)
		if e.indexed&indexedReply != 0 {
			t.prefetchUnplace(e.hashReply)
		}
		due[nd] = id
		nd++
	}
	return t.expireDue(due[:nd], now, onExpire)
}

// prefetchUnplace starts fetching what unplace will read to remove a
// key of hash h: its home cell's line and, when that cell is one of the
// last two of its line, the next line too. The backward shift reads the
// cell after the one it frees, in the next line whenever the freed cell
// is a line's last; unfetched, that read is a full miss of its own (half
// of unplace's time in BenchmarkExpireDue). Lookups do without: they read
// past their line only when the run reaches its end, rare at the index's
// load.
func (t *Table) prefetchUnplace(h uint32) {
	const last = uint32(cellsPerLine - 1) // a cell's index within its line, masked
	i := h & t.mask
	prefetch(unsafe.Pointer(&t.slots[i]))
	if i&last >= last-1 {
		prefetch(unsafe.Pointer(&t.slots[(i|last+1)&t.mask]))
	}
}

// dueShift is the unit of the sweep's bounds: 2^30 ns, about a second
// (the sweep's own period), so 32 bits last 136 years of uptime.
const dueShift = 30

// dueNever is a free entry's bound: never due.
const dueNever = ^uint32(0)

// dueBound is the bound of an expiry time: rounded down, so never later.
func dueBound(expires int64) uint32 {
	if expires <= 0 {
		return 0
	}
	return uint32(min(expires>>dueShift, int64(dueNever-1)))
}

// lowerDue lowers the sweep's bound of c (one of t's entries) to its
// Expires, when that came earlier: Touch's rare case, a state with a
// shorter timeout than the last.
func (t *Table) lowerDue(c *Conn) {
	off := uintptr(unsafe.Pointer(c)) - uintptr(unsafe.Pointer(unsafe.SliceData(t.entries)))
	if off >= uintptr(len(t.entries))*unsafe.Sizeof(Conn{}) {
		return // not an entry of this table
	}
	id := off / unsafe.Sizeof(Conn{})
	t.due[id] = min(t.due[id], dueBound(c.Expires))
}

// SetExpires moves connection id's expiry to at, earlier or later,
// keeping the sweep's bound (tests use it: writing Conn.Expires lower
// directly would leave the bound later). A free id's does nothing.
func (t *Table) SetExpires(id uint32, at int64) {
	if e := t.Get(id); e != nil {
		e.Expires = at
		t.due[id] = min(t.due[id], dueBound(at))
	}
}

// expireBatch is how many due entries Expire gathers before removing
// them: enough misses in flight to overlap, few enough that the first
// cells are still cached when their turn comes.
const expireBatch = 16

// expireDue removes the due entries ids, each after onExpire (which may
// extend it), and returns how many it removed.
func (t *Table) expireDue(ids []uint32, now int64, onExpire func(id uint32, c *Conn)) int {
	removed := 0
	for _, id := range ids {
		e := &t.entries[id]
		if onExpire != nil {
			onExpire(id, e)
			if e.Expires > now {
				t.due[id] = dueBound(e.Expires)
				continue // the callback extended the entry's life
			}
		}
		t.Delete(id)
		removed++
	}
	return removed
}

// Scan calls fn for the live entries among at most budget slots from
// cursor on, and returns where the next call should start and whether this
// call reached the end of the table. An lcore lists its connections for the
// control plane a few thousand slots at a time this way, never stopping
// the world.
func (t *Table) Scan(cursor uint32, budget int, fn func(id uint32, c *Conn)) (next uint32, done bool) {
	n := uint32(len(t.entries))
	for ; budget > 0 && cursor < n; budget-- {
		if e := &t.entries[cursor]; e.indexed&indexedLive != 0 {
			fn(cursor, e)
		}
		cursor++
	}
	return cursor, cursor >= n
}

// Range calls fn for each live connection in id order until fn returns
// false. It is O(Cap), for the control-plane listing, not the packet path.
// fn may Delete the id it is given.
func (t *Table) Range(fn func(id uint32, c *Conn) bool) {
	for i := range t.entries {
		e := &t.entries[i]
		if e.indexed&indexedLive == 0 {
			continue
		}
		if !fn(uint32(i), e) {
			return
		}
	}
}
