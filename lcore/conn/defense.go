package conn

import (
	"fmt"
	"time"
)

// Defense is how a table resists being filled by traffic that never
// becomes a connection (spoofed SYNs, one-packet UDP), after IPVS's
// drop_entry and secure_tcp defenses. Thresholds are percentages of the
// table's capacity; the zero value turns everything off (a full table
// then refuses new connections, as before).
//
// What may go: an embryonic entry (TCP in NONE, SYN_SENT, SYN_RECV or
// SYNACK; UDP never confirmed, see Touch) older than embryonicGrace, a
// finished one (TIME_WAIT, CLOSE), or any other connection that has been
// idle for IdleAfter. So a connection past its handshake that carried a
// packet within IdleAfter is never evicted. (Persistence templates live in
// their own table, outside the defense.)
type Defense struct {
	// DropEntryPercent: at or above this fill, each new connection first
	// evicts one entry that may go (the oldest the eviction hand finds in
	// a bounded scan). 0 = off.
	DropEntryPercent int
	// SecurePercent: at or above this fill, embryonic entries get the
	// short timeouts below instead of the configured ones. 0 = off.
	SecurePercent int
	// IdleAfter: a connection with no packet for this long may be evicted
	// under drop-entry pressure whatever its state.
	IdleAfter time.Duration
	// SecureSYN is the timeout of an embryonic TCP entry under pressure.
	SecureSYN time.Duration
	// SecureUDP is the timeout of an unconfirmed UDP entry under pressure.
	SecureUDP time.Duration
}

// evictScan bounds the entries one Relieve call examines, so a table full
// of active connections costs a new flow at most this many cache misses.
const evictScan = 64

// embryonicGrace spares an embryonic entry this young: a real client's
// handshake completes within it (one round trip), so a flood cannot evict
// the connection between its SYN and its ACK. To defeat it a flood must
// refill the whole threshold within the grace, millions of new flows a
// second on a large table.
const embryonicGrace = 200 * time.Millisecond

// seenShift coarsens the monotonic clock for Conn.seen: units of 2^20 ns
// (about a millisecond), so 32 bits wrap after about 52 days, longer than
// any timeout (at most 30 days): an idle time never reads as shorter than
// it is while the entry lives.
const seenShift = 20

// marks bits (Conn.marks).
const (
	markFresh     uint8 = 1 << 0 // inserted, first packet not yet touched
	markConfirmed uint8 = 1 << 1 // UDP: a reply (or, one-way, a second packet) was seen
)

// SetDefense arms the table's defense; the thresholds are rounded to whole
// entries. It returns an error naming the bad field and leaves the table
// unchanged if a value is out of range.
func (t *Table) SetDefense(d Defense) error {
	for _, p := range []struct {
		name string
		v    int
	}{{"DropEntryPercent", d.DropEntryPercent}, {"SecurePercent", d.SecurePercent}} {
		if p.v < 0 || p.v > 100 {
			return fmt.Errorf("conn: defense %s %d not in 0..100", p.name, p.v)
		}
	}
	for _, p := range []struct {
		name string
		v    time.Duration
	}{{"IdleAfter", d.IdleAfter}, {"SecureSYN", d.SecureSYN}, {"SecureUDP", d.SecureUDP}} {
		if p.v < 0 {
			return fmt.Errorf("conn: defense %s %s is negative", p.name, p.v)
		}
	}
	t.defense = d
	t.dropAt = threshold(len(t.entries), d.DropEntryPercent)
	t.secureAt = threshold(len(t.entries), d.SecurePercent)
	return nil
}

// threshold is percent of capacity in entries, at least 1 when armed.
func threshold(capacity, percent int) int {
	if percent == 0 {
		return 0
	}
	return max(1, capacity*percent/100)
}

// Pressure reports which defenses the table's fill has turned on now.
func (t *Table) Pressure() (secure, dropEntry bool) {
	n := t.Len()
	return t.secureAt > 0 && n >= t.secureAt, t.dropAt > 0 && n >= t.dropAt
}

// Evictions is the number of entries evicted under pressure so far.
func (t *Table) Evictions() uint64 { return t.evictions }

// ShortTimeouts is the number of times an embryonic entry was given a
// short timeout under pressure.
func (t *Table) ShortTimeouts() uint64 { return t.shortTimeouts }

// Touch records a packet of connection c (from Get) travelling in dir at
// now, and sets c.Expires: now plus the timeout of c's state, or under
// secure pressure the short one if c is still embryonic. Call it after the
// state has been updated for the packet.
//
// A UDP entry is confirmed by a reply, or, when its replies bypass us
// (FlagOneWay), by a second packet from the client: a spoofed flow never is.
func (t *Table) Touch(c *Conn, dir Dir, now int64, timeouts *Timeouts) {
	switch {
	case dir == Reply:
		c.marks = c.marks&^markFresh | markConfirmed
	case c.marks&markFresh != 0:
		c.marks &^= markFresh
	case c.Flags&FlagOneWay != 0:
		c.marks |= markConfirmed
	}
	c.seen = uint32(now >> seenShift)
	before := c.Expires
	timeout := timeouts.For(c.State)
	if t.secureAt > 0 && t.Len() >= t.secureAt && embryonic(c) {
		short := int64(t.defense.SecureSYN)
		if c.State == StateUDP {
			short = int64(t.defense.SecureUDP)
		}
		if short > 0 && short < timeout {
			timeout = short
			t.shortTimeouts++
		}
	}
	c.Expires = now + timeout
	if c.Expires < before {
		t.lowerDue(c) // the sweep's bound must not be later (table.go)
	}
}

// embryonic reports whether c has not (yet) become a connection: a TCP
// handshake not completed, or UDP never confirmed.
func embryonic(c *Conn) bool {
	switch c.State {
	case StateNone, StateSynSent, StateSynRecv, StateSynAck:
		return true
	case StateUDP:
		return c.marks&markConfirmed == 0
	}
	return false
}

// idleFor is how long c has gone without a packet at now.
func idleFor(c *Conn, now int64) int64 {
	return int64(uint32(now>>seenShift)-c.seen) << seenShift
}

// evictable reports whether c may be evicted under pressure at now.
// young is set for an embryonic entry spared only by embryonicGrace.
func (t *Table) evictable(c *Conn, now int64) (ok, young bool) {
	if c.State == StateTimeWait || c.State == StateClose {
		return true, false
	}
	idle := idleFor(c, now)
	if embryonic(c) {
		return idle >= int64(embryonicGrace), idle < int64(embryonicGrace)
	}
	return t.defense.IdleAfter > 0 && idle >= int64(t.defense.IdleAfter), false
}

// Relieve makes room for a new connection under drop-entry pressure: it
// examines at most evictScan entries from the eviction hand on and evicts
// the first that may go, calling onEvict (if non-nil, same rules as
// Expire's callback) just before. The hand moves on, and a freed entry is
// the next one Insert reuses, so eviction is roughly oldest first: a
// connection that just arrived is the last the hand comes back to. If
// the window holds only embryonic entries younger than embryonicGrace (a
// flood refilling the table faster than that), the oldest of them goes:
// a flood that fast must not fill the table either. It reports whether an
// entry was evicted; below the threshold it does nothing. Only Relieve
// evicts: the expiry sweep, which visits entries in no particular age
// order, removes expired entries only.
func (t *Table) Relieve(now int64, onEvict func(id uint32, c *Conn)) bool {
	if t.dropAt == 0 || t.Len() < t.dropAt {
		return false
	}
	mask := uint32(len(t.entries) - 1)
	victim, found := uint32(0), false
	var victimIdle int64 = -1
	for range evictScan {
		id := t.hand
		t.hand = (t.hand + 1) & mask
		e := &t.entries[id]
		if e.indexed&indexedLive == 0 {
			continue
		}
		ok, young := t.evictable(e, now)
		if ok {
			victim, found = id, true
			break
		}
		if idle := idleFor(e, now); young && idle > victimIdle {
			victim, victimIdle, found = id, idle, true
		}
	}
	if !found {
		return false
	}
	if onEvict != nil {
		onEvict(victim, &t.entries[victim])
	}
	t.Delete(victim)
	t.evictions++
	return true
}
