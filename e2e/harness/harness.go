// Package harness is what the end-to-end test and the demo share around a
// real lbd: building the binaries, writing lbd's configuration, starting
// the real servers and lbd in a topo.NAT, talking to lbctl and reading the
// output of nshelper get.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/topo"
)

// RepoRoot returns the directory of the module's go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if mod := strings.TrimSpace(string(out)); mod != "" && mod != os.DevNull {
			return filepath.Dir(mod), nil
		}
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("harness: cannot find the repository root")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return "", fmt.Errorf("harness: cannot find the repository root: %w", err)
	}
	return root, nil
}

// Build runs "go build -o out pkg" in root with a 5-minute timeout.
func Build(root, pkg, out string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// Config is what varies in lbd's configuration between the test and the demo.
type Config struct {
	FilePrefix    string // eal.file_prefix, unique per run
	HugePages     bool
	MemoryMB      int
	MainCPU       int
	Workers       []int
	IdleSleep     string // e.g. "20us"
	ConnTableSize int    // per lcore; 0 keeps lbd's default
	WANIf, LANIf  string // lbd's af_packet interfaces
	WANAddr       string // "192.0.2.1/24"
	LANAddr       string // "198.51.100.1/24"
	WANAddr6      string // the wan port's IPv6 address, "2001:db8::1/64"; "" none
	LANAddr6      string // the lan port's IPv6 address, "fd00:1::1/64"; "" none
	Services      []Service
	Socket        string // control socket path
	MetricsListen string // host:port inside the LB namespace
	LogLevel      string
	LogFormat     string // "json" or "console"; "" leaves lbd's default
	// Ports, when set, replaces the two ports WANIf/LANIf/WANAddr/LANAddr
	// describe.
	Ports    []Port
	Timeouts Timeouts // "" fields keep lbd's defaults
	// Web, when set, is lbd's web: section (the browser console) as YAML
	// lines indented under "web:".
	Web string
	// StateFile, when set, is lbd's restart.state_file.
	StateFile string
	// HAState is ha.state ("master" or "backup"); "" leaves lbd's default.
	HAState string
	// Extra is appended as is: top-level YAML sections (sync:, say).
	Extra string
}

// Service is one virtual service.
type Service struct {
	Protocol    string // "tcp" or "udp"; "" is tcp
	VIP         string
	Port        int
	Scheduler   string
	Persistence string   // e.g. "300s"; "" is not persistent
	Helper      string   // the service's helper ("ftp"); "" none
	Health      string   // the service's health check as YAML flow, e.g. "{type: tcp, interval: 200ms}"; "" none
	Feedback    string   // the service's dynamic feedback as YAML flow; "" none
	SorryServer string   // "address:port"; "" none
	Quorum      int      // keepalived's quorum; 0 leaves lbd's default (1)
	SchedFlags  []string // the scheduler's flags (mh-port, ...); none when empty
	SloppyTCP   bool     // sloppy_tcp: any TCP packet opens a connection
	// LocalAddresses are the FullNAT local addresses; ProxyProtocol puts
	// the PROXY v2 header in front of the client's bytes.
	LocalAddresses []string
	ProxyProtocol  bool
	TOA            bool   // toa: DPVS's TCP option address in the handshakes
	UOA            string // uoa: DPVS's UDP option of address (ipo, opp) in the first datagrams
	SynProxy       bool   // synproxy: true
	OnePacket      bool   // one_packet: every datagram scheduled on its own
	QUIC           bool   // quic: new flows go to the server their QUIC connection ID names
	Servers        []Server
}

// Server is one real server of a Service.
type Server struct {
	Address string
	Port    int
	Weight  int
	Forward string // "nat", "dr", "tun" or "fullnat"; "" leaves lbd's default (nat)
	Health  string // the server's own health keys, a YAML flow map ("{file: /run/rs1}"); "" for the service's
}

// NATConfig returns the configuration of a VS/NAT lbd in nat: TCP
// VIP:80 round robin over every real server's port 8080, weight 1.
func NATConfig(nat *topo.NAT, suffix, dir string) Config {
	svc := Service{VIP: nat.VIP.String(), Port: 80, Scheduler: "rr"}
	for _, h := range nat.Servers {
		svc.Servers = append(svc.Servers, Server{Address: h.Addr.Addr().String(), Port: 8080, Weight: 1})
	}
	return Config{
		FilePrefix:    "dplb-e2e-" + suffix,
		MemoryMB:      256,
		MainCPU:       0,
		Workers:       []int{1},
		IdleSleep:     "20us",
		WANIf:         nat.WANIf,
		LANIf:         nat.LANIf,
		WANAddr:       nat.WANAddr.String(),
		LANAddr:       nat.LANAddr.String(),
		Services:      []Service{svc},
		Socket:        filepath.Join(dir, "lbd.sock"),
		MetricsListen: "127.0.0.1:9180",
		LogLevel:      "info",
	}
}

// YAML renders c in lbd's configuration format.
func (c Config) YAML() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("eal:")
	w("  file_prefix: %s", c.FilePrefix)
	w("  huge_pages: %t", c.HugePages)
	w("  memory_mb: %d", c.MemoryMB)
	w("  main_cpu: %d", c.MainCPU)
	w("dataplane:")
	workers := make([]string, len(c.Workers))
	for i, cpu := range c.Workers {
		workers[i] = strconv.Itoa(cpu)
	}
	w("  workers: [%s]", strings.Join(workers, ", "))
	if c.IdleSleep != "" {
		w("  idle_sleep: %s", c.IdleSleep)
	}
	if c.ConnTableSize != 0 {
		w("  conn_table_size: %d", c.ConnTableSize)
	}
	w("ports:")
	ports := c.Ports
	if len(ports) == 0 {
		ports = []Port{
			AFPacketPort(0, "wan", c.WANIf, c.WANAddr, "", "client"),
			AFPacketPort(1, "lan", c.LANIf, c.LANAddr, "", "server"),
		}
		ports[0].Address6 = c.WANAddr6
		ports[1].Address6 = c.LANAddr6
	}
	for _, p := range ports {
		w("  - name: %s", p.Name)
		w("    device: %s", p.Device)
		w("    address: %s", p.Address)
		if p.Address6 != "" {
			w("    address6: %s", p.Address6)
		}
		if p.Gateway != "" {
			w("    gateway: %s", p.Gateway)
		}
		if p.Gateway6 != "" {
			w("    gateway6: %s", p.Gateway6)
		}
		if p.Role != "" {
			w("    role: %s", p.Role)
		}
		if len(p.Floating) > 0 {
			w("    floating: [%s]", strings.Join(p.Floating, ", "))
		}
		if p.KNI != "" {
			w("    kni: %s", p.KNI)
		}
		if len(p.Routes) > 0 {
			w("    routes:")
			for _, r := range p.Routes {
				w("      - {prefix: %s, via: %s}", r[0], r[1])
			}
		}
	}
	w("services:")
	for _, s := range c.Services {
		proto := s.Protocol
		if proto == "" {
			proto = "tcp"
		}
		w("  - protocol: %s", proto)
		w("    vip: %s", s.VIP)
		w("    port: %d", s.Port)
		w("    scheduler: %s", s.Scheduler)
		if s.Persistence != "" {
			w("    persistence: %s", s.Persistence)
		}
		if s.Helper != "" {
			w("    helper: %s", s.Helper)
		}
		if s.Health != "" {
			w("    health: %s", s.Health)
		}
		if s.Feedback != "" {
			w("    feedback: %s", s.Feedback)
		}
		if s.SorryServer != "" {
			w("    sorry_server: %q", s.SorryServer) // quoted: an IPv6 one starts with '['
		}
		if s.Quorum != 0 {
			w("    quorum: %d", s.Quorum)
		}
		if len(s.SchedFlags) > 0 {
			w("    sched_flags: [%s]", strings.Join(s.SchedFlags, ", "))
		}
		if s.SloppyTCP {
			w("    sloppy_tcp: true")
		}
		if len(s.LocalAddresses) > 0 {
			w("    local_addresses: [%s]", strings.Join(s.LocalAddresses, ", "))
		}
		if s.ProxyProtocol {
			w("    proxy_protocol: true")
		}
		if s.TOA {
			w("    toa: true")
		}
		if s.UOA != "" {
			w("    uoa: " + s.UOA)
		}
		if s.SynProxy {
			w("    synproxy: true")
		}
		if s.QUIC {
			w("    quic: true")
		}
		if s.OnePacket {
			w("    one_packet: true")
		}
		w("    servers:")
		for _, rs := range s.Servers {
			extra := ""
			if rs.Forward != "" {
				extra += ", forward: " + rs.Forward
			}
			if rs.Health != "" {
				extra += ", health: " + rs.Health
			}
			w("      - {address: %s, port: %d, weight: %d%s}", rs.Address, rs.Port, rs.Weight, extra)
		}
	}
	if t := c.Timeouts; t != (Timeouts{}) {
		w("timeouts:")
		for _, kv := range [][2]string{{"tcp", t.TCP}, {"tcp_fin", t.TCPFin}, {"udp", t.UDP}, {"syn", t.SYN}} {
			if kv[1] != "" {
				w("  %s: %s", kv[0], kv[1])
			}
		}
	}
	w("control:")
	w("  socket: %s", c.Socket)
	w("metrics:")
	w("  listen: %q", c.MetricsListen)
	if c.Web != "" {
		w("web:")
		b.WriteString(c.Web)
	}
	if c.StateFile != "" {
		w("restart:")
		w("  state_file: %s", c.StateFile)
	}
	if c.HAState != "" {
		w("ha:")
		w("  state: %s", c.HAState)
	}
	b.WriteString(c.Extra)
	w("log:")
	w("  level: %s", c.LogLevel)
	if c.LogFormat != "" {
		w("  format: %s", c.LogFormat)
	}
	return b.String()
}

// Buffer is a bytes.Buffer safe for one writer and concurrent readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartServers starts "nshelper serve" in every real server's namespace
// (listening on the comma-separated ports of listen[i], default ":8080")
// and waits until each has printed "ready" for every listener.
func StartServers(t *topo.Topo, nat *topo.NAT, nshelper string, listen map[string]string, timeout time.Duration) error {
	return StartServersWith(t, nat, nshelper, listen, timeout)
}

// StartServersWith is StartServers with more arguments for "nshelper
// serve" (-proxy-protocol, say).
func StartServersWith(t *topo.Topo, nat *topo.NAT, nshelper string, listen map[string]string, timeout time.Duration, serveArgs ...string) error {
	deadline := time.Now().Add(timeout)
	for _, h := range nat.Servers {
		l := listen[h.Name]
		if l == "" {
			l = ":8080"
		}
		var out Buffer
		p, err := t.Start(h.NS, &out, append([]string{nshelper, "serve", "-listen", l, "-name", h.Name}, serveArgs...)...)
		if err != nil {
			return err
		}
		want := len(strings.Split(l, ","))
		for strings.Count(out.String(), "ready ") < want {
			select {
			case <-p.Done():
				return fmt.Errorf("nshelper serve in %s exited: %v: %s", h.NS, p.Err(), out.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("nshelper serve in %s not ready after %v: %s", h.NS, timeout, out.String())
			}
		}
	}
	return nil
}

// LBCtl runs "lbctl --socket socket args..." with a 10-second timeout and
// returns its standard output.
func LBCtl(ctx context.Context, lbctl, socket string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, lbctl, append([]string{"--socket", socket}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("lbctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// LBCtlJSON runs "lbctl -L -n --stats -o json" and decodes its answer.
func LBCtlJSON(ctx context.Context, lbctl, socket string) (api.Response, error) {
	var resp api.Response
	out, err := LBCtl(ctx, lbctl, socket, "-L", "-n", "--stats", "-o", "json")
	if err != nil {
		return resp, err
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		return resp, fmt.Errorf("lbctl -o json: %w: %q", err, out)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("lbd refused: %s", resp.Error)
	}
	return resp, nil
}

// WaitReady waits until lbctl -L -n answers, lbd exits or ctx is done.
func WaitReady(ctx context.Context, lbd *topo.Proc, lbctl, socket string) error {
	var last error
	for {
		select {
		case <-lbd.Done():
			return fmt.Errorf("lbd exited before it was ready: %v (exit code %d)", lbd.Err(), lbd.ExitCode())
		default:
		}
		if _, err := os.Stat(socket); err == nil {
			if _, last = LBCtl(ctx, lbctl, socket, "-L", "-n"); last == nil {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lbd not ready: %w (last error: %v)", ctx.Err(), last)
		case <-lbd.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Result is one request's outcome as printed by nshelper get.
type Result struct {
	I      int    `json:"i"`
	Body   string `json:"body"`
	Status int    `json:"status"`
	Remote string `json:"remote"`
	Local  string `json:"local"`
	Err    string `json:"err"`
	Millis int64  `json:"ms"`
}

// Server returns the first word of the body: the name of the real server
// that answered ("" if none).
func (r Result) Server() string {
	name, _, _ := strings.Cut(r.Body, " ")
	return name
}

// SeenClient returns the client address as the server saw it, from the
// body ("rs1 192.0.2.2:41234").
func (r Result) SeenClient() string {
	_, seen, _ := strings.Cut(r.Body, " ")
	return seen
}

// Get runs "nshelper get" in ns and returns every request's result. It
// fails only if nshelper could not run or its output is not what get
// prints; failed requests are in the results.
func Get(ctx context.Context, t *topo.Topo, ns, nshelper, url string, n int, timeout time.Duration) ([]Result, error) {
	// Each request takes at most timeout; leave room for the rest.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(n)*timeout+30*time.Second)
	defer cancel()
	out, err := t.ExecContext(ctx, ns, nshelper, "get", "-url", url, "-n", strconv.Itoa(n), "-timeout", timeout.String())
	var exitErr *exec.ExitError
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode() == 1) {
		return nil, err
	}
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
			return nil, fmt.Errorf("nshelper get: bad line %q: %w", line, err)
		}
		res = append(res, r)
	}
	if !summary || len(res) != n {
		return res, fmt.Errorf("nshelper get: %d results and summary=%t, want %d and a summary:\n%s", len(res), summary, n, out)
	}
	return res, nil
}

var inUseRE = regexp.MustCompile(`"in_use"\s*:\s*(\d+)`)

// MempoolInUse finds lbd's "mempool in use at exit" log line (zap JSON or
// console format) and returns its in_use field.
func MempoolInUse(log string) (inUse int, line string, ok bool) {
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "mempool in use at exit") {
			continue
		}
		m := inUseRE.FindStringSubmatch(l)
		if m == nil {
			return 0, l, false
		}
		n, err := strconv.Atoi(m[1])
		return n, l, err == nil
	}
	return 0, "", false
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// WriteConfig writes c to dir/lbd.yaml and returns the path.
func WriteConfig(c Config, dir string) (string, error) {
	path := filepath.Join(dir, "lbd.yaml")
	return path, os.WriteFile(path, []byte(c.YAML()), 0o644)
}
