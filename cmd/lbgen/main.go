// Command lbgen is dplb's traffic generator (package perf/gen): it plays
// clients on one DPDK port and real servers on another, drives a load
// balancer between them at a series of offered loads, and prints the
// received rate, loss and latency of each.
//
//	lbgen -client-dev net_memif0,role=client,socket=/run/dplb/memif-c.sock,socket-abstract=no \
//	      -server-dev net_memif1,role=client,socket=/run/dplb/memif-s.sock,socket-abstract=no \
//	      -vip 203.0.113.10:80 -clients 203.0.113.100-203.0.113.115 \
//	      -servers 198.51.100.11-198.51.100.12 -lb-server-addr 198.51.100.1 \
//	      -rates 100k,1M,max -json out.json
//
// -syn-pcap FILE writes the SYNs that open every flow of a Pktgen range run
// (perf/pktgen) and exits.
//
// -loop DIR wires the two ports to each other through a memif pair in DIR
// (no balancer): the reference for this machine.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/perf/gen"
)

func init() {
	// The main goroutine initialises DPDK and runs the generator: its
	// thread becomes the EAL main lcore.
	runtime.LockOSThread()
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbgen: %v\n", err)
		os.Exit(2)
	}
	if o.synPcap != "" {
		err = writeSYNPcap(o)
	} else {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lbgen: %v\n", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	if err := eal.Init(o.ealArgs()); err != nil {
		return fmt.Errorf("EAL: %w", err)
	}
	defer eal.Cleanup()
	g, err := gen.Open(o.cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	res, runErr := measure(o, g)
	c := g.Counters()
	fmt.Fprintf(os.Stderr, "lbgen: totals: sent %d (tx refused %d, alloc failures %d), server rx %d (other %d, replies %d, reply tx refused %d), client rx %d (other %d), SYN-ACKs %d, server SYNs %d, IPIP %d, ARP answered %d, ARP replies %d\n",
		c.Sent, c.TxDropped, c.AllocFailed, c.ServerRx, c.ServerOther, c.ServerReplies, c.ServerReplyDropped,
		c.ClientRx, c.ClientOther, c.SynAcks, c.ServerSyns, c.ServerIPIP, c.ARPAnswered, c.ARPReplies)
	if err := g.Close(); err != nil && runErr == nil {
		runErr = err
	}
	if o.jsonPath != "" && len(res.Steps) > 0 {
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(o.jsonPath, append(b, '\n'), 0o644)
		}
		if err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// Report is what -json writes.
type Report struct {
	Label   string        `json:"label"`
	Setup   SetupResult   `json:"setup"`
	Steps   []StepReport  `json:"steps"`
	Options ReportOptions `json:"options"`
	// TSCHz is this machine's TSC rate, to turn cycles into time.
	TSCHz uint64 `json:"tsc_hz"`
	// AfterSetup is -step-cmd's output after setup (the baseline).
	AfterSetup *Hook `json:"after_setup,omitempty"`
}

// StepReport is a step's result and what -step-cmd printed after it.
type StepReport struct {
	gen.Result
	After *Hook `json:"after_step,omitempty"`
}

// Hook is one run of -step-cmd.
type Hook struct {
	Seconds float64         `json:"t_seconds"` // since the generator opened
	Output  json.RawMessage `json:"output"`    // JSON as printed, else a JSON string
	Error   string          `json:"error,omitempty"`
}

// runHook runs -step-cmd (between steps: never on the packet path).
func runHook(o *options, t0 time.Time) *Hook {
	if o.stepCmd == "" {
		return nil
	}
	out, err := exec.Command("sh", "-c", o.stepCmd).Output()
	h := &Hook{Seconds: time.Since(t0).Seconds()}
	if err != nil {
		h.Error = err.Error()
	}
	if json.Valid(out) {
		h.Output = out
	} else {
		h.Output, _ = json.Marshal(string(out))
	}
	return h
}

// SetupResult says how opening the flows went.
type SetupResult struct {
	LBMAC   string  `json:"lb_mac,omitempty"`
	SynAcks uint64  `json:"syn_acks"`
	Seconds float64 `json:"seconds"`
}

// ReportOptions records the run's parameters.
type ReportOptions struct {
	ClientDev string `json:"client_dev"`
	ServerDev string `json:"server_dev"`
	Warmup    string `json:"warmup"`
	Duration  string `json:"duration"`
	Burst     int    `json:"burst"`
	Reply     string `json:"reply"`
}

func measure(o *options, g *gen.Gen) (Report, error) {
	start := time.Now()
	rep := Report{Label: o.label, TSCHz: eal.TSCHz(), Options: ReportOptions{
		ClientDev: o.cfg.ClientDev, ServerDev: o.cfg.ServerDev, Warmup: o.step.Warmup.String(),
		Duration: o.step.Duration.String(), Burst: o.cfg.Burst, Reply: o.reply,
	}}
	t0 := nowSeconds()
	syn, err := g.Setup(o.linkTimeout)
	if err != nil {
		return rep, err
	}
	rep.Setup = SetupResult{SynAcks: syn, Seconds: nowSeconds() - t0}
	if o.cfg.Resolve {
		rep.Setup.LBMAC = g.LBMAC().String()
	}
	fmt.Fprintf(os.Stderr, "lbgen: %s: ready in %.2fs (%d flows, %s, %d queues, SYNs answered/arrived %d, balancer MAC %s)\n",
		o.label, rep.Setup.Seconds, o.cfg.Flows, o.cfg.Pattern, o.cfg.Queues, syn, rep.Setup.LBMAC)
	rep.AfterSetup = runHook(o, start)
	printHeader(o.label)
	for _, rate := range o.rates {
		s := o.step
		s.Rate = rate
		r, err := g.Step(s)
		if err != nil {
			return rep, err
		}
		rep.Steps = append(rep.Steps, StepReport{Result: r, After: runHook(o, start)})
		printRow(r)
	}
	return rep, nil
}

func printHeader(label string) {
	fmt.Printf("# %s\n", label)
	fmt.Printf("%12s %12s %12s %12s %8s %9s %9s %9s %9s %9s\n", "offered_pps", "sent_pps", "server_pps",
		"client_pps", "loss_%", "p50_us", "p99_us", "p99.9_us", "rtt_p50", "rtt_p99")
}

func printRow(r gen.Result) {
	off := "max"
	if r.OfferedPPS > 0 {
		off = fmt.Sprintf("%.0f", r.OfferedPPS)
	}
	fmt.Printf("%12s %12.0f %12.0f %12.0f %8.3f %9.1f %9.1f %9.1f %9.1f %9.1f\n", off, r.SentPPS, r.ServerPPS,
		r.ClientPPS, 100*r.Loss, r.OneWay.P50, r.OneWay.P99, r.OneWay.P999, r.RoundTrip.P50, r.RoundTrip.P99)
}

func loopDevs(dir string) (client, server string) {
	sock := filepath.Join(dir, "loop.sock")
	return "net_memif10,role=server,socket=" + sock + ",socket-abstract=no",
		"net_memif11,role=client,socket=" + sock + ",socket-abstract=no"
}

func nowSeconds() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// writeSYNPcap is -syn-pcap: one SYN per flow, for Pktgen to replay.
func writeSYNPcap(o *options) error {
	b, err := gen.NewBuilder(hdr.ProtoTCP, o.cfg.Size, o.srcMAC, o.cfg.DstMAC, o.cfg.VIP, o.cfg.VPort)
	if err != nil {
		return err
	}
	f, err := os.Create(o.synPcap)
	if err != nil {
		return err
	}
	n, err := gen.WriteSYNPcap(f, b, o.cfg.Clients, o.cfg.ClientPorts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(o.synPcap)
		return err
	}
	fmt.Fprintf(os.Stderr, "lbgen: %s: %d SYNs\n", o.synPcap, n)
	return nil
}
