package ethdev

/*
#include <stdlib.h>
#include "dplb.h"
*/
import "C"

import (
	"unsafe"

	"github.com/dplb/dplb/dpdk/mbuf"
)

// RxQueue names one receive queue of a port.
type RxQueue struct {
	Port  Port
	Queue uint16
}

// RxSet is the receive queues one poller serves, received from by one cgo
// call per poll (Poll) instead of one per queue. Its arrays are C memory.
type RxSet struct {
	qs     unsafe.Pointer // C array of struct dplb_rxq
	counts unsafe.Pointer // C array of uint16_t, one per queue
	pkts   *mbuf.Array    // len(queues) bursts of burst packets
	n      int
	burst  int
	// Count[i] is how many packets the last Poll took from queue i.
	Count []uint16
}

// NewRxSet prepares to receive up to burst packets per poll from each of
// queues. Free releases it.
func NewRxSet(queues []RxQueue, burst int) *RxSet {
	n := max(len(queues), 1)
	s := &RxSet{
		qs:     C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_dplb_rxq{}))),
		counts: C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.uint16_t(0)))),
		pkts:   mbuf.NewArray(n * burst),
		n:      len(queues),
		burst:  burst,
	}
	qs := unsafe.Slice((*C.struct_dplb_rxq)(s.qs), n)
	for i, q := range queues {
		qs[i].port, qs[i].queue = C.uint16_t(q.Port), C.uint16_t(q.Queue)
	}
	s.Count = unsafe.Slice((*uint16)(s.counts), n)[:len(queues)]
	return s
}

// Poll receives a burst from every queue and returns the total; Burst(i)
// holds queue i's packets, which the caller now owns.
func (s *RxSet) Poll() int {
	if s.n == 0 {
		return 0
	}
	return int(C.dplb_rx_queues(C.uintptr_t(uintptr(s.qs)), C.unsigned(s.n),
		C.uintptr_t(uintptr(unsafe.Pointer(&s.pkts.Pkt[0]))), C.uint16_t(s.burst), C.uintptr_t(uintptr(s.counts))))
}

// Burst is what the last Poll took from queue i.
func (s *RxSet) Burst(i int) []*mbuf.Mbuf {
	return s.pkts.Pkt[i*s.burst : i*s.burst+int(s.Count[i])]
}

// Free releases the set's arrays (not packets in them).
func (s *RxSet) Free() {
	if s.qs == nil {
		return
	}
	C.free(s.qs)
	C.free(s.counts)
	s.pkts.Free()
	s.qs, s.counts, s.Count = nil, nil, nil
}

// TxQueue names one transmit queue of a port and the C array (an
// mbuf.Array's) its packets wait in.
type TxQueue struct {
	Port  Port
	Queue uint16
	Pkts  []*mbuf.Mbuf
}

// TxSet is the transmit queues one poller sends on, flushed by one cgo
// call (Send) instead of one per queue.
type TxSet struct {
	qs []C.struct_dplb_txq // C memory
	p  unsafe.Pointer
}

// NewTxSet prepares to send on queues; each queue's Pkts must be C memory
// that outlives the set. Free releases it.
func NewTxSet(queues []TxQueue) *TxSet {
	n := max(len(queues), 1)
	s := &TxSet{p: C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_dplb_txq{})))}
	s.qs = unsafe.Slice((*C.struct_dplb_txq)(s.p), n)[:len(queues)]
	for i, q := range queues {
		s.qs[i].port, s.qs[i].queue = C.uint16_t(q.Port), C.uint16_t(q.Queue)
		if len(q.Pkts) > 0 {
			s.qs[i].pkts = C.uintptr_t(uintptr(unsafe.Pointer(&q.Pkts[0])))
		}
	}
	return s
}

// SetCount says how many packets at the front of queue i's array the next
// Send hands to the driver (0: none).
func (s *TxSet) SetCount(i, n int) { s.qs[i].n = C.uint16_t(n) }

// Send hands every queue's counted packets to the driver in one call.
func (s *TxSet) Send() {
	if len(s.qs) > 0 {
		C.dplb_tx_queues(C.uintptr_t(uintptr(s.p)), C.unsigned(len(s.qs)))
	}
}

// Sent is how many of queue i's packets the last Send's driver took; the
// caller still owns the rest.
func (s *TxSet) Sent(i int) int { return int(s.qs[i].sent) }

// Free releases the set (not the queues' arrays or packets).
func (s *TxSet) Free() {
	if s.p != nil {
		C.free(s.p)
		s.p, s.qs = nil, nil
	}
}
