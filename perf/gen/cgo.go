package gen

/*
#cgo pkg-config: libdpdk
#include <rte_mbuf.h>

static inline int lbgen_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **m, unsigned n)
{
	return rte_pktmbuf_alloc_bulk(mp, m, n);
}
*/
import "C"

import (
	"unsafe"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
)

// allocBulk fills pkts (C memory: an mbuf.Array) with fresh mbufs from mp
// in one cgo call; all or nothing.
func allocBulk(mp *mempool.Mempool, pkts []*mbuf.Mbuf) bool {
	if len(pkts) == 0 {
		return true
	}
	return C.lbgen_alloc_bulk((*C.struct_rte_mempool)(unsafe.Pointer(mp)),
		(**C.struct_rte_mbuf)(unsafe.Pointer(&pkts[0])), C.uint(len(pkts))) == 0
}
