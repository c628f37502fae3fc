package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// Port is one lbd port in a Config.
type Port struct {
	Name     string
	Device   string // DPDK device string, e.g. "net_af_packet0,iface=dp-lb-abc123"
	Address  string // "198.51.100.1/24"
	Address6 string // "2001:db8::1/64"; "" for none
	Gateway  string // "" for none
	Gateway6 string // the IPv6 next hop off the port's links; "" for none
	Role     string // "client", "server" or "both"; "" leaves lbd's default (both)
	// Floating are addresses this port answers ARP for only while lbd
	// is the master of an active/backup pair ("198.51.100.1").
	Floating []string
	// Routes are static routes through next hops on the port's subnet:
	// {"10.9.0.0/24", "198.51.100.12"}.
	Routes [][2]string
	// KNI is the kernel interface lbd makes for the port (its kni key):
	// a TAP of that name in lbd's namespace with the port's MAC and
	// addresses; "" for none.
	KNI string
}

// AFPacketPort is a Port on the af_packet device number i over iface.
func AFPacketPort(i int, name, iface, addr, gateway, role string) Port {
	return Port{Name: name, Device: fmt.Sprintf("net_af_packet%d,iface=%s", i, iface), Address: addr, Gateway: gateway, Role: role}
}

// Timeouts are lbd's connection timeouts as durations ("5s"); "" keeps
// lbd's default.
type Timeouts struct {
	TCP, TCPFin, UDP, SYN string
}

// BaseConfig is the part of every e2e configuration that is not about
// ports and services: no hugepages, one worker, a socket in dir, metrics
// on 127.0.0.1:9180 inside the LB namespace.
func BaseConfig(suffix, dir string, ports ...Port) Config {
	return Config{
		FilePrefix:    "dplb-e2e-" + suffix,
		MemoryMB:      256,
		MainCPU:       0,
		Workers:       []int{1},
		IdleSleep:     "20us",
		Ports:         ports,
		Socket:        filepath.Join(dir, "lbd.sock"),
		MetricsListen: "127.0.0.1:9180",
		LogLevel:      "info",
	}
}

// LVSPortName is the name of lbd's single port in DR and TUN configurations.
const LVSPortName = "lan"

// LVSConfig returns the configuration of lbd in a VS/DR or VS/TUN
// topology: its single port (role both, the router as gateway) and one
// service proto VIP:port, round robin over every real server at the same
// port, weight 1, forwarded by "dr" (DR topology) or "tun" (TUN topology).
func LVSConfig(l *topo.LVS, suffix, dir, proto string, port int) Config {
	fwd := "dr"
	if l.Tunnel {
		fwd = "tun"
	}
	c := BaseConfig(suffix, dir, AFPacketPort(0, LVSPortName, l.LBIf, l.LBAddr.String(), l.Gateway.String(), "both"))
	svc := Service{Protocol: proto, VIP: l.VIP.String(), Port: port, Scheduler: "rr"}
	for _, h := range l.Servers {
		svc.Servers = append(svc.Servers, Server{Address: h.Addr.Addr().String(), Port: port, Weight: 1, Forward: fwd})
	}
	c.Services = []Service{svc}
	return c
}

// NATUDPConfig returns the configuration of a VS/NAT lbd in nat with one
// UDP service VIP:port, round robin over every real server's rsPort.
func NATUDPConfig(nat *topo.NAT, suffix, dir string, port, rsPort int) Config {
	c := NATConfig(nat, suffix, dir)
	svc := Service{Protocol: "udp", VIP: nat.VIP.String(), Port: port, Scheduler: "rr"}
	for _, h := range nat.Servers {
		svc.Servers = append(svc.Servers, Server{Address: h.Addr.Addr().String(), Port: rsPort, Weight: 1, Forward: "nat"})
	}
	c.Services = []Service{svc}
	return c
}

// startReady starts nshelper args in ns and waits until it has printed
// want lines starting with "ready".
func startReady(t *topo.Topo, ns string, want int, timeout time.Duration, args ...string) (*topo.Proc, *Buffer, error) {
	out := &Buffer{}
	p, err := t.Start(ns, out, args...)
	if err != nil {
		return nil, nil, err
	}
	deadline := time.Now().Add(timeout)
	for strings.Count(out.String(), "ready") < want {
		select {
		case <-p.Done():
			return nil, nil, fmt.Errorf("%s in %s exited: %v: %s", strings.Join(args[:2], " "), ns, p.Err(), out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("%s in %s not ready after %v: %s", strings.Join(args[:2], " "), ns, timeout, out.String())
		}
	}
	return p, out, nil
}

// StartHTTP starts "nshelper serve" on every host, listening on the
// comma-separated addresses listen (":80"), and waits until all are ready.
func StartHTTP(t *topo.Topo, hosts []topo.Host, nshelper, listen string, timeout time.Duration) error {
	for _, h := range hosts {
		if _, _, err := startReady(t, h.NS, len(strings.Split(listen, ",")), timeout,
			nshelper, "serve", "-listen", listen, "-name", h.Name); err != nil {
			return err
		}
	}
	return nil
}

// StartDNS starts "nshelper dnsserve" on every host, listening on listen
// (":53"), and waits until all are ready.
func StartDNS(t *topo.Topo, hosts []topo.Host, nshelper, listen string, timeout time.Duration) error {
	for _, h := range hosts {
		if _, _, err := startReady(t, h.NS, 1, timeout, nshelper, "dnsserve", "-listen", listen); err != nil {
			return err
		}
	}
	return nil
}

// StartSMTP starts "nshelper smtpserve" on every host, listening on
// listen (":25") and greeting with code (220 serves, another refuses),
// and waits until all are ready.
func StartSMTP(t *topo.Topo, hosts []topo.Host, nshelper, listen string, code int, timeout time.Duration) error {
	for _, h := range hosts {
		if _, _, err := startReady(t, h.NS, 1, timeout, nshelper, "smtpserve", "-listen", listen, "-name", h.Name, "-code", strconv.Itoa(code)); err != nil {
			return err
		}
	}
	return nil
}

// StartUDP starts "nshelper udpserve" on every host, listening on the
// comma-separated addresses listen (":53"), and waits until all are
// ready. It returns each server's output, by host name.
func StartUDP(t *topo.Topo, hosts []topo.Host, nshelper, listen string, verbose bool, timeout time.Duration) (map[string]*Buffer, error) {
	outs := map[string]*Buffer{}
	for _, h := range hosts {
		args := []string{nshelper, "udpserve", "-listen", listen, "-name", h.Name}
		if verbose {
			args = append(args, "-v")
		}
		_, out, err := startReady(t, h.NS, len(strings.Split(listen, ",")), timeout, args...)
		if err != nil {
			return nil, err
		}
		outs[h.Name] = out
	}
	return outs, nil
}

// Decap is a running "nshelper decap".
type Decap struct {
	Host topo.Host
	Proc *topo.Proc
	Out  *Buffer
}

// TUNDevice is the name of the decapsulator's TUN device in every real
// server (each lives in its own namespace).
const TUNDevice = "dplbtun0"

// StartTOAWatch starts "nshelper toa" on h's interface for TCP port
// port, and waits until it is ready: its output has a line per segment
// carrying DPVS's TCP option address.
func StartTOAWatch(t *topo.Topo, h topo.Host, nshelper string, port int, timeout time.Duration) (*Buffer, error) {
	_, out, err := startReady(t, h.NS, 1, timeout, nshelper, "toa", "-dev", h.If, "-port", strconv.Itoa(port))
	return out, err
}

// StartUOAWatch starts "nshelper uoa" on h's interface for UDP port
// port, and waits until it is ready: its output has a line per datagram
// carrying DPVS's UDP option of address.
func StartUOAWatch(t *topo.Topo, h topo.Host, nshelper string, port int, timeout time.Duration) (*Buffer, error) {
	_, out, err := startReady(t, h.NS, 1, timeout, nshelper, "uoa", "-dev", h.If, "-port", strconv.Itoa(port))
	return out, err
}

// StartDecap starts the IPIP decapsulator on h's interface with vip on a
// TUN device, and waits until it is ready.
func StartDecap(t *topo.Topo, h topo.Host, nshelper, vip string, timeout time.Duration) (*Decap, error) {
	p, out, err := startReady(t, h.NS, 1, timeout, nshelper, "decap", "-dev", h.If, "-tun", TUNDevice, "-vip", vip)
	if err != nil {
		return nil, err
	}
	return &Decap{Host: h, Proc: p, Out: out}, nil
}

// DecapStats are the counters "nshelper decap" prints.
type DecapStats struct {
	Frames, Decap, Bad, Errors uint64
}

// ParseDecapStats returns the last "stats ..." line of a decapsulator's output.
func ParseDecapStats(out string) (DecapStats, bool) {
	var s DecapStats
	found := false
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "stats ") {
			continue
		}
		var v DecapStats
		if _, err := fmt.Sscanf(line, "stats frames=%d decap=%d bad=%d errors=%d", &v.Frames, &v.Decap, &v.Bad, &v.Errors); err == nil {
			s, found = v, true
		}
	}
	return s, found
}

// Stats asks the decapsulator for its counters (SIGUSR1) and returns them.
func (d *Decap) Stats(timeout time.Duration) (DecapStats, error) {
	before := strings.Count(d.Out.String(), "stats ")
	if err := d.Proc.Signal(syscall.SIGUSR1); err != nil {
		return DecapStats{}, err
	}
	deadline := time.Now().Add(timeout)
	for strings.Count(d.Out.String(), "stats ") == before {
		if time.Now().After(deadline) {
			return DecapStats{}, fmt.Errorf("decap in %s printed no stats within %v: %s", d.Host.NS, timeout, d.Out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s, ok := ParseDecapStats(d.Out.String())
	if !ok {
		return s, fmt.Errorf("decap in %s: no stats line in %q", d.Host.NS, d.Out.String())
	}
	return s, nil
}

// UDPGet runs "nshelper udpget" in ns (bind: local address, "" for the
// route's) and returns every query's result. Like Get it fails only if
// nshelper could not run or printed something unexpected.
func UDPGet(ctx context.Context, t *topo.Topo, ns, nshelper, addr, bind string, n int, timeout time.Duration) ([]Result, error) {
	return UDPGetSized(ctx, t, ns, nshelper, addr, bind, n, 0, timeout)
}

// UDPGetSized is UDPGet with each query padded to size bytes (0: not
// padded); an answer must come back as long, padded the same way.
func UDPGetSized(ctx context.Context, t *topo.Topo, ns, nshelper, addr, bind string, n, size int, timeout time.Duration) ([]Result, error) {
	var more []string
	if size > 0 {
		more = append(more, "-size", strconv.Itoa(size))
	}
	if bind != "" {
		more = append(more, "-bind", bind)
	}
	return udpGet(ctx, t, ns, nshelper, addr, n, timeout, more...)
}

// UDPGetFromPort is UDPGet with every query sent from source port port,
// as a resolver sends its queries from one socket.
func UDPGetFromPort(ctx context.Context, t *topo.Topo, ns, nshelper, addr string, port, n int, timeout time.Duration) ([]Result, error) {
	return udpGet(ctx, t, ns, nshelper, addr, n, timeout, "-port", strconv.Itoa(port))
}

// UDPGetQUIC is UDPGet with every query a QUIC 1-RTT packet whose
// connection ID names server (DPVS's encoding), each from a new source
// port, as a QUIC client that moved.
func UDPGetQUIC(ctx context.Context, t *topo.Topo, ns, nshelper, addr, server string, n int, timeout time.Duration) ([]Result, error) {
	return udpGet(ctx, t, ns, nshelper, addr, n, timeout, "-quic-server", server)
}

// udpGet runs nshelper udpget with more arguments.
func udpGet(ctx context.Context, t *topo.Topo, ns, nshelper, addr string, n int, timeout time.Duration, more ...string) ([]Result, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*timeout+30*time.Second)
	defer cancel()
	args := append([]string{nshelper, "udpget", "-addr", addr, "-n", strconv.Itoa(n), "-timeout", timeout.String()}, more...)
	out, err := t.ExecContext(ctx, ns, args...)
	var exitErr *exec.ExitError
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 1) {
		return nil, err
	}
	return parseResults("udpget", out, n)
}

func parseResults(what, out string, n int) ([]Result, error) {
	var res []Result
	summary := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.Contains(line, []byte(`"summary":true`)) {
			summary = true
			continue
		}
		var r Result
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("nshelper %s: bad line %q: %w", what, line, err)
		}
		res = append(res, r)
	}
	if !summary || len(res) != n {
		return res, fmt.Errorf("nshelper %s: %d results and summary=%t, want %d and a summary:\n%s", what, len(res), summary, n, out)
	}
	return res, nil
}

// NotSupportedPhrase is what lbd says when it refuses a configured
// feature its dataplane cannot serve yet.
const NotSupportedPhrase = "not supported by the dataplane yet"

// ErrNotSupported: lbd refused the configuration with NotSupportedPhrase.
var ErrNotSupported = errors.New("lbd: feature " + NotSupportedPhrase)

// LBD is a running lbd.
type LBD struct {
	Proc   *topo.Proc
	Log    *Buffer // stdout and stderr
	Config Config
	Path   string // the configuration file
	LBCtl  string // lbctl binary
}

// StartLBD writes cfg to dir, starts lbd in ns and waits until lbctl gets
// an answer. If lbd exits first having logged NotSupportedPhrase, the
// error wraps ErrNotSupported and carries the log line. The caller
// removes /var/run/dpdk/<FilePrefix>; t's Teardown kills lbd.
func StartLBD(ctx context.Context, t *topo.Topo, ns, lbd, lbctl string, cfg Config, dir string, timeout time.Duration) (*LBD, error) {
	path, err := WriteConfig(cfg, dir)
	if err != nil {
		return nil, err
	}
	l := &LBD{Log: &Buffer{}, Config: cfg, Path: path, LBCtl: lbctl}
	if l.Proc, err = t.Start(ns, l.Log, lbd, "-c", path); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := WaitReady(rctx, l.Proc, lbctl, cfg.Socket); err != nil {
		for _, line := range strings.Split(l.Log.String(), "\n") {
			if strings.Contains(line, NotSupportedPhrase) {
				// A JSON log line: its "error" field says it all.
				var entry struct{ Error string }
				if json.Unmarshal([]byte(line), &entry) == nil && entry.Error != "" {
					line = entry.Error
				}
				return l, fmt.Errorf("%w: %s", ErrNotSupported, strings.TrimSpace(line))
			}
		}
		return l, fmt.Errorf("%w\nlbd log (last 40 lines):\n%s", err, Tail(l.Log.String(), 40))
	}
	return l, nil
}

// Stop sends SIGTERM to lbd and waits up to timeout for it to exit. It
// returns an error unless lbd exited with status 0 and logged "mempool in
// use at exit" with in_use 0.
func (l *LBD) Stop(timeout time.Duration) error {
	if err := l.Proc.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM lbd: %w", err)
	}
	if !l.Proc.Wait(timeout) {
		return fmt.Errorf("lbd did not exit within %v of SIGTERM", timeout)
	}
	if code := l.Proc.ExitCode(); code != 0 {
		return fmt.Errorf("lbd exit status %d (%v), want 0", code, l.Proc.Err())
	}
	inUse, line, ok := MempoolInUse(l.Log.String())
	switch {
	case !ok && line == "":
		return errors.New(`lbd did not log "mempool in use at exit"`)
	case !ok:
		return fmt.Errorf("no in_use field in %q", line)
	case inUse != 0:
		return fmt.Errorf("lbd leaked mbufs: in_use=%d in %q", inUse, line)
	}
	return nil
}
