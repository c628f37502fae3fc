package ctl

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// The sync daemon in lbd (package connsync): made at start when
// sync.key_file is set, its modes started from the configuration and by
// lbctl --start-daemon / --stop-daemon.

// maxBulkRecords bounds one bulk dump, as the connection listing is
// bounded: a dump is held in memory while it is sent.
const maxBulkRecords = 4 << 20

// SyncTable dumps every connection and persistence template the workers
// hold as sync records, for a peer's bulk request. Entries without a real
// server (a template whose server was removed) are left out.
func (c *Controller) SyncTable() ([]lcore.SyncConn, error) {
	conns, truncated, err := c.dp.DumpConns(lcore.ConnFilter{}, c.dumpLimit())
	if err != nil {
		return nil, err
	}
	if truncated {
		c.log.Warn("bulk sync: the table has more entries than one dump sends", zap.Int("sent", len(conns)))
	}
	out := make([]lcore.SyncConn, 0, len(conns))
	for _, ci := range conns {
		if r, ok := syncable(&ci); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// dumpLimit bounds a dump of every connection: the tables' capacity (the
// dump's buffers are made that large), at most maxBulkRecords.
func (c *Controller) dumpLimit() int {
	return int(min(c.dp.ConnCapacity()+1<<16, maxBulkRecords))
}

// syncable is a dumped entry as a record, for a bulk sync or a
// handover; false for what a record cannot rebuild: a template whose
// server left the service, an IPv6 template (its key holds folds: the
// receiver rebuilds it from the connections), a connection without the
// local port and deltas it needs, a SNAT'd ping.
func syncable(ci *lcore.ConnInfo) (lcore.SyncConn, bool) {
	switch {
	case ci.Proto == hdr.ProtoICMP: // a SNAT'd ping: records carry TCP and UDP
		return lcore.SyncConn{}, false
	case ci.IPv6 && ci.Template:
		return lcore.SyncConn{}, false
	case ci.IPv6:
		fnat66 := ci.Fwd == fwd.FullNAT && !ci.LIP6.IsUnspecified()
		if ci.Fwd == fwd.FullNAT && (!ci.HasExt || ci.RIP == 0 && !fnat66) || (ci.Fwd != fwd.FullNAT || fnat66) && ci.RIP6.IsUnspecified() {
			return lcore.SyncConn{}, false
		}
	case ci.RIP == 0 || ci.VIP == 0 || (!ci.Template && ci.ClientIP == 0):
		return lcore.SyncConn{}, false
	case (ci.SeqAdjusted || ci.Fwd == fwd.FullNAT) && !ci.HasExt:
		return lcore.SyncConn{}, false
	}
	return ci.SyncConn(), true
}

// NewSyncDaemon makes lbd's sync daemon from the configuration, stopped;
// nil when sync.key_file is not set (sync cannot run without a key).
func NewSyncDaemon(cfg conf.Sync, c *Controller, log *zap.Logger) (*connsync.Daemon, error) {
	if cfg.KeyFile == "" {
		return nil, nil
	}
	key, err := connsync.LoadKey("sync.key_file", cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	t := connsync.Transport{Interface: cfg.McastInterface, Port: uint16(cfg.Port)}
	// conf.Validate checked the addresses.
	t.Group, _ = netip.ParseAddr(cfg.McastGroup)
	if cfg.Listen != "" {
		t.Listen, _ = netip.ParseAddr(cfg.Listen)
	}
	for _, p := range cfg.Peers {
		a, _ := netip.ParseAddr(p)
		t.Peers = append(t.Peers, a)
	}
	return connsync.New(c, connsync.Options{Transport: t, Key: key, Log: log.Named("sync"), BulkOnStart: true, TakeOver: cfg.PeerDeadAfter > 0,
		Params: lcore.SyncParams{Threshold: uint32(cfg.Threshold), Period: uint32(cfg.Period), RefreshPeriod: cfg.RefreshPeriod}})
}

// StartSyncModes starts the modes the configuration asks for.
func StartSyncModes(d *connsync.Daemon, cfg conf.Sync) error {
	for _, m := range []struct {
		on   bool
		mode connsync.Mode
	}{{cfg.Master, connsync.Master}, {cfg.Backup, connsync.Backup}} {
		if !m.on {
			continue
		}
		if err := d.Start(m.mode, uint8(cfg.SyncID), ""); err != nil {
			return fmt.Errorf("sync.%s: %w", m.mode, err)
		}
	}
	return nil
}

// errNoSyncKey is lbctl --start-daemon's answer when lbd runs without a key.
var errNoSyncKey = errors.New("sync.key_file: connection sync needs a shared key file in lbd's configuration " +
	"(messages are authenticated with HMAC-SHA256); none is set")

// syncVerb answers --start-daemon, --stop-daemon and -L --daemon.
func (o *Ops) syncVerb(req api.Request) (api.Response, error) {
	d := o.syncd
	if req.Op == api.OpDaemons {
		var resp api.Response
		if d == nil {
			return resp, nil
		}
		for _, s := range d.Status() {
			ad := api.Daemon{Mode: s.Mode.String(), McastInterface: s.Interface, SyncID: int(s.SyncID)}
			for _, p := range s.Peers {
				ad.Peers = append(ad.Peers, p.String())
			}
			resp.Daemons = append(resp.Daemons, ad)
		}
		resp.SyncPeers = o.c.syncPeers(d.Hellos(), time.Now(), o.started.Sync.PeerDeadAfter)
		return resp, nil
	}
	if d == nil {
		return api.Response{}, errNoSyncKey
	}
	if req.Daemon == nil {
		return api.Response{}, errors.New("no sync daemon mode given")
	}
	mode, err := connsync.ParseMode(req.Daemon.Mode)
	if err != nil {
		return api.Response{}, err
	}
	if req.Op == api.OpStopDaemon {
		return api.Response{}, d.Stop(mode)
	}
	id := o.started.Sync.SyncID
	if req.Daemon.SyncID != nil {
		id = *req.Daemon.SyncID
	}
	if id < 0 || id > 255 {
		return api.Response{}, fmt.Errorf("--syncid %d: want 0..255", id)
	}
	return api.Response{}, d.Start(mode, uint8(id), req.Daemon.McastInterface)
}

// syncPeers lists the peers that say hello, alive or not, with the local
// addresses taken over from each, sorted by address.
func (c *Controller) syncPeers(hellos []connsync.PeerHello, now time.Time, deadAfter time.Duration) []api.SyncPeer {
	slices.SortFunc(hellos, func(a, b connsync.PeerHello) int { return a.Peer.Compare(b.Peer) })
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []api.SyncPeer
	for _, h := range hellos {
		p := api.SyncPeer{Peer: h.Peer.String(), State: "alive", HelloAgo: now.Sub(h.At).Seconds()}
		switch {
		case h.Leaving:
			p.State = "leaving"
		case deadAfter > 0 && now.Sub(h.At) > deadAfter:
			p.State = "dead"
		}
		for _, a := range h.LIPs {
			p.LocalAddresses = append(p.LocalAddresses, a.String())
			if c.lipTaken[a] == h.Peer {
				p.TakenOver = append(p.TakenOver, a.String())
			}
		}
		out = append(out, p)
	}
	return out
}
