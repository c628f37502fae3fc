package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/perf/gen"
)

type options struct {
	cfg         gen.Config
	step        gen.Step
	rates       []float64
	cpu         int
	filePrefix  string
	huge        bool
	memMB       int
	jsonPath    string
	label       string
	reply       string
	linkTimeout time.Duration
	stepCmd     string
	synPcap     string
	srcMAC      hdr.MAC
}

func (o *options) ealArgs() []string {
	cpu := strconv.Itoa(o.cpu)
	a := []string{"lbgen", "--file-prefix", o.filePrefix, "-l", cpu, "--main-lcore", cpu, "-m", strconv.Itoa(o.memMB)}
	if o.huge {
		a = append(a, "--huge-unlink")
	} else {
		a = append(a, "--no-huge")
	}
	pci := false
	for _, d := range []string{o.cfg.ClientDev, o.cfg.ServerDev} {
		if strings.HasPrefix(d, "net_") {
			a = append(a, "--vdev", d)
		} else {
			pci = true
			a = append(a, "-a", d)
		}
	}
	if !pci {
		a = append(a, "--no-pci")
	}
	return append(a, "--log-level", "lib.eal:warning")
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("lbgen", flag.ContinueOnError)
	o := &options{}
	var loop, clients, cports, vip, servers, lbSrv, dstMAC, pattern, rates, steeringKey string
	fs.StringVar(&o.cfg.ClientDev, "client-dev", "", "client-side DPDK device (vdev string or PCI address)")
	fs.StringVar(&o.cfg.ServerDev, "server-dev", "", "server-side DPDK device")
	fs.StringVar(&loop, "loop", "", "directory: connect the two ports to each other by memif (no balancer; the reference)")
	fs.StringVar(&clients, "clients", "203.0.113.100-203.0.113.115", "client address range first-last (on the balancer's client subnet); IPv6 (same upper 96 bits) for IPv6 flows")
	fs.StringVar(&cports, "client-ports", "1024-65535", "client port range first-last")
	fs.StringVar(&vip, "vip", "203.0.113.10:80", "virtual service address:port")
	fs.StringVar(&servers, "servers", "198.51.100.11-198.51.100.12", "real server addresses the server side answers ARP (IPv6: neighbour solicitations) for")
	fs.StringVar(&lbSrv, "lb-server-addr", "", "the balancer's server-side address: ARP for it from every server address (fills its neighbour table)")
	fs.BoolVar(&o.cfg.Resolve, "resolve", true, "learn the balancer's MAC by ARP for the VIP (off with -loop)")
	fs.StringVar(&dstMAC, "dst-mac", "02:00:00:00:00:01", "destination MAC when not resolving")
	fs.IntVar(&o.cfg.Flows, "flows", 1000, "concurrent flows (client address x port)")
	fs.StringVar(&pattern, "pattern", "established", "established, syn-data-fin, syn (a new client address:port per SYN) or udp")
	fs.IntVar(&o.cfg.Queues, "queues", 1, "RX/TX queues per port (as many as the balancer's workers); flows are spread over them")
	fs.BoolVar(&o.cfg.AlignOwner, "align-owner", true, "with -queues > 1: send each flow on the queue of the lcore that owns it (under -steering-key; without it under this process's random key, so lbd hands most flows over); false: flow k on queue k mod queues")
	fs.StringVar(&steeringKey, "steering-key", "", "lbd's dataplane.steering_key (80 hex digits): with -align-owner every flow arrives at its owner")
	fs.BoolVar(&o.cfg.OneWay, "one-way", false, "VS/DR or VS/TUN: the server side counts (IPIP unwrapped) and answers nothing")
	fs.StringVar(&o.stepCmd, "step-cmd", "", "shell command run after setup and after each step; its output (JSON kept as JSON) goes into the step's record")
	fs.IntVar(&o.cfg.Size, "size", 60, "frame size in bytes without FCS (60 = 64 on the wire), 60..1514; IPv6 default 74, the smallest TCP frame")
	fs.StringVar(&o.reply, "reply", "ack", "server answer to data: ack, echo or none")
	fs.IntVar(&o.cfg.Burst, "burst", 32, "packets per burst")
	fs.Float64Var(&o.cfg.OpenRate, "open-rate", 200e3, "SYNs per second when opening established flows")
	fs.StringVar(&rates, "rates", "100k,1M,max", "offered loads in packets per second, comma-separated (k, M suffixes; max = as fast as possible)")
	fs.DurationVar(&o.step.Warmup, "warmup", time.Second, "warm-up per step, not measured")
	fs.DurationVar(&o.step.Duration, "duration", 3*time.Second, "measured time per step")
	fs.DurationVar(&o.step.Drain, "drain", 200*time.Millisecond, "wait for packets in flight after each step")
	fs.DurationVar(&o.linkTimeout, "link-timeout", 10*time.Second, "wait this long for links and ARP")
	fs.IntVar(&o.cpu, "cpu", 0, "CPU of the generator's lcore")
	fs.StringVar(&o.filePrefix, "file-prefix", fmt.Sprintf("lbgen%d", os.Getpid()), "DPDK --file-prefix (unique per process)")
	fs.BoolVar(&o.huge, "huge", false, "use hugepages (--huge-unlink) instead of --no-huge")
	fs.IntVar(&o.memMB, "mem", 256, "DPDK memory in MiB")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.label, "label", "lbgen", "name of this run in the output")
	fs.StringVar(&o.synPcap, "syn-pcap", "", "write a pcap file of one TCP SYN per -clients x -client-ports pair (every flow a Pktgen range run over them can send) to -vip, from -src-mac to -dst-mac (lbd's client port), and exit; no DPDK")
	var srcMAC string
	fs.StringVar(&srcMAC, "src-mac", "02:00:00:00:00:02", "with -syn-pcap: the frames' source MAC (the generator's port)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	if loop != "" {
		o.cfg.ClientDev, o.cfg.ServerDev = loopDevs(loop)
		o.cfg.Resolve = false
	}
	if o.srcMAC, err = hdr.ParseMAC(srcMAC); err != nil {
		return nil, fmt.Errorf("-src-mac: %w", err)
	}
	if o.synPcap == "" && (o.cfg.ClientDev == "" || o.cfg.ServerDev == "") {
		return nil, errors.New("-client-dev and -server-dev (or -loop) are required")
	}
	if o.cfg.SteeringKey, err = conf.ParseSteeringKey(steeringKey); err != nil {
		return nil, fmt.Errorf("-steering-key: %w", err)
	}
	var cnet, snet *gen.Net6
	if o.cfg.Clients, cnet, err = parseRange(clients); err != nil {
		return nil, fmt.Errorf("-clients: %w", err)
	}
	if o.cfg.Servers, snet, err = parseRange(servers); err != nil {
		return nil, fmt.Errorf("-servers: %w", err)
	}
	if (cnet == nil) != (snet == nil) {
		return nil, fmt.Errorf("-clients %q and -servers %q: want both IPv4 or both IPv6", clients, servers)
	}
	if cnet != nil {
		o.cfg.Six = &gen.Six{ClientNet: *cnet, ServerNet: *snet}
	}
	lo, hi, ok := strings.Cut(cports, "-")
	p0, e1 := strconv.ParseUint(lo, 10, 16)
	p1, e2 := strconv.ParseUint(hi, 10, 16)
	if !ok || e1 != nil || e2 != nil {
		return nil, fmt.Errorf("-client-ports %q: want first-last", cports)
	}
	o.cfg.ClientPorts = [2]uint16{uint16(p0), uint16(p1)}
	six := o.cfg.Six
	ap, err := netip.ParseAddrPort(vip)
	if err != nil || !ap.Addr().Is4() && (six == nil || !ap.Addr().Is6()) || six != nil && !ap.Addr().Is6() {
		return nil, fmt.Errorf("-vip %q: want IPv4:port, or [IPv6]:port with IPv6 -clients", vip)
	}
	o.cfg.VPort = ap.Port()
	if six != nil {
		six.VIP = hdr.Addr6From(ap.Addr())
	} else {
		o.cfg.VIP = addr32(ap.Addr())
	}
	if lbSrv != "" {
		a, err := netip.ParseAddr(lbSrv)
		switch {
		case err == nil && six == nil && a.Is4():
			o.cfg.LBServerAddr = addr32(a)
		case err == nil && six != nil && a.Is6() && !a.Is4In6():
			six.LBServerAddr = hdr.Addr6From(a)
		default:
			return nil, fmt.Errorf("-lb-server-addr %q: want an address of -servers' family", lbSrv)
		}
	}
	if six != nil && o.synPcap != "" {
		return nil, errors.New("-syn-pcap: IPv4 only")
	}
	if six != nil && !set["size"] {
		o.cfg.Size = max(o.cfg.Size, gen.MinFrame6)
	}
	if o.cfg.DstMAC, err = hdr.ParseMAC(dstMAC); err != nil {
		return nil, fmt.Errorf("-dst-mac: %w", err)
	}
	if o.cfg.Pattern, err = gen.ParsePattern(pattern); err != nil {
		return nil, fmt.Errorf("-pattern: %w", err)
	}
	if o.cfg.Reply, err = gen.ParseReplyMode(o.reply); err != nil {
		return nil, fmt.Errorf("-reply: %w", err)
	}
	if o.rates, err = parseRates(rates); err != nil {
		return nil, fmt.Errorf("-rates: %w", err)
	}
	if o.step.Duration <= 0 {
		return nil, errors.New("-duration must be > 0")
	}
	return o, nil
}

func addr32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// parseRange reads "first-last" (or one address): IPv4, or IPv6 whose
// upper 96 bits agree (the network returned; the range holds the low 32
// bits).
func parseRange(s string) (gen.Range, *gen.Net6, error) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		hi = lo
	}
	a, err1 := netip.ParseAddr(lo)
	b, err2 := netip.ParseAddr(hi)
	if err1 == nil && err2 == nil && a.Is6() && b.Is6() && !a.Is4In6() && !b.Is4In6() {
		na, la := gen.Split6(hdr.Addr6From(a))
		nb, lb := gen.Split6(hdr.Addr6From(b))
		if na != nb || lb < la {
			return gen.Range{}, nil, fmt.Errorf("%q: want IPv6 first-last with first <= last and the same upper 96 bits", s)
		}
		return gen.Range{First: la, Last: lb}, &na, nil
	}
	if err1 != nil || err2 != nil || !a.Is4() || !b.Is4() || addr32(b) < addr32(a) {
		return gen.Range{}, nil, fmt.Errorf("%q: want IPv4 first-last with first <= last", s)
	}
	return gen.Range{First: addr32(a), Last: addr32(b)}, nil, nil
}

// parseRates reads "100k,1.5M,max".
func parseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "max" {
			out = append(out, 0)
			continue
		}
		mul := 1.0
		switch {
		case strings.HasSuffix(f, "k"):
			mul, f = 1e3, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mul, f = 1e6, strings.TrimSuffix(f, "M")
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q: want a positive rate or max", f)
		}
		out = append(out, v*mul)
	}
	if len(out) == 0 {
		return nil, errors.New("no rates")
	}
	return out, nil
}
