/*
 * dplb.h: the C side of dplb's DPDK bindings.
 *
 * Only small static inline helpers live here: wrappers for DPDK's inline
 * functions and macros that cgo cannot reach (rte_errno is a per-lcore TLS
 * macro, rte_mbuf's fields sit in anonymous unions), and functions that fuse
 * per-packet work into one call per burst. Go packages include this file with
 * `#cgo CFLAGS: -I${SRCDIR}/../../cgo`.
 */
#ifndef DPLB_H
#define DPLB_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <rte_config.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

/* rte_errno is a macro over a per-thread (TLS) variable: read it on the
 * OS thread that made the failed call. A goroutine may move between two
 * cgo calls, so Go callers hold the thread (runtime.LockOSThread) across
 * the call and this read. */
static inline int dplb_errno(void) { return rte_errno; }

/*
 * Byte offsets of the rte_mbuf fields that the Go side reads and writes
 * directly (trivial accessors are field reads, never cgo calls).
 */
enum {
	DPLB_MBUF_OFF_BUF_ADDR   = offsetof(struct rte_mbuf, buf_addr),
	DPLB_MBUF_OFF_DATA_OFF   = offsetof(struct rte_mbuf, data_off),
	DPLB_MBUF_OFF_NB_SEGS    = offsetof(struct rte_mbuf, nb_segs),
	DPLB_MBUF_OFF_PORT       = offsetof(struct rte_mbuf, port),
	DPLB_MBUF_OFF_OL_FLAGS   = offsetof(struct rte_mbuf, ol_flags),
	DPLB_MBUF_OFF_PKT_TYPE   = offsetof(struct rte_mbuf, packet_type),
	DPLB_MBUF_OFF_PKT_LEN    = offsetof(struct rte_mbuf, pkt_len),
	DPLB_MBUF_OFF_DATA_LEN   = offsetof(struct rte_mbuf, data_len),
	DPLB_MBUF_OFF_RSS        = offsetof(struct rte_mbuf, hash.rss),
	DPLB_MBUF_OFF_BUF_LEN    = offsetof(struct rte_mbuf, buf_len),
	DPLB_MBUF_OFF_NEXT       = offsetof(struct rte_mbuf, next),
	DPLB_MBUF_OFF_TX_OFFLOAD = offsetof(struct rte_mbuf, tx_offload),
	DPLB_MBUF_OFF_REFCNT     = offsetof(struct rte_mbuf, refcnt),
	DPLB_MBUF_OFF_VLAN_TCI   = offsetof(struct rte_mbuf, vlan_tci),
	DPLB_MBUF_OFF_VLAN_OUTER = offsetof(struct rte_mbuf, vlan_tci_outer),
};

/* tx_offload bit layout (rte_mbuf_core.h): l2_len:7, l3_len:9, l4_len:8. */
enum {
	DPLB_TXOFF_L2_SHIFT = 0,  DPLB_TXOFF_L2_BITS = 7,
	DPLB_TXOFF_L3_SHIFT = 7,  DPLB_TXOFF_L3_BITS = 9,
	DPLB_TXOFF_L4_SHIFT = 16, DPLB_TXOFF_L4_BITS = 8,
};

/* Inline DPDK functions, wrapped so cgo can call them. */
static inline struct rte_mbuf *dplb_pktmbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }
static inline void dplb_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
static inline uint16_t dplb_pktmbuf_headroom(const struct rte_mbuf *m) { return rte_pktmbuf_headroom(m); }
static inline uint16_t dplb_pktmbuf_tailroom(const struct rte_mbuf *m) { return rte_pktmbuf_tailroom(m); }

/*
 * The burst guard (dpdk/ethdev/burstguard.c). A driver may unmap a queue's
 * memory on its interrupt thread while a poller is inside a burst on that
 * queue (DPDK 22.11's memif does on the peer's disconnect: it clears its
 * "connected" flag, then munmaps the rings, with nothing in between that
 * waits for a burst already past the flag). Every burst is therefore
 * bracketed by its thread's guard sequence (odd while inside), and an
 * munmap on the interrupt thread waits until every burst that was in
 * progress has left; the driver's later bursts see the flag cleared.
 * Two plain stores per burst (membarrier(2) puts the barrier on the
 * interrupt thread's side), none per packet.
 */
struct dplb_guard_slot {
	uint64_t seq; /* odd while the owning thread is inside a burst */
	char pad[56]; /* one cache line per thread */
};
extern __thread struct dplb_guard_slot *dplb_guard_self;
extern int dplb_guard_asymmetric;
struct dplb_guard_slot *dplb_guard_register(void);

static inline struct dplb_guard_slot *dplb_guard_enter(void) {
	struct dplb_guard_slot *s = dplb_guard_self;
	if (__builtin_expect(s == NULL, 0))
		s = dplb_guard_register(); /* once per thread; NULL when out of slots */
	if (s == NULL)
		return NULL;
	/* The odd sequence must be visible before the driver reads its
	 * connected flag (the interrupt thread clears that flag, then reads
	 * the sequences). With membarrier(2) the interrupt thread's side
	 * forces that order on every thread, so a plain store will do;
	 * without it, a full barrier here. */
	if (__builtin_expect(dplb_guard_asymmetric, 1)) {
		__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	} else {
		__atomic_fetch_add(&s->seq, 1, __ATOMIC_SEQ_CST);
	}
	return s;
}

static inline void dplb_guard_leave(struct dplb_guard_slot *s) {
	if (s != NULL)
		__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
}

static inline uint16_t dplb_rx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n) {
	struct dplb_guard_slot *g = dplb_guard_enter();
	uint16_t got = rte_eth_rx_burst(port, q, pkts, n);
	dplb_guard_leave(g);
	return got;
}

/*
 * One receive call for every queue a worker polls: a cgo crossing per loop
 * iteration, not one per queue (an idle queue costs a crossing as much as
 * a busy one). Queue i's burst lands at pkts + i * burst and counts[i]
 * says how many; the result is the total. The arrays are C memory, passed
 * as integers so that cgo does not check them as Go pointers on every call.
 */
struct dplb_rxq {
	uint16_t port, queue;
};

static inline unsigned dplb_rx_queues(uintptr_t qs, unsigned n, uintptr_t pkts, uint16_t burst, uintptr_t counts) {
	const struct dplb_rxq *q = (const struct dplb_rxq *)qs;
	struct rte_mbuf **p = (struct rte_mbuf **)pkts;
	uint16_t *c = (uint16_t *)counts;
	unsigned total = 0;
	struct dplb_guard_slot *g = dplb_guard_enter();
	for (unsigned i = 0; i < n; i++) {
		c[i] = rte_eth_rx_burst(q[i].port, q[i].queue, p + (size_t)i * burst, burst);
		total += c[i];
	}
	dplb_guard_leave(g);
	return total;
}

/*
 * One transmit call for every queue a worker sends on (as dplb_rx_queues
 * receives): each queue with n > 0 hands its n packets to the driver and
 * records in sent how many the driver took; the caller still owns the
 * rest. A queue whose port is gone sends nothing.
 */
struct dplb_txq {
	uintptr_t pkts; /* struct rte_mbuf *[], C memory */
	uint16_t port, queue, n, sent;
};

static inline void dplb_tx_queues(uintptr_t qs, unsigned n) {
	struct dplb_txq *q = (struct dplb_txq *)qs;
	struct dplb_guard_slot *g = dplb_guard_enter();
	for (unsigned i = 0; i < n; i++) {
		q[i].sent = q[i].n == 0 ? 0 : rte_eth_tx_burst(q[i].port, q[i].queue, (struct rte_mbuf **)q[i].pkts, q[i].n);
	}
	dplb_guard_leave(g);
}

static inline uint16_t dplb_tx_burst(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n) {
	struct dplb_guard_slot *g = dplb_guard_enter();
	uint16_t sent = rte_eth_tx_burst(port, q, pkts, n);
	dplb_guard_leave(g);
	return sent;
}

/*
 * TX a burst and free what the driver did not take, in one call: the loop
 * never holds on to unsent packets (a full TX ring is a counted drop).
 */
static inline uint16_t dplb_tx_burst_or_free(uint16_t port, uint16_t q, struct rte_mbuf **pkts, uint16_t n) {
	uint16_t sent = dplb_tx_burst(port, q, pkts, n);
	if (sent < n)
		rte_pktmbuf_free_bulk(pkts + sent, n - sent);
	return sent;
}

static inline unsigned dplb_ring_sp_enqueue_burst(struct rte_ring *r, void **objs, unsigned n) {
	return rte_ring_sp_enqueue_burst(r, objs, n, NULL);
}
static inline unsigned dplb_ring_mp_enqueue_burst(struct rte_ring *r, void **objs, unsigned n) {
	return rte_ring_mp_enqueue_burst(r, objs, n, NULL);
}
static inline unsigned dplb_ring_sc_dequeue_burst(struct rte_ring *r, void **objs, unsigned n) {
	return rte_ring_sc_dequeue_burst(r, objs, n, NULL);
}
static inline unsigned dplb_ring_mc_dequeue_burst(struct rte_ring *r, void **objs, unsigned n) {
	return rte_ring_mc_dequeue_burst(r, objs, n, NULL);
}
static inline unsigned dplb_ring_count(const struct rte_ring *r) { return rte_ring_count(r); }
static inline unsigned dplb_ring_free_count(const struct rte_ring *r) { return rte_ring_free_count(r); }

/* rte_eth_link has bitfields, which cgo cannot read. */
struct dplb_link { uint32_t speed; int up; int full_duplex; int autoneg; };
static inline int dplb_link_get(uint16_t port, struct dplb_link *out) {
	struct rte_eth_link l;
	int ret = rte_eth_link_get_nowait(port, &l);
	if (ret == 0) {
		out->speed = l.link_speed;
		out->up = l.link_status;
		out->full_duplex = l.link_duplex;
		out->autoneg = l.link_autoneg;
	}
	return ret;
}

/* Port configuration flattened for the Go side. */
static inline int dplb_eth_configure(uint16_t port, uint16_t nrx, uint16_t ntx,
		uint64_t rss_hf, uint8_t *rss_key, uint8_t rss_key_len,
		uint64_t rx_offloads, uint64_t tx_offloads, uint32_t mtu) {
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (rss_hf != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
		/* NULL key: the driver's default Toeplitz key. */
		conf.rx_adv_conf.rss_conf.rss_key = rss_key;
		conf.rx_adv_conf.rss_conf.rss_key_len = rss_key_len;
	}
	conf.rxmode.offloads = rx_offloads;
	conf.rxmode.mtu = mtu;
	conf.txmode.offloads = tx_offloads;
	return rte_eth_dev_configure(port, nrx, ntx, &conf);
}

static inline int dplb_eth_rx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc,
		unsigned socket, struct rte_mempool *mp) {
	return rte_eth_rx_queue_setup(port, q, nb_desc, socket, NULL, mp);
}

static inline int dplb_eth_tx_queue_setup(uint16_t port, uint16_t q, uint16_t nb_desc,
		unsigned socket, uint64_t offloads) {
	struct rte_eth_dev_info info;
	int ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return ret;
	struct rte_eth_txconf txconf = info.default_txconf;
	txconf.offloads = offloads;
	return rte_eth_tx_queue_setup(port, q, nb_desc, socket, &txconf);
}

#endif /* DPLB_H */
