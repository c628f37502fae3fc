package connsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/lcore"
)

// Controller is what the daemon needs of lbd's controller (ctl's
// Controller is the real one).
type Controller interface {
	// SyncRecords appends what the workers queued for sync; never blocks.
	SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn
	// InstallSynced hands received records to the workers that own them.
	InstallSynced(recs []lcore.SyncConn)
	// SyncTable dumps every connection and template, for a bulk request.
	SyncTable() ([]lcore.SyncConn, error)
	// SetSyncParams turns the workers' sync on (a master runs) or off.
	SetSyncParams(p lcore.SyncParams)
	// LocalAddrs are this director's own FullNAT local addresses, IPv4
	// and IPv6, which a master's hellos list.
	LocalAddrs() []netip.Addr
}

// Mode is IPVS's sync daemon role; both may run at once.
type Mode uint8

const (
	Master Mode = 1 // sends the workers' records, answers bulk requests
	Backup Mode = 2 // installs what masters send
)

// String is the mode as ipvsadm names it.
func (m Mode) String() string {
	if m == Master {
		return "master"
	}
	return "backup"
}

// ParseMode reads "master" or "backup".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "master":
		return Master, nil
	case "backup":
		return Backup, nil
	}
	return 0, fmt.Errorf("sync daemon mode %q: want master or backup", s)
}

const (
	defaultPull     = 5 * time.Millisecond
	defaultQueueLen = 256
	// bulkBurst datagrams of a bulk dump go out per bulkPace, so a peer
	// installing them is not flooded past its receive queue.
	bulkBurst = 8
	bulkPace  = time.Millisecond
	// bulkRetry is how often RequestBulk asks again while no bulk-end came.
	bulkRetry = 2 * time.Second
	// bulkOnStartWait bounds a starting backup's wait for the tables.
	bulkOnStartWait = 30 * time.Second
)

// HelloInterval is how often a master says hello to its peers.
const HelloInterval = time.Second

// Options configure a Daemon.
type Options struct {
	Transport Transport
	Key       []byte           // the shared HMAC key, at least MinKeyLen bytes
	Params    lcore.SyncParams // the workers' sync rules while a master runs (On is set then)
	Pull      time.Duration    // how often a master pulls the workers' records (default 5ms)
	QueueLen  int              // received messages waiting for install (default 256)
	// BulkOnStart: a backup, when it starts, asks the masters for their
	// whole tables (RequestBulk, in the background), so a director that
	// comes back learns the idle connections too, not only those that
	// reach a sync threshold again.
	BulkOnStart bool
	// TakeOver: this director takes dead peers' local addresses over
	// while its backup mode runs (ctl/takeover.go), and its hellos say
	// so.
	TakeOver bool
	Log      *zap.Logger
}

// ModeStatus is one running mode, for lbctl -L --daemon.
type ModeStatus struct {
	Mode      Mode
	Interface string
	Peers     []netip.Addr // unicast peers; empty: multicast on Interface
	SyncID    uint8
}

// String is ipvsadm's line: "master sync daemon (mcast=eth0, syncid=1)".
func (s ModeStatus) String() string {
	where := "mcast=" + s.Interface
	if len(s.Peers) > 0 {
		ps := make([]string, len(s.Peers))
		for i, p := range s.Peers {
			ps[i] = p.String()
		}
		where = "peers=" + strings.Join(ps, ",")
	}
	return fmt.Sprintf("%s sync daemon (%s, syncid=%d)", s.Mode, where, s.SyncID)
}

// modeSet is what the receive goroutine reads on every message.
type modeSet struct {
	master, backup     bool
	masterID, backupID uint8
}

// Daemon is lbd's sync daemon: one UDP socket while any mode runs, a
// receive goroutine that checks and filters, an install goroutine behind
// a bounded queue, a bulk server, and a master's pull loop.
type Daemon struct {
	ctl   Controller
	opt   Options
	boot  uint64
	peers *peers
	log   *zap.Logger

	mu    sync.Mutex // starts and stops
	modes atomic.Pointer[modeSet]
	run   *running

	sendMu sync.Mutex // the encoder, the sequence, the send buffer
	enc    *Codec
	seq    uint64
	out    []byte
	hello6 bool // this lbd listed an IPv6 local address: its hellos go on with kind 10

	waitMu   sync.Mutex
	bulkWait chan struct{} // closed when a bulk-end for us was installed

	left atomic.Bool // Leave said goodbye: the stop sends no HelloForget
}

type running struct {
	conn      *net.UDPConn
	transport Transport
	dests     []netip.AddrPort
	perMsg    int               // records per datagram
	fit       [lastKind + 1]int // records of each kind per datagram
	queue     chan inbound
	bulk      chan bulkRequest
	wg        sync.WaitGroup
	stopPull  chan struct{} // the master's pull loop, nil when not a master
	pullDone  chan struct{}
	closed    chan struct{}
}

type inbound struct {
	from *peer
	kind Kind
	recs []lcore.SyncConn
}

type bulkRequest struct {
	from *peer
	addr netip.Addr
	boot uint64
}

// New makes a stopped daemon. The key is required: sync is never sent or
// accepted unauthenticated. The boot id is the start time, so a restarted
// lbd's is larger and its peers reset their replay windows for it.
func New(ctl Controller, opt Options) (*Daemon, error) {
	enc, err := NewCodec(opt.Key)
	if err != nil {
		return nil, fmt.Errorf("sync.key_file: %w", err)
	}
	opt.Transport = opt.Transport.withDefaults()
	if opt.Pull <= 0 {
		opt.Pull = defaultPull
	}
	if opt.QueueLen <= 0 {
		opt.QueueLen = defaultQueueLen
	}
	if opt.Log == nil {
		opt.Log = zap.NewNop()
	}
	d := &Daemon{ctl: ctl, opt: opt, boot: uint64(time.Now().UnixNano()), peers: newPeers(), log: opt.Log, enc: enc}
	d.modes.Store(&modeSet{})
	for _, p := range opt.Transport.Peers {
		d.peers.get(p, true)
	}
	return d, nil
}

// Boot is this daemon's boot id.
func (d *Daemon) Boot() uint64 { return d.boot }

// Start runs mode with syncid; iface, when set, replaces the configured
// multicast interface. Both modes share one socket, so while one runs the
// other must name the same interface.
func (d *Daemon) Start(mode Mode, syncID uint8, iface string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := *d.modes.Load()
	if (mode == Master && m.master) || (mode == Backup && m.backup) {
		return fmt.Errorf("the %s sync daemon is already running", mode)
	}
	if d.run == nil {
		t := d.opt.Transport
		if iface != "" {
			t.Interface = iface
		}
		if err := d.open(t); err != nil {
			return err
		}
	} else if iface != "" && iface != d.run.transport.Interface {
		return fmt.Errorf("--mcast-interface %s: the running sync daemon uses %s; both modes share one socket", iface, d.run.transport.Interface)
	}
	if mode == Master {
		m.master, m.masterID = true, syncID
	} else {
		m.backup, m.backupID = true, syncID
	}
	d.modes.Store(&m) // before the pull loop, whose messages carry the syncid
	if mode == Master {
		d.left.Store(false)
		d.run.stopPull, d.run.pullDone = make(chan struct{}), make(chan struct{})
		go d.pull(d.run, d.run.stopPull, d.run.pullDone)
		p := d.opt.Params
		p.On = true
		d.ctl.SetSyncParams(p)
	}
	if mode == Backup && d.opt.BulkOnStart {
		r := d.run
		r.wg.Go(func() { d.bulkOnStart(r, syncID) })
	}
	if mode == Backup && m.master && d.opt.TakeOver {
		// The peers learn at once that this director takes over now,
		// not at the next hello: lbd starts its master first.
		d.sendHello(d.run, HelloAlive)
	}
	d.log.Info("sync daemon started", zap.Stringer("mode", mode), zap.Uint8("syncid", syncID),
		zap.String("interface", d.run.transport.Interface), zap.Int("records_per_datagram", d.run.perMsg))
	return nil
}

// Stop stops mode; the socket closes when neither mode runs.
func (d *Daemon) Stop(mode Mode) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := *d.modes.Load()
	if (mode == Master && !m.master) || (mode == Backup && !m.backup) {
		return fmt.Errorf("the %s sync daemon is not running", mode)
	}
	if mode == Master {
		if !d.left.Load() {
			d.sendHello(d.run, HelloForget) // its peers take nothing over
		}
		m.master = false
		d.ctl.SetSyncParams(lcore.SyncParams{})
		close(d.run.stopPull)
		<-d.run.pullDone
		d.run.stopPull = nil
	} else {
		m.backup = false
	}
	d.modes.Store(&m)
	if mode == Backup {
		// No hello comes in now: the peers would all look dead.
		d.peers.forgetHellos()
		if m.master && d.opt.TakeOver {
			d.sendHello(d.run, HelloAlive) // it takes nothing over now
		}
	}
	if !m.master && !m.backup {
		d.close()
	}
	d.log.Info("sync daemon stopped", zap.Stringer("mode", mode))
	return nil
}

// Leave tells the peers that this lbd stops, when a master runs: they
// take its local addresses over at once (ctl/takeover.go), rather than
// after its hellos have been missing for sync.peer_dead_after. lbd calls
// it as it stops for good (not for an upgrade, whose next lbd says hello
// again within the peers' patience).
func (d *Daemon) Leave() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.run != nil && d.modes.Load().master {
		d.sendHello(d.run, HelloLeaving)
		d.left.Store(true)
	}
}

// Close stops both modes.
func (d *Daemon) Close() {
	for _, m := range []Mode{Master, Backup} {
		d.Stop(m) // not running: nothing to do
	}
}

// Status lists the running modes, master first.
func (d *Daemon) Status() []ModeStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.modes.Load()
	var out []ModeStatus
	add := func(mode Mode, id uint8) {
		t := d.run.transport
		out = append(out, ModeStatus{Mode: mode, Interface: t.Interface, Peers: t.Peers, SyncID: id})
	}
	if m.master {
		add(Master, m.masterID)
	}
	if m.backup {
		add(Backup, m.backupID)
	}
	return out
}

// Stats copies every peer's counters.
func (d *Daemon) Stats() []PeerStats { return d.peers.stats() }

func (d *Daemon) open(t Transport) error {
	conn, payload, err := t.open()
	if err != nil {
		return err
	}
	var fit [lastKind + 1]int
	for k := range fit {
		fit[k] = KindFit(Kind(k), payload)
	}
	if fit[KindFullNAT6] == 0 { // the longest record
		conn.Close()
		return fmt.Errorf("mcast interface %s: its MTU is too small for a sync record", t.Interface)
	}
	r := &running{conn: conn, transport: t, dests: t.destinations(), perMsg: fit[KindRecords], fit: fit,
		queue: make(chan inbound, d.opt.QueueLen), bulk: make(chan bulkRequest, 4), closed: make(chan struct{})}
	for _, a := range r.dests {
		d.peers.get(a.Addr(), true)
	}
	r.wg.Go(func() { d.receive(r) })
	r.wg.Go(func() { d.install(r) })
	r.wg.Go(func() { d.serveBulk(r) })
	d.run = r
	return nil
}

func (d *Daemon) close() {
	r := d.run
	close(r.closed)
	r.conn.Close()
	r.wg.Wait()
	d.run = nil
	// A new start trusts each sender's next boot id again: a peer whose
	// clock went back across its restart is heard after a stop and start.
	d.peers.resetWindows()
}

func (d *Daemon) bulkOnStart(r *running, syncID uint8) {
	ctx, cancel := context.WithTimeout(context.Background(), bulkOnStartWait)
	defer cancel()
	if err := d.requestBulk(ctx, r, syncID); err != nil {
		d.log.Info("bulk sync on start: no master sent its table", zap.Error(err))
		return
	}
	d.log.Info("bulk sync on start: the masters' tables are installed")
}

// errNotRunning: a send while no mode runs.
var errNotRunning = errors.New("the sync daemon is not running")
