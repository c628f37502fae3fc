package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/handover"
)

// checkTimeout bounds the new binary's -check.
const checkTimeout = 30 * time.Second

// upgrader serves lbctl upgrade and SIGUSR2: it checks the new binary
// (it must pass -check with lbd's configuration), then stops lbd's run
// so that main execs the binary with the handover.
type upgrader struct {
	config string             // lbd's configuration file
	self   string             // the binary lbd was started from: the default
	run    context.Context    // lbd's run: once it is done, lbd is stopping
	stop   context.CancelFunc // ends lbd's run

	mu       sync.Mutex
	checking bool
	binary   string   // the binary to exec, once checked
	state    []byte   // the handover Run collected
	control  *os.File // the listening control socket Run handed over
}

// request checks bin ("" is the binary lbd was started from) and, if it
// will do, stops the run; it refuses while another upgrade is checked or
// under way.
func (u *upgrader) request(bin string) (string, error) {
	u.mu.Lock()
	if u.checking || u.binary != "" {
		busy := u.binary
		u.mu.Unlock()
		if busy == "" {
			busy = "another binary (being checked)"
		}
		return "", fmt.Errorf("an upgrade to %s is already in progress", busy)
	}
	u.checking = true
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.checking = false
		u.mu.Unlock()
	}()
	if bin == "" {
		bin = u.self
	}
	if err := u.check(bin); err != nil {
		return "", err
	}
	u.mu.Lock()
	if u.run.Err() != nil {
		// Stopping (SIGTERM while the binary was checked): a stop, not
		// an upgrade.
		u.mu.Unlock()
		return "", errors.New("lbd is stopping")
	}
	u.binary = bin
	u.mu.Unlock()
	u.stop()
	return bin, nil
}

// check runs bin -check -c config: the binary must start on this
// machine and accept lbd's configuration.
func (u *upgrader) check(bin string) error {
	if !filepath.IsAbs(bin) {
		return fmt.Errorf("binary %q: not an absolute path", bin)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("binary: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("binary %s: not an executable file", bin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-check", "-c", u.config).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = "it printed nothing"
		}
		return fmt.Errorf("%s -check -c %s failed (%v): %s", bin, u.config, err, msg)
	}
	return nil
}

// closeOnExec marks every descriptor but stdin, stdout, stderr and those
// kept close-on-exec: DPDK leaves some open without the flag (its memory
// files, with their locks), and the new lbd's DPDK could not take them.
func closeOnExec(keep ...int) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range fds {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 && !slices.Contains(keep, fd) {
			syscall.CloseOnExec(fd)
		}
	}
}

// keepControl stores the listening control socket Run hands over.
func (u *upgrader) keepControl(f *os.File) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.control = f
}

// upgrading reports whether the run stops for an upgrade.
func (u *upgrader) upgrading() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.binary != ""
}

// keep stores the handover Run collected.
func (u *upgrader) keep(state []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.state = state
}

// exec replaces lbd with the new binary, same pid and arguments, the
// handover in an inherited memfd. If the new binary cannot be exec'd,
// lbd execs itself again (the running binary, even if its file was
// replaced), so the ports and connections come back as they were. It
// returns only if both fail.
func (u *upgrader) exec(log *zap.Logger) error {
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, handover.EnvFD+"=") && !strings.HasPrefix(kv, handover.EnvControlFD+"=") {
			env = append(env, kv)
		}
	}
	keep := -1
	if u.state != nil {
		fd, err := handover.Memfd(u.state)
		if err != nil {
			log.Error("handover not passed on: the new lbd starts with an empty connection table", zap.Error(err))
		} else {
			env = append(env, fmt.Sprintf("%s=%d", handover.EnvFD, fd))
			keep = fd
		}
	}
	keepControl := -1
	if u.control != nil {
		fd := int(u.control.Fd())
		if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); errno == 0 {
			env = append(env, fmt.Sprintf("%s=%d", handover.EnvControlFD, fd))
			keepControl = fd
		}
	}
	closeOnExec(keep, keepControl)
	args := append([]string{u.binary}, os.Args[1:]...)
	log.Info("upgrade: exec", zap.String("binary", u.binary), zap.Strings("args", args[1:]))
	log.Sync()
	err := syscall.Exec(u.binary, args, env)
	log.Error("upgrade: exec of the new binary failed; starting the running one again", zap.String("binary", u.binary), zap.Error(err))
	log.Sync()
	args[0] = os.Args[0]
	err2 := syscall.Exec("/proc/self/exe", args, env)
	return errors.Join(err, err2)
}
