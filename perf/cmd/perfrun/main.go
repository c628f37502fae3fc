// Command perfrun is dplb's perf run on one machine: it drives lbd with
// lbgen over memif at a series of offered loads and compares it with
// references measured in the same run: the generator looped back on itself
// (no forwarder at all) and dpdk-testpmd forwarding in lbd's place (a
// zero-work DPDK forwarder, two-way and one-way, when installed). lbd runs
// in VS/NAT, VS/DR and VS/TUN, with 1k and 1M established flows, with new
// connections, and with several worker lcores, and in NAT66 and VS/DR over
// IPv6 beside their IPv4 forms (ipv6.go); after each step lbgen
// records lbctl's per-lcore JSON, from which perfrun derives cycles per
// packet. It prints tables and writes perf/results/<date>.md (the report),
// .json (everything) and .svg (plots).
//
//	go build -o bin/lbd ./cmd/lbd && go build -o bin/lbctl ./cmd/lbctl && go build -o bin/lbgen ./cmd/lbgen
//	go run ./perf/cmd/perfrun -cases testpmd,nat,dr -rates 100k,500k,1M,2M,max
//
// lbd runs with its EAL main lcore on CPU 0 and its workers on CPU 1;
// lbgen runs on CPU 0 at nice 19 (see perf/README.md for why).
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
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
	workerCPUs                 string
	connTable                  int
	openRate                   float64
	long                       bool
	// rounds: how many times the cases issue #11's and #15's targets read
	// are measured (rounds.go).
	rounds int
	// steeringKey is given to lbd (dataplane.steering_key) and lbgen
	// (-steering-key), so that lbgen sends every flow on its owner's queue.
	steeringKey string
	// lookup: time issue #11's lookup target after the cases (lookup.go).
	lookup bool
}

// Defaults of the quick run (make perf, a few minutes) and of -long.
const (
	quickRates = "500k,1M,2M,max"
	longRates  = "100k,250k,500k,1M,1.5M,2M,2.5M,max"
	// defaultCases: the references, then lbd in every forwarding method
	// with 1k established flows, 1M established flows and new
	// connections, the SYN proxy's cookies, then 2 and 4 worker lcores.
	// longExtraCases run with -long only: 10M flows take some 20 s to
	// open and a 16M-entry table (1.5 GB).
	// nat6 and dr6 (issue #16) are nat and dr over IPv6, beside them in
	// the report; -long adds their 1M-flow forms.
	longExtraCases = ",nat-10m,nat6-1m,dr6-1m"
	defaultCases   = "loop,testpmd,testpmd-1way,nat,dr,tun,nat6,dr6,nat-1m,dr-1m,tun-1m,nat-new,dr-new,tun-new,nat-synproxy,nat6-synproxy,nat-2lc,nat-4lc,dr-2lc,dr-4lc"
)

func main() {
	var o options
	flag.StringVar(&o.lbd, "lbd", "bin/lbd", "lbd binary")
	flag.StringVar(&o.lbctl, "lbctl", "bin/lbctl", "lbctl binary")
	flag.StringVar(&o.lbgen, "lbgen", "bin/lbgen", "lbgen binary")
	flag.StringVar(&o.testpmd, "testpmd", "dpdk-testpmd", "dpdk-testpmd binary for the forwarder reference (\"\" skips it)")
	flag.StringVar(&o.out, "out", "perf/results", "directory for <date>.json and <date>.svg")
	flag.StringVar(&o.rates, "rates", quickRates, "offered loads (lbgen -rates); -long: "+longRates)
	flag.DurationVar(&o.warmup, "warmup", 500*time.Millisecond, "warm-up per step; -long: 1s")
	flag.DurationVar(&o.duration, "duration", time.Second, "measured time per step; -long: 3s")
	flag.BoolVar(&o.long, "long", false, "the long version: more offered loads and longer steps (about 20 minutes with the rounds) unless -rates/-warmup/-duration are given")
	flag.IntVar(&o.flows, "flows", 1000, "concurrent flows of the cases without a flow count in their name")
	flag.IntVar(&o.size, "size", 60, "frame size without FCS")
	flag.StringVar(&o.pattern, "pattern", "established", "lbgen -pattern of the cases that do not name one")
	flag.StringVar(&o.reply, "reply", "ack", "lbgen -reply (VS/NAT and the two-way references)")
	flag.BoolVar(&o.huge, "huge", false, "lbd and lbgen on hugepages (else --no-huge)")
	flag.StringVar(&o.cases, "cases", defaultCases, "cases to run, in order: loop, testpmd, testpmd-1way, and lbd cases named METHOD[-1m|-FLOWS][-new|-synproxy][-Nlc] with METHOD nat, dr, tun, or nat6/dr6 over IPv6 (lbd = nat)")
	flag.IntVar(&o.genCPU, "gen-cpu", 0, "CPU of lbgen, lbd's main lcore and every non-worker thread")
	flag.IntVar(&o.lbdCPU, "lbd-cpu", 1, "CPU of lbd's worker (and testpmd's forwarding lcore)")
	flag.StringVar(&o.workerCPUs, "worker-cpus", "", "CPUs of lbd's workers for the -Nlc cases, comma-separated (first N used); empty: -lbd-cpu repeated N times")
	flag.IntVar(&o.connTable, "conn-table", 2097152, "lbd dataplane.conn_table_size (per lcore)")
	flag.Float64Var(&o.openRate, "open-rate", 500e3, "SYNs per second when lbgen opens established flows")
	flag.StringVar(&o.steeringKey, "steering-key", "", "steering key (80 hex digits) given to lbd and lbgen so that multi-lcore flows arrive at their owner; empty: one drawn at random for this run")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of the cases issue #11's and #15's targets read (the first is the whole run; later ones at "+roundRates+" offered): the targets give the median round")
	flag.BoolVar(&o.lookup, "lookup", true, "time lookups among 1k and 10M connections after the cases (issue #11's lookup target; 1.5 GB for a few seconds)")
	rerender := flag.String("report-from", "", "write the .md report again from a results .json of an earlier run (no measurement)")
	flag.Parse()
	if *rerender != "" {
		if err := reportFrom(*rerender, o); err != nil {
			fmt.Fprintf(os.Stderr, "perfrun: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if o.long {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rates"] {
			o.rates = longRates
		}
		if !set["warmup"] {
			o.warmup = time.Second
		}
		if !set["duration"] {
			o.duration = 3 * time.Second
		}
		if !set["cases"] {
			o.cases = defaultCases + longExtraCases
		}
	}
	if o.steeringKey == "" {
		var k [40]byte
		if _, err := rand.Read(k[:]); err != nil {
			fmt.Fprintf(os.Stderr, "perfrun: %v\n", err)
			os.Exit(1)
		}
		o.steeringKey = hex.EncodeToString(k[:])
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "perfrun: %v\n", err)
		os.Exit(1)
	}
}

// Case is one measured setup.
type Case struct {
	Name   string          `json:"name"`
	About  string          `json:"about"`
	Spec   *lbdCase        `json:"lbd,omitempty"` // nil for the references
	OneWay bool            `json:"one_way"`       // no replies: the server side only counts
	Report json.RawMessage `json:"lbgen"`
	// Metrics are lbd's per-step numbers derived from lbctl's JSON after
	// each step (the raw JSON is in the lbgen report, steps[].after_step).
	Metrics []StepMetrics  `json:"step_metrics,omitempty"`
	Extra   map[string]any `json:"extra,omitempty"`
	Error   string         `json:"error,omitempty"`
	steps   []step
	tscHz   uint64
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
	After *hook `json:"after_step"`
}

// hook is one output of lbgen -step-cmd.
type hook struct {
	Seconds float64         `json:"t_seconds"`
	Output  json.RawMessage `json:"output"`
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
	LoadAfter  string  `json:"loadavg_after"`
	Cases      []*Case `json:"cases"`
	// Rounds are the later rounds' cases (rounds.go), round 2 first.
	Rounds  [][]*Case `json:"rounds,omitempty"`
	Summary []Row     `json:"summary"`
	Targets []Target  `json:"targets"`
	// Issue11 are issue #11's targets (scale, new connections, tail, cost).
	Issue11 []Target `json:"targets_issue11"`
	// IPv6 is "IPv6 beside IPv4" (issue #16), when an IPv6 case ran.
	IPv6 *IPv6Section `json:"ipv6_beside_ipv4,omitempty"`
	// Lookup is issue #11's lookup target, timed once (lookup.go).
	Lookup *LookupScale `json:"lookup_scale,omitempty"`
}

// Row is a line of the summary: the step with the highest received rate,
// latency at the step chosen by latencyStep.
type Row struct {
	Case      string  `json:"case"`
	MaxRxPPS  float64 `json:"max_rx_pps"`
	VsLoop    float64 `json:"ratio_to_loop,omitempty"`
	VsTestpmd float64 `json:"ratio_to_testpmd,omitempty"`
	Reference string  `json:"reference,omitempty"` // testpmd or testpmd-1way
	LossAtMax float64 `json:"loss_at_max"`
	// CyclesPerPacket and BusyPercent at the max step (lbd only; 0 = none).
	CyclesPerPacket float64 `json:"cycles_per_packet,omitempty"`
	BusyPercent     float64 `json:"busy_percent,omitempty"`
	NewConnsPerSec  float64 `json:"new_conns_per_sec,omitempty"`
	LatOffered      float64 `json:"latency_at_offered_pps"`
	P50             float64 `json:"p50_us"`
	P99             float64 `json:"p99_us"`
	P999            float64 `json:"p999_us"`
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
		c, err := runCase(ctx, o, dir, strings.TrimSpace(name))
		if err != nil {
			return err
		}
		if c != nil {
			res.Cases = append(res.Cases, c)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// The later rounds (rounds.go): the cases the targets read, at
	// roundRates (a start-up step, the latency step, the highest rate).
	ro := o
	ro.rates = roundRates
	for r := 2; r <= o.rounds; r++ {
		var round []*Case
		for _, name := range casesOfRounds(o.cases) {
			fmt.Fprintf(os.Stderr, "perfrun: round %d of %d: %s\n", r, o.rounds, name)
			c, err := runCase(ctx, ro, dir, name)
			if err != nil {
				return err
			}
			if c != nil {
				round = append(round, c)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		res.Rounds = append(res.Rounds, round)
	}
	if o.lookup {
		fmt.Fprintf(os.Stderr, "perfrun: lookups among 1k and 10M connections\n")
		var err error
		if res.Lookup, err = measureLookupScale(1<<10, 10_000_000); err != nil {
			fmt.Fprintf(os.Stderr, "perfrun: %v\n", err) // the row says not measured
		}
	}
	res.LoadAfter = strings.TrimSpace(readFile("/proc/loadavg"))
	res.Summary = summarize(res.Cases)
	res.Targets = targets(res.Cases)
	res.Issue11 = issue11Targets(res)
	res.IPv6 = ipv6Beside(res.Cases)
	printSummary(res)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	stem := filepath.Join(o.out, time.Now().Format("2006-01-02T150405"))
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(stem+".json", append(b, '\n'), 0o644); err != nil {
		return err
	}
	plots := plotGroups(res.Cases)
	var svgs []string
	for _, g := range plots {
		f := stem + g.suffix + ".svg"
		if err := os.WriteFile(f, plot(g.cases), 0o644); err != nil {
			return err
		}
		svgs = append(svgs, filepath.Base(f))
		g.file = filepath.Base(f)
	}
	if err := os.WriteFile(stem+".md", report(res, o, plots, filepath.Base(stem)), 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s.md, %s.json and %s\n", stem, stem, strings.Join(svgs, ", "))
	for _, c := range allCases(res) {
		if c.Error != "" {
			return fmt.Errorf("case %s failed: %s", c.Name, c.Error)
		}
	}
	return nil
}

// runCase measures one case of the list; nil when it is skipped (no
// testpmd).
func runCase(ctx context.Context, o options, dir, name string) (*Case, error) {
	var c *Case
	switch name {
	case "loop":
		c = runLoop(ctx, o, dir)
	case "testpmd", "testpmd-1way":
		if o.testpmd == "" {
			return nil, nil
		}
		if _, err := exec.LookPath(o.testpmd); err != nil {
			fmt.Fprintf(os.Stderr, "perfrun: %s not found: skipping the forwarder reference\n", o.testpmd)
			return nil, nil
		}
		c = runTestpmd(ctx, o, dir, name == "testpmd-1way")
	default:
		spec, err := parseCase(name, o)
		if err != nil {
			return nil, err
		}
		c = runLBD(ctx, o, dir, spec)
	}
	if c.Error != "" {
		fmt.Fprintf(os.Stderr, "perfrun: %s: %s\n", c.Name, c.Error)
	}
	return c, nil
}

// allCases are the first round's cases and the later rounds'.
func allCases(res Results) []*Case {
	all := append([]*Case(nil), res.Cases...)
	for _, r := range res.Rounds {
		all = append(all, r...)
	}
	return all
}

// genArgs are lbgen's arguments common to every case.
func genArgs(o options, dir, name string, flows int, pattern string) []string {
	a := []string{
		"-label", name, "-json", filepath.Join(dir, name+".json"),
		"-rates", o.rates, "-warmup", o.warmup.String(), "-duration", o.duration.String(),
		"-flows", fmt.Sprint(flows), "-size", fmt.Sprint(o.size), "-pattern", pattern, "-reply", o.reply,
		"-open-rate", fmt.Sprint(o.openRate),
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
	timeout := time.Duration(len(strings.Split(o.rates, ",")))*(o.warmup+o.duration+2*time.Second) + 30*time.Second
	if c.Spec != nil {
		timeout += time.Duration(float64(c.Spec.Flows) / o.openRate * float64(time.Second))
	}
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
		TSCHz uint64 `json:"tsc_hz"`
	}
	if err := json.Unmarshal(b, &r); err == nil {
		c.steps, c.tscHz = r.Steps, r.TSCHz
	}
}

func runLoop(ctx context.Context, o options, dir string) *Case {
	c := &Case{Name: "loop", About: "lbgen's client port wired to its server port by one memif pair, nothing in between (the generator's own ceiling)"}
	runGen(ctx, o, c, dir, append(genArgs(o, dir, c.Name, o.flows, o.pattern), "-loop", dir))
	return c
}

func memif(id int, sock string, role string) string {
	return fmt.Sprintf("net_memif%d,role=%s,socket=%s,socket-abstract=no", id, role, sock)
}

func runTestpmd(ctx context.Context, o options, dir string, oneWay bool) *Case {
	c := &Case{Name: "testpmd", About: fmt.Sprintf("dpdk-testpmd --forward-mode=io between two memif ports, forwarding on CPU %d (a zero-work DPDK forwarder in lbd's place), the server side answering", o.lbdCPU)}
	if oneWay {
		c.Name, c.OneWay = "testpmd-1way", true
		c.About = fmt.Sprintf("dpdk-testpmd --forward-mode=io as above, one way (the server side answers nothing): the reference for VS/DR and VS/TUN")
	}
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
	a := append(genArgs(o, dir, c.Name, o.flows, o.pattern), "-resolve=false",
		"-client-dev", memif(0, cs, "client"), "-server-dev", memif(1, ss, "client"))
	if oneWay {
		a = append(a, "-one-way")
	}
	runGen(ctx, o, c, dir, a)
	enter.Write([]byte("\n"))
	if err := waitTimeout(p, 10*time.Second); err != nil && c.Error == "" {
		c.Error = fmt.Sprintf("testpmd: %v", err)
	}
	return c
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

// reportFrom rewrites <stem>.md (and the plots) from <stem>.json, with the
// options the run recorded in its command line.
func reportFrom(path string, o options) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var res Results
	if err := json.Unmarshal(b, &res); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(res.Options) > 1 {
		fs := flag.NewFlagSet("perfrun", flag.ContinueOnError)
		fs.StringVar(&o.rates, "rates", o.rates, "")
		fs.DurationVar(&o.warmup, "warmup", o.warmup, "")
		fs.DurationVar(&o.duration, "duration", o.duration, "")
		fs.IntVar(&o.size, "size", o.size, "")
		fs.BoolVar(&o.huge, "huge", o.huge, "")
		fs.BoolVar(&o.long, "long", false, "")
		fs.Int("rounds", 0, "")
		for _, name := range []string{"lbd", "lbctl", "lbgen", "testpmd", "out", "cases", "reply", "pattern", "steering-key", "worker-cpus"} {
			fs.String(name, "", "") // taken so that the parse goes on past them
		}
		fs.SetOutput(io.Discard)
		_ = fs.Parse(res.Options[1:]) // unknown flags end the parse: defaults stay
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if o.long && !set["rates"] {
			o.rates = longRates
		}
		if o.long && !set["warmup"] {
			o.warmup = time.Second
		}
		if o.long && !set["duration"] {
			o.duration = 3 * time.Second
		}
	}
	for _, c := range allCases(res) {
		var r struct {
			Steps []step `json:"steps"`
			TSCHz uint64 `json:"tsc_hz"`
		}
		if len(c.Report) > 0 && json.Unmarshal(c.Report, &r) == nil {
			c.steps, c.tscHz = r.Steps, r.TSCHz
		}
		if c.Spec != nil && c.Spec.SynProxy {
			cookieSteps(c) // as the run read them: the cookies come back to the client side
		}
		if d, ok := c.Extra["drops"].(map[string]any); ok {
			m := map[string]uint64{}
			for k, v := range d {
				if f, ok := v.(float64); ok {
					m[k] = uint64(f)
				}
			}
			c.Extra["drops"] = m
		}
	}
	res.Summary = summarize(res.Cases)
	res.Targets = targets(res.Cases)
	res.Issue11 = issue11Targets(res)
	res.IPv6 = ipv6Beside(res.Cases)
	stem := strings.TrimSuffix(path, ".json")
	plots := plotGroups(res.Cases)
	for _, g := range plots {
		f := stem + g.suffix + ".svg"
		if err := os.WriteFile(f, plot(g.cases), 0o644); err != nil {
			return err
		}
		g.file = filepath.Base(f)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(stem+".md", report(res, o, plots, filepath.Base(stem)), 0o644)
}
