package ctl

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// Dataplane is what the controller needs from the lcores. DPDK is the real
// one; tests of the control plane use a fake.
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
	// SendProbe asks worker 0 to send a TCP SYN probe; false if it could not.
	SendProbe(ip uint32, dstPort, srcPort uint16) bool
	// DumpConns lists the lcores' connections matching filter, at most
	// about max in all.
	DumpConns(filter lcore.ConnFilter, max int) (conns []lcore.ConnInfo, truncated bool, err error)
}

// DPDK is the real dataplane: the EAL, one packet pool, the ports and the
// worker lcores.
type DPDK struct {
	log     *zap.Logger
	cfg     conf.Config
	pool    *mempool.Mempool
	ports   []openPort
	workers []*lcore.Worker
	rings   []*ring.Ring // handoff rings between workers
	cmdMu   sync.Mutex   // the command rings have one producer: whoever holds this
}

type openPort struct {
	name   string
	id     ethdev.Port
	info   ethdev.DevInfo
	hw     PortHW
	queues uint16 // queue pairs: one per worker, or fewer if the device has fewer
}

// txCsumOffloads are the TX offloads lbd uses when a port has all of them.
const txCsumOffloads = ethdev.TxOffloadIPv4Cksum | ethdev.TxOffloadTCPCksum | ethdev.TxOffloadUDPCksum

// publishTimeout bounds the wait for the workers' acknowledgements.
const publishTimeout = 2 * time.Second

// handoffRingSize is the capacity of each worker-to-worker ring.
const handoffRingSize = 2048

// OpenDPDK initialises the EAL and starts the ports; the workers start
// later (StartWorkers) with the first snapshot, which needs the ports' MAC
// addresses. The calling goroutine must be locked to its thread: it
// becomes the EAL main lcore. On error everything opened is closed again.
func OpenDPDK(cfg conf.Config, log *zap.Logger) (d *DPDK, err error) {
	args := cfg.EALArgs("lbd")
	log.Info("starting DPDK", zap.Strings("eal_args", args))
	if err := eal.Init(args); err != nil {
		return nil, err
	}
	d = &DPDK{log: log, cfg: cfg}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	dp := cfg.Dataplane
	d.pool, err = mempool.CreatePktmbufPool(mempool.PktmbufPool{
		Name: "dplb_pkt", N: uint(dp.Mbufs), Cache: uint(dp.MbufCache), Socket: eal.SocketAny,
	})
	if err != nil {
		return nil, fmt.Errorf("dataplane.mbufs: %w", err)
	}
	nq := uint16(len(dp.Workers))
	for i, pc := range cfg.Ports {
		p, err := d.openPort(i, pc, nq)
		if err != nil {
			return nil, err
		}
		d.ports = append(d.ports, p)
	}
	return d, nil
}

func (d *DPDK) openPort(i int, pc conf.Port, nq uint16) (openPort, error) {
	field := fmt.Sprintf("ports[%d] (%s)", i, pc.Name)
	id, err := ethdev.ByName(pc.DeviceName())
	if err != nil {
		return openPort{}, fmt.Errorf("%s.device %q: no such DPDK port (is the device bound to a DPDK driver, or the vdev string right?): %w", field, pc.Device, err)
	}
	info, err := id.Info()
	if err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	if most := min(info.MaxRxQueues, info.MaxTxQueues); nq > most {
		// Fewer queues than workers: the first ones poll the port, the
		// others hand it what they send (software steering).
		d.log.Warn("port has fewer queues than workers; the others reach it through them",
			zap.String("port", pc.Name), zap.Uint16("queues", most), zap.Uint16("workers", nq),
			zap.String("hint", fmt.Sprintf("for net_af_packet add qpairs=%d to the device string, for net_tap queues=%d", nq, nq)))
		nq = most
	}
	c := ethdev.Config{RxQueues: nq, TxQueues: nq}
	offload := info.TxOffloadCapa&txCsumOffloads == txCsumOffloads
	if offload {
		c.TxOffloads = txCsumOffloads
	}
	// Spread flows over the queues: aligned with the lcores' ownership
	// where the device can, else any spread (the lcores hand packets over).
	// Persistence is a matter of the services, which can change: the
	// alignment chosen at start holds only while it matches (Snapshot).
	byAddr := false
	for _, s := range d.cfg.Services {
		byAddr = byAddr || s.Persistence > 0
	}
	var rssMode uint8
	c.RSSHashFunctions, rssMode = rssFor(info, pc.Role, nq, byAddr)
	if rssMode != lcore.RSSSoftware {
		// Both sides must hash with the same key for a connection's two
		// directions to meet.
		c.RSSKey = rssKey(int(info.HashKeySize))
	}
	if err := id.Configure(c); err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	dp := d.cfg.Dataplane
	for q := uint16(0); q < nq; q++ {
		if err := id.RxQueueSetup(q, uint16(dp.RxDescriptors), info.SocketID, d.pool); err != nil {
			return openPort{}, fmt.Errorf("%s: %w", field, err)
		}
		if err := id.TxQueueSetup(q, uint16(dp.TxDescriptors), info.SocketID, c.TxOffloads); err != nil {
			return openPort{}, fmt.Errorf("%s: %w", field, err)
		}
	}
	if pc.MTU != 0 {
		if err := id.SetMTU(uint16(pc.MTU)); err != nil {
			if !ethdev.IsUnsupported(err) {
				return openPort{}, fmt.Errorf("%s.mtu: %w", field, err)
			}
			d.log.Warn("port cannot set its MTU; keeping the device's", zap.String("port", pc.Name), zap.Error(err))
		}
	}
	if err := id.Start(); err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	p := openPort{name: pc.Name, id: id, info: info, queues: nq}
	if pc.Promiscuous {
		if err := id.SetPromiscuous(true); err != nil {
			d.log.Warn("port cannot enter promiscuous mode", zap.String("port", pc.Name), zap.Error(err))
		}
	}
	mac, err := id.MACAddr()
	if err != nil {
		id.Stop()
		id.Close()
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	link, _ := id.Link()
	mtu, err := id.MTU()
	if err != nil || mtu == 0 {
		mtu = 1500
	}
	p.hw = PortHW{MAC: hdr.MAC(mac), MTU: mtu, CsumOffload: offload, RSS: rssMode}
	d.log.Info("port up", zap.String("port", pc.Name), zap.Uint16("port_id", uint16(id)),
		zap.String("driver", info.Driver), zap.String("mac", p.hw.MAC.String()), zap.String("address", pc.Address),
		zap.String("role", pc.Role), zap.String("link", link.String()), zap.Uint16("mtu", mtu),
		zap.Uint16("queues", nq), zap.Bool("tx_checksum_offload", offload), zap.Bool("rss_aligned", rssMode != lcore.RSSSoftware))
	return p, nil
}

// Hardware describes the started ports, in configuration order.
func (d *DPDK) Hardware() []PortHW {
	out := make([]PortHW, len(d.ports))
	for i, p := range d.ports {
		out[i] = p.hw
	}
	return out
}

// confineControlThreads moves every thread of the process (the Go
// runtime's, the control plane's, DPDK's interrupt thread) off the workers'
// CPUs, so none preempts a poll loop; threads made later inherit the mask.
// With no CPU left over (workers on every CPU) nothing changes.
func confineControlThreads(workers []int) (unix.CPUSet, error) {
	var all, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return set, err
	}
	set = all
	for _, cpu := range workers {
		set.Clear(cpu)
	}
	if set.Count() == 0 {
		return all, nil
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return set, err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return set, fmt.Errorf("thread %d: %w", tid, err)
		}
	}
	return set, nil
}

// StartWorkers creates and starts one worker per configured CPU, with a
// handoff ring for every ordered pair of workers.
func (d *DPDK) StartWorkers(snap *lcore.Snapshot) error {
	dp := d.cfg.Dataplane
	if set, err := confineControlThreads(dp.Workers); err != nil {
		d.log.Warn("control threads not moved off the worker CPUs", zap.Error(err))
	} else {
		d.log.Info("control threads confined", zap.Int("cpus", set.Count()))
	}
	n := len(dp.Workers)
	handoffs := make([]lcore.Handoff, n)
	if n > 1 {
		for i := range handoffs {
			handoffs[i] = lcore.Handoff{Out: make([]*ring.Ring, n), In: make([]*ring.Ring, n)}
		}
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				if i == j {
					continue
				}
				r, err := ring.Create(fmt.Sprintf("dplb_ho_%d_%d", i, j), handoffRingSize, eal.SocketAny, ring.SingleProducer|ring.SingleConsumer)
				if err != nil {
					return fmt.Errorf("dataplane.workers: handoff ring %d->%d: %w", i, j, err)
				}
				d.rings = append(d.rings, r)
				handoffs[i].Out[j], handoffs[j].In[i] = r, r
			}
		}
	}
	for i, cpu := range dp.Workers {
		pqs := make([]lcore.PortQueue, len(d.ports))
		for j, p := range d.ports {
			pqs[j] = lcore.PortQueue{Port: p.id, RxQueue: uint16(i), TxQueue: uint16(i)}
			if uint16(i) >= p.queues {
				pqs[j] = lcore.PortQueue{Port: p.id, NoQueue: true, TxVia: i % int(p.queues)}
			}
		}
		w, err := lcore.NewWorker(lcore.Config{
			ID: i, CPU: cpu, Ports: pqs, Pool: d.pool, Burst: dp.Burst,
			ConnTableSize: dp.ConnTableSize, IdleSleep: dp.IdleSleep, Snapshot: snap,
			Defense: conn.Defense{
				DropEntryPercent: dp.Defense.DropEntry, SecurePercent: dp.Defense.Secure, IdleAfter: dp.Defense.IdleAfter,
				SecureSYN: dp.Defense.SYNTimeout, SecureUDP: dp.Defense.UDPTimeout,
			},
			Workers: n, Handoff: handoffs[i],
		})
		if err != nil {
			return fmt.Errorf("dataplane.workers[%d]: %w", i, err)
		}
		if err := w.Start(); err != nil {
			w.Free()
			return fmt.Errorf("dataplane.workers[%d]: %w", i, err)
		}
		d.workers = append(d.workers, w)
		d.log.Info("lcore started", zap.Int("worker", i), zap.Int("cpu", cpu), zap.Int("conn_table", w.ConnTableCap()))
	}
	return nil
}

// NumWorkers implements Dataplane.
func (d *DPDK) NumWorkers() int { return len(d.cfg.Dataplane.Workers) }

// Publish implements Dataplane.
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

// RequestARP implements Dataplane; worker 0 sends the requests.
func (d *DPDK) RequestARP(port int, ip uint32) bool {
	if len(d.workers) == 0 {
		return false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	return d.workers[0].Commands().Push(lcore.Command{Kind: lcore.CmdARPRequest, Port: port, IP: ip})
}

// DrainEvents implements Dataplane. One goroutine (the controller's loop) calls it.
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

// WorkerStats implements Dataplane.
func (d *DPDK) WorkerStats() []lcore.Stats {
	out := make([]lcore.Stats, len(d.workers))
	for i, w := range d.workers {
		out[i] = w.Stats()
	}
	return out
}

// DestStats implements Dataplane.
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

// DumpConns implements Dataplane: each worker lists its own table a slice
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

// SendProbe implements Dataplane.
func (d *DPDK) SendProbe(ip uint32, dstPort, srcPort uint16) bool {
	if len(d.workers) == 0 {
		return false
	}
	d.cmdMu.Lock()
	defer d.cmdMu.Unlock()
	return d.workers[0].Commands().Push(lcore.Command{Kind: lcore.CmdProbe, IP: ip, DstPort: dstPort, SrcPort: srcPort})
}

// TSCHz implements Dataplane.
func (d *DPDK) TSCHz() uint64 { return eal.TSCHz() }

// ConnCapacity implements Dataplane.
func (d *DPDK) ConnCapacity() uint64 {
	var n uint64
	for _, w := range d.workers {
		n += uint64(w.ConnTableCap())
	}
	return n
}

// PortStat is a port's name and counters, for metrics.
type PortStat struct {
	Name  string
	Stats ethdev.Stats
}

// PortStats reads every port's counters.
func (d *DPDK) PortStats() []PortStat {
	out := make([]PortStat, 0, len(d.ports))
	for _, p := range d.ports {
		s, err := p.id.Stats()
		if err != nil {
			continue
		}
		out = append(out, PortStat{Name: p.name, Stats: s})
	}
	return out
}

// MempoolInUse counts the mbufs out of the pool.
func (d *DPDK) MempoolInUse() int {
	if d.pool == nil {
		return 0
	}
	return d.pool.InUse()
}

// Workers exposes the workers to metrics.
func (d *DPDK) Workers() []*lcore.Worker { return d.workers }

// Close stops the workers (each frees the mbufs it holds), stops and
// closes the ports (releasing their queues' mbufs), checks that every mbuf
// came back, and releases DPDK. It returns the mbufs still in use, which
// must be 0.
func (d *DPDK) Close() (inUse int, err error) {
	for _, w := range d.workers {
		w.Stop()
	}
	// Packets still in flight between lcores go back to the pool.
	objs := ring.NewObjs(256)
	for _, r := range d.rings {
		for n := r.SCDequeueBurst(objs); n > 0; n = r.SCDequeueBurst(objs) {
			for _, o := range objs[:n] {
				mbuf.FromPointer(o).Free()
			}
		}
		r.Free()
	}
	ring.FreeObjs(objs)
	d.rings = nil
	var errs []error
	for _, p := range d.ports {
		if e := p.id.Stop(); e != nil {
			errs = append(errs, e)
		}
		if e := p.id.Close(); e != nil {
			errs = append(errs, e)
		}
	}
	for _, w := range d.workers {
		w.Free()
	}
	d.workers, d.ports = nil, nil
	if d.pool != nil {
		inUse = d.pool.InUse()
		if inUse == 0 {
			d.pool.Free()
		}
		d.pool = nil
	}
	if e := eal.Cleanup(); e != nil {
		errs = append(errs, e)
	}
	return inUse, errors.Join(errs...)
}
