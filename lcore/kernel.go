package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/spsc"
)

// The kernel's path through a port (ports[].kni, DPVS's KNI): a port may
// have a kernel interface of its own (a TAP the runtime makes, with the
// port's MAC and addresses), so that the director's kernel reaches the
// port's network through the port: ssh or BGP to the port's address, a
// host's health checks to servers only the port reaches.
//
// What lbd would drop as addressed to the port's own address (to_local:
// TCP and UDP beside its probes, echo replies and ICMP errors that are
// none of its probes' or connections') and the ARP replies and IPv6
// neighbour advertisements it learns from, a worker hands to the kernel
// instead: pushed on its ring to the runtime's pump (KernelIO.Out), which
// writes them to the interface. Frames the kernel sends on the interface
// come back on worker 0's ring (KernelIO.In), which its kernel job sends
// out of the port as they are: the kernel made the whole frame, ARP and
// checksums included. Neither direction makes a cgo call or a syscall on
// a worker: the rings are Go memory, the pump does the I/O.

// KernelIO is a worker's share of the kernel's path: Out carries packets
// to the kernel interfaces (the mbuf's port field names the port), In,
// worker 0's only, the kernel's frames to send (likewise).
type KernelIO struct {
	Out *KernelRing
	In  *KernelRing
}

// KernelRing is a ring of packets between a worker and the runtime's
// kernel pump.
type KernelRing = spsc.Ring[*mbuf.Mbuf]

// kernelPeriod is how often worker 0 sends what the kernel wrote, and
// kernelBurst the most it sends at a time: the kernel's path is control
// traffic, 50 µs of delay is nothing to it, and the poll loop pays for it
// only once per period.
const (
	kernelPeriod = commandPeriod
	kernelBurst  = 64
)

// hasKernel reports whether port in has a kernel interface (in is -1 for
// a packet the worker made).
func (w *Worker) hasKernel(in int) bool {
	return in >= 0 && w.cfg.Ports[in].Kernel && w.cfg.Kernel.Out != nil
}

// consumeOrKernel is what becomes of a packet lbd learnt from (an ARP
// reply, a neighbour advertisement) that arrived on port in: counted
// under why, then given to the port's kernel interface, which resolves
// its own neighbours, or freed without one.
func (w *Worker) consumeOrKernel(in int, why Stat) exit {
	if w.hasKernel(in) {
		return exit{kind: exitKernel, why: why}
	}
	return consume(why)
}

// toKernel hands a packet that arrived on port in to its kernel
// interface; a full ring drops it (kernel_full).
func (w *Worker) toKernel(m *mbuf.Mbuf, in int) {
	m.SetPort(uint16(in))
	m.SetOlFlags(0)
	if !w.cfg.Kernel.Out.Push(m) {
		w.discard(m, DropKernelFull)
		return
	}
	w.cnt.own[ToKernel]++
}

// runKernel sends what the kernel wrote on its interfaces out of their
// ports (worker 0's kernel job).
func (w *Worker) runKernel(int64) {
	for range kernelBurst {
		m, ok := w.cfg.Kernel.In.Pop()
		if !ok {
			return
		}
		port := int(m.Port())
		if port >= len(w.cfg.Ports) {
			m.Free() // cannot happen: the pump names a port of the configuration
			continue
		}
		m.SetOlFlags(0)
		w.cnt.own[FromKernel]++
		w.send(m, port)
	}
}
