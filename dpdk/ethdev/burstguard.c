/*
 * The burst guard: see cgo/dplb.h and guard.go.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <rte_interrupts.h>

#include "dplb.h"

#define DPLB_GUARD_SLOTS 256

static struct dplb_guard_slot dplb_guard_slots[DPLB_GUARD_SLOTS] __attribute__((aligned(64)));
static unsigned dplb_guard_used;
/* How many unmappings waited for bursts (guard.go's GuardedUnmaps). */
uint64_t dplb_guard_waits;
__thread struct dplb_guard_slot *dplb_guard_self;
/* Whether the process is registered for expedited membarrier(2), so that
 * pollers need no barrier of their own (set once, before any slot). */
int dplb_guard_asymmetric;
static int dplb_guard_asymmetric_tried;

/* dplb_guard_register gives the calling thread its slot (threads that
 * poll are few and live as long as the process). */
struct dplb_guard_slot *dplb_guard_register(void) {
	if (!__atomic_exchange_n(&dplb_guard_asymmetric_tried, 1, __ATOMIC_ACQ_REL)) {
		if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
			__atomic_store_n(&dplb_guard_asymmetric, 1, __ATOMIC_RELEASE);
	}
	unsigned i = __atomic_fetch_add(&dplb_guard_used, 1, __ATOMIC_ACQ_REL);
	if (i >= DPLB_GUARD_SLOTS)
		return NULL; /* unguarded: more polling threads than any lbd has */
	dplb_guard_self = &dplb_guard_slots[i];
	return dplb_guard_self;
}

static uint64_t dplb_guard_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* dplb_guard_wait returns once every burst that was in progress when it
 * was called has ended (or after a second: a thread stopped inside a
 * burst, by a debugger say, must not hang the interrupt thread forever). */
static void dplb_guard_wait(void) {
	/* Pairs with dplb_guard_enter: after this, every poller's odd
	 * sequence is visible, or its burst will see the cleared flag. */
	if (__atomic_load_n(&dplb_guard_asymmetric, __ATOMIC_ACQUIRE))
		syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	unsigned n = __atomic_load_n(&dplb_guard_used, __ATOMIC_ACQUIRE);
	if (n > DPLB_GUARD_SLOTS)
		n = DPLB_GUARD_SLOTS;
	uint64_t deadline = 0;
	for (unsigned i = 0; i < n; i++) {
		struct dplb_guard_slot *s = &dplb_guard_slots[i];
		uint64_t v = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		if ((v & 1) == 0 || s == dplb_guard_self)
			continue;
		if (deadline == 0)
			deadline = dplb_guard_now_ns() + 1000000000u;
		/* The poller may be off its CPU: yield rather than spin. */
		while (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == v && dplb_guard_now_ns() < deadline)
			sched_yield();
	}
	__atomic_fetch_add(&dplb_guard_waits, 1, __ATOMIC_RELAXED);
}

/*
 * munmap interposes libc's for the drivers DPDK loads (the executable
 * exports it, guard.go): on EAL's interrupt thread, where drivers handle
 * a peer's disconnect, it first waits out the bursts in progress. Every
 * other caller goes straight to the system call.
 */
int munmap(void *addr, size_t len) {
	if (rte_thread_is_intr())
		dplb_guard_wait();
	return (int)syscall(SYS_munmap, addr, len);
}
