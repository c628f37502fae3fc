// Package topo builds small network-namespace topologies for end-to-end
// tests and demos by running iproute2, ethtool and sysctl.
//
// Every name a Topo creates carries a per-Topo random suffix so that two
// runs cannot collide: namespaces are called "dplb-<base>-<suffix>" and
// links "dp-<base>-<suffix>" (scripts/clean.sh removes leftovers of both).
// Teardown kills the processes started in the namespaces and deletes the
// namespaces (which deletes the links inside them) and any link left in
// the root namespace. It is idempotent and only logs failures.
package topo

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Name prefixes of everything a Topo creates; scripts/clean.sh knows them.
const (
	NSPrefix   = "dplb-"
	LinkPrefix = "dp-"
)

// maxIfName is IFNAMSIZ-1: the longest Linux interface name.
const maxIfName = 15

// cmdTimeout bounds every single command a Topo runs.
const cmdTimeout = 30 * time.Second

// Logger is the part of testing.T a Topo uses.
type Logger interface {
	Logf(format string, args ...any)
}

// Topo is a set of namespaces, links and processes to remove together.
type Topo struct {
	log    Logger
	suffix string

	mu        sync.Mutex
	nss       []string // created namespaces, in creation order
	rootLinks []string // links created in the root namespace
	procs     []*Proc
	torn      bool
}

// New returns an empty Topo with a fresh 6-character suffix.
func New(log Logger) *Topo {
	return &Topo{log: log, suffix: randSuffix(6)}
}

func randSuffix(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on Linux; fall back to the clock.
		t := uint64(time.Now().UnixNano())
		for i := range b {
			b[i] = byte(t >> (8 * i))
		}
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// Suffix is the random suffix of every name this Topo creates.
func (t *Topo) Suffix() string { return t.suffix }

// NSName returns the full namespace name for base.
func (t *Topo) NSName(base string) string { return NSPrefix + base + "-" + t.suffix }

// IfName returns the full interface name for base; base must be at most
// 5 characters so that the name fits in 15.
func (t *Topo) IfName(base string) string { return LinkPrefix + base + "-" + t.suffix }

// AddNS creates the namespace NSName(base), brings its loopback up,
// disables IPv6 for every interface created in it later, and returns its
// name.
func (t *Topo) AddNS(base string) (string, error) {
	ns := t.NSName(base)
	if _, err := t.Exec("", "ip", "netns", "add", ns); err != nil {
		return "", err
	}
	t.mu.Lock()
	t.nss = append(t.nss, ns)
	t.mu.Unlock()
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"},
		{"sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"},
	} {
		if _, err := t.Exec(ns, args...); err != nil {
			return "", err
		}
	}
	return ns, nil
}

func checkIfName(name string) error {
	if name == "" || len(name) > maxIfName || strings.ContainsAny(name, "/ .") {
		return fmt.Errorf("topo: bad interface name %q (1..%d chars, no '/', ' ', '.')", name, maxIfName)
	}
	return nil
}

// Veth creates a veth pair with ifA in nsA and ifB in nsB ("" is the root
// namespace). Both ends are left down.
func (t *Topo) Veth(nsA, ifA, nsB, ifB string) error {
	if err := checkIfName(ifA); err != nil {
		return err
	}
	if err := checkIfName(ifB); err != nil {
		return err
	}
	args := []string{"ip", "link", "add", "name", ifA}
	if nsA != "" {
		args = append(args, "netns", nsA)
	}
	args = append(args, "type", "veth", "peer", "name", ifB)
	if nsB != "" {
		args = append(args, "netns", nsB)
	}
	if _, err := t.Exec("", args...); err != nil {
		return err
	}
	t.mu.Lock()
	if nsA == "" {
		t.rootLinks = append(t.rootLinks, ifA)
	} else if nsB == "" {
		t.rootLinks = append(t.rootLinks, ifB)
	}
	t.mu.Unlock()
	return nil
}

// Bridge creates bridge br in ns (STP off, so ports forward at once),
// enslaves ifs to it and brings br and ifs up.
func (t *Topo) Bridge(ns, br string, ifs ...string) error {
	if err := checkIfName(br); err != nil {
		return err
	}
	if _, err := t.Exec(ns, "ip", "link", "add", "name", br, "type", "bridge", "stp_state", "0", "forward_delay", "0"); err != nil {
		return err
	}
	if ns == "" {
		t.mu.Lock()
		t.rootLinks = append(t.rootLinks, br)
		t.mu.Unlock()
	}
	if err := t.NoIPv6(ns, br); err != nil {
		return err
	}
	for _, ifc := range ifs {
		if _, err := t.Exec(ns, "ip", "link", "set", ifc, "master", br); err != nil {
			return err
		}
		if err := t.Up(ns, ifc); err != nil {
			return err
		}
	}
	return t.Up(ns, br)
}

// Addr adds cidr ("192.0.2.2/24") to ifc in ns.
func (t *Topo) Addr(ns, ifc, cidr string) error {
	_, err := t.Exec(ns, "ip", "addr", "add", cidr, "dev", ifc)
	return err
}

// Route adds a route in ns, written as after "ip route add":
// "default via 192.0.2.1".
func (t *Topo) Route(ns, route string) error {
	_, err := t.Exec(ns, append([]string{"ip", "route", "add"}, strings.Fields(route)...)...)
	return err
}

// Up brings ifc in ns up.
func (t *Topo) Up(ns, ifc string) error {
	_, err := t.Exec(ns, "ip", "link", "set", ifc, "up")
	return err
}

// NoIPv6 disables IPv6 on ifc so that it sends no stray IPv6 frames.
func (t *Topo) NoIPv6(ns, ifc string) error {
	_, err := t.Exec(ns, "sysctl", "-q", "-w", "net.ipv6.conf."+ifc+".disable_ipv6=1")
	return err
}

// NoOffload turns off TX checksum offload, TSO, GSO and GRO on ifc: a
// packet that reaches an af_packet socket then carries a full checksum and
// is at most one MTU long.
func (t *Topo) NoOffload(ns, ifc string) error {
	_, err := t.Exec(ns, "ethtool", "-K", ifc, "tx", "off", "tso", "off", "gso", "off", "gro", "off")
	return err
}

// ForAFPacket prepares ifc for traffic to or from af_packet: NoOffload
// and NoIPv6.
func (t *Topo) ForAFPacket(ns, ifc string) error {
	if err := t.NoOffload(ns, ifc); err != nil {
		return err
	}
	return t.NoIPv6(ns, ifc)
}

// nsCommand returns the argv that runs args in ns ("" = root namespace).
func nsCommand(ns string, args []string) []string {
	if ns == "" {
		return args
	}
	return append([]string{"ip", "netns", "exec", ns}, args...)
}

// Exec runs args in ns ("" = root namespace) with a 30s timeout and
// returns its combined output; the error includes that output.
func (t *Topo) Exec(ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	return t.ExecContext(ctx, ns, args...)
}

// ExecContext is Exec bounded by ctx instead of the default timeout.
func (t *Topo) ExecContext(ctx context.Context, ns string, args ...string) (string, error) {
	argv := nsCommand(ns, args)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Proc is a process started in a namespace; Teardown kills it.
type Proc struct {
	Cmd  *exec.Cmd
	Name string // args[0] of the command, for logs

	done chan struct{}
	err  error
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the error returned by exec.Cmd.Wait; valid after Done is closed.
func (p *Proc) Err() error { <-p.done; return p.err }

// ExitCode is the exit code, or -1 if it was killed by a signal; valid
// after Done is closed.
func (p *Proc) ExitCode() int {
	<-p.done
	if p.Cmd.ProcessState == nil {
		return -1
	}
	return p.Cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process itself (not its group).
func (p *Proc) Signal(sig syscall.Signal) error {
	return p.Cmd.Process.Signal(sig)
}

// Wait waits up to timeout for the process to exit and reports whether it
// did.
func (p *Proc) Wait(timeout time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.Cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if p.Wait(grace) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	p.Wait(5 * time.Second)
}

// Start runs args in ns in the background, in its own process group,
// with stdout and stderr sent to out (nil: discarded). ip netns exec execs
// the command, so Proc's pid is the command's own.
func (t *Topo) Start(ns string, out io.Writer, args ...string) (*Proc, error) {
	t.mu.Lock()
	torn := t.torn
	t.mu.Unlock()
	if torn {
		return nil, errors.New("topo: Start after Teardown")
	}
	argv := nsCommand(ns, args)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = out
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	p := &Proc{Cmd: cmd, Name: args[0], done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.mu.Lock()
	t.procs = append(t.procs, p)
	t.mu.Unlock()
	return p, nil
}

// Teardown kills every started process and deletes every namespace and
// root-namespace link this Topo created. It logs failures and can be
// called any number of times, also concurrently.
func (t *Topo) Teardown() {
	t.mu.Lock()
	if t.torn {
		t.mu.Unlock()
		return
	}
	t.torn = true
	procs, nss, links := t.procs, t.nss, t.rootLinks
	t.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(3 * time.Second)
		}()
	}
	wg.Wait()
	for i := len(links) - 1; i >= 0; i-- {
		if _, err := t.Exec("", "ip", "link", "del", links[i]); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			t.log.Logf("topo teardown: %v", err)
		}
	}
	for i := len(nss) - 1; i >= 0; i-- {
		// What a started process left behind in the namespace (vsftpd's
		// session processes, which leave its process group) dies with it.
		t.killAllIn(nss[i])
		if _, err := t.Exec("", "ip", "netns", "del", nss[i]); err != nil {
			t.log.Logf("topo teardown: %v", err)
		}
	}
}

// killAllIn kills every process still in namespace ns.
func (t *Topo) killAllIn(ns string) {
	out, err := t.Exec("", "ip", "netns", "pids", ns)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(out) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
