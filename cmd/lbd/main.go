// Command lbd is dplb's load-balancer daemon: a DPDK dataplane doing
// LVS-style virtual services, driven by lbctl over a Unix socket.
//
//	lbd -c /etc/dplb/lbd.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl"
)

func init() {
	// The main goroutine initialises DPDK: its thread becomes the EAL main lcore.
	runtime.LockOSThread()
}

func main() {
	path := flag.String("c", "/etc/dplb/lbd.yaml", "configuration file (YAML)")
	check := flag.Bool("check", false, "validate the configuration and exit")
	flag.Parse()

	cfg, err := conf.Load(*path)
	if err == nil {
		err = cfg.Validate(ctl.Schedulers())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbd: %v\n", err)
		os.Exit(2)
	}
	if *check {
		fmt.Println("lbd: configuration OK")
		return
	}
	log, err := newLogger(cfg.Log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbd: log: %v\n", err)
		os.Exit(2)
	}
	defer log.Sync()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// Reloading comes with the control-plane work; until then SIGHUP must
	// not kill the daemon (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			log.Warn("SIGHUP: configuration reload is not supported yet; restart lbd to apply changes")
		}
	}()

	if err := ctl.Run(ctx, cfg, log); err != nil {
		log.Error("lbd failed", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Info("lbd stopped")
}

func newLogger(c conf.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.OutputPaths = []string{"stderr"}
	return zc.Build()
}
