// Package mbuf binds DPDK's packet buffers (struct rte_mbuf).
//
// Trivial accessors read and write the mbuf's fields directly from Go
// through offsets computed by the C compiler (cgo/dplb.h), so the
// per-packet path makes no cgo call. Only single-segment packets are handled
// by the data accessors; the dataplane receives with scatter off.
package mbuf

/*
#include "dplb.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/dplb/dplb/dpdk/internal/rteerr"
	"github.com/dplb/dplb/dpdk/mempool"
)

// Mbuf is a packet buffer (struct rte_mbuf).
type Mbuf C.struct_rte_mbuf

func (m *Mbuf) c() *C.struct_rte_mbuf { return (*C.struct_rte_mbuf)(unsafe.Pointer(m)) }

func cpool(mp *mempool.Mempool) *C.struct_rte_mempool {
	return (*C.struct_rte_mempool)(unsafe.Pointer(mp))
}

const (
	offBufAddr   = uintptr(C.DPLB_MBUF_OFF_BUF_ADDR)
	offDataOff   = uintptr(C.DPLB_MBUF_OFF_DATA_OFF)
	offNbSegs    = uintptr(C.DPLB_MBUF_OFF_NB_SEGS)
	offPort      = uintptr(C.DPLB_MBUF_OFF_PORT)
	offOlFlags   = uintptr(C.DPLB_MBUF_OFF_OL_FLAGS)
	offPktType   = uintptr(C.DPLB_MBUF_OFF_PKT_TYPE)
	offPktLen    = uintptr(C.DPLB_MBUF_OFF_PKT_LEN)
	offDataLen   = uintptr(C.DPLB_MBUF_OFF_DATA_LEN)
	offRSS       = uintptr(C.DPLB_MBUF_OFF_RSS)
	offBufLen    = uintptr(C.DPLB_MBUF_OFF_BUF_LEN)
	offTxOffload = uintptr(C.DPLB_MBUF_OFF_TX_OFFLOAD)
	offNext      = uintptr(C.DPLB_MBUF_OFF_NEXT)
	offRefcnt    = uintptr(C.DPLB_MBUF_OFF_REFCNT)
	offVlanTCI   = uintptr(C.DPLB_MBUF_OFF_VLAN_TCI)
	offVlanOuter = uintptr(C.DPLB_MBUF_OFF_VLAN_OUTER)

	pktmbufHeadroom = C.RTE_PKTMBUF_HEADROOM
	portInvalid     = uint16(C.RTE_MBUF_PORT_INVALID)
	notDirect       = uint64(C.RTE_MBUF_F_INDIRECT | C.RTE_MBUF_F_EXTERNAL)

	txL2Shift, txL2Mask = C.DPLB_TXOFF_L2_SHIFT, 1<<C.DPLB_TXOFF_L2_BITS - 1
	txL3Shift, txL3Mask = C.DPLB_TXOFF_L3_SHIFT, 1<<C.DPLB_TXOFF_L3_BITS - 1
	txL4Shift, txL4Mask = C.DPLB_TXOFF_L4_SHIFT, 1<<C.DPLB_TXOFF_L4_BITS - 1
)

// Offload flags (ol_flags) the dataplane uses.
const (
	RxIPCksumBad  = uint64(C.RTE_MBUF_F_RX_IP_CKSUM_BAD)
	RxIPCksumGood = uint64(C.RTE_MBUF_F_RX_IP_CKSUM_GOOD)
	RxL4CksumBad  = uint64(C.RTE_MBUF_F_RX_L4_CKSUM_BAD)
	RxL4CksumGood = uint64(C.RTE_MBUF_F_RX_L4_CKSUM_GOOD)
	RxRSSHash     = uint64(C.RTE_MBUF_F_RX_RSS_HASH)
	TxIPv4        = uint64(C.RTE_MBUF_F_TX_IPV4)
	TxIPCksum     = uint64(C.RTE_MBUF_F_TX_IP_CKSUM)
	TxTCPCksum    = uint64(C.RTE_MBUF_F_TX_TCP_CKSUM)
	TxUDPCksum    = uint64(C.RTE_MBUF_F_TX_UDP_CKSUM)
)

// ErrNoRoom is returned when head- or tailroom does not suffice.
var ErrNoRoom = errors.New("mbuf: not enough room")

func (m *Mbuf) at(off uintptr) unsafe.Pointer { return unsafe.Add(unsafe.Pointer(m), off) }

func (m *Mbuf) dataOff() uint16         { return *(*uint16)(m.at(offDataOff)) }
func (m *Mbuf) setDataOff(v uint16)     { *(*uint16)(m.at(offDataOff)) = v }
func (m *Mbuf) bufAddr() unsafe.Pointer { return *(*unsafe.Pointer)(m.at(offBufAddr)) }

// Data is the packet's first segment as a byte slice over the mbuf's own
// memory (no copy). It is valid until the mbuf is freed or sent.
func (m *Mbuf) Data() []byte {
	return unsafe.Slice((*byte)(unsafe.Add(m.bufAddr(), m.dataOff())), m.DataLen())
}

// DataLen is the first segment's length.
func (m *Mbuf) DataLen() int { return int(*(*uint16)(m.at(offDataLen))) }

// PktLen is the whole packet's length.
func (m *Mbuf) PktLen() int { return int(*(*uint32)(m.at(offPktLen))) }

// SetLen sets a single-segment packet's length (data_len and pkt_len).
func (m *Mbuf) SetLen(n int) error {
	if n < 0 || n > m.DataLen()+m.Tailroom() {
		return ErrNoRoom
	}
	*(*uint16)(m.at(offDataLen)) = uint16(n)
	*(*uint32)(m.at(offPktLen)) = uint32(n)
	return nil
}

// Recycle readies a packet that was received, and is done with, to
// carry a new frame, as rte_pktmbuf_reset leaves a fresh one (empty, the
// default headroom, no flags), without a cgo call: a generator that
// turns what it receives into what it sends next saves a free and an
// allocation per packet. It reports false, and changes nothing, for an
// mbuf that is not a lone direct segment held once (chained, shared,
// indirect or external): free that one instead.
func (m *Mbuf) Recycle() bool {
	if m.NbSegs() != 1 || *(*unsafe.Pointer)(m.at(offNext)) != nil ||
		*(*uint16)(m.at(offRefcnt)) != 1 || m.OlFlags()&notDirect != 0 {
		return false
	}
	m.setDataOff(uint16(min(pktmbufHeadroom, int(*(*uint16)(m.at(offBufLen))))))
	*(*uint16)(m.at(offDataLen)) = 0
	*(*uint32)(m.at(offPktLen)) = 0
	m.SetOlFlags(0)
	m.setTxOffload(0)
	*(*uint32)(m.at(offPktType)) = 0
	*(*uint16)(m.at(offVlanTCI)) = 0
	*(*uint16)(m.at(offVlanOuter)) = 0
	m.SetPort(portInvalid)
	return true
}

// NbSegs is the number of segments.
func (m *Mbuf) NbSegs() int { return int(*(*uint16)(m.at(offNbSegs))) }

// Port is the input port.
func (m *Mbuf) Port() uint16 { return *(*uint16)(m.at(offPort)) }

// SetPort overwrites the input port field (the dataplane reuses it to tag
// a packet it hands to another lcore).
func (m *Mbuf) SetPort(p uint16) { *(*uint16)(m.at(offPort)) = p }

// Headroom is the free space before the data.
func (m *Mbuf) Headroom() int { return int(m.dataOff()) }

// Tailroom is the free space after the first segment's data.
func (m *Mbuf) Tailroom() int {
	return int(*(*uint16)(m.at(offBufLen))) - int(m.dataOff()) - m.DataLen()
}

// Prepend grows the packet at the front by n bytes and returns the new
// front (e.g. for an outer header).
func (m *Mbuf) Prepend(n int) ([]byte, error) {
	if n < 0 || n > m.Headroom() {
		return nil, ErrNoRoom
	}
	m.setDataOff(m.dataOff() - uint16(n))
	*(*uint16)(m.at(offDataLen)) += uint16(n)
	*(*uint32)(m.at(offPktLen)) += uint32(n)
	return m.Data()[:n], nil
}

// Adj removes n bytes from the front of the packet.
func (m *Mbuf) Adj(n int) error {
	if n < 0 || n > m.DataLen() {
		return ErrNoRoom
	}
	m.setDataOff(m.dataOff() + uint16(n))
	*(*uint16)(m.at(offDataLen)) -= uint16(n)
	*(*uint32)(m.at(offPktLen)) -= uint32(n)
	return nil
}

// Append grows the packet at the end by n bytes and returns them.
func (m *Mbuf) Append(n int) ([]byte, error) {
	if n < 0 || n > m.Tailroom() {
		return nil, ErrNoRoom
	}
	old := m.DataLen()
	*(*uint16)(m.at(offDataLen)) += uint16(n)
	*(*uint32)(m.at(offPktLen)) += uint32(n)
	return m.Data()[old:], nil
}

// OlFlags are the offload flags (RX results, TX requests).
func (m *Mbuf) OlFlags() uint64 { return *(*uint64)(m.at(offOlFlags)) }

// SetOlFlags replaces the offload flags.
func (m *Mbuf) SetOlFlags(f uint64) { *(*uint64)(m.at(offOlFlags)) = f }

// PacketType is the driver's packet type classification (RTE_PTYPE_*).
func (m *Mbuf) PacketType() uint32 { return *(*uint32)(m.at(offPktType)) }

// RSSHash is the NIC's RSS hash; meaningful when OlFlags has RxRSSHash.
func (m *Mbuf) RSSHash() uint32 { return *(*uint32)(m.at(offRSS)) }

func (m *Mbuf) txOffload() uint64     { return *(*uint64)(m.at(offTxOffload)) }
func (m *Mbuf) setTxOffload(v uint64) { *(*uint64)(m.at(offTxOffload)) = v }

// L2Len, L3Len and L4Len are the header lengths the NIC needs for TX offloads.
func (m *Mbuf) L2Len() int { return int(m.txOffload() >> txL2Shift & txL2Mask) }
func (m *Mbuf) L3Len() int { return int(m.txOffload() >> txL3Shift & txL3Mask) }
func (m *Mbuf) L4Len() int { return int(m.txOffload() >> txL4Shift & txL4Mask) }

// SetHeaderLens sets l2_len, l3_len and l4_len in one write.
func (m *Mbuf) SetHeaderLens(l2, l3, l4 int) {
	v := m.txOffload() &^ (txL2Mask<<txL2Shift | txL3Mask<<txL3Shift | txL4Mask<<txL4Shift)
	v |= uint64(l2)&txL2Mask<<txL2Shift | uint64(l3)&txL3Mask<<txL3Shift | uint64(l4)&txL4Mask<<txL4Shift
	m.setTxOffload(v)
}

// Alloc takes one mbuf from a pool (a cgo call: not for the per-packet path).
func Alloc(mp *mempool.Mempool) (*Mbuf, error) {
	m := C.dplb_pktmbuf_alloc(cpool(mp))
	if m == nil {
		return nil, rteerr.FromErrno("rte_pktmbuf_alloc", int(C.ENOMEM))
	}
	return (*Mbuf)(unsafe.Pointer(m)), nil
}

// Free returns the mbuf (all its segments) to its pool.
func (m *Mbuf) Free() { C.dplb_pktmbuf_free(m.c()) }

// FreeBulk frees a burst of mbufs in one call. pkts should live in C
// memory (an Array), so cgo does not scan it.
func FreeBulk(pkts []*Mbuf) {
	if len(pkts) == 0 {
		return
	}
	C.rte_pktmbuf_free_bulk((**C.struct_rte_mbuf)(unsafe.Pointer(&pkts[0])), C.uint(len(pkts)))
}

// Array is a burst array of mbuf pointers in C memory. Passing a Go-allocated
// array to C makes cgo scan it on every call; C memory is not checked.
type Array struct {
	p   unsafe.Pointer
	Pkt []*Mbuf // the whole array, len == capacity
}

// NewArray allocates an array of n mbuf pointers with malloc.
func NewArray(n int) *Array {
	if n <= 0 {
		n = 1
	}
	p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(uintptr(0))))
	return &Array{p: p, Pkt: unsafe.Slice((**Mbuf)(p), n)}
}

// Free releases the array itself (not the mbufs in it).
func (a *Array) Free() {
	if a.p != nil {
		C.free(a.p)
		a.p, a.Pkt = nil, nil
	}
}

// FromPointer converts a C pointer taken from another binding (ring, ethdev).
func FromPointer(p unsafe.Pointer) *Mbuf { return (*Mbuf)(p) }

// Pointer is the mbuf as a C pointer, for rings.
func (m *Mbuf) Pointer() unsafe.Pointer { return unsafe.Pointer(m) }
