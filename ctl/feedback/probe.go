package feedback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/conf"
)

// Prober polls one target once and returns its load in percent 0..100.
// It must return once ctx is done. Poll is the real one; tests of the
// Poller may pass their own through WithProber.
type Prober func(ctx context.Context, t Target) (load float64, err error)

// Limits of what a poll reads.
const (
	maxBody   = 1 << 10 // an HTTP body longer than this is not one number
	maxOutput = 4 << 10 // output of a command kept (stdout parsed, stderr quoted)
	maxReason = 200
)

// Poll asks the target for its load once, within its timeout: an HTTP GET
// of its load endpoint (a 2xx answer whose body is one number) or a run
// of its command (exit 0, stdout one number). See ParseLoad for the
// number. Polls leave from the host's own stack, bound to the
// configuration's source address if it has one.
func Poll(ctx context.Context, t Target) (float64, error) {
	c := t.Config.Effective()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var (
		load float64
		err  error
	)
	switch c.Type {
	case conf.FeedbackHTTP:
		load, err = pollHTTP(ctx, t, c)
	case conf.FeedbackExec:
		load, err = pollExec(ctx, t, c)
	default:
		return 0, fmt.Errorf("feedback type %q polls nothing", c.Type)
	}
	if err != nil && ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return 0, fmt.Errorf("timeout after %s", c.Timeout)
		}
		return 0, errors.New("canceled")
	}
	return load, err
}

// PollAddr returns the address a target is polled at: the server's
// address with the configuration's port, or the server's port if that is 0.
func (t Target) PollAddr() netip.AddrPort {
	if p := t.Config.Port; p != 0 {
		return netip.AddrPortFrom(t.Addr.Addr(), uint16(p))
	}
	return t.Addr
}

func truncate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxReason {
		return s[:maxReason] + "..."
	}
	return s
}

func pollHTTP(ctx context.Context, t Target, c conf.Feedback) (float64, error) {
	addr := t.PollAddr().String()
	d := &net.Dialer{}
	if src := c.SourceAddr(); src.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp4", addr)
		},
		DisableKeepAlives:      true, // every poll opens a fresh connection
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.Path, nil)
	if err != nil {
		return 0, errors.New(truncate(err.Error()))
	}
	req.Header.Set("User-Agent", "dplb-feedback")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, errors.New(truncate(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, fmt.Errorf("HTTP status %d, want 2xx", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, errors.New(truncate("reading body: " + err.Error()))
	}
	if len(body) > maxBody {
		return 0, fmt.Errorf("body longer than %d bytes, want one number", maxBody)
	}
	return ParseLoad(string(body))
}

// limitedBuffer keeps the first maxOutput bytes written to it.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func pollExec(ctx context.Context, t Target, c conf.Feedback) (float64, error) {
	if len(c.Command) == 0 {
		return 0, errors.New("exec: no command")
	}
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	p := t.PollAddr()
	cmd.Env = append(os.Environ(),
		"DPLB_RS_ADDR="+p.Addr().String(),
		"DPLB_RS_PORT="+strconv.Itoa(int(p.Port())),
	)
	if t.VIP.IsValid() {
		cmd.Env = append(cmd.Env,
			"DPLB_VIP="+t.VIP.Addr().String(),
			"DPLB_VPORT="+strconv.Itoa(int(t.VIP.Port())))
	}
	var stdout, stderr limitedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The command and whatever it starts form a process group, killed
	// whole when the poll times out.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 100 * time.Millisecond
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r := ee.String() // "exit status 2", "signal: killed"
			if l := lastLine(stderr.String()); l != "" {
				r += ": " + l
			}
			return 0, errors.New(truncate(r))
		}
		return 0, errors.New(truncate("exec: " + err.Error()))
	}
	return ParseLoad(stdout.String())
}
