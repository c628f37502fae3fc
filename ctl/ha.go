package ctl

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// High availability, the controller's side (docs/design.md, "High
// availability"): the sync sender drains the workers' sync rings
// (SyncRecords), the sync receiver hands records to the workers that own
// them (InstallSynced), and keepalived's notify hook makes this lbd master
// or backup (SetHAState).

const (
	// syncBatchMax bounds the records one worker installs in one commands
	// job, so a large batch delays its packets by little.
	syncBatchMax = 256
	// installWait bounds how long InstallSynced waits for the workers.
	installWait = time.Second
	// announceRounds and announceSpacing: gratuitous ARP on takeover is
	// sent three times a second apart, as keepalived does for its VIPs.
	announceRounds  = 3
	announceSpacing = time.Second
)

// Results of installing a synced record, the label of
// dplb_sync_install_records_total.
const (
	installInstalled = iota
	installNoService
	installNoDest
	installTableFull
	installConflict
	installInvalid
	installFullNAT   // a FullNAT server here and not in the record, or the reverse (lcore.SyncBatch.FullNAT)
	installLocalPort // the record's local port is not this worker's or is taken (lcore.SyncBatch.LocalPort)
	installRingFull  // the worker's command ring stayed full: not handed over
	installTimeout   // the worker did not confirm within installWait
	numInstallResults
)

var installResultNames = [numInstallResults]string{"installed", "no_service", "no_dest", "table_full", "conflict", "invalid",
	"fullnat_unmatched", "local_port_taken", "ring_full", "timeout"}

// haState is the controller's HA state; backup, sync and epoch are
// guarded by the controller's mu.
type haState struct {
	backup bool
	sync   lcore.SyncParams
	epoch  uint64        // grows with each SetHAState: a stale takeover stops announcing
	spaced time.Duration // between announcement rounds (tests shorten it)

	syncMu   sync.Mutex // one reader of the workers' sync rings at a time
	installs [numInstallResults]atomic.Uint64
	// announceLost counts gratuitous ARPs not sent: worker 0's command
	// ring stayed full.
	announceLost atomic.Uint64
	// takeovers counts dead peers' local addresses taken over (takeover.go).
	takeovers atomic.Uint64
}

// SyncRecords appends to buf the records the workers' sync rings hold
// and returns it; it never blocks on the workers. The sync sender calls it.
func (c *Controller) SyncRecords(buf []lcore.SyncConn) []lcore.SyncConn {
	c.ha.syncMu.Lock()
	defer c.ha.syncMu.Unlock()
	return c.dp.SyncRecords(buf)
}

// InstallSynced hands records received from a peer director to the workers
// that own them and waits at most installWait for them (installRecords). A
// worker is never waited on: a full command ring or a slow worker costs
// the records, counted.
func (c *Controller) InstallSynced(recs []lcore.SyncConn) {
	for i, v := range c.installRecords(recs, installWait) {
		c.ha.installs[i].Add(uint64(v))
	}
}

// installRecords hands records to the workers that own them
// (lcore.SyncConn.Owner; a FullNAT connection's steering entry to the
// owner of its local port, when that is another worker), in batches of at most syncBatchMax, and waits up
// to wait for them. It returns how many records
// had each result (a steering entry counts only when refused).
func (c *Controller) installRecords(recs []lcore.SyncConn, wait time.Duration) (res [numInstallResults]uint32) {
	if len(recs) == 0 {
		return res
	}
	c.adoptPeerServers(recs)
	n := max(c.dp.NumWorkers(), 1)
	per := make([][]lcore.SyncConn, n)
	for _, r := range recs {
		w := r.Owner(n)
		per[w] = append(per[w], r)
		// A FullNAT or NAT64 connection's local port may be another
		// worker's here (the peer's worker count or steering key
		// differ): that worker gets its steering entry, which holds the
		// port and hands the server's packets to w.
		o := w
		switch {
		case r.HasExt && r.Fwd == fwd.FullNAT && r.RIP != 0:
			o = lcore.Owner(r.Ext.LIP, r.Ext.LPort, n)
		case r.HasExt && r.Fwd == fwd.FullNAT && r.IPv6 && !r.Six.LIP.IsUnspecified(): // FNAT66
			o = lcore.Owner6(&r.Six.LIP, r.Ext.LPort, n)
		}
		if o != w {
			s := r
			s.Steer, s.SteerTo = true, w
			per[o] = append(per[o], s)
		}
	}
	deadline := time.Now().Add(wait)
	var batches []*lcore.SyncBatch
	for w, rs := range per {
		for len(rs) > 0 {
			k := min(len(rs), syncBatchMax)
			b := &lcore.SyncBatch{Records: rs[:k:k]}
			rs = rs[k:]
			if !c.command(w, lcore.Command{Kind: lcore.CmdSyncInstall, Sync: b}, deadline) {
				res[installRingFull] += uint32(k)
				continue
			}
			batches = append(batches, b)
		}
	}
	for _, b := range batches {
		for !b.Done() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
		if !b.Done() {
			res[installTimeout] += uint32(len(b.Records))
			continue
		}
		res[installInstalled] += b.Installed
		res[installNoService] += b.NoService
		res[installNoDest] += b.NoDest
		res[installTableFull] += b.TableFull
		res[installConflict] += b.Conflict
		res[installInvalid] += b.Invalid
		res[installFullNAT] += b.FullNAT
		res[installLocalPort] += b.LocalPort
	}
	return res
}

// command pushes a command to a worker, retrying while its ring is full
// until deadline.
func (c *Controller) command(worker int, cmd lcore.Command, deadline time.Time) bool {
	for !c.dp.SendCommand(worker, cmd) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Microsecond)
	}
	return true
}

// SetSyncParams publishes the workers' sync rules (the sync daemon's
// threshold, period and refresh; On false stops the workers' copying).
func (c *Controller) SetSyncParams(p lcore.SyncParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.publishHA(p, c.ha.backup); err != nil {
		c.log.Error("sync parameters not published", zap.Error(err))
	}
}

// SyncParams are the workers' sync rules now.
func (c *Controller) SyncParams() lcore.SyncParams {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ha.sync
}

// SetHAState makes this lbd the master of its pair (it answers ARP for the
// VIPs and floating addresses, and announces them by gratuitous ARP) or
// the backup (it answers for neither). On error nothing changed.
func (c *Controller) SetHAState(master bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.publishHA(c.ha.sync, !master); err != nil {
		return fmt.Errorf("ha state %s: lcores did not take it: %w", haStateName(master), err)
	}
	c.ha.epoch++
	c.log.Info("ha state", zap.String("state", haStateName(master)))
	if master {
		targets := c.announceTargets()
		c.announce(targets)
		go c.announceAgain(c.ha.epoch, targets)
	}
	return nil
}

// HAState is "master" or "backup".
func (c *Controller) HAState() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return haStateName(!c.ha.backup)
}

func haStateName(master bool) string {
	if master {
		return "master"
	}
	return "backup"
}

// publishHA publishes the running snapshot with other sync rules and HA
// state; the caller holds mu.
func (c *Controller) publishHA(p lcore.SyncParams, backup bool) error {
	c.gen++ // spent even on failure: some lcores may have taken it
	next := c.snap.WithHA(c.gen, p, backup)
	if err := c.dp.Publish(next); err != nil {
		return err
	}
	c.snap, c.ha.sync, c.ha.backup = next, p, backup
	return nil
}

// announceTarget is one gratuitous ARP, or unsolicited NA when ip6 is
// set: an address on a port.
type announceTarget struct {
	port int
	ip   uint32
	ip6  hdr.Addr6
}

// addr is the address t announces.
func (t announceTarget) addr() netip.Addr {
	if !t.ip6.IsUnspecified() {
		return t.ip6.Netip()
	}
	return addrOf(t.ip)
}

// announceTargets are every VIP on each port facing clients, each
// floating address on its port and each local address (draining ones
// too) on the port whose subnet holds it; the caller holds mu.
func (c *Controller) announceTargets() []announceTarget {
	var vips []uint32
	for _, s := range c.snap.Services {
		if !s.Key.IsIPv6() && s.SNAT == nil { // IPv6 VIPs: worker 0's unsolicited NAs at takeover; a SNAT rule's key is no VIP
			vips = append(vips, s.Key.VIP)
		}
	}
	slices.Sort(vips)
	vips = slices.Compact(vips)
	var out []announceTarget
	for i, p := range c.snap.Ports {
		if p.FacesClients {
			for _, v := range vips {
				out = append(out, announceTarget{port: i, ip: v})
			}
		}
		for _, f := range p.Floating {
			out = append(out, announceTarget{port: i, ip: f})
		}
		// FullNAT local addresses move with the master like the VIPs:
		// the servers' replies must reach it. So do removed ones whose
		// connections still drain (lbd answers ARP for them).
		for _, s := range c.snap.Services {
			for _, l := range s.LocalAddrs {
				if l&p.Mask == p.Net && !slices.Contains(out, announceTarget{port: i, ip: l}) {
					out = append(out, announceTarget{port: i, ip: l})
				}
			}
		}
		for _, l := range append(lipsOf4(c.lipDrain), lipsOf4(c.lipTaken)...) {
			if l&p.Mask == p.Net && !slices.Contains(out, announceTarget{port: i, ip: l}) {
				out = append(out, announceTarget{port: i, ip: l})
			}
		}
	}
	return out
}

// announce has worker 0 send one round of gratuitous ARP.
func (c *Controller) announce(targets []announceTarget) {
	deadline := time.Now().Add(100 * time.Millisecond)
	for _, t := range targets {
		if !c.command(0, lcore.Command{Kind: lcore.CmdAnnounce, Port: t.port, IP: t.ip, IP6: t.ip6}, deadline) {
			c.ha.announceLost.Add(1)
		}
	}
}

// announceAgain sends the later rounds, unless the state changed since.
func (c *Controller) announceAgain(epoch uint64, targets []announceTarget) {
	spacing := announceSpacing
	if c.ha.spaced > 0 {
		spacing = c.ha.spaced
	}
	for round := 1; round < announceRounds; round++ {
		time.Sleep(spacing)
		c.mu.Lock()
		current := c.ha.epoch == epoch && !c.ha.backup
		c.mu.Unlock()
		if !current {
			return
		}
		c.announce(targets)
	}
}

// haCollector exports the HA state and the install counts to /metrics.
type haCollector struct {
	ctl                     *Controller
	master, installs, garps *prometheus.Desc
	taken, takeovers        *prometheus.Desc
}

func newHACollector(c *Controller) *haCollector {
	d := prometheus.NewDesc
	return &haCollector{
		ctl:       c,
		master:    d("dplb_ha_master", "1 while this lbd is the master of its pair (answers ARP for the VIPs and floating addresses), 0 as backup.", nil, nil),
		installs:  d("dplb_sync_install_records_total", "Connection records received from a peer director, by what installing them gave (installed, no_service, no_dest, table_full, conflict, invalid, ring_full, timeout).", []string{"result"}, nil),
		garps:     d("dplb_ha_announce_lost_total", "Gratuitous ARPs of a takeover not sent: worker 0's command ring stayed full.", nil, nil),
		taken:     d("dplb_sync_local_addresses_taken_over", "Dead peer directors' FullNAT local addresses this lbd answers for now.", nil, nil),
		takeovers: d("dplb_sync_local_address_takeovers_total", "Dead peer directors' FullNAT local addresses taken over since lbd started.", nil, nil),
	}
}

func (h *haCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(h, ch) }

func (h *haCollector) Collect(ch chan<- prometheus.Metric) {
	master := 0.0
	if h.ctl.HAState() == "master" {
		master = 1
	}
	ch <- prometheus.MustNewConstMetric(h.master, prometheus.GaugeValue, master)
	for i := range h.ctl.ha.installs {
		ch <- prometheus.MustNewConstMetric(h.installs, prometheus.CounterValue, float64(h.ctl.ha.installs[i].Load()), installResultNames[i])
	}
	ch <- prometheus.MustNewConstMetric(h.garps, prometheus.CounterValue, float64(h.ctl.ha.announceLost.Load()))
	h.ctl.mu.Lock()
	taken := len(h.ctl.lipTaken)
	h.ctl.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(h.taken, prometheus.GaugeValue, float64(taken))
	ch <- prometheus.MustNewConstMetric(h.takeovers, prometheus.CounterValue, float64(h.ctl.ha.takeovers.Load()))
}
