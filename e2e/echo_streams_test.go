package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/topo"
)

// Echo streams: data both ways on long-lived TCP connections. The client
// writes chunk bytes every interval (byte i of the stream is
// streamByte(i)), the real server echoes every byte back, and the client
// checks each echoed byte and the time between echoes: a lost or foreign
// segment that TCP accepted shows as corruption, a connection the path
// lost shows as a reset or a stall, and an outage the connection survived
// shows as its longest gap.

// startEchoServers echoes every connection on port in each namespace
// until the test ends.
func startEchoServers(t *testing.T, port int, namespaces ...string) {
	t.Helper()
	startTCPServers(t, "echo server", port, serveEcho, namespaces...)
}

// startEchoServers6 is startEchoServers on IPv6.
func startEchoServers6(t *testing.T, port int, namespaces ...string) {
	t.Helper()
	serveTCP(t, "echo server", "tcp6", port, serveEcho, namespaces...)
}

func serveEcho(c net.Conn) {
	defer c.Close()
	io.Copy(c, c) // until the client's FIN
}

// echoStream is one client connection.
type echoStream struct {
	c        net.Conn
	chunk    int64
	interval time.Duration
	dead     time.Duration // no echo for this long: the connection is lost

	sent, got atomic.Int64
	lastEcho  atomic.Int64 // unix nanoseconds of the last echoed bytes
	done      chan struct{}
	// After done: how it ended ("" ok) and its longest gap between echoes.
	result streamResult
	maxGap time.Duration
	gapAt  time.Time // when the longest gap ended
}

// dialEcho connects from ns to addr.
func dialEcho(ctx context.Context, ns, addr string, chunk int64, interval, dead time.Duration) (*echoStream, error) {
	var c net.Conn
	err := topo.InNS(ns, func() (err error) {
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, tcpNetwork(addr), addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	s := &echoStream{c: c, chunk: chunk, interval: interval, dead: dead, done: make(chan struct{})}
	s.result.local = c.LocalAddr().String()
	s.lastEcho.Store(time.Now().UnixNano())
	return s, nil
}

// run writes until stop is closed, then half-closes and reads the rest
// of the echo; done is closed when the stream has ended.
func (s *echoStream) run(stop <-chan struct{}) {
	writeErr := make(chan error, 1)
	go func() { writeErr <- s.write(stop) }()
	s.read()
	s.c.Close()
	if err := <-writeErr; err != nil && s.result.kind == "" {
		s.result.kind, s.result.err = classify(err), err
	}
	if s.result.kind == "" && s.got.Load() != s.sent.Load() {
		s.result.kind, s.result.err = "eof", fmt.Errorf("%d bytes sent, %d echoed", s.sent.Load(), s.got.Load())
	}
	s.result.got = s.got.Load()
	close(s.done)
}

func (s *echoStream) write(stop <-chan struct{}) error {
	buf := make([]byte, s.chunk)
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return s.c.(*net.TCPConn).CloseWrite()
		case <-tick.C:
		}
		off := s.sent.Load()
		for i := range buf {
			buf[i] = streamByte(off + int64(i))
		}
		s.c.SetWriteDeadline(time.Now().Add(s.dead))
		n, err := s.c.Write(buf)
		s.sent.Add(int64(n))
		if err != nil {
			s.c.SetReadDeadline(time.Now()) // end the reader too
			return err
		}
	}
}

func (s *echoStream) read() {
	buf := make([]byte, 16<<10)
	for {
		s.c.SetReadDeadline(time.Now().Add(s.dead))
		n, err := s.c.Read(buf)
		now := time.Now()
		if n > 0 {
			off := s.got.Load()
			for i := range n {
				if buf[i] != streamByte(off+int64(i)) {
					s.result.kind = "corrupt"
					s.result.err = fmt.Errorf("echoed byte %d is %d, want %d", off+int64(i), buf[i], streamByte(off+int64(i)))
					return
				}
			}
			if gap := time.Duration(now.UnixNano() - s.lastEcho.Load()); gap > s.maxGap {
				s.maxGap, s.gapAt = gap, now
			}
			s.lastEcho.Store(now.UnixNano())
			s.got.Add(int64(n))
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			s.result.kind, s.result.err = classify(err), err
			return
		}
	}
}

// echoFleet is many echo streams to one address.
type echoFleet struct {
	streams []*echoStream
	failed  []string // dial errors
	stop    chan struct{}
}

// startFleet is startEchoFleet with haChunk-byte writes every interval
// (haStreamDead without an echo: lost); the streams stop when the test
// ends, and the test fails at once if any never connected.
func startFleet(t *testing.T, ctx context.Context, ns, addr string, n int, interval time.Duration) *echoFleet {
	t.Helper()
	fleet := startEchoFleet(ctx, ns, addr, n, haChunk, interval, haStreamDead)
	t.Cleanup(func() {
		select {
		case <-fleet.stop:
		default:
			close(fleet.stop)
		}
	})
	if len(fleet.failed) > 0 {
		t.Fatalf("%d of %d streams to %s never connected: %v", len(fleet.failed), n, addr, fleet.failed[:min(3, len(fleet.failed))])
	}
	return fleet
}

// startEchoFleet opens n streams from ns to addr, 50 handshakes at a
// time, and starts them.
func startEchoFleet(ctx context.Context, ns, addr string, n int, chunk int64, interval, dead time.Duration) *echoFleet {
	f := &echoFleet{stop: make(chan struct{})}
	var mu sync.Mutex
	var dials sync.WaitGroup
	for i := range n {
		dials.Go(func() {
			s, err := dialEcho(ctx, ns, addr, chunk, interval, dead)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				f.failed = append(f.failed, err.Error())
				return
			}
			f.streams = append(f.streams, s)
			go s.run(f.stop)
		})
		if i%50 == 49 {
			dials.Wait()
		}
	}
	dials.Wait()
	return f
}

// progressSince counts the streams that had an echo after t and the ones
// that have already ended.
func (f *echoFleet) progressSince(t time.Time) (moving, ended int) {
	for _, s := range f.streams {
		select {
		case <-s.done:
			ended++
			continue
		default:
		}
		if s.lastEcho.Load() > t.UnixNano() {
			moving++
		}
	}
	return moving, ended
}

// finish stops every stream and waits for them to end (each within its
// dead time).
func (f *echoFleet) finish() {
	close(f.stop)
	for _, s := range f.streams {
		<-s.done
	}
}

// quiet returns the client addresses of up to n live streams with no
// echo since t.
func (f *echoFleet) quiet(t time.Time, n int) []string {
	var out []string
	for _, s := range f.streams {
		select {
		case <-s.done:
			continue
		default:
		}
		if len(out) < n && s.lastEcho.Load() <= t.UnixNano() {
			out = append(out, s.result.local)
		}
	}
	return out
}

// stalled returns the client addresses of up to n streams that broke
// or stalled longer than maxStall; valid after finish.
func (f *echoFleet) stalled(maxStall time.Duration, n int) []string {
	var out []string
	for _, s := range f.streams {
		if len(out) < n && (s.result.kind != "" || s.maxGap > maxStall) {
			out = append(out, s.result.local)
		}
	}
	return out
}

// verdict tallies how the streams ended: broken ones by kind, and the
// ones that survived but stalled longer than maxStall, as "stall".
func (f *echoFleet) verdict(maxStall time.Duration) (*tally, time.Duration) {
	ty := &tally{}
	var longest time.Duration
	for _, s := range f.streams {
		r := s.result
		if r.kind == "" && s.maxGap > maxStall {
			r.kind = "stall"
			r.err = fmt.Errorf("no echo for %v (ending %s), allowed %v", s.maxGap.Round(time.Millisecond), s.gapAt.Format("15:04:05.000"), maxStall)
		}
		longest = max(longest, s.maxGap)
		ty.add(r)
	}
	return ty, longest
}
