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
// workers share one fixed table, touched only when a persistent service
// gets a new connection and by worker 0's expiry sweep:
//
//   - a slot's key word (client network, VIP) is claimed once, by
//     compare-and-swap from zero, and never changes again;
//   - its value word (VIP port, protocol, real server) is set by
//     compare-and-swap from zero. Of two workers that race to make the
//     same template, the loser finds the winner's value and adopts its
//     server; re-pointing a template at another server (its own went
//     quiescent or away) is a compare-and-swap from the value read;
//   - an expired template's value goes back to zero, so the slot serves
//     the same client network and VIP again; key words are never freed
//     (a table that fills up stores no more templates, counted as
//     templates_lost, and the connections go on without persistence).
//
// Nothing blocks and nothing allocates.

// templateSlot is one template, 32 bytes.
type templateSlot struct {
	key      atomic.Uint64 // client network << 32 | VIP; 0: free
	val      atomic.Uint64 // VIP port << 48 | protocol << 40 | real-server id + 1; 0: none
	expires  atomic.Int64  // on the table's clock (TemplateTable.offset)
	controls atomic.Int32  // connections using it (IPVS's n_control): it lives while any do
	_        int32
}

const (
	templateSub   = uint64(0xffffff) << 40 // the VIP port and protocol in a value word
	templateDest  = uint64(1)<<40 - 1      // the real-server id + 1
	templateProbe = 32                     // slots examined from a key's home slot
)

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

// templateKey packs a template's key word (never 0: a VIP is not 0.0.0.0)
// and the port and protocol half of its value word.
func templateKey(cnet, vip uint32, vport uint16, proto uint8) (key, sub uint64) {
	return uint64(cnet)<<32 | uint64(vip), uint64(vport)<<48 | uint64(proto)<<40
}

func (t *TemplateTable) home(key uint64) uint64 {
	h := (key ^ t.seed) * 0x9E3779B97F4A7C15
	return (h ^ h>>29) & t.mask
}

// find looks a template up: its slot and value word when it exists, and
// else the first slot where it could be made (-1: none within reach).
func (t *TemplateTable) find(key, sub uint64) (slot int, val uint64, free int) {
	free = -1
	i := t.home(key)
	for n := 0; n < templateProbe; n, i = n+1, (i+1)&t.mask {
		s := &t.slots[i]
		switch k := s.key.Load(); k {
		case key:
			v := s.val.Load()
			if v != 0 && v&templateSub == sub {
				return int(i), v, free
			}
			if v == 0 && free < 0 {
				free = int(i)
			}
		case 0:
			if free < 0 {
				free = int(i)
			}
			return -1, 0, free // nothing is made beyond a free slot
		}
	}
	return -1, 0, free
}

// claim makes the template (key, sub) -> val in slot i, found free. It
// fails when another worker took the slot first.
func (t *TemplateTable) claim(i int, key, val uint64) bool {
	s := &t.slots[i]
	if k := s.key.Load(); k != key && !s.key.CompareAndSwap(0, key) {
		return false
	}
	return s.val.CompareAndSwap(0, val)
}

// offset turns a worker's clock (ns since its epoch) into the table's.
func (t *TemplateTable) offset(workerEpoch time.Time) int64 { return int64(workerEpoch.Sub(t.epoch)) }

// expire sweeps n slots from the cursor: an expired template that
// controls no connection is cleared; one that does is re-armed for again
// (its service's persistence time). Run by worker 0 only.
func (t *TemplateTable) expire(now int64, n int, again func(key, val uint64) int64) {
	for ; n > 0; n-- {
		s := &t.slots[t.sweep]
		t.sweep = (t.sweep + 1) & int(t.mask)
		v := s.val.Load()
		if v == 0 || s.expires.Load() > now {
			continue
		}
		if s.controls.Load() > 0 {
			s.expires.Store(now + again(s.key.Load(), v))
			continue
		}
		if s.val.CompareAndSwap(v, 0) {
			t.persistent[uint32(v&templateDest)-1].Add(-1)
		}
	}
}
