package ctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/ctl/handover"
	"github.com/dplb/dplb/lcore"
)

// Restart and upgrade without loss (docs/design.md, "Restart and
// upgrade"). A stopping lbd holds its lcores' RX, dumps their connection
// tables and the shared persistence templates as sync records, adds the
// listing's counters and the neighbour table, and hands the lot to the
// next lbd: across exec in a memfd (an upgrade) or in restart.state_file
// (a plain restart). The next lbd starts its lcores held, installs the
// records through the same command the connection sync uses, carries the
// counters on, and only then lets its lcores receive.

// handoverSlack is room in a dump beyond the entries the lcores publish
// (a few made between the count and the dump).
const handoverSlack = 1024

// collectHandover reads what the next lbd needs: every connection and
// persistence template, each real server's counters (raw and the
// listing's baseline base), the neighbours. The caller has held the
// lcores' RX, so the tables no longer change but for expiry.
func (c *Controller) collectHandover(base baselines, configPath string) (handover.State, error) {
	s := handover.State{Written: time.Now(), ConfigPath: configPath, HA: c.HAState()}
	// The next lbd keeps it unless its configuration sets one: a FullNAT
	// connection's local port was chosen for its owner under it.
	s.SteeringKey = lcore.CurrentSteeringKey()
	var most uint64
	for _, ws := range c.dp.WorkerStats() {
		most = max(most, ws[lcore.Conns])
	}
	v := c.view(nil)
	var templates uint64
	for i := range v.Services {
		v.Services[i].each(func(r *ServerView) { templates += r.Persistent })
	}
	perWorker := most + templates + handoverSlack
	conns, truncated, err := c.dp.DumpConns(lcore.ConnFilter{}, int(perWorker)*c.dp.NumWorkers())
	if err != nil {
		return s, err
	}
	if truncated {
		c.log.Warn("handover: the connection dump was truncated; some connections are not handed over")
	}
	for _, ci := range conns {
		if r, ok := syncable(&ci); ok {
			s.Records = append(s.Records, r)
		}
	}
	// Read again after the dump: by now the lcores have published the
	// counters of the last packets they handled before the hold.
	v = c.view(nil)
	for i := range v.Services {
		v.Services[i].each(func(r *ServerView) {
			b := base[r.key]
			s.Counters = append(s.Counters, handover.DestCounters{
				Proto: r.key.svc.Proto, VIP: r.key.svc.VIP, VIP6: r.key.svc.VIP6, VPort: r.key.svc.Port,
				RIP: r.key.addr, RIP6: r.key.addr6, RPort: r.key.port,
				Counters: counterArray(r.Stats), Base: counterArray(b),
			})
		})
	}
	c.mu.Lock()
	for ip, e := range c.neigh.entries {
		s.Neighbours = append(s.Neighbours, handover.Neighbour{IP: ip, MAC: e.mac, Port: uint16(e.port)})
	}
	for ip, e := range c.neigh6.entries {
		s.Neighbours6 = append(s.Neighbours6, handover.Neighbour6{IP: ip, MAC: e.mac, Port: uint16(e.port)})
	}
	c.mu.Unlock()
	return s, nil
}

func counterArray(c Counters) [5]uint64 {
	return [5]uint64{c.Conns, c.InPkts, c.OutPkts, c.InBytes, c.OutBytes}
}

func countersFrom(a [5]uint64) Counters {
	return Counters{Conns: a[0], InPkts: a[1], OutPkts: a[2], InBytes: a[3], OutBytes: a[4]}
}

// HandoverResult is what a starting lbd made of a handover.
type HandoverResult struct {
	Records   int // records handed over
	Installed uint32
	// Refused by reason: no such service or real server here, no room, a
	// live entry holding the keys, an impossible state.
	NoService, NoDest, TableFull, Conflict, Invalid uint32
	// A FullNAT server here and not in the record (or the reverse); a
	// local port this worker does not own or another connection holds.
	FullNAT, LocalPort   uint32
	Counters, Neighbours int
	HA                   string // the HA state taken over, when not the configuration's
}

// String is the result for the log and lbctl -L's Info.
func (r HandoverResult) String() string {
	s := fmt.Sprintf("%d of %d connections and templates installed (no_service %d, no_dest %d, table_full %d, conflict %d, invalid %d, "+
		"fullnat_unmatched %d, local_port_taken %d), counters of %d real servers, %d neighbours",
		r.Installed, r.Records, r.NoService, r.NoDest, r.TableFull, r.Conflict, r.Invalid, r.FullNAT, r.LocalPort, r.Counters, r.Neighbours)
	if r.HA != "" {
		s += ", ha state " + r.HA
	}
	return s
}

// restoreHandover applies a handed-over state to a controller whose
// lcores run held: the neighbours first (the first forwarded packet finds
// its next hop), the counters (the listings go on from where they were;
// base receives the -Z baselines), then the connections and templates.
func (c *Controller) restoreHandover(s *handover.State, base baselines) (HandoverResult, error) {
	res := HandoverResult{Records: len(s.Records)}
	now := time.Now()
	c.mu.Lock()
	known := map[destKey]bool{}
	for i := range c.services {
		c.services[i].eachServer(func(r *server) { known[r.key] = true })
	}
	c.carried = map[destKey]Counters{}
	for _, dc := range s.Counters {
		k := destKey{svc: lcore.ServiceKey{VIP: dc.VIP, VIP6: dc.VIP6, Port: dc.VPort, Proto: dc.Proto}, addr: dc.RIP, addr6: dc.RIP6, port: dc.RPort}
		if !known[k] {
			continue // not a real server here: its counters end with it
		}
		c.carried[k] = countersFrom(dc.Counters)
		if dc.Base != [5]uint64{} {
			base[k] = countersFrom(dc.Base)
		}
		res.Counters++
	}
	changed := false
	for _, n := range s.Neighbours {
		if int(n.Port) < len(c.ports) && c.neigh.learn(n.IP, n.MAC, int(n.Port), now) {
			changed = true
			res.Neighbours++
		}
	}
	for _, n := range s.Neighbours6 {
		if int(n.Port) < len(c.ports) && c.neigh6.learn(n.IP, n.MAC, int(n.Port), now) {
			changed = true
			res.Neighbours++
		}
	}
	var err error
	if changed {
		c.gen++
		next := c.snap.WithNeighbours(c.gen, c.neigh.macs())
		next.Neigh6 = c.neigh6.macs()
		if err = c.dp.Publish(next); err == nil {
			c.snap = next
		}
	}
	c.mu.Unlock()
	if err != nil {
		return res, fmt.Errorf("neighbours: %w", err)
	}
	err = c.installHandover(s.Records, &res)
	// keepalived set the HA state at run time and will not set it again:
	// the next lbd takes it over, not the configuration's.
	if s.HA != "" && s.HA != c.HAState() {
		if herr := c.SetHAState(s.HA == "master"); herr != nil {
			err = errors.Join(err, herr)
		}
		res.HA = s.HA
	}
	return res, err
}

// handoverInstallWait bounds the wait for the lcores to install a
// handover: longer than a sync's (InstallSynced), as the whole table
// comes at once and the lcores do nothing else yet.
const handoverInstallWait = 10 * time.Second

// installHandover installs a handover's records (installRecords, with a
// longer wait) and adds the counts to sum; records a worker did not take
// in time are an error.
func (c *Controller) installHandover(recs []lcore.SyncConn, sum *HandoverResult) error {
	res := c.installRecords(recs, handoverInstallWait)
	sum.Installed += res[installInstalled]
	sum.NoService += res[installNoService]
	sum.NoDest += res[installNoDest]
	sum.TableFull += res[installTableFull]
	sum.Conflict += res[installConflict]
	sum.Invalid += res[installInvalid]
	sum.FullNAT += res[installFullNAT]
	sum.LocalPort += res[installLocalPort]
	if lost := res[installRingFull] + res[installTimeout]; lost != 0 {
		return fmt.Errorf("the lcores did not install %d of the handed-over connections within %v", lost, handoverInstallWait)
	}
	return nil
}

// restoreSyncDaemons makes the running sync daemons those the lbd before
// this one ran (keepalived's notify script started them at run time and
// will not again), when it ran any: modes the configuration started but
// it did not run stop, the others start.
func restoreSyncDaemons(d *connsync.Daemon, want []handover.SyncDaemon, log *zap.Logger) {
	if d == nil || len(want) == 0 {
		return
	}
	running := map[connsync.Mode]bool{}
	for _, st := range d.Status() {
		running[st.Mode] = true
	}
	wanted := map[connsync.Mode]bool{}
	for _, w := range want {
		mode, err := connsync.ParseMode(w.Mode)
		if err != nil {
			continue
		}
		wanted[mode] = true
		if running[mode] {
			continue
		}
		if err := d.Start(mode, w.SyncID, w.Interface); err != nil {
			log.Error("handover: sync daemon not started again", zap.String("mode", w.Mode), zap.Error(err))
		} else {
			log.Info("handover: sync daemon started again", zap.String("mode", w.Mode), zap.Uint8("syncid", w.SyncID))
		}
	}
	for mode := range running {
		if !wanted[mode] {
			if err := d.Stop(mode); err != nil {
				log.Error("handover: sync daemon not stopped", zap.Stringer("mode", mode), zap.Error(err))
			}
		}
	}
}

// logHandover logs what a starting lbd made of a handover.
func logHandover(log *zap.Logger, how string, s *handover.State, r HandoverResult) {
	log.Info("handover installed", zap.String("from", how), zap.Int("writer_pid", s.PID),
		zap.Duration("age", time.Since(s.Written).Round(time.Millisecond)), zap.String("result", r.String()))
}

// loadIncoming finds the handover this lbd starts from: the one passed
// across exec, else restart.state_file (deleted once read, so that it
// is never installed twice). A handover that does not decode or is not
// for this lbd now is refused with its reason in the log, and lbd
// starts empty. from says where it came from.
func loadIncoming(opts RunOptions, cfg conf.Config, log *zap.Logger) (s *handover.State, from string) {
	b, from := opts.Incoming, "upgrade"
	if b == nil {
		path := cfg.Restart.StateFile
		if path == "" {
			return nil, ""
		}
		from = "state file " + path
		var err error
		b, err = handover.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, ""
		}
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			log.Warn("restart.state_file not removed", zap.String("path", path), zap.Error(rerr))
		}
		if err != nil {
			log.Warn("handover refused: starting with an empty connection table", zap.String("from", from), zap.Error(err))
			return nil, ""
		}
	}
	st, err := handover.Decode(b)
	if err == nil {
		err = st.Check(opts.ConfigPath, time.Now(), cfg.Restart.MaxAge)
	}
	if err != nil {
		log.Warn("handover refused: starting with an empty connection table", zap.String("from", from), zap.Error(err))
		return nil, ""
	}
	return &st, from
}

// handOver, as Run stops, collects the handover for the next lbd when
// there is to be one: for an upgrade (to opts.Outgoing) or a restart
// with restart.state_file. The lcores are held first: nothing changes
// the tables while they are read, and nothing is forwarded that the
// next lbd would not know of.
func handOver(dp Runtime, c *Controller, ops *Ops, cfg conf.Config, opts RunOptions, log *zap.Logger) {
	upgrading := opts.Upgrading != nil && opts.Upgrading()
	if !upgrading && cfg.Restart.StateFile == "" {
		return
	}
	dp.HoldRX(true)
	t0 := time.Now()
	s, err := c.collectHandover(ops.baselines(), opts.ConfigPath)
	if err != nil {
		log.Error("handover not collected: the next lbd starts with an empty connection table", zap.Error(err))
		return
	}
	s.PID = os.Getpid()
	s.Services = ops.servicesHandover()
	if ops.syncd != nil {
		for _, st := range ops.syncd.Status() {
			s.SyncDaemons = append(s.SyncDaemons, handover.SyncDaemon{Mode: st.Mode.String(), SyncID: st.SyncID, Interface: st.Interface})
		}
		s.Peers = ops.syncd.Hellos()
	}
	b := handover.Encode(nil, s)
	fields := []zap.Field{zap.Int("records", len(s.Records)), zap.Int("counters", len(s.Counters)),
		zap.Int("neighbours", len(s.Neighbours)+len(s.Neighbours6)), zap.Int("peers", len(s.Peers)), zap.Int("bytes", len(b)), zap.Duration("took", time.Since(t0))}
	if upgrading {
		opts.Outgoing(b)
		log.Info("handover ready for the new binary", fields...)
		return
	}
	if err := handover.WriteFile(cfg.Restart.StateFile, b); err != nil {
		log.Error("restart.state_file not written: the next lbd starts with an empty connection table", zap.Error(err))
		return
	}
	log.Info("handover written to restart.state_file", append(fields, zap.String("path", cfg.Restart.StateFile))...)
}

// noteHandover keeps what a handover gave, for the listing's Info.
func (c *Controller) noteHandover(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handover = s
}

// pullTable asks the sync peers for their whole table (a bulk request)
// and waits at most wait for it to be installed; lbd then forwards with
// whatever arrived. It returns what happened, for the listing.
func pullTable(ctx context.Context, d *connsync.Daemon, wait time.Duration, log *zap.Logger) string {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t0 := time.Now()
	if err := d.RequestBulk(ctx); err != nil {
		log.Warn("sync peers' table not pulled: forwarding with what arrived", zap.Duration("waited", time.Since(t0)), zap.Error(err))
		return fmt.Sprintf("sync peers: no whole table within %v (%v)", wait, err)
	}
	log.Info("sync peers' table pulled and installed", zap.Duration("took", time.Since(t0)))
	return "sync peers: whole table pulled (see dplb_sync_install_records_total)"
}
