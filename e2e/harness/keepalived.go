package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// The example keepalived configuration and notify script shipped for
// operators; the failover test runs these very files, with this
// director's settings put in.
const (
	KeepalivedConf = "deploy/keepalived/keepalived.conf"
	NotifyScript   = "deploy/keepalived/dplb-notify.sh"
)

// VRRPNode is what differs between the shipped example and one director
// of a test pair.
type VRRPNode struct {
	RouterID  string // router_id
	Interface string // the management interface: VRRP and sync
	MgmtVIP   string // the management VIP, "10.255.0.254/24"
	Priority  int
	LBCtl     string // lbctl binary
	Socket    string // lbd's control socket
	SyncID    int
}

// substitute replaces the one match of re in s by repl, and fails unless
// there is exactly one: the test must notice when the shipped file
// changes shape.
func substitute(s, what string, re *regexp.Regexp, repl string) (string, error) {
	if n := len(re.FindAllStringIndex(s, -1)); n != 1 {
		return "", fmt.Errorf("harness: %s: %d matches of %s, want 1", what, n, re)
	}
	return re.ReplaceAllLiteralString(s, repl), nil
}

type edit struct {
	re   *regexp.Regexp
	repl string
}

func applyEdits(s, what string, edits []edit) (string, error) {
	var err error
	for _, e := range edits {
		if s, err = substitute(s, what, e.re, e.repl); err != nil {
			return "", err
		}
	}
	return s, nil
}

// WriteKeepalived writes dir/keepalived.conf and dir/dplb-notify.sh: the
// shipped files from the repository root with n's settings, the script
// logging to dir/notify.log. It returns the configuration's path.
func WriteKeepalived(root, dir string, n VRRPNode) (string, error) {
	confIn, err := os.ReadFile(filepath.Join(root, KeepalivedConf))
	if err != nil {
		return "", err
	}
	scriptIn, err := os.ReadFile(filepath.Join(root, NotifyScript))
	if err != nil {
		return "", err
	}
	script := filepath.Join(dir, "dplb-notify.sh")
	conf, err := applyEdits(string(confIn), KeepalivedConf, []edit{
		{regexp.MustCompile(`(?m)^[ \t]*router_id \S+$`), "\trouter_id " + n.RouterID},
		{regexp.MustCompile(`(?m)^\tinterface \S+$`), "\tinterface " + n.Interface},
		{regexp.MustCompile(`(?m)^\t\t\S+ dev \S+$`), "\t\t" + n.MgmtVIP + " dev " + n.Interface},
		{regexp.MustCompile(`(?m)^\tpriority \d+$`), fmt.Sprintf("\tpriority %d", n.Priority)},
	})
	if err != nil {
		return "", err
	}
	// Every notify line and the lbd check name the shipped script's
	// installed path.
	conf = strings.ReplaceAll(conf, "/etc/keepalived/dplb-notify.sh", script)
	if strings.Count(conf, script) != 6 {
		return "", fmt.Errorf("harness: %s: want notify_master, _backup, _fault, _stop and the lbd checks (check, alive) calling the script", KeepalivedConf)
	}
	body, err := applyEdits(string(scriptIn), NotifyScript, []edit{
		{regexp.MustCompile(`(?m)^LBCTL=.*$`), "LBCTL=" + n.LBCtl},
		{regexp.MustCompile(`(?m)^SOCKET=.*$`), "SOCKET=" + n.Socket},
		{regexp.MustCompile(`(?m)^SYNC_IF=.*$`), "SYNC_IF=" + n.Interface},
		{regexp.MustCompile(`(?m)^SYNC_ID=.*$`), fmt.Sprintf("SYNC_ID=%d", n.SyncID)},
		{regexp.MustCompile(`(?m)^LOG=.*$`), "LOG=" + filepath.Join(dir, "notify.log")},
	})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "keepalived.conf")
	return path, os.WriteFile(path, []byte(conf), 0o644)
}

// Keepalived is a keepalived running in the foreground in a director's
// namespace with its own configuration and pid files.
type Keepalived struct {
	Proc *topo.Proc
	Log  *Buffer
	Dir  string
}

// StartKeepalived starts keepalived (VRRP only, in the foreground,
// logging to its output, line-buffered, no syslog) in ns with
// dir/keepalived.conf; the pid files go to dir. The host's own
// keepalived, if any, plays no part.
// keepalived's own check of the configuration, run first in ns where its
// interfaces exist, must pass: warnings included.
func StartKeepalived(t *topo.Topo, ns, dir string) (*Keepalived, error) {
	conf := filepath.Join(dir, "keepalived.conf")
	if _, err := t.Exec(ns, "keepalived", "--config-test", "--use-file", conf); err != nil {
		return nil, fmt.Errorf("keepalived refuses the configuration: %w", err)
	}
	k := &Keepalived{Log: &Buffer{}, Dir: dir}
	var err error
	k.Proc, err = t.Start(ns, k.Log, "stdbuf", "-oL", "-eL", "keepalived", "--vrrp", "--dont-fork", "--log-console", "--log-detail", "--no-syslog",
		"--use-file", conf,
		"--pid", filepath.Join(dir, "keepalived.pid"), "--vrrp_pid", filepath.Join(dir, "vrrp.pid"))
	return k, err
}

// RealtimeLimit is the VRRP process's RLIMIT_RTTIME, soft and hard (in
// µs, as /proc/PID/limits has them): what keepalived set for its
// real-time VRRP child from vrrp_rlimit_rttime.
func (k *Keepalived) RealtimeLimit() (soft, hard string, err error) {
	b, err := os.ReadFile(filepath.Join(k.Dir, "vrrp.pid"))
	if err != nil {
		return "", "", err
	}
	limits, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/limits")
	if err != nil {
		return "", "", err
	}
	const name = "Max realtime timeout"
	for _, line := range strings.Split(string(limits), "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, name)); strings.HasPrefix(line, name) && len(f) >= 2 {
			return f[0], f[1], nil
		}
	}
	return "", "", fmt.Errorf("no %q in the VRRP process's limits:\n%s", name, limits)
}

// Kill ends keepalived and its VRRP child at once, as a dead machine
// would: no last advert with priority 0, no notify script. topo.Start
// put them in their own process group.
func (k *Keepalived) Kill() {
	_ = syscall.Kill(-k.Proc.Cmd.Process.Pid, syscall.SIGKILL)
	k.Proc.Wait(5 * time.Second)
}

// Stop stops keepalived cleanly (SIGTERM): it sends a priority-0 advert,
// so the peer takes over at once, and runs notify_stop.
func (k *Keepalived) Stop(timeout time.Duration) error {
	if err := k.Proc.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if !k.Proc.Wait(timeout) {
		return fmt.Errorf("keepalived did not exit within %v of SIGTERM", timeout)
	}
	return nil
}

// NotifyLog is what the notify script logged.
func (k *Keepalived) NotifyLog() string {
	b, _ := os.ReadFile(filepath.Join(k.Dir, "notify.log"))
	return string(b)
}

// State is the last state keepalived logged entering ("MASTER",
// "BACKUP", "FAULT"), "" if none yet.
func (k *Keepalived) State() string {
	m := enteringRE.FindAllStringSubmatch(k.Log.String(), -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

var enteringRE = regexp.MustCompile(`Entering (\w+) STATE`)
