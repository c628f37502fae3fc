// Command demo is the driver behind "make demo": it builds the VS/NAT
// topology in network namespaces, starts lbd in the LB namespace with the
// seeds' example services (TCP VIP:80 round robin over rs1:8080 and
// rs2:8080; TCP VIP:21 -> rs2:21), sends 20 HTTP requests from the client
// namespace, prints which real server answered each and lbctl's tables,
// stops lbd with SIGTERM and removes everything, also on Ctrl-C.
//
// lbd serves its browser console on 127.0.0.1:9443 inside the LB
// namespace, with two demo logins (demo/demo, an admin, and viewer/viewer).
// With -console 10m the demo keeps lbd running that long with a request a
// second and forwards 127.0.0.1:9443 of this host to the console.
//
//	demo -lbd bin/lbd -lbctl bin/lbctl -nshelper bin/nshelper [-hugepages=false] [-console 10m]
//
// Run as root; with -hugepages (the default) run scripts/setup.sh first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

type stdoutLogger struct{}

func (stdoutLogger) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func main() {
	lbd := flag.String("lbd", "bin/lbd", "path of the lbd binary")
	lbctl := flag.String("lbctl", "bin/lbctl", "path of the lbctl binary")
	nshelper := flag.String("nshelper", "bin/nshelper", "path of the nshelper binary (go build ./e2e/nshelper)")
	huge := flag.Bool("hugepages", true, "run lbd with hugepages (reserved by scripts/setup.sh); false: --no-huge")
	requests := flag.Int("n", 20, "HTTP requests to send to the VIP")
	console := flag.Duration("console", 0, "keep lbd running this long with a request a second, its console forwarded to https://127.0.0.1:9443/ on this host")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, stop, *lbd, *lbctl, *nshelper, *huge, *requests, *console)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stopSignals func(), lbdPath, lbctl, nshelper string, huge bool, n int, console time.Duration) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("must run as root (network namespaces)")
	}
	for i, p := range []*string{&lbdPath, &lbctl, &nshelper} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("%s: %w", []string{"-lbd", "-lbctl", "-nshelper"}[i], err)
		}
		*p = abs
	}
	dir, err := os.MkdirTemp("", "dplb-demo-")
	if err != nil {
		return err
	}
	tp := topo.New(stdoutLogger{})
	defer func() {
		fmt.Println("== teardown")
		tp.Teardown()
		if err == nil || ctx.Err() != nil {
			os.RemoveAll(dir)
		} else {
			fmt.Printf("   lbd's configuration and log kept in %s\n", dir)
		}
	}()
	// After the first Ctrl-C the deferred teardown runs; a second one
	// kills the demo at once (scripts/clean.sh then removes the leftovers).
	go func() {
		<-ctx.Done()
		stopSignals()
	}()

	fmt.Printf("== topology (suffix %s)\n", tp.Suffix())
	nat, err := topo.BuildNAT(tp, 2)
	if err != nil {
		return err
	}
	fmt.Printf("   client  %-22s %s in %s\n", nat.Client.Addr, nat.Client.If, nat.Client.NS)
	fmt.Printf("   lbd     wan=%s (%s)  lan=%s (%s)  in %s\n", nat.WANIf, nat.WANAddr, nat.LANIf, nat.LANAddr, nat.LBNS)
	for _, h := range nat.Servers {
		fmt.Printf("   %-7s %-22s %s in %s\n", h.Name, h.Addr, h.If, h.NS)
	}
	fmt.Printf("   VIP     %s\n", nat.VIP)
	if err := harness.StartServers(tp, nat, nshelper, map[string]string{"rs2": ":8080,:21"}, 10*time.Second); err != nil {
		return err
	}

	cfg := harness.NATConfig(nat, tp.Suffix(), dir)
	cfg.FilePrefix = "dplb-demo-" + tp.Suffix()
	cfg.HugePages = huge
	cfg.Services = append(cfg.Services, harness.Service{VIP: nat.VIP.String(), Port: 21, Scheduler: "rr",
		Servers: []harness.Server{{Address: nat.Servers[1].Addr.Addr().String(), Port: 21, Weight: 1}}})
	if cfg.Web, err = consoleConfig(dir); err != nil {
		return err
	}
	cfgPath, err := harness.WriteConfig(cfg, dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Join("/var/run/dpdk", cfg.FilePrefix))
	logFile, err := os.Create(filepath.Join(dir, "lbd.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	var log harness.Buffer
	fmt.Printf("== starting lbd -c %s (log: %s)\n", cfgPath, logFile.Name())
	lbd, err := tp.Start(nat.LBNS, io.MultiWriter(logFile, &log), lbdPath, "-c", cfgPath)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = harness.WaitReady(rctx, lbd, lbctl, cfg.Socket)
	cancel()
	if err != nil {
		fmt.Printf("-- lbd log (last 30 lines):\n%s\n", harness.Tail(log.String(), 30))
		return err
	}

	url := "http://" + nat.VIP.String() + "/"
	// The first connection may be lost while ARP resolves on both sides.
	for i := 0; i < 5; i++ {
		warm, err := harness.Get(ctx, tp, nat.Client.NS, nshelper, url, 1, 2*time.Second)
		if err != nil {
			return err
		}
		if warm[0].Err == "" {
			fmt.Printf("== warm-up request answered by %s after %d failure(s)\n", warm[0].Server(), i)
			break
		}
	}
	fmt.Printf("== %d requests from the client to %s (each on a new connection)\n", n, url)
	res, err := harness.Get(ctx, tp, nat.Client.NS, nshelper, url, n, 3*time.Second)
	if err != nil {
		return err
	}
	failed := 0
	for _, r := range res {
		if r.Err != "" {
			failed++
			fmt.Printf("   #%-3d FAILED: %s\n", r.I+1, r.Err)
			continue
		}
		fmt.Printf("   #%-3d answered by %s  (server saw client %s; reply from %s)\n", r.I+1, r.Server(), r.SeenClient(), r.Remote)
	}
	url21 := "http://" + nat.VIP.String() + ":21/"
	if res21, err := harness.Get(ctx, tp, nat.Client.NS, nshelper, url21, 1, 3*time.Second); err == nil {
		if r := res21[0]; r.Err == "" {
			fmt.Printf("== %s answered by %s\n", url21, r.Server())
		} else {
			fmt.Printf("== %s FAILED: %s\n", url21, r.Err)
		}
	}
	for _, args := range [][]string{{"-L", "-n"}, {"-L", "-n", "--stats"}} {
		out, err := harness.LBCtl(ctx, lbctl, cfg.Socket, args...)
		fmt.Printf("== lbctl %s\n%s", strings.Join(args, " "), out)
		if err != nil {
			return err
		}
	}

	fmt.Printf("== console: https://%s/ inside namespace %s (self-signed; its SHA-256 is in lbd's log)\n", consoleAddr, nat.LBNS)
	fmt.Println("   log in as demo / demo (admin) or viewer / viewer (read only)")
	if console > 0 {
		if err := serveConsole(ctx, tp, nat.LBNS, nat.Client.NS, nshelper, url, console); err != nil {
			return err
		}
	} else {
		fmt.Println("   (make demo DEMOARGS=-console=10m keeps lbd running and forwards it to this host)")
	}

	fmt.Println("== stopping lbd (SIGTERM)")
	if err := lbd.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if !lbd.Wait(10 * time.Second) {
		return errors.New("lbd did not exit within 10s of SIGTERM")
	}
	fmt.Printf("   lbd exit status %d\n", lbd.ExitCode())
	if inUse, line, ok := harness.MempoolInUse(log.String()); ok {
		fmt.Printf("   mbufs in use at exit: %d\n", inUse)
	} else {
		fmt.Printf("   no mempool line in lbd's log %q\n", line)
	}
	if code := lbd.ExitCode(); code != 0 {
		return fmt.Errorf("lbd exited with status %d", code)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d requests failed", failed, n)
	}
	return nil
}
