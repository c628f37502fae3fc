package ctl

import (
	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Dataplane is all the control plane knows of the lcores. The DPDK
// runtime (lcore/runtime) is the real one; the control plane's tests use
// a fake, so they need no EAL.
type Dataplane interface {
	NumWorkers() int
	// Publish hands snap to every worker and returns once all use it.
	Publish(snap *lcore.Snapshot) error
	// RequestARP asks the dataplane to send an ARP request; false if the
	// command ring was full.
	RequestARP(port int, ip uint32) bool
	// DrainEvents passes every pending worker event to fn.
	DrainEvents(fn func(lcore.Event))
	// WorkerStats reads each worker's counters.
	WorkerStats() []lcore.Stats
	// DestStats sums one real server's counters over the workers.
	DestStats(id uint32) lcore.DestStats
	// ConnCapacity is the connection tables' total capacity.
	ConnCapacity() uint64
	// TSCHz is the CPU clock, to turn time into cycles.
	TSCHz() uint64
	// SendProbe asks worker 0 to send a TCP SYN probe with initial
	// sequence number seq to ip, or to ip6 when that is not zero; false
	// if it could not.
	SendProbe(ip uint32, ip6 hdr.Addr6, dstPort, srcPort uint16, seq uint32) bool
	// Trace asks the worker that owns f what it would do with f's next
	// packet (lbctl trace); nothing changes.
	Trace(f lcore.TraceFlow) (lcore.TraceResult, error)
	// DumpConns lists the lcores' connections matching filter, at most
	// about max in all.
	DumpConns(filter lcore.ConnFilter, max int) (conns []lcore.ConnInfo, truncated bool, err error)
	// SendCommand pushes cmd to one worker's command ring; false if it
	// was full.
	SendCommand(worker int, cmd lcore.Command) bool
	// SyncRecords appends what the workers' sync rings hold to buf; one
	// goroutine at a time calls it.
	SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn

	// For metrics:
	// PortStats passes each port's device counters to fn.
	PortStats(fn func(port string, s ethdev.Stats))
	// PortLink reads port i's link state without waiting (ports in
	// configuration order).
	PortLink(i int) (ethdev.Link, error)
	// MempoolInUse counts the packet buffers taken out of the pool.
	MempoolInUse() int
	// Workers are the lcores, for their rings, jobs and table sizes.
	Workers() []*lcore.Worker
}

// Runtime is the dataplane as lbd runs it: opened before the controller
// exists (the ports' hardware addresses go into the first snapshot),
// started with that snapshot, closed at exit.
type Runtime interface {
	Dataplane
	// Hardware describes the started ports in configuration order (name,
	// MAC, MTU, offloads, RSS mode); their addresses come from the
	// configuration.
	Hardware() []lcore.PortInfo
	// StartWorkers starts the lcores on their first snapshot.
	StartWorkers(first *lcore.Snapshot) error
	// HoldRX stops (true) or resumes (false) the lcores' receiving; set
	// before StartWorkers, they start held (a handover installs the
	// connection table first).
	HoldRX(hold bool)
	// Close stops everything and reports the mbufs that did not come back.
	Close() (inUse int, err error)
}

// OpenRuntime opens the dataplane for a validated configuration (lbd
// passes lcore/runtime's Open). The calling goroutine is locked to its
// thread.
type OpenRuntime func(cfg conf.Config, log *zap.Logger) (Runtime, error)
