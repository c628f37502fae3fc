// Package lcore is dplb's dataplane: one poll-mode worker per lcore, each a
// goroutine locked to its OS thread and pinned to its CPU, owning its RX/TX
// queues, its connection table, its scheduler state and its counters. The
// control plane talks to a worker only through two single-producer
// single-consumer rings (commands down, events up) and reads its published
// counters; nothing on the packet path takes a lock, allocates, or makes a
// cgo call per packet (one per RX burst, one per TX burst).
package lcore

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
	"github.com/dplb/dplb/lcore/spsc"
)

// PortQueue is one port as a worker sees it: its own RX and TX queue, or,
// on a port with fewer queues than workers, none: the worker does not
// poll the port and hands what it sends there to worker TxVia.
type PortQueue struct {
	Port    ethdev.Port
	RxQueue uint16
	TxQueue uint16
	NoQueue bool
	TxVia   int
	// Kernel: the port has a kernel interface (kernel.go), which gets
	// what is addressed to the port and lbd does not take.
	Kernel bool
}

// Config describes a worker.
type Config struct {
	ID            int         // worker index, 0..n-1 (indexes Service.Scheds)
	CPU           int         // CPU to pin the thread to; -1 leaves it unpinned
	Ports         []PortQueue // indexed like Snapshot.Ports
	Pool          *mempool.Mempool
	Burst         int
	ConnTableSize int
	Defense       conn.Defense  // the table's answer to floods (conn.Defense)
	IdleSleep     time.Duration // >0: sleep this long when idle (shared-CPU machines)
	Snapshot      *Snapshot     // the first snapshot
	Workers       int           // number of workers (1: no steering)
	Handoff       Handoff       // rings to and from the other workers
	// Templates is the persistence template table all workers share
	// (required with several workers; one worker makes its own).
	Templates *TemplateTable
	// Expects is the table of expected connections (the FTP helper's
	// data connections) all workers share (required with several
	// workers; one worker makes its own).
	Expects *ExpectTable
	// Fragments bounds the fragment state (frag.go); zero fields take
	// DefaultFragLimits.
	Fragments FragLimits
	// Kernel is the worker's rings to and from the ports' kernel
	// interfaces (kernel.go); zero without any.
	Kernel KernelIO
	// HoldRX starts the worker with its RX held (see Worker.HoldRX): it
	// runs its commands but receives nothing until released.
	HoldRX bool
}

const (
	ringSize     = 1024
	syncRingSize = 8192 // records (24 bytes each) between two pulls of the sync sender
	// syncInstallBudget bounds the synced records one commands job
	// installs (tens of microseconds), however many batches wait.
	syncInstallBudget = 512
	commandPeriod     = 50 * time.Microsecond
	expirePeriod      = 100 * time.Microsecond
	publishPeriod     = time.Millisecond
	// A full sweep of the connection table takes about this long, whatever
	// the traffic: expirePeriod/sweepTime of the table per expire run.
	sweepTime = time.Second
	idleSpins = 256 // empty polls before an idle sleep
	// fragSweep is how many fragment table entries an expire run visits:
	// the default table (4096) in about 6 ms.
	fragSweep = 64
)

// job is a periodic task of the poll loop, timed so a slow one shows.
type job struct {
	name   string
	period int64
	next   int64
	run    func(now int64)
	runs   atomic.Uint64
	nanos  atomic.Uint64
	slow   atomic.Uint64 // runs of SlowJob or longer
}

// SlowJob is where a job's run counts as slow: as long as a loop
// iteration the perf report counts as long, so that a report can tell
// how many of its long iterations a job made.
const SlowJob = 16384 * time.Nanosecond

// txQueue buffers one port's output until the end of the burst.
type txQueue struct {
	arr   *mbuf.Array
	n     int
	bytes uint64
}

// Worker is one poll-mode lcore.
type Worker struct {
	cfg    Config
	snap   *Snapshot
	table  *conn.Table
	cnt    *counters
	rx     *ethdev.RxSet // every port's receive queue, polled in one call
	rxPort []int         // the port of each of rx's queues
	descs  []desc        // the burst being processed, parsed (see desc.go)
	hashes []uint32      // their connection keys' hashes (prefetch.go)
	tx     []txQueue
	txs    *ethdev.TxSet // the tx queues, flushed in one call
	hops   hopCache      // next hops' MACs of the current snapshot (route)

	// The lookup stage's count of each service's SYNs in the burst, for
	// foretelling their schedulers' picks (prefetch.go).
	foresight [foreseeServices]foresight
	foreseen  int

	// busyPolls counts the polls that carried packets: the stage
	// accounting samples every stageSample-th (loopstats.go).
	busyPolls uint64
	free      *mbuf.Array // drops of this burst, freed in one call
	nfree     int
	hout      []txQueue   // packets for other lcores, by worker id
	hin       *mbuf.Array // packets taken from the peers' rings

	nworkers   int
	tmpl       *TemplateTable           // shared by all workers (templates.go)
	tmplOff    int64                    // w.now + tmplOff is the template table's clock
	tmplBudget int                      // template slots worker 0 sweeps per expire run
	vips       map[uint32]struct{}      // every VIP of every snapshot so far (steering)
	vips6      map[hdr.Addr6]struct{}   // every IPv6 VIP so far (steering), nil before the first
	neigh6     neighCache6              // on-link IPv6 clients learnt from their first packet (neighcache.go)
	dump       *DumpRequest             // a connection listing in progress
	neigh      neighCache               // clients learnt from their first packet (see neighcache.go)
	ipID       uint16                   // the next outer IP ID of VS/TUN packets
	pmtu       pathMTUs                 // path MTUs to real servers learnt from ICMP (tunerr.go)
	frags      *fragTable               // datagrams whose fragments pass here (frag.go)
	ftp        *ftpTable                // FTP control connections' state (ftp.go), made with the first FTP service
	expects    *ExpectTable             // expected data connections, shared (expect.go)
	fragDesc   desc                     // scratch for a held fragment sent on
	lpools     map[uint32]*lportPool    // this worker's free FullNAT local ports, by LIP (fullnat.go)
	lpools6    map[hdr.Addr6]*lportPool // by IPv6 LIP (fullnat6.go); nil before the first
	steers     int                      // steering entries in the table (steerentry.go), not connections
	lipNext    int                      // where the next FullNAT connection starts looking among a service's LIPs
	held       [heldSlots]heldSeg       // client segments waiting for a proxied connection's server (synproxy.go)
	heldDesc   desc                     // a held segment, parsed again when its server answers
	synSpare   [synSpares]*mbuf.Mbuf    // spare mbufs for a SYN when the cookie's ACK carries data (synhold.go)
	nspare     int
	synDesc    desc        // the SYN built in a spare
	ttlBucket  tokenBucket // limits the ICMP time exceeded it sends (wire.go)
	announced6 bool        // worker 0 sent its unsolicited NAs (nd6.go)
	cmds       *spsc.Ring[Command]
	events     *spsc.Ring[Event]
	syncOut    *spsc.Ring[SyncConn] // records for the peer directors (syncout.go)
	jobs       []*job
	flow       sched.Flow // scratch for the scheduler, so nothing escapes
	now        int64      // monotonic ns since epoch, read once per iteration
	epoch      time.Time
	expire     func(id uint32, c *conn.Conn)
	budget     int

	// onePacketFrag is the one-packet connection (id+1) the first
	// fragment just forwarded made, for its fragment entry (onepacket.go).
	onePacketFrag uint32

	icmp6Bucket tokenBucket // limits the ICMPv6 errors it sends (icmp6err.go)
	pmtu6       pathMTUs6   // path MTUs to IPv6 real servers learnt from ICMPv6 (tunerr6.go)

	tid     atomic.Int32 // the loop's OS thread, once it runs (ThreadID)
	stop    atomic.Bool
	holdRX  atomic.Bool // receive nothing; commands still run (a handover)
	ackGen  atomic.Uint64
	started chan error
	done    chan struct{}
}

// NewWorker allocates a worker's memory; Start runs it.
func NewWorker(cfg Config) (*Worker, error) {
	if cfg.Burst <= 0 || cfg.Burst > 512 {
		return nil, fmt.Errorf("lcore %d: burst %d out of range 1..512", cfg.ID, cfg.Burst)
	}
	if cfg.Snapshot == nil || len(cfg.Snapshot.Ports) != len(cfg.Ports) {
		return nil, fmt.Errorf("lcore %d: the first snapshot must describe the worker's %d ports", cfg.ID, len(cfg.Ports))
	}
	table, err := conn.New(cfg.ConnTableSize)
	if err != nil {
		return nil, fmt.Errorf("lcore %d: %w", cfg.ID, err)
	}
	if err := table.SetDefense(cfg.Defense); err != nil {
		return nil, fmt.Errorf("lcore %d: %w", cfg.ID, err)
	}
	cmds, _ := spsc.New[Command](ringSize)
	events, _ := spsc.New[Event](ringSize)
	syncOut, _ := spsc.New[SyncConn](syncRingSize)
	w := &Worker{
		ipID: uint16(endpointHash(uint32(cfg.ID), 0)), // workers start apart, unguessably
		cfg:  cfg, snap: cfg.Snapshot, table: table, cnt: newCounters(),
		free: mbuf.NewArray(cfg.Burst + 1),
		cmds: cmds, events: events, syncOut: syncOut, epoch: time.Now(),
		started: make(chan error, 1), done: make(chan struct{}),
	}
	var queues []ethdev.RxQueue
	for pi, pq := range cfg.Ports {
		if !pq.NoQueue {
			queues = append(queues, ethdev.RxQueue{Port: pq.Port, Queue: pq.RxQueue})
			w.rxPort = append(w.rxPort, pi)
		}
	}
	w.rx = ethdev.NewRxSet(queues, cfg.Burst)
	// One poll's packets are processed as one batch: up to a burst per
	// queue (and a burst of handed-over ones, never more than that).
	batch := cfg.Burst * max(len(queues), 1)
	w.descs, w.hashes = make([]desc, batch), make([]uint32, batch)
	w.frags = newFragTable(cfg.Fragments)
	w.ackGen.Store(cfg.Snapshot.Gen)
	w.holdRX.Store(cfg.HoldRX)
	if w.tmpl = cfg.Templates; w.tmpl == nil {
		if cfg.Workers > 1 {
			return nil, fmt.Errorf("lcore %d: %d workers must share one template table", cfg.ID, cfg.Workers)
		}
		if w.tmpl, err = NewTemplates(cfg.ConnTableSize); err != nil {
			return nil, fmt.Errorf("lcore %d: %w", cfg.ID, err)
		}
	}
	w.tmplOff = w.tmpl.offset(w.epoch)
	if w.expects = cfg.Expects; w.expects == nil {
		if cfg.Workers > 1 {
			return nil, fmt.Errorf("lcore %d: %d workers must share one table of expected connections", cfg.ID, cfg.Workers)
		}
		w.expects = NewExpectTable()
	}
	w.tmplBudget = sweepBudget(w.tmpl.Cap())
	w.nworkers = max(cfg.Workers, 1)
	w.vips = map[uint32]struct{}{}
	w.lpools = map[uint32]*lportPool{}
	w.learnVIPs(cfg.Snapshot)
	if w.nworkers > 1 {
		if len(cfg.Handoff.Out) != w.nworkers || len(cfg.Handoff.In) != w.nworkers {
			return nil, fmt.Errorf("lcore %d: %d workers need handoff rings to each", cfg.ID, w.nworkers)
		}
		w.hin = mbuf.NewArray(cfg.Burst)
		for j := 0; j < w.nworkers; j++ {
			w.hout = append(w.hout, txQueue{arr: mbuf.NewArray(cfg.Burst * len(cfg.Ports))})
		}
	}
	var txq []ethdev.TxQueue
	for _, pq := range cfg.Ports {
		// Room for a whole batch (a burst from every queue) plus the
		// packets the worker makes itself.
		q := txQueue{arr: mbuf.NewArray(batch + cfg.Burst)}
		w.tx = append(w.tx, q)
		txq = append(txq, ethdev.TxQueue{Port: pq.Port, Queue: pq.TxQueue, Pkts: q.arr.Pkt})
	}
	w.txs = ethdev.NewTxSet(txq)
	w.expire = w.expireEntry
	w.budget = sweepBudget(table.Cap())
	w.jobs = []*job{
		{name: "commands", period: int64(commandPeriod), run: w.runCommands},
		{name: "expire", period: int64(expirePeriod), run: w.runExpire},
		{name: "publish", period: int64(publishPeriod), run: w.runPublish},
	}
	if cfg.Kernel.In != nil {
		w.jobs = append(w.jobs, &job{name: "kernel", period: int64(kernelPeriod), run: w.runKernel})
	}
	return w, nil
}

// sweepBudget is how many of a table's capacity slots an expire run
// examines so that the whole table is swept once a sweepTime.
func sweepBudget(capacity int) int {
	return max(16, int(int64(capacity)*int64(expirePeriod)/int64(sweepTime)))
}

// Start launches the poll loop on its own thread and waits until it runs.
func (w *Worker) Start() error {
	go w.loop()
	return <-w.started
}

// Stop asks the loop to end and waits for it. Every mbuf the worker held is
// freed by then.
func (w *Worker) Stop() {
	w.stop.Store(true)
	<-w.done
}

// HoldRX stops (true) or resumes (false) receiving from the ports, from
// the next loop iteration on. A held worker still runs its commands and
// its timers: a restarting lbd installs a handed-over connection table
// before the first packet is read, and a stopping one dumps its table
// while nothing changes it. What arrives meanwhile waits in the NIC's
// ring, or is lost there and retransmitted by TCP.
func (w *Worker) HoldRX(hold bool) { w.holdRX.Store(hold) }

// Commands is the ring the control plane (one goroutine) writes to.
func (w *Worker) Commands() *spsc.Ring[Command] { return w.cmds }

// Events is the ring the control plane (one goroutine) reads from.
func (w *Worker) Events() *spsc.Ring[Event] { return w.events }

// SyncOut is the ring of records the worker wants synced to the peer
// directors; the control plane (one goroutine) reads it.
func (w *Worker) SyncOut() *spsc.Ring[SyncConn] { return w.syncOut }

// AckedGen is the generation of the snapshot the worker uses.
func (w *Worker) AckedGen() uint64 { return w.ackGen.Load() }

// Stats reads the worker's published counters.
func (w *Worker) Stats() Stats { return w.cnt.read() }

// DestStats reads the worker's published counters of one real server.
func (w *Worker) DestStats(id uint32) DestStats { return w.cnt.readDest(id) }

// JobStat is the accumulated cost of one periodic job.
type JobStat struct {
	Name  string
	Runs  uint64
	Nanos uint64
	Slow  uint64 // runs of SlowJob or longer
}

// JobStats reads the periodic jobs' run counts and time spent.
func (w *Worker) JobStats() []JobStat {
	out := make([]JobStat, len(w.jobs))
	for i, j := range w.jobs {
		out[i] = JobStat{Name: j.name, Runs: j.runs.Load(), Nanos: j.nanos.Load(), Slow: j.slow.Load()}
	}
	return out
}

// ThreadID is the OS thread the poll loop runs on (0 before it starts):
// its scheduler statistics say how long the OS kept the worker waiting.
func (w *Worker) ThreadID() int { return int(w.tid.Load()) }

// ID is the worker's index.
func (w *Worker) ID() int { return w.cfg.ID }

// ConnTableCap is the connection table's capacity.
func (w *Worker) ConnTableCap() int { return w.table.Cap() }

// Free releases the worker's C memory after Stop.
func (w *Worker) Free() {
	w.freeFrags()
	if w.nfree > 0 {
		mbuf.FreeBulk(w.free.Pkt[:w.nfree])
		w.nfree = 0
	}
	w.freeHeld()
	w.freeSynSpares()
	w.rx.Free()
	w.free.Free()
	if w.hin != nil {
		w.hin.Free()
	}
	for i := range w.hout {
		w.hout[i].arr.Free()
	}
	for i := range w.tx {
		w.tx[i].arr.Free()
	}
	w.txs.Free()
}

func (w *Worker) loop() {
	defer close(w.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	w.tid.Store(int32(unix.Gettid()))
	if w.cfg.CPU >= 0 {
		var set unix.CPUSet
		set.Set(w.cfg.CPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			w.started <- fmt.Errorf("lcore %d: pin to CPU %d: %w", w.cfg.ID, w.cfg.CPU, err)
			return
		}
	}
	// A registered thread gets an lcore id, so the mempool's per-lcore
	// cache serves it.
	if _, err := eal.RegisterThread(); err != nil {
		w.started <- fmt.Errorf("lcore %d: %w", w.cfg.ID, err)
		return
	}
	defer eal.UnregisterThread()
	w.started <- nil
	// No first-touch page faults while connections arrive (conn/mem.go):
	// the table is faulted in here, on the worker's own CPU (its NUMA
	// node's memory), every worker at once, before the first poll and
	// the first command (a handover's table is installed after it).
	w.table.Prefault()

	idle, slept, busy := 0, false, false
	for !w.stop.Load() {
		prev := w.now
		w.now = int64(time.Since(w.epoch))
		w.countIteration(prev, w.now, slept)
		if busy {
			// Cycle accounting: the time of iterations whose poll carried
			// packets, apart from empty polls; it ends where the next
			// begins, so this clock read serves both.
			w.cnt.own[BusyNanos] += uint64(w.now - prev)
		}
		slept, busy = false, false
		w.cnt.own[Iterations]++
		start := w.now // each job's run is timed from the end of the one before
		for _, j := range w.jobs {
			if w.now >= j.next {
				j.run(w.now)
				end := int64(time.Since(w.epoch))
				j.runs.Add(1)
				j.nanos.Add(uint64(end - start))
				if end-start >= int64(SlowJob) {
					j.slow.Add(1)
				}
				j.next = w.now + j.period
				start = end
			}
		}
		if w.poll() > 0 {
			busy, idle = true, 0
			continue
		}
		if idle++; w.cfg.IdleSleep > 0 && idle > idleSpins {
			w.cnt.own[IdleSleeps]++
			time.Sleep(w.cfg.IdleSleep)
			slept = true
		}
	}
	if busy {
		w.cnt.own[BusyNanos] += uint64(int64(time.Since(w.epoch)) - w.now)
	}
	w.freeFrags()
	w.flush()
	for j := range w.hout { // handed-off packets not enqueued: the peers are stopping
		if q := &w.hout[j]; q.n > 0 {
			mbuf.FreeBulk(q.arr.Pkt[:q.n])
			q.n = 0
		}
	}
	w.runPublish(0)
	if w.dump != nil {
		w.dump.done.Store(true) // whatever it holds: the worker is gone
	}
}

// poll receives one burst from every port, handles it and sends the result.
func (w *Worker) poll() int {
	if w.holdRX.Load() {
		return 0
	}
	got := 0
	var clock stageClock // per-burst stage accounting (loopstats.go), every stageSample-th busy poll
	clock.start(w.stageScale())
	if n := w.rx.Poll(); n > 0 {
		w.busyPolls++
		clock.mark(w.cnt, StageRxCycles)
		ds := w.descs[:0]
		for j, pi := range w.rxPort {
			for _, m := range w.rx.Burst(j) {
				ds = ds[:len(ds)+1]
				d := &ds[len(ds)-1]
				parse(d, m, pi)
				w.checkDstMAC(d)
			}
		}
		clock.mark(w.cnt, StageParseCycles)
		w.prefetch(ds)
		clock.mark(w.cnt, StageLookupCycles)
		w.run(ds, true)
		clock.mark(w.cnt, StageProcessCycles)
		got += n
	}
	if w.nworkers > 1 {
		w.flushHandoffs()
		got += w.pollHandoffs()
		w.flushHandoffs() // what handling the handed-in packets gave to others
	}
	if got == 0 {
		w.flush() // what the jobs made (ARP requests, probes)
		return 0
	}
	clock.resume()
	w.flush()
	clock.mark(w.cnt, StageTxCycles)
	return got
}

func (w *Worker) runCommands(int64) {
	if !w.announced6 && w.cfg.ID == 0 {
		w.announced6 = true
		w.announce6()
	}
	if w.dump != nil {
		w.runDump()
	}
	installed := 0
	for {
		cmd, ok := w.cmds.Pop()
		if !ok {
			return
		}
		switch cmd.Kind {
		case CmdTrace:
			w.trace(cmd.Trace)
			cmd.Trace.done.Store(true) // publishes Result to the control plane
		case CmdSnapshot:
			if cmd.Snap != nil && len(cmd.Snap.Ports) == len(w.cfg.Ports) {
				takeover := w.cfg.ID == 0 && w.snap != nil && w.snap.Backup && !cmd.Snap.Backup
				w.snap = cmd.Snap
				if takeover {
					w.announceTakeover()
					w.announce6()
				}
				w.learnVIPs(cmd.Snap)
				w.cnt.reset(cmd.Snap.ResetDests)
				// Published before the acknowledgement: what the control
				// plane reads once Publish returns is of this snapshot
				// (it frees an id when its connection gauges read 0).
				w.runPublish(0)
				w.ackGen.Store(cmd.Snap.Gen)
			}
		case CmdARPRequest:
			w.sendARPRequest(cmd.Port, cmd.IP)
		case CmdSolicit:
			w.sendSolicit(cmd.Port, cmd.IP6)
		case CmdProbe:
			w.sendProbe(cmd.IP, cmd.IP6, cmd.DstPort, cmd.SrcPort, cmd.Seq)
		case CmdProbeSegment:
			f := hdr.TCPFields{SrcPort: cmd.SrcPort, DstPort: cmd.DstPort, Seq: cmd.Seq, Ack: cmd.Ack, Flags: cmd.Flags, Window: 1024}
			w.sendProbeSegment(cmd.IP, cmd.IP6, &f, cmd.Payload)
		case CmdProbeDatagram:
			w.sendProbeDatagram(cmd.IP, cmd.IP6, cmd.DstPort, cmd.SrcPort, cmd.Payload)
		case CmdProbeEcho:
			w.sendProbeEcho(cmd.IP, cmd.IP6, cmd.SrcPort, uint16(cmd.Seq))
		case CmdSyncInstall:
			if cmd.Sync != nil {
				w.installSynced(cmd.Sync)
				if installed += len(cmd.Sync.Records); installed >= syncInstallBudget {
					return // the rest at the next run: a bulk transfer must not stall the packets
				}
			}
		case CmdAnnounce:
			if !cmd.IP6.IsUnspecified() {
				if cmd.Port >= 0 && cmd.Port < len(w.snap.Ports) {
					w.sendUnsolicitedNA(cmd.Port, cmd.IP6)
				}
				break
			}
			w.announce(cmd.Port, cmd.IP)
		case CmdAnnounce6:
			if cmd.Port >= 0 && cmd.Port < len(w.snap.Ports) {
				w.announce6Port(cmd.Port)
			}
		case CmdDump:
			if w.dump != nil { // one at a time: the control plane waits for each
				w.dump.Truncated = true
				w.dump.done.Store(true)
			}
			w.dump = cmd.Dump
		}
	}
}

// learnVIPs adds a snapshot's VIPs to those steering knows (control work:
// the map may grow).
func (w *Worker) learnVIPs(s *Snapshot) {
	for v := range s.vips {
		w.vips[v] = struct{}{}
	}
	if s.HasIPv6() {
		if w.vips6 == nil {
			w.vips6 = map[hdr.Addr6]struct{}{}
		}
		for v := range s.six.vips {
			w.vips6[v] = struct{}{}
		}
		w.table.EnableSix()
	}
	if s.hasFTP && w.ftp == nil {
		w.ftp = newFTPTable()
	}
	w.learnLIPs(s)
}

func (w *Worker) runExpire(now int64) {
	w.table.Expire(now, w.budget, w.expire)
	w.sweepFrags(fragSweep)
	w.refillSynSpares()
	if w.cfg.ID == 0 {
		w.expireTemplates(w.tmplBudget)
	}
}

func (w *Worker) runPublish(int64) {
	w.cnt.own[Conns] = uint64(w.table.Len() - w.steers)
	w.cnt.own[Evictions] = w.table.Evictions()
	w.cnt.own[ShortTimeouts] = w.table.ShortTimeouts()
	secure, drop := w.table.Pressure()
	w.cnt.own[DefenseSecure], w.cnt.own[DefenseDrop] = b2u(secure), b2u(drop)
	w.cnt.own[LoopNanos] = uint64(time.Since(w.epoch))
	if w.cfg.ID == 0 { // the shared templates' gauges, published once
		for _, id := range w.snap.Counted {
			if id < MaxDests {
				w.cnt.dest[id][DestPersistent] = uint64(w.tmpl.persistent[id].Load())
			}
		}
	}
	w.cnt.publish(w.snap.Counted)
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// countState adds (or removes) a connection in state s to its real
// server's active/inactive gauges.
func (w *Worker) countState(dest uint32, s conn.State, add bool) {
	which := DestInactive
	if conn.Active(s) {
		which = DestActive
	}
	if add {
		w.cnt.dest[dest][which]++
	} else {
		w.cnt.dest[dest][which]--
	}
}

// event tells the control plane something; a full ring loses it (counted).
func (w *Worker) event(e Event) {
	if !w.events.Push(e) {
		w.cnt.own[EventsLost]++
	}
}
