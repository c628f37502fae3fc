// Command lbd is dplb's load-balancer daemon: a DPDK dataplane doing
// LVS-style virtual services, driven by lbctl over a Unix socket.
//
//	lbd -c /etc/dplb/lbd.yaml
//	kill -USR2 $(pidof lbd)   # upgrade in place to the binary at lbd's path (lbctl upgrade)
//	echo 'a password' | lbd -hash-password   # a bcrypt hash for web.users
//	lbd doctor -c /etc/dplb/lbd.yaml [-o json]   # check the host for it
//	lbd import-keepalived [-f /etc/keepalived/keepalived.conf]   # its virtual servers as lbd.yaml services
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"strings"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl"
	"github.com/dplb/dplb/ctl/doctor"
	"github.com/dplb/dplb/ctl/handover"
	"github.com/dplb/dplb/ctl/web"
	"github.com/dplb/dplb/lcore/runtime"
)

func init() {
	// The main goroutine initialises DPDK: its thread becomes the EAL main lcore.
	goruntime.LockOSThread()
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "doctor" {
		os.Exit(doctorMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "import-keepalived" {
		os.Exit(importKeepalivedMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	path := flag.String("c", "/etc/dplb/lbd.yaml", "configuration file (YAML)")
	check := flag.Bool("check", false, "validate the configuration and exit")
	hashPassword := flag.Bool("hash-password", false, "read a password on stdin, print its bcrypt hash for web.users and exit")
	flag.Parse()
	if *hashPassword {
		if err := printHash(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "lbd: -hash-password: %v\n", err)
			os.Exit(2)
		}
		return
	}

	cfg, err := conf.Load(*path) // validated, but for the scheduler names
	if err == nil {
		err = cfg.CheckSchedulers(ctl.Schedulers())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbd: %v\n", err)
		os.Exit(2)
	}
	if *check {
		fmt.Println("lbd: configuration OK")
		return
	}
	log, level, err := newLogger(cfg.Log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbd: log: %v\n", err)
		os.Exit(2)
	}
	defer log.Sync()

	// An upgrading lbd passed its connections across exec; read them
	// before anything else can take the descriptor's number.
	incoming, _, herr := handover.FromEnv()
	if herr != nil {
		log.Warn("handover refused: starting with an empty connection table", zap.Error(herr))
	}
	control, cerr := handover.ControlFromEnv()
	if cerr != nil {
		log.Warn("control socket not taken over: listening anew", zap.Error(cerr))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	self, err := os.Executable() // now: a package may replace the file later
	if err != nil {
		self = ""
	}
	up := &upgrader{config: *path, self: self, run: ctx, stop: stopRun}
	// SIGUSR2 upgrades to the binary at lbd's own path, as lbctl upgrade.
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	go func() {
		for range usr2 {
			log.Info("SIGUSR2: upgrading", zap.String("binary", self))
			if bin, err := up.request(""); err != nil {
				log.Error("upgrade refused, lbd keeps running", zap.String("error", err.Error()))
			} else {
				log.Info("upgrade: handing over to a new binary", zap.String("binary", bin))
			}
		}
	}()
	// SIGHUP reloads the configuration file, as lbctl reload does.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{}, 1)
	go func() {
		for range hup {
			log.Info("SIGHUP: reloading", zap.String("path", *path))
			select {
			case reload <- struct{}{}:
			default: // a reload is already pending
			}
		}
	}()

	opts := ctl.RunOptions{
		ConfigPath: *path,
		Reload:     reload,
		SetLevel: func(l string) error {
			lv, err := zapcore.ParseLevel(l)
			if err == nil {
				level.SetLevel(lv)
			}
			return err
		},
		Open:      openRuntime,
		Incoming:  incoming,
		Upgrade:   up.request,
		Upgrading: up.upgrading,
		Outgoing:  up.keep,

		Control:     control,
		KeepControl: up.keepControl,
	}
	if err := ctl.Run(ctx, cfg, log, opts); err != nil {
		log.Error("lbd failed", zap.Error(err))
		if incoming != nil && cfg.Restart.StateFile != "" {
			// The upgrade's handover lived only in memory: leave it where
			// the lbd systemd starts next looks (restart.max_age still
			// bounds its use).
			if werr := handover.WriteFile(cfg.Restart.StateFile, incoming); werr != nil {
				log.Error("the upgrade's handover is lost", zap.Error(werr))
			} else {
				log.Info("the upgrade's handover is kept for the next start", zap.String("path", cfg.Restart.StateFile))
			}
		}
		log.Sync()
		os.Exit(1)
	}
	if up.upgrading() {
		err := up.exec(log)
		log.Error("upgrade: exec failed", zap.Error(err))
		log.Sync()
		os.Exit(1)
	}
	log.Info("lbd stopped")
}

// openRuntime starts DPDK and the ports: the dataplane the controller drives.
func openRuntime(cfg conf.Config, log *zap.Logger) (ctl.Runtime, error) {
	d, err := runtime.Open(cfg, log)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return d, nil
}

// printHash reads one line (the password, without its newline) and
// prints its bcrypt hash.
func printHash(in io.Reader, out io.Writer) error {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return errors.New("empty password")
	}
	h, err := web.HashPassword(pw)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, h)
	return err
}

func newLogger(c conf.Log) (*zap.Logger, zap.AtomicLevel, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, zap.AtomicLevel{}, err
	}
	zc := zap.NewProductionConfig()
	if c.Format == "console" {
		zc = zap.NewDevelopmentConfig()
		zc.DisableStacktrace = true
	}
	zc.Level = zap.NewAtomicLevelAt(level)
	zc.OutputPaths = []string{"stderr"}
	log, err := zc.Build()
	return log, zc.Level, err
}

// doctorMain is `lbd doctor`: check the host for the configuration; exit
// 0 when nothing fails (warnings allowed), 1 when something does, 2 on a
// bad command line.
func doctorMain(args []string) int {
	fs := flag.NewFlagSet("lbd doctor", flag.ContinueOnError)
	path := fs.String("c", "/etc/dplb/lbd.yaml", "configuration file (YAML)")
	output := fs.String("o", "text", "output: text or json")
	root := fs.String("root", "/", "root of the /proc and /sys trees to check")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *output != "text" && *output != "json" {
		fmt.Fprintf(os.Stderr, "lbd doctor: -o %q: want text or json\n", *output)
		return 2
	}
	cfg, err := conf.Load(*path)
	if err == nil {
		err = cfg.Validate(ctl.Schedulers())
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", *path, err)
	}
	findings := doctor.Run(doctor.Host{Root: *root}, cfg, err)
	write := doctor.WriteText
	if *output == "json" {
		write = doctor.WriteJSON
	}
	if err := write(os.Stdout, findings); err != nil {
		fmt.Fprintf(os.Stderr, "lbd doctor: %v\n", err)
		return 2
	}
	if doctor.Failed(findings) {
		return 1
	}
	return 0
}
