package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// Long-lived TCP streams through lbd with real Linux TCP at both ends:
// the test process listens inside the real servers' namespaces and dials
// from the client's (sockets stay in the namespace they were made in).
//
// Protocol: the client sends one line "total chunk interval\n"; the
// server then writes total bytes, chunk bytes at a time with interval
// between chunks, byte i of the stream being streamByte(i), and closes.
// For an upload the line is "up total\n", the client sends the bytes and
// the server answers "ok\n" once it has them all, intact.
// The client checks every byte, so a lost, reordered or foreign segment
// that TCP accepted would show, and a broken connection shows as a reset
// or a stall.

func streamByte(i int64) byte { return byte(i % 251) }

// startStreamServers listens on port in each namespace until the test
// ends.
func startStreamServers(t *testing.T, port int, namespaces ...string) {
	t.Helper()
	startTCPServers(t, "stream server", port, serveStream, namespaces...)
}

// startTCPServers listens on port in each namespace and runs serve on
// every connection accepted, until the test ends.
func startTCPServers(t *testing.T, what string, port int, serve func(net.Conn), namespaces ...string) {
	t.Helper()
	serveTCP(t, what, "tcp4", port, serve, namespaces...)
}

// serveTCP is startTCPServers on network ("tcp4" or "tcp6"). At the end
// it closes the connections still open too: one whose client is gone
// without a FIN that reached it (a failover that broke it) would
// otherwise hold the test until its timeout.
func serveTCP(t *testing.T, what, network string, port int, serve func(net.Conn), namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		var ln net.Listener
		if err := topo.InNS(ns, func() (err error) {
			ln, err = net.Listen(network, fmt.Sprintf(":%d", port))
			return err
		}); err != nil {
			t.Fatalf("%s in %s: %v", what, ns, err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		open := map[net.Conn]bool{}
		t.Cleanup(func() {
			ln.Close()
			mu.Lock()
			for c := range open {
				c.Close()
			}
			mu.Unlock()
			wg.Wait()
		})
		wg.Go(func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				open[c] = true
				mu.Unlock()
				wg.Go(func() {
					serve(c)
					mu.Lock()
					delete(open, c)
					mu.Unlock()
				})
			}
		})
	}
}

func serveStream(c net.Conn) {
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var total, chunk int64
	var interval time.Duration
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil {
		return
	}
	if _, err := fmt.Sscanf(line, "up %d", &total); err == nil {
		receiveUpload(c, rd, total)
		return
	}
	if _, err := fmt.Sscanf(line, "%d %d %d", &total, &chunk, &interval); err != nil || chunk <= 0 {
		return
	}
	buf := make([]byte, chunk)
	for sent := int64(0); sent < total; {
		n := min(chunk, total-sent)
		for i := range n {
			buf[i] = streamByte(sent + i)
		}
		c.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
		sent += n
		if interval > 0 && sent < total {
			time.Sleep(interval)
		}
	}
}

func receiveUpload(c net.Conn, rd *bufio.Reader, total int64) {
	buf := make([]byte, 64<<10)
	for got := int64(0); got < total; {
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		n, err := rd.Read(buf[:min(int64(len(buf)), total-got)])
		for i := range n {
			if buf[i] != streamByte(got+int64(i)) {
				fmt.Fprintf(c, "corrupt at %d\n", got+int64(i))
				return
			}
		}
		got += int64(n)
		if err != nil {
			return
		}
	}
	io.WriteString(c, "ok\n")
}

// upload sends total bytes from ns to addr and waits for the server's
// verdict, each step within stall.
func upload(ctx context.Context, ns, addr string, total int64, stall time.Duration) streamResult {
	var c net.Conn
	err := topo.InNS(ns, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, "tcp", addr)
		return err
	})
	if err != nil {
		return streamResult{kind: "dial", err: err}
	}
	defer c.Close()
	r := streamResult{local: c.LocalAddr().String()}
	buf := make([]byte, 16<<10)
	if _, err := fmt.Fprintf(c, "up %d\n", total); err != nil {
		r.kind, r.err = classify(err), err
		return r
	}
	for r.got < total {
		n := min(int64(len(buf)), total-r.got)
		for i := range n {
			buf[i] = streamByte(r.got + i)
		}
		c.SetWriteDeadline(time.Now().Add(stall))
		w, err := c.Write(buf[:n])
		r.got += int64(w)
		if err != nil {
			r.kind, r.err = classify(err), err
			return r
		}
	}
	c.SetReadDeadline(time.Now().Add(stall))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ok\n" {
		r.kind, r.err = "error", fmt.Errorf("server's verdict %q: %v", line, err)
		if err != nil {
			r.kind = classify(err)
		}
	}
	return r
}

// streamSpec is what one client asks for.
type streamSpec struct {
	total, chunk int64
	interval     time.Duration
	stall        time.Duration // no byte for this long is a stall
}

// streamResult is how one stream ended.
type streamResult struct {
	local string // the client's address:port ("" if it never connected)
	got   int64
	kind  string // "" ok; else dial, reset, stall, eof (closed early), corrupt, error
	err   error
}

func (r streamResult) String() string {
	if r.kind == "" {
		return fmt.Sprintf("%s ok (%d bytes)", r.local, r.got)
	}
	return fmt.Sprintf("%s %s after %d bytes: %v", r.local, r.kind, r.got, r.err)
}

// tcpNetwork is the network to dial addr ("host:port") on: "tcp6" for
// an IPv6 host ("[2001:db8::1]:80"), else "tcp4".
func tcpNetwork(addr string) string {
	if strings.HasPrefix(addr, "[") {
		return "tcp6"
	}
	return "tcp4"
}

// dialStream connects from ns to addr and sends the request; the stream
// is then read by readStream.
func dialStream(ctx context.Context, ns, addr string, s streamSpec, timeout time.Duration) (net.Conn, streamResult) {
	var c net.Conn
	err := topo.InNS(ns, func() error {
		var err error
		c, err = (&net.Dialer{Timeout: timeout}).DialContext(ctx, tcpNetwork(addr), addr)
		return err
	})
	if err != nil {
		return nil, streamResult{kind: "dial", err: err}
	}
	r := streamResult{local: c.LocalAddr().String()}
	c.SetWriteDeadline(time.Now().Add(s.stall))
	if _, err := fmt.Fprintf(c, "%d %d %d\n", s.total, s.chunk, int64(s.interval)); err != nil {
		c.Close()
		r.kind, r.err = classify(err), err
		return nil, r
	}
	return c, r
}

// readStream reads the whole stream and closes c.
func readStream(c net.Conn, r streamResult, s streamSpec) streamResult {
	defer c.Close()
	buf := make([]byte, 64<<10)
	for r.got < s.total {
		c.SetReadDeadline(time.Now().Add(s.stall))
		n, err := c.Read(buf)
		for i := range n {
			if buf[i] != streamByte(r.got+int64(i)) {
				r.got += int64(i)
				r.kind, r.err = "corrupt", fmt.Errorf("byte %d is %d, want %d", r.got, buf[i], streamByte(r.got))
				return r
			}
		}
		r.got += int64(n)
		if err != nil && r.got < s.total {
			r.kind, r.err = classify(err), err
			return r
		}
	}
	return r
}

// classify names why a stream broke.
func classify(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "reset"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "stall"
	case errors.Is(err, io.EOF):
		return "eof"
	}
	return "error"
}

// tally counts results by kind and keeps a few examples of each failure.
type tally struct {
	mu       sync.Mutex
	ok       int
	byKind   map[string]int
	examples map[string][]string
}

func (ty *tally) add(r streamResult) {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	if r.kind == "" {
		ty.ok++
		return
	}
	if ty.byKind == nil {
		ty.byKind, ty.examples = map[string]int{}, map[string][]string{}
	}
	ty.byKind[r.kind]++
	if len(ty.examples[r.kind]) < 5 {
		ty.examples[r.kind] = append(ty.examples[r.kind], r.String())
	}
}

func (ty *tally) broken() int {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	n := 0
	for _, v := range ty.byKind {
		n += v
	}
	return n
}

// summary is "N ok; reset 3, stall 2" with examples on following lines.
func (ty *tally) summary() string {
	ty.mu.Lock()
	defer ty.mu.Unlock()
	var kinds []string
	for k := range ty.byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "%d ok", ty.ok)
	for _, k := range kinds {
		fmt.Fprintf(&b, "; %s %d", k, ty.byKind[k])
	}
	for _, k := range kinds {
		for _, ex := range ty.examples[k] {
			fmt.Fprintf(&b, "\n  %s", ex)
		}
	}
	return b.String()
}

// dropsByReason sums dplb_lcore_drops_total over the lcores, by reason.
func dropsByReason(body string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "dplb_lcore_drops_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `reason="`)
		reason, rest, _ := strings.Cut(rest, `"`)
		sp := strings.LastIndexByte(rest, ' ')
		var v float64
		if _, err := fmt.Sscan(rest[sp+1:], &v); err == nil && sp >= 0 {
			out[reason] += v
		}
	}
	return out
}

// counterSum sums dplb_lcore_events_total{counter=name} over the lcores.
func counterSum(body, name string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "dplb_lcore_events_total{") || !strings.Contains(line, `counter="`+name+`"`) {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		var v float64
		if _, err := fmt.Sscan(line[sp+1:], &v); err == nil {
			sum += v
		}
	}
	return sum
}

// nonZero renders the non-zero entries of m, sorted.
func nonZero(m map[string]float64) string {
	var parts []string
	for k, v := range m {
		if v != 0 {
			parts = append(parts, fmt.Sprintf("%s=%.0f", k, v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
