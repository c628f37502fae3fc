package lcore

import (
	"sync/atomic"
)

// Expected connections (the FTP helper's data connections). A control
// connection announces a data connection before its first packet: the
// server's 227/229 reply (passive: the client will connect from any port
// to VIP:P) or the client's PORT/EPRT (active: the server will connect
// from any port to client:P). The data connection's owner is the worker
// of its client endpoint, which the announcement does not always name
// (passive: the client's port is unknown), so expectations live in one
// table all workers share, without locks, like the persistence templates:
// the control connection's owner adds one, the data connection's owner
// takes it (once) with its first SYN.
//
// A slot's state word is generation<<2 | state. A writer takes a free
// slot (or an expired one) by compare-and-swap to busy, stores the fields,
// then marks it ready; a taker reads the fields of a ready slot and claims
// them by one compare-and-swap from the state it read to free at the next
// generation, so fields rewritten meanwhile never pass for the ones read.

const (
	expectFree  = 0
	expectBusy  = 1
	expectReady = 2

	expectSlots  = 4096 // shared by all workers
	expectReach  = 8    // slots searched from a key's home
	expectExpiry = 60   // seconds an expectation waits for its connection
)

// expectation is a data connection announced on a control connection.
// Its key is the first packet's source, destination and destination port
// (the source port is not known): client -> VIP:P (passive) or RIP ->
// client:P (active).
type expectation struct {
	src, dst uint32
	dport    uint16
	vip      uint32 // the control connection's VIP and virtual port (its service)
	vport    uint16
	rip      uint32 // the real server the data connection goes to
	dest     uint32 // its dest id in the service
	expires  int64  // on the table's clock
}

// passive reports whether the client opens the data connection (to the VIP).
func (x *expectation) passive() bool { return x.dst == x.vip }

type expectSlot struct {
	state   atomic.Uint64
	addrs   atomic.Uint64 // src<<32 | dst
	ports   atomic.Uint64 // dport<<48 | vport<<32 | rip
	vipDest atomic.Uint64 // vip<<32 | dest
	expires atomic.Int64
}

// ExpectTable is the shared table of expected connections.
type ExpectTable struct {
	slots [expectSlots]expectSlot
}

// NewExpectTable makes an empty table.
func NewExpectTable() *ExpectTable { return &ExpectTable{} }

func expectHome(src, dst uint32, dport uint16) int {
	return int(endpointHash(src^dst, dport) % expectSlots)
}

// add stores x, in place of a live expectation with its key (a command
// repeated, a reply retransmitted); false when its reach is full of live
// expectations. Times are on the persistence templates' clock, which all
// workers share.
func (t *ExpectTable) add(x *expectation, now int64) bool {
	home := expectHome(x.src, x.dst, x.dport)
	for pass := 0; pass < 2; pass++ {
		for i := 0; i < expectReach; i++ {
			if t.store(&t.slots[(home+i)%expectSlots], x, now, pass == 0) {
				return true
			}
		}
	}
	return false
}

// store writes x in s if s is free or expired (second pass) or holds x's
// key (first pass), and reports whether it did.
func (t *ExpectTable) store(s *expectSlot, x *expectation, now int64, sameOnly bool) bool {
	addrs := uint64(x.src)<<32 | uint64(x.dst)
	st := s.state.Load()
	gen := st >> 2
	switch st & 3 {
	case expectFree:
		if sameOnly || !s.state.CompareAndSwap(st, gen<<2|expectBusy) {
			return false
		}
	case expectReady:
		same := s.addrs.Load() == addrs && uint16(s.ports.Load()>>48) == x.dport
		if sameOnly && !same || !sameOnly && s.expires.Load() > now {
			return false
		}
		if !s.state.CompareAndSwap(st, (gen+1)<<2|expectBusy) {
			return false
		}
		gen++
	default:
		return false
	}
	s.addrs.Store(addrs)
	s.ports.Store(uint64(x.dport)<<48 | uint64(x.vport)<<32 | uint64(x.rip))
	s.vipDest.Store(uint64(x.vip)<<32 | uint64(x.dest))
	s.expires.Store(x.expires)
	s.state.Store(gen<<2 | expectReady)
	return true
}

// take finds and removes the live expectation for a first packet src ->
// dst:dport into x.
func (t *ExpectTable) take(src, dst uint32, dport uint16, now int64, x *expectation) bool {
	home := expectHome(src, dst, dport)
	addrs := uint64(src)<<32 | uint64(dst)
	for i := 0; i < expectReach; i++ {
		s := &t.slots[(home+i)%expectSlots]
		st := s.state.Load()
		if st&3 != expectReady || s.addrs.Load() != addrs {
			continue
		}
		ports, vd, exp := s.ports.Load(), s.vipDest.Load(), s.expires.Load()
		if uint16(ports>>48) != dport || exp <= now {
			continue
		}
		if !s.state.CompareAndSwap(st, (st>>2+1)<<2|expectFree) {
			continue // taken or replaced meanwhile
		}
		*x = expectation{src: src, dst: dst, dport: dport, vport: uint16(ports >> 32), rip: uint32(ports),
			vip: uint32(vd >> 32), dest: uint32(vd), expires: exp}
		return true
	}
	return false
}
