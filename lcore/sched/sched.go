// Package sched holds the connection schedulers of LVS, each in its own
// file, behind one interface and a registry of names (as ipvsadm's -s):
// rr wrr lc wlc sed nq lblc lblcr dh sh mh fo ovf twos, with the semantics of
// IPVS's net/netfilter/ipvs/ip_vs_<name>.c (each file says where it departs
// from them). Schedule allocates nothing.
//
// Every scheduler treats a dest as available when its weight is positive
// (0 = quiescent: no new connections, existing ones continue) and it is not
// overloaded by its -x/-y thresholds: overloaded from the moment its total
// connections (active + inactive) reach Upper until they drop below Lower,
// or below 3/4 of Upper when Lower is 0, as IPVS's IP_VS_DEST_F_OVERLOAD.
//
// A scheduler instance belongs to one lcore: each worker keeps its own
// state, so schedulers need no locks. What that means per algorithm:
//
//   - rr, wrr: the cursor (and wrr's current weight) is per lcore, so each
//     lcore walks its own sequence. Across the machine every server still
//     gets its share (1:1 for rr, weight-proportional for wrr), but two
//     consecutive connections on different lcores may go to the same
//     server, and the interleaving is per lcore.
//   - lc, wlc, sed, nq, fo, ovf, twos: Counts are the lcore's own
//     connection counts. RSS spreads flows evenly over the lcores, so each
//     lcore's counts are about the machine's divided by the number of
//     lcores, and comparing them picks about what global counts would.
//     ovf compares active connections to the weight, so with L lcores a
//     server takes up to about L*weight before overflowing; twos draws from
//     a per-lcore random source.
//   - dh, sh, mh: stateless tables built from the same dests and a fixed
//     hash, identical on every lcore: a flow gets the same server whichever
//     lcore sees it (only the threshold state, from the lcore's counts,
//     can differ).
//   - lblc, lblcr: the destination-address tables are per lcore, so one
//     address may be mapped to different servers on different lcores. RSS
//     over the 4-tuple sends one address to every lcore, so locality is
//     diluted by up to the number of lcores; an RSS key on the
//     destination address alone would keep it.
package sched

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// Dest is a real server as a scheduler sees it.
type Dest struct {
	ID     uint32    // stable id of the (service, server) pair; indexes counters
	Addr   uint32    // IPv4 address, big-endian value of the 4 bytes (0 for an IPv6 server)
	Addr6  hdr.Addr6 // an IPv6 server's address
	Port   uint16
	Weight int32 // 0 = quiescent: no new connections
	Fwd    fwd.Method
	Upper  uint32 // no new connections at or above this many (ipvsadm -x); 0 = no limit
	Lower  uint32 // ... until below this many (ipvsadm -y); 0 = 3/4 of Upper
}

// Flow is what a scheduler may look at to choose.
type Flow struct {
	SrcIP   uint32
	DstIP   uint32
	SrcPort uint16
	DstPort uint16
	Proto   uint8
	Now     int64 // monotonic nanoseconds, for schedulers whose state expires
}

// Counts gives a scheduler the live connection counts of the real servers,
// by Dest.ID: active (ESTABLISHED) and inactive (other states), as ipvsadm
// shows them.
type Counts interface {
	Active(id uint32) uint32
	Inactive(id uint32) uint32
}

// Scheduler chooses a real server for a new connection.
type Scheduler interface {
	// Schedule returns the index of the chosen Dest, or -1 when none can
	// take the connection. It must not allocate.
	Schedule(f *Flow, c Counts) int
}

// Foresight is a Scheduler that can tell, changing nothing, which dest it
// would choose k picks from now if nothing else changed meanwhile. It is
// a hint for the lookup stage, which warms the index cells a new
// connection to that server will probe; a wrong answer costs a wasted
// prefetch, never a different choice. ok is false when it cannot tell.
type Foresight interface {
	Ahead(k int) (idx int, ok bool)
}

// Flags are the scheduler flags of ipvsadm -b.
type Flags uint8

const (
	// FlagFallback: sh-fallback / mh-fallback, choose another server when
	// the hashed one is unavailable.
	FlagFallback Flags = 1 << iota
	// FlagPort: sh-port / mh-port, hash the source port too.
	FlagPort
)

// Options configure a scheduler instance.
type Options struct {
	Flags       Flags
	MHTableSize int // mh's Maglev table size, a prime; 0 = 65537
}

// Factory makes a scheduler over a fixed list of real servers.
type Factory func(dests []Dest, o Options) (Scheduler, error)

// registry maps scheduler names to factories; it is fixed at build time.
var registry = map[string]Factory{
	"dh":    newDestHashing,
	"fo":    newFailover,
	"lblc":  newLBLC,
	"lblcr": newLBLCR,
	"lc":    newLeastConn,
	"mh":    newMaglev,
	"nq":    newNeverQueue,
	"ovf":   newOverflow,
	"rr":    newRoundRobin,
	"sed":   newShortestExpectedDelay,
	"sh":    newSourceHashing,
	"twos":  newPowerOfTwo,
	"wlc":   newWeightedLeastConn,
	"wrr":   newWeightedRoundRobin,
}

// New makes the named scheduler over dests.
func New(name string, dests []Dest, o Options) (Scheduler, error) {
	f, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown scheduler %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return f(dests, o)
}

// Names lists the registered schedulers, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
