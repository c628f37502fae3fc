// Command perfrun is dplb's perf run on one machine: it drives lbd with
// lbgen over memif at a series of offered loads and compares it with two
// references measured in the same run, the generator looped back on itself
// (no forwarder at all) and dpdk-testpmd forwarding in lbd's place (a
// zero-work DPDK forwarder, when installed). It prints a table and writes
// perf/results/<date>.json and .svg.
//
//	go build -o bin/lbd ./cmd/lbd && go build -o bin/lbctl ./cmd/lbctl && go build -o bin/lbgen ./cmd/lbgen
//	go run ./perf/cmd/perfrun -rates 100k,500k,1M,2M,max
//
// lbd runs with its EAL main lcore on CPU 0 and its one worker on CPU 1;
// lbgen runs on CPU 0 at nice 19 (see perf/README.md for why).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	lbd, lbctl, lbgen, testpmd string
	out                        string
	rates                      string
	warmup, duration           time.Duration
	flows                      int
	size                       int
	pattern                    string
	reply                      string
	huge                       bool
	cases                      string
	genCPU, lbdCPU             int
}

func main() {
	var o options
	flag.StringVar(&o.lbd, "lbd", "bin/lbd", "lbd binary")
	flag.StringVar(&o.lbctl, "lbctl", "bin/lbctl", "lbctl binary")
	flag.StringVar(&o.lbgen, "lbgen", "bin/lbgen", "lbgen binary")
	flag.StringVar(&o.testpmd, "testpmd", "dpdk-testpmd", "dpdk-testpmd binary for the forwarder reference (\"\" skips it)")
	flag.StringVar(&o.out, "out", "perf/results", "directory for <date>.json and <date>.svg")
	flag.StringVar(&o.rates, "rates", "100k,250k,500k,1M,2M,max", "offered loads (lbgen -rates)")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up per step")
	flag.DurationVar(&o.duration, "duration", 3*time.Second, "measured time per step")
	flag.IntVar(&o.flows, "flows", 1000, "concurrent flows")
	flag.IntVar(&o.size, "size", 60, "frame size without FCS")
	flag.StringVar(&o.pattern, "pattern", "established", "lbgen -pattern")
	flag.StringVar(&o.reply, "reply", "ack", "lbgen -reply")
	flag.BoolVar(&o.huge, "huge", false, "lbd and lbgen on hugepages (else --no-huge)")
	flag.StringVar(&o.cases, "cases", "loop,testpmd,lbd", "cases to run, in order")
	flag.IntVar(&o.genCPU, "gen-cpu", 0, "CPU of lbgen, lbd's main lcore and every non-worker thread")
	flag.IntVar(&o.lbdCPU, "lbd-cpu", 1, "CPU of lbd's worker (and testpmd's forwarding lcore)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "perfrun: %v\n", err)
		os.Exit(1)
	}
}

// Case is one measured setup.
type Case struct {
	Name   string          `json:"name"`
	About  string          `json:"about"`
	Report json.RawMessage `json:"lbgen"`
	Extra  map[string]any  `json:"extra,omitempty"`
	Error  string          `json:"error,omitempty"`
	steps  []step
}

// step is the part of lbgen's per-step result the summary uses.
type step struct {
	Offered float64 `json:"offered_pps"`
	SentPPS float64 `json:"sent_pps"`
	SrvPPS  float64 `json:"server_pps"`
	CliPPS  float64 `json:"client_pps"`
	Loss    float64 `json:"loss"`
	OneWay  struct {
		P50  float64 `json:"p50_us"`
		P99  float64 `json:"p99_us"`
		P999 float64 `json:"p999_us"`
	} `json:"one_way"`
	RoundTrip struct {
		P50 float64 `json:"p50_us"`
		P99 float64 `json:"p99_us"`
	} `json:"round_trip"`
}

// Results is the JSON file.
type Results struct {
	Date    string   `json:"date"`
	Host    string   `json:"host"`
	Kernel  string   `json:"kernel"`
	CPUs    string   `json:"cpu_model"`
	Options []string `json:"command"`
	// LoadBefore is /proc/loadavg at the start: other work on this
	// machine's two CPUs skews every number.
	LoadBefore string  `json:"loadavg_before"`
	Cases      []*Case `json:"cases"`
	Summary    []Row   `json:"summary"`
}

// Row is a line of the summary at the maximal offered load.
type Row struct {
	Case        string  `json:"case"`
	MaxRxPPS    float64 `json:"max_rx_pps"`
	VsLoop      float64 `json:"ratio_to_loop,omitempty"`
	VsTestpmd   float64 `json:"ratio_to_testpmd,omitempty"`
	LossAtMax   float64 `json:"loss_at_max"`
	P99AtLowest float64 `json:"p99_us_at_lowest_load"`
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "dplb-perf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, stop := signalContext()
	defer stop()

	res := Results{Date: time.Now().UTC().Format(time.RFC3339), Options: os.Args}
	res.Host, _ = os.Hostname()
	res.Kernel = strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	res.CPUs = cpuModel()
	res.LoadBefore = strings.TrimSpace(readFile("/proc/loadavg"))
	for _, name := range strings.Split(o.cases, ",") {
		var c *Case
		switch strings.TrimSpace(name) {
		case "loop":
			c = runLoop(ctx, o, dir)
		case "testpmd":
			if o.testpmd == "" {
				continue
			}
			if _, err := exec.LookPath(o.testpmd); err != nil {
				fmt.Fprintf(os.Stderr, "perfrun: %s not found: skipping the forwarder reference\n", o.testpmd)
				continue
			}
			c = runTestpmd(ctx, o, dir)
		case "lbd":
			c = runLBD(ctx, o, dir)
		default:
			return fmt.Errorf("-cases: unknown case %q (loop, testpmd, lbd)", name)
		}
		if c.Error != "" {
			fmt.Fprintf(os.Stderr, "perfrun: %s: %s\n", c.Name, c.Error)
		}
		res.Cases = append(res.Cases, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	res.Summary = summarize(res.Cases)
	printSummary(res)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	stem := filepath.Join(o.out, time.Now().Format("2006-01-02T150405"))
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(stem+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(stem+".svg", plot(res.Cases), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s.json and %s.svg\n", stem, stem)
	for _, c := range res.Cases {
		if c.Error != "" {
			return fmt.Errorf("case %s failed: %s", c.Name, c.Error)
		}
	}
	return nil
}

// genArgs are lbgen's arguments common to every case.
func genArgs(o options, dir, name string) []string {
	a := []string{
		"-label", name, "-json", filepath.Join(dir, name+".json"),
		"-rates", o.rates, "-warmup", o.warmup.String(), "-duration", o.duration.String(),
		"-flows", fmt.Sprint(o.flows), "-size", fmt.Sprint(o.size), "-pattern", o.pattern, "-reply", o.reply,
		"-cpu", fmt.Sprint(o.genCPU), "-file-prefix", fmt.Sprintf("lbgen-%s-%d", name, os.Getpid()),
	}
	if o.huge {
		a = append(a, "-huge")
	}
	return a
}

// runGen runs lbgen on the generator's CPU at nice 19, so that the
// non-worker threads of the process under test (Go runtime, control plane,
// DPDK control threads), which share that CPU, preempt it at once when they
// wake up instead of stalling the worker they serve.
func runGen(ctx context.Context, o options, c *Case, dir string, args []string) {
	timeout := time.Duration(len(strings.Split(o.rates, ",")))*(o.warmup+o.duration+time.Second) + 30*time.Second
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	full := append([]string{"-n", "19", "taskset", "-c", fmt.Sprint(o.genCPU), o.lbgen}, args...)
	cmd := exec.CommandContext(cctx, "nice", full...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stdout = os.Stdout
	cmd.Stderr = &stderr
	fmt.Printf("\n== %s: %s\n", c.Name, c.About)
	err := cmd.Run()
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "lbgen:") {
			fmt.Println(l)
		}
	}
	if err != nil {
		c.Error = fmt.Sprintf("lbgen: %v: %s", err, lastLines(stderr.String(), 5))
	}
	b, rerr := os.ReadFile(filepath.Join(dir, c.Name+".json"))
	if rerr != nil {
		if c.Error == "" {
			c.Error = rerr.Error()
		}
		return
	}
	c.Report = b
	var r struct {
		Steps []step `json:"steps"`
	}
	if err := json.Unmarshal(b, &r); err == nil {
		c.steps = r.Steps
	}
}

func runLoop(ctx context.Context, o options, dir string) *Case {
	c := &Case{Name: "loop", About: "lbgen's client port wired to its server port by one memif pair, nothing in between (the generator's own ceiling)"}
	runGen(ctx, o, c, dir, append(genArgs(o, dir, c.Name), "-loop", dir))
	return c
}

func memif(id int, sock string, role string) string {
	return fmt.Sprintf("net_memif%d,role=%s,socket=%s,socket-abstract=no", id, role, sock)
}

func runTestpmd(ctx context.Context, o options, dir string) *Case {
	c := &Case{Name: "testpmd", About: fmt.Sprintf("dpdk-testpmd --forward-mode=io between two memif ports, forwarding on CPU %d (a zero-work DPDK forwarder in lbd's place)", o.lbdCPU)}
	cs, ss := filepath.Join(dir, "tp-client.sock"), filepath.Join(dir, "tp-server.sock")
	args := []string{"-c", fmt.Sprint(o.genCPU), o.testpmd,
		"--file-prefix", fmt.Sprintf("dplb-perf-tp-%d", os.Getpid()), "--no-pci", "-m", "512",
		"--lcores", fmt.Sprintf("0@%d,1@%d", o.genCPU, o.lbdCPU), "--main-lcore", "0",
		"--vdev", memif(0, cs, "server"), "--vdev", memif(1, ss, "server")}
	if o.huge {
		args = append(args, "--huge-unlink")
	} else {
		args = append(args, "--no-huge")
	}
	// Without --stats-period testpmd waits on stdin ("Press enter to
	// exit"), sleeping; with it, its main lcore spins on the generator's CPU.
	args = append(args, "--", "--forward-mode=io", "--no-mlockall",
		"--total-num-mbufs", "16384", "--nb-cores", "1", "--burst", "32")
	log := filepath.Join(dir, "testpmd.log")
	stdin, enter, err := os.Pipe()
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer enter.Close()
	p, err := startIn("taskset", args, log, stdin)
	stdin.Close()
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if err := waitFile(ss, 10*time.Second); err != nil {
		c.Error = fmt.Sprintf("testpmd: %v: %s", err, lastLines(readFile(log), 5))
		p.Process.Kill()
		<-p.done
		return c
	}
	runGen(ctx, o, c, dir, append(genArgs(o, dir, c.Name), "-resolve=false",
		"-client-dev", memif(0, cs, "client"), "-server-dev", memif(1, ss, "client")))
	enter.Write([]byte("\n"))
	if err := waitTimeout(p, 10*time.Second); err != nil && c.Error == "" {
		c.Error = fmt.Sprintf("testpmd: %v", err)
	}
	return c
}

func runLBD(ctx context.Context, o options, dir string) *Case {
	c := &Case{Name: "lbd", About: fmt.Sprintf("lbd VS/NAT, one service with two real servers, worker on CPU %d, main lcore on CPU %d", o.lbdCPU, o.genCPU),
		Extra: map[string]any{}}
	cs, ss, ctl := filepath.Join(dir, "lbd-client.sock"), filepath.Join(dir, "lbd-server.sock"), filepath.Join(dir, "lbd.sock")
	cfg := lbdConfig(o, cs, ss, ctl)
	cfgPath := filepath.Join(dir, "lbd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		c.Error = err.Error()
		return c
	}
	c.Extra["config"] = cfg
	log := filepath.Join(dir, "lbd.log")
	// All of lbd's threads start on the generator's CPU; the worker moves
	// itself to its own CPU (dataplane.workers), so nothing else runs there.
	p, err := start("taskset", []string{"-c", fmt.Sprint(o.genCPU), o.lbd, "-c", cfgPath}, log)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if err := waitFile(ss, 15*time.Second); err != nil {
		c.Error = fmt.Sprintf("lbd: %v: %s", err, lastLines(readFile(log), 5))
		p.Process.Kill()
		<-p.done
		return c
	}
	runGen(ctx, o, c, dir, append(genArgs(o, dir, c.Name), "-lb-server-addr", "198.51.100.1",
		"-vip", "203.0.113.10:80", "-clients", "203.0.113.100-203.0.113.115", "-servers", "198.51.100.11-198.51.100.12",
		"-client-dev", memif(0, cs, "client"), "-server-dev", memif(1, ss, "client")))
	for _, args := range [][]string{{"-L", "-n", "--stats", "--exact"}, {"-L", "-n"}} {
		out, err := exec.Command(o.lbctl, append([]string{"--socket", ctl}, args...)...).CombinedOutput()
		fmt.Printf("$ lbctl %s\n%s", strings.Join(args, " "), out)
		c.Extra["lbctl "+strings.Join(args, " ")] = string(out)
		if err != nil && c.Error == "" {
			c.Error = fmt.Sprintf("lbctl: %v", err)
		}
	}
	p.Process.Signal(syscall.SIGTERM)
	if err := waitTimeout(p, 15*time.Second); err != nil && c.Error == "" {
		c.Error = fmt.Sprintf("lbd exit: %v: %s", err, lastLines(readFile(log), 5))
	}
	for _, l := range strings.Split(readFile(log), "\n") {
		if strings.Contains(l, "mempool in use at exit") {
			c.Extra["lbd_exit"] = strings.TrimSpace(l)
		}
	}
	return c
}

func lbdConfig(o options, clientSock, serverSock, ctlSock string) string {
	return fmt.Sprintf(`# written by perfrun
eal:
  file_prefix: dplb-perf-%d
  memory_mb: 512
  huge_pages: %t
  main_cpu: %d
dataplane:
  workers: [%d]
  conn_table_size: 1048576
ports:
  - name: client
    device: %s
    address: 203.0.113.1/24
    role: client
  - name: server
    device: %s
    address: 198.51.100.1/24
    role: server
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 80
    scheduler: rr
    servers:
      - address: 198.51.100.11
        port: 8080
      - address: 198.51.100.12
        port: 8080
control:
  socket: %s
metrics:
  listen: ""
log:
  level: info
`, os.Getpid(), o.huge, o.genCPU, o.lbdCPU, memif(0, clientSock, "server"), memif(1, serverSock, "server"), ctlSock)
}

// proc is a background process and the result of its Wait.
type proc struct {
	*exec.Cmd
	done chan error
}

func start(prog string, args []string, logPath string) (*proc, error) {
	return startIn(prog, args, logPath, nil)
}

func startIn(prog string, args []string, logPath string, stdin *os.File) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(prog, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{Cmd: cmd, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		f.Close()
	}()
	return p, nil
}

func waitFile(path string, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if _, err := os.Stat(path); err == nil {
			time.Sleep(200 * time.Millisecond)
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear within %v", path, d)
}

// waitTimeout waits for a process started by start; after d it kills it.
func waitTimeout(p *proc, d time.Duration) error {
	select {
	case err := <-p.done:
		return err
	case <-time.After(d):
		p.Process.Kill()
		<-p.done
		return fmt.Errorf("still running after %v: killed", d)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

func cpuModel() string {
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if strings.HasPrefix(l, "model name") {
			_, v, _ := strings.Cut(l, ":")
			return strings.TrimSpace(v)
		}
	}
	return ""
}
