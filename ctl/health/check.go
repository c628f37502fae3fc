package health

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dplb/dplb/conf"
)

// Checker runs one probe of a target and says whether it passed and, if
// not, why. It must return once ctx is done. Check is the real one; tests
// of the Monitor pass their own through WithChecker.
type Checker func(ctx context.Context, t Target) Result

// Result is one probe's outcome.
type Result struct {
	OK     bool
	Reason string // why it failed, "" when it passed
	// Weight is the weight the probe set, -1 when it sets none: an exec
	// check with weight_from_exit that exits 2..255 passes and sets the
	// weight to its exit status - 2 (keepalived's misc_dynamic).
	Weight int
	// Delta is added to the server's weight: a file check's number times
	// its file_weight (keepalived's FILE_CHECK weight), 0 for the others.
	Delta int
}

// Outcome is the Result of a probe that passed or not and sets no weight.
func Outcome(ok bool, reason string) Result { return Result{OK: ok, Reason: reason, Weight: -1} }

// Plain makes a Checker of a probe that sets no weight.
func Plain(probe func(ctx context.Context, t Target) (ok bool, reason string)) Checker {
	return func(ctx context.Context, t Target) Result { return Outcome(probe(ctx, t)) }
}

// maxBody is how much of an HTTP body expect_body searches,
// maxDigestBody how much expect_digest reads (keepalived reads it all; a
// health page is small), and maxOutput how much of a command's output a
// reason quotes from.
const (
	maxBody       = 64 << 10
	maxDigestBody = 16 << 20
	maxOutput     = 4 << 10
	maxReason     = 200
)

// Probe runs the target's check once, within its timeout, and returns
// whether it passed and, if not, a short reason ("connect: connection
// refused", "HTTP status 500, want 200-399", "timeout after 1s"). A check
// of type none passes.
func Probe(ctx context.Context, t Target) (ok bool, reason string) {
	r := Check(ctx, t)
	return r.OK, r.Reason
}

// Check is Probe with the weight an exec check's exit status sets. The
// check's also checks run after it, each within its own timeout, when it
// passed; all must pass, and the reason of one that failed names it
// ("also tcp: connect: connection refused").
func Check(ctx context.Context, t Target) Result { return CheckVia(ctx, t, nil) }

// CheckVia is Check with viaLBD probing the checks (the check or its also
// checks) that leave through lbd (via: lbd; an also check without a via
// has its check's), each within its timeout; the others leave from the
// host.
func CheckVia(ctx context.Context, t Target, viaLBD func(ctx context.Context, t Target) Result) Result {
	one := func(t Target) Result {
		if t.Check.Via != conf.HealthViaLBD || viaLBD == nil {
			return checkOne(ctx, t)
		}
		ctx, cancel := context.WithTimeout(ctx, t.Check.Effective().Timeout)
		defer cancel()
		return viaLBD(ctx, t)
	}
	also := t.Check.Also
	res := one(t)
	for _, a := range also {
		if !res.OK {
			break
		}
		at := t
		at.Check = t.Check.AlsoAsProbed(a)
		r := one(at)
		if !r.OK {
			return Outcome(false, truncate("also "+a.Effective().Type+": "+r.Reason))
		}
		// keepalived adds every checker's dynamic weight.
		res.Delta += r.Delta
	}
	return res
}

// checkOne runs one check, without its also checks, within its timeout.
func checkOne(ctx context.Context, t Target) Result {
	t.Check = t.Check.Effective()
	ctx, cancel := context.WithTimeout(ctx, t.Check.Timeout)
	defer cancel()
	if ctx.Err() != nil {
		return Outcome(false, errReason(ctx, ctx.Err(), t.Check.Timeout))
	}
	switch t.Check.Type {
	case conf.HealthExec:
		return probeExec(ctx, t)
	case conf.HealthFile:
		return probeFile(t.Check)
	case conf.HealthBFD:
		return probeBFD(bfdSessions(), t)
	}
	return Outcome(probe(ctx, t))
}

func probe(ctx context.Context, t Target) (ok bool, reason string) {
	switch t.Check.Type {
	case conf.HealthNone:
		return true, ""
	case conf.HealthTCP:
		return probeTCP(ctx, t)
	case conf.HealthHTTP, conf.HealthHTTPS:
		return probeHTTPURLs(ctx, t)
	case conf.HealthUDP:
		return probeUDP(ctx, t)
	case conf.HealthDNS:
		return probeDNS(ctx, t)
	case conf.HealthSMTP:
		return probeSMTP(ctx, t)
	case conf.HealthICMP:
		return probeICMP(ctx, t)
	}
	return false, fmt.Sprintf("unknown check type %q", t.Check.Type)
}

// dialer returns a dialer bound to the check's source address, if any.
func dialer(c conf.HealthCheck, network string) *net.Dialer {
	d := &net.Dialer{}
	src := c.SourceAddr()
	if !src.IsValid() {
		return d
	}
	switch network {
	case "udp":
		d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	default:
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	return d
}

// errReason turns a probe's error into a reason. ctx is the probe's
// context, timeout its check's timeout.
func errReason(ctx context.Context, err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout after " + timeout.String()
	case ctx.Err() != nil:
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH):
		return "host unreachable"
	case errors.Is(err, syscall.ENETUNREACH):
		return "network unreachable"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "source address not available"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed by the server"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return truncate(oe.Err.Error())
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return truncate(ue.Err.Error())
	}
	return truncate(err.Error())
}

// dialReason is errReason for a failed connection, prefixed "connect: "
// unless it is a timeout.
func dialReason(ctx context.Context, err error, timeout time.Duration) string {
	r := errReason(ctx, err, timeout)
	if strings.HasPrefix(r, "timeout") || r == "canceled" {
		return r
	}
	return "connect: " + r
}

func truncate(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > maxReason {
		return s[:maxReason] + "..."
	}
	return s
}

func probeTCP(ctx context.Context, t Target) (bool, string) {
	conn, err := dialer(t.Check, "tcp").DialContext(ctx, "tcp", t.ProbeAddr().String())
	if err != nil {
		return false, dialReason(ctx, err, t.Check.Timeout)
	}
	conn.Close()
	return true, ""
}

// probeHTTPURLs requests the check's path, then each of its extra_urls,
// and passes when all pass; with extra_urls a failure's reason starts
// with the path that failed.
func probeHTTPURLs(ctx context.Context, t Target) (bool, string) {
	ok, reason := probeHTTP(ctx, t)
	if len(t.Check.ExtraURLs) == 0 {
		return ok, reason
	}
	if !ok {
		return false, truncate(t.Check.Path + ": " + reason)
	}
	for _, u := range t.Check.ExtraURLs {
		ut := t
		ut.Check = t.Check.URL(u)
		if ok, reason := probeHTTP(ctx, ut); !ok {
			return false, truncate(u.Path + ": " + reason)
		}
	}
	return true, ""
}

func probeHTTP(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	addr := t.ProbeAddr().String()
	serverName := c.Host
	if h, _, err := net.SplitHostPort(c.Host); err == nil {
		serverName = h
	}
	if serverName == "" {
		serverName = t.ProbeAddr().Addr().String()
	}
	d := dialer(c, "tcp")
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig: &tls.Config{
			InsecureSkipVerify: c.TLSSkipVerify, //nolint:gosec // configured: real servers' certificates are usually for the VIP's name
			ServerName:         serverName,
		},
		DisableKeepAlives:      true, // every probe opens a fresh connection
		DisableCompression:     true,
		MaxResponseHeaderBytes: maxBody,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, c.Type+"://"+addr+c.Path, nil)
	if err != nil {
		return false, truncate(err.Error())
	}
	if c.Host != "" {
		req.Host = c.Host
	}
	req.Header.Set("User-Agent", "dplb-health")
	resp, err := client.Do(req)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return false, dialReason(ctx, err, c.Timeout)
		}
		var ce *tls.CertificateVerificationError
		if errors.As(err, &ce) {
			return false, truncate("TLS: " + ce.Err.Error())
		}
		return false, errReason(ctx, err, c.Timeout)
	}
	defer resp.Body.Close()
	// The transport may still hand back an answer that raced the
	// deadline's cancellation (a TLS server sees the close_notify, ends
	// its handler and replies before the socket closes): an answer after
	// the timeout is a timeout.
	if ctx.Err() != nil {
		return false, errReason(ctx, ctx.Err(), c.Timeout)
	}
	if !c.StatusOK(resp.StatusCode) {
		return false, fmt.Sprintf("HTTP status %d, want %s", resp.StatusCode, c.ExpectStatus)
	}
	if c.ExpectBody == "" && c.ExpectRegex == "" && c.ExpectDigest == "" {
		return true, ""
	}
	return checkBody(ctx, c, resp.Body)
}

// checkBody reads the body's first maxBody bytes, for expect_body and
// expect_regex, or with expect_digest all of it (at most maxDigestBody
// bytes, as keepalived's url digest reads it all) for its MD5.
func checkBody(ctx context.Context, c conf.HealthCheck, r io.Reader) (bool, string) {
	h := md5.New()
	var head bytes.Buffer
	var w io.Writer = &limitedWriter{&head, maxBody}
	limit := int64(maxBody)
	if c.ExpectDigest != "" {
		w, limit = io.MultiWriter(h, w), maxDigestBody+1
	}
	n, err := io.Copy(w, io.LimitReader(r, limit))
	switch {
	case err != nil:
		return false, "reading body: " + errReason(ctx, err, c.Timeout)
	case c.ExpectDigest != "" && n > maxDigestBody:
		return false, fmt.Sprintf("body longer than %d MiB: not digested", maxDigestBody>>20)
	}
	if c.ExpectDigest != "" {
		if sum := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(sum, c.ExpectDigest) {
			return false, fmt.Sprintf("body digest %s, want %s", sum, strings.ToLower(c.ExpectDigest))
		}
	}
	if c.ExpectBody != "" && !bytes.Contains(head.Bytes(), []byte(c.ExpectBody)) {
		return false, fmt.Sprintf("body does not contain %q", c.ExpectBody)
	}
	if c.ExpectRegex != "" {
		re, err := regexp.Compile(c.ExpectRegex) // validated with the configuration
		if err != nil || !re.Match(head.Bytes()) {
			return false, fmt.Sprintf("body does not match %q", c.ExpectRegex)
		}
	}
	return true, ""
}

// limitedWriter keeps the first n bytes written to it and takes the rest
// without keeping them.
type limitedWriter struct {
	b *bytes.Buffer
	n int
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	if room := w.n - w.b.Len(); room > 0 {
		w.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// deadlineConn is a connection whose deadline is ctx's, and which ctx's
// end interrupts.
func deadlineConn(ctx context.Context, conn net.Conn) (stop func() bool) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	return context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
}

func probeUDP(ctx context.Context, t Target) (bool, string) {
	c := t.Check
	reply, why := udpExchange(ctx, t, []byte(c.Send))
	if why != "" {
		return false, why
	}
	if c.Expect != "" && !bytes.Contains(reply, []byte(c.Expect)) {
		return false, fmt.Sprintf("reply does not contain %q", c.Expect)
	}
	return true, ""
}

// udpExchange sends one datagram to t's probe address and returns the
// first reply (at most maxBody bytes), or why there is none: "no reply
// within 1s", "port unreachable" (an ICMP error came back).
func udpExchange(ctx context.Context, t Target, payload []byte) ([]byte, string) {
	c := t.Check
	conn, err := dialer(c, "udp").DialContext(ctx, "udp", t.ProbeAddr().String())
	if err != nil {
		return nil, dialReason(ctx, err, c.Timeout)
	}
	defer conn.Close()
	stop := deadlineConn(ctx, conn)
	defer stop()
	if _, err := conn.Write(payload); err != nil {
		return nil, "send: " + errReason(ctx, err, c.Timeout)
	}
	buf := make([]byte, maxBody)
	n, err := conn.Read(buf)
	if err != nil {
		r := errReason(ctx, err, c.Timeout)
		switch {
		case strings.HasPrefix(r, "timeout"):
			return nil, "no reply within " + c.Timeout.String()
		case r == "connection refused":
			return nil, "port unreachable"
		}
		return nil, r
	}
	return buf[:n], ""
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

// probeExec passes when the command exits 0 or, with weight_from_exit,
// 2..255, which sets the weight to the status - 2 (keepalived's
// misc_dynamic: 0..253).
func probeExec(ctx context.Context, t Target) Result {
	c := t.Check
	if len(c.Command) == 0 {
		return Outcome(false, "exec: no command")
	}
	cmd := exec.CommandContext(ctx, c.Command[0], c.Command[1:]...)
	probe := t.ProbeAddr()
	cmd.Env = append(os.Environ(),
		"DPLB_RS_ADDR="+probe.Addr().String(),
		"DPLB_RS_PORT="+strconv.Itoa(int(probe.Port())),
		"DPLB_VIP="+t.VIP.Addr().String(),
		"DPLB_VPORT="+strconv.Itoa(int(t.VIP.Port())),
	)
	var out limitedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// The command and whatever it starts form a process group, killed
	// whole when the probe times out.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 100 * time.Millisecond
	err := cmd.Run()
	if ctx.Err() != nil {
		return Outcome(false, errReason(ctx, ctx.Err(), c.Timeout))
	}
	if err == nil {
		return Outcome(true, "")
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if status := ee.ExitCode(); c.WeightFromExit && status >= 2 {
			return Result{OK: true, Weight: status - 2}
		}
		r := ee.String() // "exit status 2", "signal: killed"
		if l := lastLine(out.String()); l != "" {
			r += ": " + l
		}
		return Outcome(false, truncate(r))
	}
	return Outcome(false, truncate("exec: "+err.Error()))
}
