package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds one exchange on a connection, on both sides.
const DefaultTimeout = 5 * time.Second

// MaxRequestBytes is the largest request line the server reads.
const MaxRequestBytes = 1 << 20

// Listen prepares the control socket at path and listens on it.
//
// It creates the parent directory (0755) if missing. If path exists and is a
// socket, it dials it: if something answers it returns ErrSocketInUse and
// leaves the socket alone; if the dial is refused the socket is stale and is
// removed. If path exists and is not a socket it returns ErrNotSocket. After
// binding, the socket is chmod'ed to mode and, when gid >= 0, chown'ed to
// group gid. The socket file is removed when the listener is closed.
func Listen(path string, mode os.FileMode, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, mode); err != nil {
		l.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("control socket %s: %w", path, err)
		}
	}
	return l, nil
}

// removeStale clears the way for binding path, refusing to touch a live
// socket or anything that is not a socket.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("control socket %s: refusing to replace it: %w", path, ErrNotSocket)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: %w", path, ErrSocketInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control socket %s: cannot tell whether it is in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("control socket %s: removing stale socket: %w", path, err)
	}
	return nil
}

// Server answers requests on a control socket.
type Server struct {
	Handler  Handler                          // executes requests that pass the checks
	AllowGID int                              // group allowed besides root; -1 = root only
	Logf     func(format string, args ...any) // optional; nil discards
	Timeout  time.Duration                    // per-connection deadline; 0 = DefaultTimeout
}

// Serve accepts connections on l until ctx is cancelled, then closes l,
// waits for the connections in flight and returns nil. It returns an error
// if Accept fails for any other reason.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			l.Close()
			return fmt.Errorf("control socket: accept: %w", err)
		}
		wg.Go(func() {
			defer c.Close()
			s.serveConn(ctx, c)
		})
	}
}

func (s *Server) timeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// serveConn runs one exchange. Every outcome, refusal or not, is a Response.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	timeout := s.timeout()
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		s.logf("control socket: set deadline: %v", err)
		return
	}
	resp := s.respond(ctx, c)
	resp.Version = Version
	// A fresh deadline, so that a client that timed out reading still
	// gets told why.
	if err := c.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		s.logf("control socket: set deadline: %v", err)
		return
	}
	if err := json.NewEncoder(c).Encode(resp); err != nil {
		s.logf("control socket: writing response: %v", err)
	}
}

func (s *Server) respond(ctx context.Context, c net.Conn) Response {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Response{Error: "permission denied: cannot read peer credentials"}
	}
	cred, err := peerCred(uc)
	if err != nil {
		s.logf("control socket: SO_PEERCRED: %v", err)
		return Response{Error: "permission denied: cannot read peer credentials"}
	}
	if !allowed(cred.Uid, cred.Gid, s.AllowGID) {
		s.logf("control socket: refused pid %d uid %d gid %d", cred.Pid, cred.Uid, cred.Gid)
		return Response{Error: fmt.Sprintf("permission denied: uid %d is not root or in the configured group", cred.Uid)}
	}
	ctx = WithAuthor(ctx, Author{User: userName(cred.Uid), Via: ViaSocket})
	req, err := readRequest(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return Response{Error: fmt.Sprintf("timed out after %v waiting for a complete request", s.timeout())}
	}
	if err != nil {
		return Response{Error: err.Error()}
	}
	if req.Version != Version {
		return Response{Error: fmt.Sprintf("API version mismatch: request is v%d, lbd speaks v%d; use an lbctl from the same release as lbd", req.Version, Version)}
	}
	return s.handle(ctx, req)
}

// handle runs the Handler, turning a panic into a refusal so that one bad
// request cannot take lbd down.
func (s *Server) handle(ctx context.Context, req Request) (resp Response) {
	defer func() {
		if r := recover(); r != nil {
			s.logf("control socket: panic handling %q: %v\n%s", req.Op, r, debug.Stack())
			resp = Response{Error: fmt.Sprintf("internal error in lbd while handling %q; see lbd's log", req.Op)}
		}
	}()
	return s.Handler.Handle(ctx, req)
}

// readRequest reads one JSON request line of at most MaxRequestBytes.
func readRequest(r io.Reader) (Request, error) {
	br := bufio.NewReader(io.LimitReader(r, MaxRequestBytes+1))
	line, err := br.ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return Request{}, fmt.Errorf("reading request: %w", err)
	}
	if len(line) > MaxRequestBytes {
		return Request{}, fmt.Errorf("malformed request: longer than %d bytes", MaxRequestBytes)
	}
	if len(line) == 0 {
		return Request{}, errors.New("malformed request: empty")
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Request{}, fmt.Errorf("malformed request: %w", err)
	}
	return req, nil
}

// allowed is the access decision: root, or a peer whose primary group is
// allowGID (when allowGID >= 0).
func allowed(uid, gid uint32, allowGID int) bool {
	if uid == 0 {
		return true
	}
	return allowGID >= 0 && int64(gid) == int64(allowGID)
}

func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// userName is the name of Unix user uid, "uid N" when it has none.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid " + id
}
