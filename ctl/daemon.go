package ctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/bgp"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/ctl/web"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/sched"
)

// Schedulers are the names the configuration may use.
func Schedulers() []string { return sched.Names() }

// RunOptions are what lbd's main gives Run besides the configuration.
type RunOptions struct {
	ConfigPath string             // the file cfg was loaded from; reload re-reads it ("" refuses reload)
	Reload     <-chan struct{}    // each receive reloads the configuration (SIGHUP)
	SetLevel   func(string) error // applies a new log.level on reload; nil: log.level needs a restart
	Open       OpenRuntime        // opens the dataplane (lcore/runtime's Open)

	// Incoming is the handover the lbd before this one passed across exec
	// (an upgrade), encoded; nil: none, and Run loads restart.state_file
	// if there is one.
	Incoming []byte
	// Upgrade serves lbctl upgrade; nil refuses it. It checks the binary
	// ("": the one lbd was started from) and, if it will do, arranges for
	// Run to stop with Upgrading true; it returns the binary's path.
	Upgrade func(binary string) (string, error)
	// Upgrading reports, as Run stops, whether it stops for an upgrade:
	// Run then passes the encoded handover to Outgoing (which the caller
	// hands to the new binary) instead of writing restart.state_file.
	Upgrading func() bool
	Outgoing  func(state []byte)
	// Control is the listening control socket the lbd before this one
	// passed across exec (nil: Run listens on control.socket). When Run
	// stops for an upgrade it hands its own to KeepControl, leaving the
	// socket's file in place, instead of closing it.
	Control     *os.File
	KeepControl func(*os.File)
}

// Run is lbd: it takes the control socket, opens the dataplane (opts.Open:
// DPDK, the ports) and starts the lcores, serves lbctl and /metrics,
// reloads the configuration on opts.Reload, and on ctx's end stops
// everything, checking that every mbuf came back. cfg is valid (conf.Load,
// then CheckSchedulers). The calling goroutine must be locked to its OS
// thread (it becomes the EAL main lcore).
func Run(ctx context.Context, cfg conf.Config, log *zap.Logger, opts RunOptions) (err error) {
	gid := -1
	if g := cfg.Control.Group; g != "" {
		grp, err := user.LookupGroup(g)
		if err != nil {
			return fmt.Errorf("control.group: %w", err)
		}
		gid, _ = strconv.Atoi(grp.Gid)
	}
	// The socket first: a second lbd must fail before it touches DPDK.
	l, err := controlListener(cfg, gid, opts.Control)
	if err != nil {
		return fmt.Errorf("control.socket: %w", err)
	}
	// A duplicate outlives the listener, which the server closes first
	// thing on a stop: the next lbd of an upgrade takes it over.
	dup, err := l.File()
	if err != nil {
		l.Close()
		os.Remove(cfg.Control.Socket)
		return fmt.Errorf("control.socket: %w", err)
	}
	defer keepOrRemoveControl(dup, cfg.Control.Socket, opts)
	defer l.Close()
	var ml net.Listener
	if cfg.Metrics.Listen != "" {
		if ml, err = net.Listen("tcp", cfg.Metrics.Listen); err != nil {
			return fmt.Errorf("metrics.listen: %w", err)
		}
		defer ml.Close()
	}
	var console *web.Console // the browser console, when web.listen is set
	if cfg.Web.Listen != "" {
		if console, err = web.Listen(cfg.Web, log); err != nil {
			return err
		}
		defer console.Close()
	}

	incoming, from := loadIncoming(opts, cfg, log)
	if incoming != nil && incoming.SteeringKey != nil && cfg.Dataplane.SteeringKey == "" {
		// No key configured here: keep the one of the lbd before, so that
		// every handed-over connection keeps its owner (a FullNAT one's
		// local port was chosen for it).
		if kerr := lcore.SetSteeringKey(incoming.SteeringKey); kerr != nil {
			log.Warn("handover: the steering key not taken over", zap.Error(kerr))
		}
	}
	dp, err := opts.Open(cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		inUse, cerr := dp.Close()
		log.Info("mempool in use at exit", zap.Int("in_use", inUse))
		if inUse != 0 {
			cerr = errors.Join(cerr, fmt.Errorf("%d mbufs were not returned to the pool", inUse))
		}
		if err == nil {
			err = cerr
		}
	}()
	ctl, err := NewController(dp, cfg, dp.Hardware(), log)
	if err != nil {
		return err
	}
	// Without a handover, a backup of a sync pair asks its peers for
	// their table.
	pull := incoming == nil && cfg.Sync.Backup && cfg.Sync.KeyFile != "" && cfg.Restart.PullWait > 0
	// With a handover (or a table to pull) the lcores start held: the
	// first packet they read must find its connection installed.
	dp.HoldRX(incoming != nil || pull)
	if err := dp.StartWorkers(ctl.Snapshot()); err != nil {
		return err
	}

	rates := NewRateEstimator(func() View { return ctl.view(nil) }) // IPVS's estimator, for --rate and /metrics
	ops := NewOps(ctl, cfg, opts.ConfigPath, opts.SetLevel, rates, log)
	// Connection sync with the peer directors: on from the start when
	// the configuration says so, else when lbctl --start-daemon asks.
	syncd, err := NewSyncDaemon(cfg.Sync, ctl, log)
	if err != nil {
		return err
	}
	if syncd != nil {
		defer syncd.Close()
		if err := StartSyncModes(syncd, cfg.Sync); err != nil {
			return err
		}
	}
	ops.SetSync(syncd)
	ops.upgrade = opts.Upgrade
	if incoming != nil {
		restoreSyncDaemons(syncd, incoming.SyncDaemons, log)
		if syncd != nil {
			if n, dead := seedPeers(syncd, incoming.Peers, incoming.Written, time.Now(), cfg.Sync.PeerDeadAfter); n > 0 {
				log.Info("peer directors known from the handover", zap.String("from", from), zap.Int("peers", n), zap.Int("dead", dead))
			}
		}
		// lbctl's edits first: the connections to a server lbctl added
		// are installed with it (carry.go).
		if note := ops.adoptServices(incoming.Services); note != "" {
			log.Info(note, zap.String("from", from))
		}
		res, err := ctl.restoreHandover(incoming, ops.base)
		if err != nil {
			log.Error("handover not fully installed", zap.String("from", from), zap.Error(err))
		}
		logHandover(log, from, incoming, res)
		ctl.noteHandover(from + ": " + res.String())
		dp.HoldRX(false)
	}
	if pull {
		ctl.noteHandover(pullTable(ctx, syncd, cfg.Restart.PullWait, log))
		dp.HoldRX(false)
	}
	// The lcores forward: the servers may send to this director's local
	// addresses, which a peer may have taken over while it was away.
	ctl.AnnounceLocalAddrs()

	// BGP (scale-out): announce the healthy VIPs to the routers.
	var ann *announcer
	if cfg.BGP.Enabled() {
		nh, _ := cfg.BGPNextHop() // conf.Validate checked there is one
		nh6, _ := cfg.BGPNextHop6()
		sp, err := bgp.Start(ctx, cfg.BGP, nh, nh6, log)
		if err != nil {
			return err
		}
		defer sp.Stop()
		ann = newAnnouncer(sp, cfg.BGP, ctl, log)
		ops.ann = ann
		ctl.OnLinkChange(ann.poke)
	}

	// Everything below runs on ctx, which ends when the caller's does
	// except for a stop (not an upgrade) with BGP: lbd then withdraws its
	// VIPs first and keeps forwarding for bgp.shutdown_grace, so the
	// routers move new flows to the other directors and the connections
	// here can finish.
	stopping := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-stopping.Done():
		}
		if ann != nil && (opts.Upgrading == nil || !opts.Upgrading()) {
			ann.stop(ctx)
			log.Info("bgp: every VIP withdrawn; stopping after the grace period", zap.Duration("shutdown_grace", cfg.BGP.ShutdownGrace))
			select {
			case <-time.After(cfg.BGP.ShutdownGrace):
			case <-ctx.Done():
			}
		}
		cancel()
	}()
	var wg sync.WaitGroup
	if ann != nil {
		wg.Go(func() { ann.run(ctx) })
	}
	// Health checks: a failed server's weight drops to 0 in the next
	// snapshot, and comes back (with slow start) when it passes again.
	mon := health.New(log, ctl.HealthChanged, health.WithChecker(ctl.checker))
	defer func() {
		// A stop (not an upgrade, whose next lbd goes on checking) says
		// AdminDown to the servers' BFD, which then count no failure.
		if opts.Upgrading == nil || !opts.Upgrading() {
			health.CloseBFD()
		}
	}()
	defer mon.Close()
	ctl.SetHealth(mon)
	// Dynamic feedback: servers' reported load scales their weights.
	fb := feedback.New(log, ctl.FeedbackChanged)
	defer fb.Close()
	ctl.SetFeedback(fb)
	wg.Go(func() {
		if err := fb.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("feedback poller", zap.Error(err))
		}
	})
	wg.Go(func() { rates.Run(ctx) })
	if syncd != nil {
		wg.Go(func() { ctl.takeoverLoop(ctx, syncd, cfg.Sync.PeerDeadAfter) })
	}
	wg.Go(func() {
		if err := mon.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("health monitor", zap.Error(err))
		}
	})
	if opts.Reload != nil {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-opts.Reload:
					// Ops logs the outcome; a refusal leaves everything as it was.
					if _, err := ops.Reload(api.Author{User: "signal", Via: api.ViaSignal}); err != nil {
						log.Error("reload refused", zap.String("error", err.Error()))
					}
				}
			}
		})
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		srv := &api.Server{Handler: ops, AllowGID: gid, Logf: func(f string, a ...any) { log.Sugar().Infof(f, a...) }}
		if err := srv.Serve(ctx, l); err != nil {
			log.Error("control socket", zap.Error(err))
			cancel()
		}
	}()
	var hs *http.Server
	if ml != nil {
		hs = &http.Server{Handler: metricsHandler(dp, ctl, mon, rates, syncd, ann), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(ml); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics", zap.Error(err))
			}
		}()
	}
	if console != nil {
		// The console sends its reads and edits to ops, as lbctl does.
		wg.Go(func() {
			if err := console.Serve(ctx, ops); err != nil {
				log.Error("console", zap.Error(err))
			}
		})
	}
	log.Info("lbd running", zap.String("socket", cfg.Control.Socket), zap.String("metrics", cfg.Metrics.Listen),
		zap.Int("services", len(cfg.Services)))
	ctl.Run(ctx)
	log.Info("stopping")
	if syncd != nil && (opts.Upgrading == nil || !opts.Upgrading()) {
		syncd.Leave() // the peers take this director's local addresses over now
	}
	handOver(dp, ctl, ops, cfg, opts, log)
	if hs != nil {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		hs.Shutdown(sctx)
		scancel()
	}
	wg.Wait()
	return nil
}

// controlListener is the control socket: the one an upgrading lbd passed
// on, if it is bound to control.socket, else a new one. Its file is not
// unlinked when it closes: keepOrRemoveControl decides.
func controlListener(cfg conf.Config, gid int, inherited *os.File) (*net.UnixListener, error) {
	if inherited != nil {
		l, err := net.FileListener(inherited)
		inherited.Close()
		if ul, ok := l.(*net.UnixListener); err == nil && ok && ul.Addr().String() == cfg.Control.Socket {
			ul.SetUnlinkOnClose(false)
			return ul, nil
		}
		if err == nil { // the configuration moved the socket: serve the new path
			l.Close()
		}
	}
	l, err := api.Listen(cfg.Control.Socket, os.FileMode(cfg.Control.SocketMode), gid)
	if err != nil {
		return nil, err
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// keepOrRemoveControl runs as Run returns, after the listener closed:
// stopping for an upgrade, dup (the listening socket) goes to
// opts.KeepControl for the next lbd; otherwise it closes and the
// socket's file goes.
func keepOrRemoveControl(dup *os.File, path string, opts RunOptions) {
	if opts.Upgrading != nil && opts.Upgrading() && opts.KeepControl != nil {
		opts.KeepControl(dup)
		return
	}
	dup.Close()
	os.Remove(path)
}
