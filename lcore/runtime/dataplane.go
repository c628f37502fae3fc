package runtime

// The methods the control plane drives the lcores with (ctl.Dataplane).

import (
	"fmt"
	"time"

	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// NumWorkers implements ctl.Dataplane.
func (d *DPDK) NumWorkers() int { return len(d.cfg.Dataplane.Workers) }

// Publish implements ctl.Dataplane.
func (d *DPDK) Publish(snap *lcore.Snapshot) error {
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	deadline := time.Now().Add(publishTimeout)
	for _, w := range d.workers {
		for !w.Commands().Push(lcore.Command{Kind: lcore.CmdSnapshot, Snap: snap}) {
			if time.Now().After(deadline) {
				return fmt.Errorf("lcore %d: command ring full for %v", w.ID(), publishTimeout)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	for _, w := range d.workers {
		for w.AckedGen() < snap.Gen {
			if time.Now().After(deadline) {
				return fmt.Errorf("lcore %d did not acknowledge snapshot %d within %v", w.ID(), snap.Gen, publishTimeout)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

// RequestARP implements ctl.Dataplane; worker 0 sends the requests.
func (d *DPDK) RequestARP(port int, ip uint32) bool {
	if len(d.workers) == 0 {
		return false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	return d.workers[0].Commands().Push(lcore.Command{Kind: lcore.CmdARPRequest, Port: port, IP: ip})
}

// DrainEvents implements ctl.Dataplane. One goroutine (the controller's loop) calls it.
func (d *DPDK) DrainEvents(fn func(lcore.Event)) {
	for _, w := range d.workers {
		for {
			ev, ok := w.Events().Pop()
			if !ok {
				break
			}
			fn(ev)
		}
	}
}

// WorkerStats implements ctl.Dataplane.
func (d *DPDK) WorkerStats() []lcore.Stats {
	out := make([]lcore.Stats, len(d.workers))
	for i, w := range d.workers {
		out[i] = w.Stats()
	}
	return out
}

// DestStats implements ctl.Dataplane.
func (d *DPDK) DestStats(id uint32) lcore.DestStats {
	var sum lcore.DestStats
	for _, w := range d.workers {
		s := w.DestStats(id)
		for i := range sum {
			sum[i] += s[i]
		}
	}
	return sum
}

// dumpTimeout bounds the wait for the lcores' connection listings.
const dumpTimeout = 10 * time.Second

// DumpConns implements ctl.Dataplane: each worker lists its own table a slice
// at a time between bursts; this waits for all of them.
func (d *DPDK) DumpConns(filter lcore.ConnFilter, max int) ([]lcore.ConnInfo, bool, error) {
	reqs := make([]*lcore.DumpRequest, len(d.workers))
	d.cmdMu.Lock()
	for i, w := range d.workers {
		r := &lcore.DumpRequest{ConnFilter: filter, Out: make([]lcore.ConnInfo, 0, max/len(d.workers)+1)}
		if !w.Commands().Push(lcore.Command{Kind: lcore.CmdDump, Dump: r}) {
			d.cmdMu.Unlock()
			return nil, false, fmt.Errorf("lcore %d: command ring full", w.ID())
		}
		reqs[i] = r
	}
	d.cmdMu.Unlock()
	deadline := time.Now().Add(dumpTimeout)
	var out []lcore.ConnInfo
	truncated := false
	for i, r := range reqs {
		for !r.Done() {
			if time.Now().After(deadline) {
				return nil, false, fmt.Errorf("lcore %d did not list its connections within %v", i, dumpTimeout)
			}
			time.Sleep(time.Millisecond)
		}
		out = append(out, r.Out...)
		truncated = truncated || r.Truncated
	}
	return out, truncated, nil
}

// SendProbe implements ctl.Dataplane.
func (d *DPDK) SendProbe(ip uint32, ip6 hdr.Addr6, dstPort, srcPort uint16, seq uint32) bool {
	if len(d.workers) == 0 {
		return false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	return d.workers[0].Commands().Push(lcore.Command{Kind: lcore.CmdProbe, IP: ip, IP6: ip6, DstPort: dstPort, SrcPort: srcPort, Seq: seq})
}

// SendCommand implements ctl.Dataplane.
func (d *DPDK) SendCommand(worker int, cmd lcore.Command) bool {
	if worker < 0 || worker >= len(d.workers) {
		return false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	return d.workers[worker].Commands().Push(cmd)
}

// SyncRecords implements ctl.Dataplane: it takes what each worker's sync
// ring holds now.
func (d *DPDK) SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn {
	for _, w := range d.workers {
		for n := w.SyncOut().Len(); n > 0; n-- {
			r, ok := w.SyncOut().Pop()
			if !ok {
				break
			}
			buf = append(buf, r)
		}
	}
	return buf
}

// TSCHz implements ctl.Dataplane.
func (d *DPDK) TSCHz() uint64 { return eal.TSCHz() }

// ConnCapacity implements ctl.Dataplane.
func (d *DPDK) ConnCapacity() uint64 {
	var n uint64
	for _, w := range d.workers {
		n += uint64(w.ConnTableCap())
	}
	return n
}

// PortStats passes every port's device counters to fn, in configuration
// order; a port whose counters cannot be read is left out.
func (d *DPDK) PortStats(fn func(port string, s ethdev.Stats)) {
	for _, p := range d.ports {
		s, err := p.id.Stats()
		if err != nil {
			continue
		}
		fn(p.name, s)
	}
}

// PortLink reads port i's link state without waiting.
func (d *DPDK) PortLink(i int) (ethdev.Link, error) {
	if i < 0 || i >= len(d.ports) {
		return ethdev.Link{}, fmt.Errorf("no port %d", i)
	}
	return d.ports[i].id.Link()
}

// MempoolInUse counts the mbufs out of the pool.
func (d *DPDK) MempoolInUse() int {
	if d.pool == nil {
		return 0
	}
	return d.pool.InUse()
}

// Workers exposes the workers to metrics (rings, jobs, table capacity).
func (d *DPDK) Workers() []*lcore.Worker { return d.workers }
