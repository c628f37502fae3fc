package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/perf/gen"
)

// lbdCase is one lbd setup: forwarding method, flows, traffic, workers.
type lbdCase struct {
	Method  string `json:"method"`  // nat, dr or tun
	Flows   int    `json:"flows"`   // concurrent established flows (ignored by "syn")
	Pattern string `json:"pattern"` // lbgen -pattern: established, syn-data-fin, syn, udp
	Lcores  int    `json:"lcores"`  // worker lcores (and queues per port)
	Workers []int  `json:"worker_cpus"`
	// SynProxy: the service answers SYNs with cookies (synproxy.go).
	SynProxy bool `json:"synproxy,omitempty"`
	// IPv6: the service, its servers and the flows are IPv6 (ipv6.go).
	IPv6 bool `json:"ipv6,omitempty"`
}

// parseCase reads METHOD[-1m|-1k|-FLOWS][-new][-Nlc]: "nat", "dr-1m",
// "tun-new", "nat-4lc". "lbd" is "nat".
func parseCase(name string, o options) (*lbdCase, error) {
	parts := strings.Split(name, "-")
	c := &lbdCase{Method: parts[0], Flows: o.flows, Pattern: o.pattern, Lcores: 1}
	if c.Method == "lbd" {
		c.Method = "nat"
	}
	if c.Method == "nat6" || c.Method == "dr6" {
		c.Method, c.IPv6 = strings.TrimSuffix(c.Method, "6"), true
	}
	if c.Method != "nat" && c.Method != "dr" && c.Method != "tun" {
		return nil, fmt.Errorf("-cases: unknown case %q (loop, testpmd, testpmd-1way, or METHOD[-1m][-new|-synproxy][-Nlc] with METHOD nat, dr, tun, nat6 or dr6)", name)
	}
	for _, p := range parts[1:] {
		switch {
		case p == "new":
			c.Pattern = "syn"
		case p == "synproxy":
			c.Pattern, c.SynProxy = "syn", true
		case p == "sdf":
			c.Pattern = "syn-data-fin"
		case p == "udp":
			c.Pattern = "udp"
		case strings.HasSuffix(p, "lc"):
			n, err := strconv.Atoi(strings.TrimSuffix(p, "lc"))
			if err != nil || n < 1 || n > 64 {
				return nil, fmt.Errorf("-cases %q: %q: want 1lc..64lc", name, p)
			}
			c.Lcores = n
		default:
			mul := 1
			q := strings.ToLower(p)
			switch {
			case strings.HasSuffix(q, "k"):
				mul, q = 1000, strings.TrimSuffix(q, "k")
			case strings.HasSuffix(q, "m"):
				mul, q = 1000000, strings.TrimSuffix(q, "m")
			}
			n, err := strconv.Atoi(q)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("-cases %q: unknown part %q (want 1k, 1m, new, sdf, udp or Nlc)", name, p)
			}
			c.Flows = n * mul
		}
	}
	if o.workerCPUs != "" {
		for _, f := range strings.Split(o.workerCPUs, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("-worker-cpus %q: %v", o.workerCPUs, err)
			}
			c.Workers = append(c.Workers, n)
		}
		if len(c.Workers) < c.Lcores {
			return nil, fmt.Errorf("-worker-cpus %q: case %s needs %d CPUs", o.workerCPUs, name, c.Lcores)
		}
		c.Workers = c.Workers[:c.Lcores]
	} else {
		for range c.Lcores {
			c.Workers = append(c.Workers, o.lbdCPU)
		}
	}
	return c, nil
}

var methodName = map[string]string{"nat": "VS/NAT", "dr": "VS/DR", "tun": "VS/TUN"}

func runLBD(ctx context.Context, o options, dir string, spec *lbdCase) *Case {
	name := spec.Method
	if spec.IPv6 {
		name += "6"
	}
	if spec.SynProxy {
		name += "-synproxy"
	} else if spec.Pattern == "syn" {
		name += "-new"
	} else if spec.Pattern != o.pattern {
		name += "-" + spec.Pattern
	} else if spec.Flows != o.flows {
		name += "-" + si(float64(spec.Flows))
	}
	if spec.Lcores > 1 {
		name += fmt.Sprintf("-%dlc", spec.Lcores)
	}
	oneWay := spec.Method != "nat"
	traffic := fmt.Sprintf("%s established flows", si(float64(spec.Flows)))
	switch spec.Pattern {
	case "syn":
		traffic = "SYNs from ever-new client address:port (new connections)"
		if spec.SynProxy {
			traffic = "spoofed SYNs from ever-new client address:port to a SYN-proxied service (each answered with a cookie, counted at the client side)"
		}
	case "syn-data-fin", "udp":
		traffic = fmt.Sprintf("%s %s flows", si(float64(spec.Flows)), spec.Pattern)
	}
	method := methodName[spec.Method]
	if spec.IPv6 {
		method = methodName6[spec.Method]
	}
	about := fmt.Sprintf("lbd %s, %s, %d worker lcore(s) on CPU %s, main lcore on CPU %d", method, traffic,
		spec.Lcores, intsString(spec.Workers), o.genCPU)
	if oneWay {
		about += "; one way (replies bypass lbd: counted at the server side)"
	}
	c := &Case{Name: name, About: about, Spec: spec, OneWay: oneWay, Extra: map[string]any{}}
	sub := filepath.Join(dir, name)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		c.Error = err.Error()
		return c
	}
	cs, ss, ctl := filepath.Join(sub, "c.sock"), filepath.Join(sub, "s.sock"), filepath.Join(sub, "lbd.sock")
	metricsAddr := freeAddr()
	cfg := lbdConfig(o, spec, cs, ss, ctl, metricsAddr)
	if spec.SynProxy {
		cfg = synProxyConfig(cfg)
	}
	cfgPath := filepath.Join(sub, "lbd.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		c.Error = err.Error()
		return c
	}
	c.Extra["config"] = cfg
	log := filepath.Join(sub, "lbd.log")
	// All of lbd's threads start on the generator's CPU; the workers move
	// themselves to their CPUs (dataplane.workers).
	p, err := start("taskset", []string{"-c", fmt.Sprint(o.genCPU), o.lbd, "-c", cfgPath}, log)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	if err := waitFile(ss, 20*time.Second); err != nil {
		c.Error = fmt.Sprintf("lbd: %v: %s", err, lastLines(readFile(log), 5))
		p.Process.Kill()
		<-p.done
		return c
	}
	clients := "203.0.113.100-203.0.113.115"
	if spec.Pattern == "syn" || spec.Flows > 16*65536 {
		// 244 addresses x 64512 ports: 15.7M tuples, no reuse within a run.
		clients = "203.0.113.11-203.0.113.254"
	}
	ad := addrs4
	if spec.IPv6 {
		ad = addrs6
	}
	args := append(genArgs(o, dir, c.Name, spec.Flows, spec.Pattern), "-lb-server-addr", ad.lbServer(),
		"-vip", ad.vipPort(), "-clients", ad.clients(clients), "-servers", ad.servers(),
		"-client-dev", memif(0, cs, "client"), "-server-dev", memif(1, ss, "client"),
		"-queues", fmt.Sprint(spec.Lcores), "-steering-key", o.steeringKey,
		"-step-cmd", fmt.Sprintf("%s --socket %s -L -n --per-lcore -o json", o.lbctl, ctl))
	if oneWay {
		args = append(args, "-one-way")
	}
	if spec.IPv6 && o.size < gen.MinFrame6 {
		// The smallest IPv6 TCP frame (the last -size wins).
		args = append(args, "-size", fmt.Sprint(gen.MinFrame6))
	}
	runGen(ctx, o, c, dir, args)
	if spec.SynProxy {
		cookieRates(c)
	}
	c.Metrics = stepMetrics(c, o)
	if d := dropReasons(metricsAddr); len(d) > 0 {
		c.Extra["drops"] = d
	}
	for _, args := range [][]string{{"-L", "-n", "--stats", "--exact"}, {"-L", "-n", "--per-lcore"}} {
		out, err := exec.Command(o.lbctl, append([]string{"--socket", ctl}, args...)...).CombinedOutput()
		fmt.Printf("$ lbctl %s\n%s", strings.Join(args, " "), out)
		c.Extra["lbctl "+strings.Join(args, " ")] = string(out)
		if err != nil && c.Error == "" {
			c.Error = fmt.Sprintf("lbctl: %v; lbd log: %s", err, lastLines(readFile(log), 5))
			c.Extra["lbd_log_tail"] = crashLines(readFile(log)) // lbd gone: what it said last
		}
	}
	p.Process.Signal(syscall.SIGTERM)
	if err := waitTimeout(p, 20*time.Second); err != nil && c.Error == "" {
		c.Error = fmt.Sprintf("lbd exit: %v: %s", err, lastLines(readFile(log), 5))
	}
	for _, l := range strings.Split(readFile(log), "\n") {
		if strings.Contains(l, "mempool in use at exit") {
			c.Extra["lbd_exit"] = strings.TrimSpace(l)
		}
	}
	return c
}

func intsString(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// freeAddr is a free local TCP address for lbd's /metrics.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}

// dropReasons scrapes lbd's /metrics for its drop counters by reason
// (the whole case, all lcores), the nonzero ones.
func dropReasons(addr string) map[string]uint64 {
	if addr == "" {
		return nil
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]uint64{}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "dplb_lcore_drops_total{") {
			continue
		}
		_, rest, _ := strings.Cut(l, `reason="`)
		reason, _, _ := strings.Cut(rest, `"`)
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil && v > 0 {
			out[reason] += uint64(v)
		}
	}
	return out
}

// The new-connection cases' SYN timeout and connection table: 4 s of
// SYNs at up to 3M/s live at once (16M entries, 1.6 GB per lcore).
const (
	newConnLife  = 4 * time.Second
	newConnTable = 1 << 24
)

func lbdConfig(o options, spec *lbdCase, clientSock, serverSock, ctlSock, metricsAddr string) string {
	port, forward := 8080, spec.Method // dr and tun: the service's port
	if spec.Method != "nat" {
		port = 80
	}
	timeouts := ""
	table := o.connTable
	if spec.Pattern == "syn" {
		// New connections never complete: they go after newConnLife, so
		// that from about 1M/s on the table holds 4M live entries or
		// more while they arrive (issue #11's condition), in a table
		// with room for newConnLife at 3M/s.
		timeouts = fmt.Sprintf("timeouts:\n  syn: %s\n  tcp_fin: 1s\n", newConnLife)
		if !spec.SynProxy {
			table = max(table, newConnTable)
		}
	}
	ad := addrs4
	if spec.IPv6 {
		ad = addrs6
	}
	mem := 512 + 256*spec.Lcores
	for table < spec.Flows+spec.Flows/2 { // room for the flows per lcore (ownership spreads them)
		table *= 2
	}
	return fmt.Sprintf(`# written by perfrun
eal:
  file_prefix: dplb-perf-%d
  memory_mb: %d
  huge_pages: %t
  main_cpu: %d
dataplane:
  workers: [%s]
  conn_table_size: %d
  steering_key: "%s"
ports:
  - name: client
    device: %s
    address: 203.0.113.1/24
%s    role: client
  - name: server
    device: %s
    address: 198.51.100.1/24
%s    role: server
services:
  - protocol: tcp
    vip: %s
    port: 80
    scheduler: rr
    servers:
      - address: %s
        port: %d
        forward: %s
      - address: %s
        port: %d
        forward: %s
%scontrol:
  socket: %s
metrics:
  listen: "%s"
log:
  level: info
`, os.Getpid(), mem, o.huge, o.genCPU, intsString(spec.Workers), table, o.steeringKey,
		memif(0, clientSock, "server"), ad.address6(ad.clientNet, "203.0.113.1"),
		memif(1, serverSock, "server"), ad.address6(ad.serverNet, "198.51.100.1"),
		ad.vip(), ad.server("198.51.100.11"), port, forward, ad.server("198.51.100.12"), port, forward,
		timeouts, ctlSock, metricsAddr)
}

// lbctlJSON is the part of lbctl -L -n --per-lcore -o json used here.
type lbctlJSON struct {
	Services []struct {
		Stats struct {
			Conns uint64 `json:"conns"`
		} `json:"stats"`
	} `json:"services"`
	Lcores []struct {
		ID              int                `json:"id"`
		RxPackets       uint64             `json:"rx_packets"`
		Connections     uint64             `json:"connections"`
		Drops           uint64             `json:"drops"`
		HandedOff       uint64             `json:"handed_off"`
		BusyPercent     float64            `json:"busy_percent"`
		CyclesPerPacket float64            `json:"cycles_per_packet"`
		RunQueueWait    float64            `json:"run_queue_wait_seconds"`
		Preemptions     uint64             `json:"preemptions"`
		LoopMaxMicros   float64            `json:"loop_max_us"`
		LoopIterations  []uint64           `json:"loop_iterations"`
		StageCycles     map[string]float64 `json:"stage_cycles"`
		Jobs            []struct {
			Name     string `json:"name"`
			SlowRuns uint64 `json:"slow_runs"`
		} `json:"jobs"`
	} `json:"lcores"`
	Runtime *runtimeJSON `json:"runtime"`
}

// StepMetrics are lbd's numbers for one step, from the difference between
// lbctl's JSON after the step and after the one before (after setup for
// the first). lbd reports cumulative cycles per packet; busy cycles are
// cycles_per_packet x rx_packets, so the difference is exact. Busy time
// is those cycles over the TSC rate (lbgen reports it: same machine),
// over the wall time between the two samples (warm-up, measurement and
// drain of the step).
type StepMetrics struct {
	CyclesPerPacket float64   `json:"cycles_per_packet"` // all lcores: busy cycles / packets they processed
	LcoreCPP        []float64 `json:"lcore_cycles_per_packet"`
	LcoreBusy       []float64 `json:"lcore_busy_percent"`
	LbdPackets      uint64    `json:"lbd_rx_packets"` // packets lbd's lcores received in the step (both directions)
	NewConns        uint64    `json:"new_conns"`
	NewConnsPerSec  float64   `json:"new_conns_per_sec"` // new_conns over the sending time (warm-up + duration)
	LiveConns       uint64    `json:"live_conns"`        // entries in lbd's tables after the step (all lcores)
	HandedOff       uint64    `json:"handed_off"`
	Drops           uint64    `json:"drops"`
	Evidence                  // evidence.go
}

func stepMetrics(c *Case, o options) []StepMetrics {
	var rep struct {
		AfterSetup *hook `json:"after_setup"`
	}
	if json.Unmarshal(c.Report, &rep) != nil || rep.AfterSetup == nil {
		return nil
	}
	prev := rep.AfterSetup
	var out []StepMetrics
	for _, s := range c.steps {
		var m StepMetrics
		if s.After == nil {
			out = append(out, m)
			continue
		}
		var a, b lbctlJSON
		if json.Unmarshal(prev.Output, &a) != nil || json.Unmarshal(s.After.Output, &b) != nil {
			out = append(out, m)
			prev = s.After
			continue
		}
		wall := s.After.Seconds - prev.Seconds
		var cyc, pk float64
		for i, l := range b.Lcores {
			var cyc0, pk0 float64
			var ho0, dr0 uint64
			if i < len(a.Lcores) {
				cyc0 = a.Lcores[i].CyclesPerPacket * float64(a.Lcores[i].RxPackets)
				pk0 = float64(a.Lcores[i].RxPackets)
				ho0, dr0 = a.Lcores[i].HandedOff, a.Lcores[i].Drops
			}
			dc := l.CyclesPerPacket*float64(l.RxPackets) - cyc0
			dp := float64(l.RxPackets) - pk0
			cpp, busy := 0.0, 0.0
			if dp > 0 {
				cpp = dc / dp
			}
			if c.tscHz > 0 && wall > 0 {
				busy = 100 * dc / float64(c.tscHz) / wall
			}
			m.LcoreCPP = append(m.LcoreCPP, round1(cpp))
			m.LcoreBusy = append(m.LcoreBusy, round1(busy))
			cyc += dc
			pk += dp
			m.HandedOff += l.HandedOff - ho0
			m.Drops += l.Drops - dr0
			m.LiveConns += l.Connections
		}
		if pk > 0 {
			m.CyclesPerPacket = round1(cyc / pk)
		}
		m.LbdPackets = uint64(pk)
		var c0, c1 uint64
		for _, sv := range a.Services {
			c0 += sv.Stats.Conns
		}
		for _, sv := range b.Services {
			c1 += sv.Stats.Conns
		}
		m.evidence(&a, &b)
		m.NewConns = c1 - c0
		m.NewConnsPerSec = float64(m.NewConns) / (o.warmup + o.duration).Seconds()
		out = append(out, m)
		prev = s.After
	}
	return out
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// crashLines is the start of a Go crash report in lbd's log (the signal
// or panic and the crashing goroutine), else the log's last 100 lines.
func crashLines(log string) string {
	l := strings.Split(strings.TrimSpace(log), "\n")
	for i, line := range l {
		if strings.HasPrefix(line, "SIGSEGV") || strings.HasPrefix(line, "SIGBUS") || strings.HasPrefix(line, "fatal error") || strings.HasPrefix(line, "panic:") {
			return strings.Join(l[max(0, i-5):min(len(l), i+60)], "\n")
		}
	}
	return strings.Join(l[max(0, len(l)-100):], "\n")
}
