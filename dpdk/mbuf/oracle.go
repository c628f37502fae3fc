package mbuf

/*
#include "dplb.h"
static inline void dplb_test_refcnt_update(struct rte_mbuf *m, int16_t v) { rte_mbuf_refcnt_update(m, v); }
static inline void dplb_test_lens(const struct rte_mbuf *m, int *out) {
	out[0] = m->l2_len; out[1] = m->l3_len; out[2] = m->l4_len;
}
*/
import "C"

// C-side reads of the fields the Go accessors compute themselves; tests use
// them as an oracle (cgo cannot be used in _test.go files).

func cL2L3L4(m *Mbuf) [3]int {
	var out [3]C.int
	C.dplb_test_lens(m.c(), &out[0])
	return [3]int{int(out[0]), int(out[1]), int(out[2])}
}

func cHeadroom(m *Mbuf) int { return int(C.dplb_pktmbuf_headroom(m.c())) }
func cTailroom(m *Mbuf) int { return int(C.dplb_pktmbuf_tailroom(m.c())) }

func cRefcntUpdate(m *Mbuf, v int) { C.dplb_test_refcnt_update(m.c(), C.int16_t(v)) }
