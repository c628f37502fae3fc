package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// serve runs a Server with h on a fresh socket and returns the socket path.
func serve(t *testing.T, h api.Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "lbd.sock")
	l, err := api.Listen(path, 0o660, -1)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	srv := &api.Server{Handler: h, AllowGID: -1, Logf: t.Logf}
	go func() { done <- srv.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return path
}

var sample = api.Response{
	Version: api.Version,
	Info:    &api.Info{ConnTableSize: 4096, Connections: 7},
	Services: []api.Service{{
		Protocol: "TCP", VIP: "192.0.2.100", Port: 80, Scheduler: "rr",
		Stats: api.Stats{Conns: 200, InPkts: 1200, OutPkts: 1000, InBytes: 80000, OutBytes: 120000},
		Servers: []api.RealServer{{
			Address: "198.51.100.11", Port: 80, Forward: "Masq", Weight: 1,
			ActiveConns: 3, InactiveConns: 4,
			Stats: api.Stats{Conns: 100, InPkts: 600, OutPkts: 500, InBytes: 40000, OutBytes: 60000},
		}},
	}},
}

// fakeLBD answers list with sample and refuses everything else.
var fakeLBD = api.HandlerFunc(func(_ context.Context, req api.Request) api.Response {
	switch req.Op {
	case api.OpList:
		return sample
	case "panic":
		panic("boom")
	default:
		return api.Response{Error: "unknown op \"" + req.Op + "\""}
	}
})

func TestCall(t *testing.T) {
	path := serve(t, fakeLBD)
	tests := []struct {
		name    string
		req     api.Request
		want    api.Response
		wantErr string
	}{
		{
			name: "list",
			req:  api.Request{Op: api.OpList},
			want: sample,
		},
		{
			name: "explicit version",
			req:  api.Request{Version: api.Version, Op: api.OpList},
			want: sample,
		},
		{
			name:    "handler refusal",
			req:     api.Request{Op: "frobnicate"},
			want:    api.Response{Version: api.Version, Error: `unknown op "frobnicate"`},
			wantErr: `unknown op "frobnicate"`,
		},
		{
			name:    "version mismatch",
			req:     api.Request{Version: 2, Op: api.OpList},
			want:    api.Response{Version: api.Version, Error: "API version mismatch: request is v2, lbd speaks v1; use an lbctl from the same release as lbd"},
			wantErr: "API version mismatch: request is v2, lbd speaks v1; use an lbctl from the same release as lbd",
		},
		{
			name:    "handler panic",
			req:     api.Request{Op: "panic"},
			want:    api.Response{Version: api.Version, Error: `internal error in lbd while handling "panic"; see lbd's log`},
			wantErr: `internal error in lbd while handling "panic"; see lbd's log`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := api.Call(context.Background(), path, tt.req)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Call: %v", err)
				}
			} else {
				var re *api.RemoteError
				if !errors.As(err, &re) || err.Error() != tt.wantErr {
					t.Fatalf("Call error = %v, want RemoteError %q", err, tt.wantErr)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Call = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestWire checks the exact bytes on the socket, including requests that
// Call would never send.
func TestWire(t *testing.T) {
	path := serve(t, api.HandlerFunc(func(context.Context, api.Request) api.Response {
		return api.Response{Info: &api.Info{ConnTableSize: 8, Connections: 1}}
	}))
	tests := []struct {
		name string
		send string
		want string
	}{
		{
			name: "valid",
			send: `{"version":1,"op":"list"}` + "\n",
			want: `{"version":1,"info":{"conn_table_size":8,"connections":1}}` + "\n",
		},
		{
			name: "valid without newline",
			send: `{"version":1,"op":"list"}`,
			want: `{"version":1,"info":{"conn_table_size":8,"connections":1}}` + "\n",
		},
		{
			name: "missing version",
			send: `{"op":"list"}` + "\n",
			want: `{"version":1,"error":"API version mismatch: request is v0, lbd speaks v1; use an lbctl from the same release as lbd"}` + "\n",
		},
		{
			name: "future version",
			send: `{"version":7,"op":"list"}` + "\n",
			want: `{"version":1,"error":"API version mismatch: request is v7, lbd speaks v1; use an lbctl from the same release as lbd"}` + "\n",
		},
		{
			name: "malformed JSON",
			send: "{not json\n",
			want: `{"version":1,"error":"malformed request: invalid character 'n' looking for beginning of object key string"}` + "\n",
		},
		{
			name: "wrong type",
			send: `{"version":"1","op":"list"}` + "\n",
			want: `{"version":1,"error":"malformed request: json: cannot unmarshal string into Go struct field Request.version of type int"}` + "\n",
		},
		{
			name: "two objects on a line",
			send: `{"version":1}{"version":1}` + "\n",
			want: `{"version":1,"error":"malformed request: invalid character '{' after top-level value"}` + "\n",
		},
		{
			name: "empty",
			send: "",
			want: `{"version":1,"error":"malformed request: empty"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			if err := c.(*net.UnixConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("response\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestServerTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &api.Server{Handler: fakeLBD, AllowGID: -1, Timeout: 50 * time.Millisecond}
	go srv.Serve(ctx, l)

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	// Send half a request and stall.
	io.WriteString(c, `{"version":1,`)
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	want := `{"version":1,"error":"timed out after 50ms waiting for a complete request"}` + "\n"
	if line != want {
		t.Errorf("response\n got %s\nwant %s", line, want)
	}
}

func TestServeReturnsOnCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&api.Server{Handler: fakeLBD, AllowGID: -1}).Serve(ctx, l) }()
	if _, err := api.Call(ctx, path, api.Request{Op: api.OpList}); err != nil {
		t.Fatalf("Call: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after shutdown: Lstat = %v, want not exist", err)
	}
	_, err = api.Call(context.Background(), path, api.Request{Op: api.OpList})
	if want := "lbd does not seem to be running: no socket at " + path; err == nil || err.Error() != want {
		t.Errorf("Call after shutdown = %v, want %q", err, want)
	}
}

func TestCallNotRunning(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	makeStale(t, stale)
	tests := []struct {
		name string
		path string
		want string
	}{
		{"missing", filepath.Join(dir, "missing.sock"), "lbd does not seem to be running: no socket at " + filepath.Join(dir, "missing.sock")},
		{"missing dir", filepath.Join(dir, "nodir", "lbd.sock"), "lbd does not seem to be running: no socket at " + filepath.Join(dir, "nodir", "lbd.sock")},
		{"stale", stale, "lbd does not seem to be running: nothing listens on " + stale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := api.Call(context.Background(), tt.path, api.Request{Op: api.OpList})
			if !errors.Is(err, api.ErrNotRunning) || err.Error() != tt.want {
				t.Errorf("Call = %v, want ErrNotRunning %q", err, tt.want)
			}
		})
	}
}

// makeStale leaves a socket file at path that nobody listens on.
func makeStale(t *testing.T, path string) {
	t.Helper()
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
}

func TestListen(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, path string)
		wantErr error
	}{
		{"fresh", func(*testing.T, string) {}, nil},
		{"stale socket is replaced", makeStale, nil},
		{
			"live socket is refused",
			func(t *testing.T, path string) {
				l, err := net.Listen("unix", path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
			},
			api.ErrSocketInUse,
		},
		{
			"regular file is refused",
			func(t *testing.T, path string) {
				if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			api.ErrNotSocket,
		},
		{
			"directory is refused",
			func(t *testing.T, path string) {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			api.ErrNotSocket,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "lbd.sock")
			tt.setup(t, path)
			before, _ := os.Lstat(path)
			l, err := api.Listen(path, 0o600, -1)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Listen = %v, want %v", err, tt.wantErr)
				}
				after, err := os.Lstat(path)
				if err != nil || !os.SameFile(before, after) {
					t.Errorf("Listen touched %s on refusal (Lstat: %v)", path, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer l.Close()
			c, err := net.Dial("unix", path)
			if err != nil {
				t.Fatalf("dial new socket: %v", err)
			}
			c.Close()
		})
	}
}

func TestListenRefusalMessages(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.sock")
	l, err := api.Listen(live, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		want string
	}{
		{live, "control socket " + live + ": another lbd is serving on the socket"},
		{file, "control socket " + file + ": refusing to replace it: path exists and is not a socket"},
	}
	for _, tt := range tests {
		_, err := api.Listen(tt.path, 0o600, -1)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Listen(%s) = %v, want %q", tt.path, err, tt.want)
		}
	}
}

func TestListenModeAndOwner(t *testing.T) {
	gid := os.Getgid()
	if os.Getuid() == 0 {
		gid = 1234 // root may give the socket to any group
	}
	tests := []struct {
		name    string
		mode    os.FileMode
		gid     int
		wantGID int
	}{
		{"root only", 0o600, -1, os.Getgid()},
		{"group", 0o660, gid, gid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "run", "dplb")
			path := filepath.Join(parent, "lbd.sock")
			l, err := api.Listen(path, tt.mode, tt.gid)
			if err != nil {
				t.Fatalf("Listen: %v", err)
			}
			defer l.Close()
			fi, err := os.Lstat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode() & os.ModePerm; got != tt.mode || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("socket mode = %v, want socket with %v", fi.Mode(), tt.mode)
			}
			if got := int(fi.Sys().(*syscall.Stat_t).Gid); got != tt.wantGID {
				t.Errorf("socket gid = %d, want %d", got, tt.wantGID)
			}
			di, err := os.Stat(parent)
			if err != nil {
				t.Fatal(err)
			}
			if got := di.Mode() & os.ModePerm; got&^0o755 != 0 || !di.IsDir() {
				t.Errorf("parent mode = %v, want dir within 0755", di.Mode())
			}
		})
	}
}
