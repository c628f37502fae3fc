package lcore

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
)

// Persistence templates, shared by all workers. A connection is owned by
// the worker its client endpoint hashes to, so the connections of one
// client network land on every worker; the template that names their real
// server (IPVS's persistence template) must be one for all of them. The
// workers share one fixed, open-addressed table, touched only when a
// persistent service gets a new connection and by worker 0's expiry
// sweep. Nothing blocks and nothing allocates.
//
// A slot has a key word (client network, VIP), a value word (VIP port,
// protocol, generation, real server) and a count of the connections that
// use it (controls). The generation counts the slot's lives; the real
// server field also says whether the value is empty (0), live, or locked
// (templateLock: worker 0 is freeing the slot). The protocol:
//
//   - claim: a key word of 0 (never used) or templateTomb (freed) is taken
//     by compare-and-swap; a key word that already holds the key (a freed
//     value) is used as is. The claimer counts its connection in controls
//     first, then sets the value by compare-and-swap from the empty value
//     it read, generation included. Of two workers that race to make one
//     template, the loser finds the winner's value and adopts it.
//   - adopt: a worker counts its connection in controls (the pin), then
//     reads the value and the key again; only if both are unchanged does
//     it use the template, else it drops the pin and looks again.
//     Re-pointing a template at another server is, under the pin, a
//     compare-and-swap from the value read.
//   - free (worker 0's sweep, or a worker that finds no free slot in a
//     key's reach, see reclaim): a live template that has expired and controls
//     no connection is locked by compare-and-swap (value -> templateLock,
//     same generation); then controls is read again. If a worker pinned
//     it meanwhile, the value is put back and the template re-armed.
//     Otherwise the key becomes templateTomb and the value the empty value
//     of the next generation. An empty value under a live key (a claim
//     that lost its race) is freed the same way.
//
// Why no worker sees a torn or recycled template: the key word changes
// only from 0 or templateTomb (by claim) or while the value is locked (by
// free), and every free moves the value to a new generation, which it
// never leaves. So a compare-and-swap on the value that succeeds proves
// the slot was not freed since the value was read (no ABA: a recycled
// slot holding the same port, protocol and server differs in its
// generation), and the pin and the lock are ordered like Dekker's flags
// (each side writes its own word, then reads the other's): either the
// adopter sees the lock and retries, or worker 0 sees the pin and backs
// off. A connection's slot therefore holds its template for as long as
// the connection lives. The generation has 24 bits; a reader would have to
// stall through 16 million frees of one slot to be fooled.
//
// Freed slots keep the probe chains that run through them (a tombstone
// does not end a search, 0 does), and they serve any key, so a table with
// churning client networks keeps storing templates; only a reach (32
// slots from a key's home) full of live templates stores no more
// (templates_lost; the connections go on without persistence). Rare races
// (a slot freed between two workers' searches) can make two templates for
// one network; each is correct, one expires unused.

// templateSlot is one template, 32 bytes.
type templateSlot struct {
	key      atomic.Uint64 // client network << 32 | VIP; 0: never used; templateTomb: freed
	val      atomic.Uint64 // VIP port << 48 | protocol << 40 | generation << 16 | real-server id + 1
	expires  atomic.Int64  // on the table's clock (TemplateTable.offset)
	controls atomic.Int32  // connections using it (IPVS's n_control) and pins: it lives while any
	_        int32
}

const (
	templateSub   = uint64(0xffffff) << 40 // the VIP port and protocol in a value word
	templateGen   = uint64(0xffffff) << 16 // the slot's generation
	templateDest  = uint64(0xffff)         // the real-server id + 1 (MaxDests fits)
	templateLock  = templateDest           // the real-server field of a slot being freed
	templateTomb  = ^uint64(0)             // the key word of a freed slot (VIP 255.255.255.255)
	templateProbe = 32                     // slots examined from a key's home slot
)

// templateLive tells whether a value word names a real server.
func templateLive(v uint64) bool { d := v & templateDest; return d != 0 && d != templateLock }

// TemplateTable is the persistence template table all workers share.
type TemplateTable struct {
	slots []templateSlot
	mask  uint64
	seed  uint64
	epoch time.Time
	// persistent counts the templates naming each real server (the
	// DestPersistent gauge, published by worker 0).
	persistent [MaxDests]atomic.Int32
	sweep      int // worker 0's expiry cursor
	// used is set once any slot has held a template: until then the
	// sweep has nothing to look at (a table sized like the connection
	// table, 16M slots of 32 bytes, is half a gigabyte to read a second
	// for services without persistence).
	used atomic.Bool
}

// NewTemplates makes a table for about capacity templates (rounded up to
// a power of two, 1024 at least).
func NewTemplates(capacity int) (*TemplateTable, error) {
	if capacity <= 0 || capacity > 1<<26 {
		return nil, fmt.Errorf("template table of %d: want 1..67108864", capacity)
	}
	n := 1024
	for n < capacity {
		n <<= 1
	}
	t := &TemplateTable{slots: make([]templateSlot, n), mask: uint64(n - 1), epoch: time.Now()}
	var seed [8]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("template table: %w", err)
	}
	t.seed = binary.LittleEndian.Uint64(seed[:]) // keyed: a sender cannot pile its networks on one probe run
	return t, nil
}

// Cap is the number of slots.
func (t *TemplateTable) Cap() int { return len(t.slots) }

// templateKey packs a template's key word (never 0 nor templateTomb: a
// VIP is neither 0.0.0.0 nor 255.255.255.255) and the port and protocol
// half of its value word.
func templateKey(cnet, vip uint32, vport uint16, proto uint8) (key, sub uint64) {
	return uint64(cnet)<<32 | uint64(vip), uint64(vport)<<48 | uint64(proto)<<40
}

// home is a key's first slot: the keyed key through splitmix64's
// finalizer, whose low bits depend on every key bit (client networks
// differ only in their high bits: a plain multiply would give every /24
// of a VIP one home).
func (t *TemplateTable) home(key uint64) uint64 {
	z := key ^ t.seed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return (z ^ z>>31) & t.mask
}

// find looks a template up: its slot and value word when it is live, and
// else the first slot where it could be made and that slot's empty value
// (free -1: none within reach).
func (t *TemplateTable) find(key, sub uint64) (slot int, val uint64, free int, empty uint64) {
	free = -1
	i := t.home(key)
	for n := 0; n < templateProbe; n, i = n+1, (i+1)&t.mask {
		s := &t.slots[i]
		k := s.key.Load()
		if k != key && k != templateTomb && k != 0 {
			continue
		}
		v := s.val.Load()
		if k == key && templateLive(v) && v&templateSub == sub {
			return int(i), v, free, 0
		}
		if v&templateDest == 0 && free < 0 {
			free, empty = int(i), v
		}
		if k == 0 {
			break // nothing is made beyond a never-used slot
		}
	}
	return -1, 0, free, empty
}

// pin counts a connection on slot i's template (key, val) if the slot
// still holds it; the count keeps it from being freed.
func (t *TemplateTable) pin(i int, key, val uint64) bool {
	s := &t.slots[i]
	s.controls.Add(1)
	if s.val.Load() == val && s.key.Load() == key {
		return true
	}
	s.controls.Add(-1)
	return false
}

// unpin drops a count taken by pin or claim.
func (t *TemplateTable) unpin(i int) { t.slots[i].controls.Add(-1) }

// claim makes the template key -> val (port, protocol and server) in
// slot i, found free with the empty value empty, and pins it. It fails
// when another worker took or changed the slot first.
func (t *TemplateTable) claim(i int, key, empty, val uint64, expires int64) bool {
	s := &t.slots[i]
	if !t.used.Load() {
		t.used.Store(true) // before the slot holds anything the sweep should see
	}
	if k := s.key.Load(); k != key && (k != 0 && k != templateTomb || !s.key.CompareAndSwap(k, key)) {
		return false
	}
	s.controls.Add(1)
	if !s.val.CompareAndSwap(empty, val|empty&templateGen) {
		s.controls.Add(-1)
		return false
	}
	s.expires.Store(expires)
	t.persistent[uint32(val&templateDest)-1].Add(1)
	return true
}

// reclaim frees, for a worker that found no free slot for key, the first
// template in key's reach that has expired and controls no connection
// (worker 0's sweep would, within a second). It reports whether it did.
func (t *TemplateTable) reclaim(key uint64, now int64) bool {
	i := t.home(key)
	for n := 0; n < templateProbe; n, i = n+1, (i+1)&t.mask {
		s := &t.slots[i]
		v := s.val.Load()
		if !templateLive(v) || s.expires.Load() > now || s.controls.Load() > 0 {
			continue
		}
		if t.free(s, v) {
			t.persistent[uint32(v&templateDest)-1].Add(-1)
			return true
		}
	}
	return false
}

// offset turns a worker's clock (ns since its epoch) into the table's.
func (t *TemplateTable) offset(workerEpoch time.Time) int64 { return int64(workerEpoch.Sub(t.epoch)) }

// expire sweeps n slots from the cursor: an expired template that
// controls no connection is freed; one that does is re-armed for again
// (its service's persistence time). Run by worker 0 only.
func (t *TemplateTable) expire(now int64, n int, again func(key, val uint64) int64) {
	if !t.used.Load() {
		return
	}
	for ; n > 0; n-- {
		i := t.sweep
		t.sweep = (t.sweep + 1) & int(t.mask)
		s := &t.slots[i]
		k, v := s.key.Load(), s.val.Load()
		if k == 0 || k == templateTomb {
			continue
		}
		if templateLive(v) {
			if s.expires.Load() > now {
				continue
			}
			if s.controls.Load() > 0 {
				s.expires.Store(now + again(k, v))
				continue
			}
		} else if v&templateDest != 0 {
			continue // locked: another worker is freeing it
		}
		if t.free(s, v) && templateLive(v) {
			t.persistent[uint32(v&templateDest)-1].Add(-1)
		}
	}
}

// free frees slot s, found with value v (live or empty), unless a worker
// changed or pinned it meanwhile (see the protocol above).
func (t *TemplateTable) free(s *templateSlot, v uint64) bool {
	gen := v & templateGen
	if !s.val.CompareAndSwap(v, gen|templateLock) {
		return false
	}
	if templateLive(v) && s.controls.Load() > 0 {
		s.val.Store(v) // pinned after all: the next sweep re-arms it
		return false
	}
	s.key.Store(templateTomb)
	s.val.Store((gen + 1<<16) & templateGen)
	return true
}
