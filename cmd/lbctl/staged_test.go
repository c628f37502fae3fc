package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// serveFunc answers requests with fn on a fresh socket.
func serveFunc(t *testing.T, fn func(api.Request) api.Response) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := &api.Server{AllowGID: -1, Handler: api.HandlerFunc(func(_ context.Context, req api.Request) api.Response { return fn(req) })}
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

func TestParseStaged(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		op      string
		dry     bool
		file    string
		wantErr string
	}{
		{args: []string{"-L", "--timeout"}, op: api.OpTimeouts},
		{args: []string{"--list", "--timeout", "-o", "json"}, op: api.OpTimeouts},
		{args: []string{"-R", "--dry-run"}, op: api.OpRestore, dry: true},
		{args: []string{"-S", "--diff", "rules.txt"}, op: api.OpDiff, file: "rules.txt"},
		{args: []string{"-S", "--diff=-"}, op: api.OpDiff, file: "-"},
		{args: []string{"-L", "-c", "--timeout"}, wantErr: "-c and --timeout"},
		{args: []string{"-A", "-t", "192.0.2.1:80", "--dry-run"}, wantErr: "option --dry-run is not allowed with -A"},
		{args: []string{"-L", "--diff", "x"}, wantErr: "option --diff is not allowed with -L"},
		{args: []string{"-S", "--diff"}, wantErr: `option "--diff" needs a value`},
		{args: []string{"-R", "--timeout"}, wantErr: "option --timeout is not allowed with -R"},
		{args: []string{"-L", "-t", "192.0.2.1:80", "--timeout"}, wantErr: "option -t is not allowed with -L --timeout"},
	} {
		c, err := parseArgs(tt.args, env(nil))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Op != tt.op || c.DryRun != tt.dry || c.DiffFile != tt.file {
			t.Errorf("%q: op %q dry %v file %q err %v; want %q %v %q", tt.args, c.Op, c.DryRun, c.DiffFile, err, tt.op, tt.dry, tt.file)
		}
	}
}

func TestRunStaged(t *testing.T) {
	change := api.Change{Kind: api.ChangeAdd, Service: "-t 192.0.2.1:80", Rule: "-A -t 192.0.2.1:80 -s rr"}
	var got api.Request
	// lbd answers a change when the rules say so, none when they are
	// empty, and refuses "bad".
	sock := serveFunc(t, func(req api.Request) api.Response {
		got = req
		switch {
		case req.Op == api.OpTimeouts:
			return api.Response{Timeouts: &api.TimeoutsSpec{TCP: 900, TCPFin: 120, UDP: 300}}
		case strings.Contains(req.Text, "bad"):
			return api.Response{Error: "line 1: bad"}
		case req.Text != "":
			return api.Response{Changes: []api.Change{change}}
		}
		return api.Response{}
	})
	dir := t.TempDir()
	file := filepath.Join(dir, "saved")
	if err := os.WriteFile(file, []byte("-A -t 192.0.2.1:80 -s rr\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope")
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
		wantReq    api.Request
	}{
		{name: "timeouts", args: []string{"-L", "--timeout"}, wantStdout: "Timeout (tcp tcpfin udp): 900 120 300\n",
			wantReq: api.Request{Op: api.OpTimeouts}},
		{name: "timeouts json", args: []string{"-L", "--timeout", "-o", "json"},
			wantStdout: lines(`{`, `  "version": 1,`, `  "timeouts": {`, `    "tcp": 900,`, `    "tcp_fin": 120,`, `    "udp": 300`, `  }`, `}`),
			wantReq:    api.Request{Op: api.OpTimeouts}},
		{name: "dry run differs", args: []string{"-R", "--dry-run"}, stdin: "-A -t 192.0.2.1:80\n", wantCode: 1,
			wantStdout: "+ -A -t 192.0.2.1:80 -s rr\n", wantReq: api.Request{Op: api.OpRestore, DryRun: true, Text: "-A -t 192.0.2.1:80\n"}},
		{name: "dry run same", args: []string{"-R", "--dry-run"}, wantReq: api.Request{Op: api.OpRestore, DryRun: true}},
		{name: "dry run refused", args: []string{"-R", "--dry-run"}, stdin: "bad\n", wantCode: 2, wantStderr: "lbctl: line 1: bad\n",
			wantReq: api.Request{Op: api.OpRestore, DryRun: true, Text: "bad\n"}},
		{name: "diff file", args: []string{"-S", "--diff", file}, wantCode: 1, wantStdout: "+ -A -t 192.0.2.1:80 -s rr\n",
			wantReq: api.Request{Op: api.OpDiff, Text: "-A -t 192.0.2.1:80 -s rr\n"}},
		{name: "diff stdin", args: []string{"-S", "--diff", "-"}, stdin: "-A -t 192.0.2.1:80 -s rr\n", wantCode: 1,
			wantStdout: "+ -A -t 192.0.2.1:80 -s rr\n", wantReq: api.Request{Op: api.OpDiff, Text: "-A -t 192.0.2.1:80 -s rr\n"}},
		{name: "diff json", args: []string{"-S", "--diff", file, "-o", "json"}, wantCode: 1,
			wantStdout: lines(`{`, `  "version": 1,`, `  "changes": [`, `    {`, `      "kind": "add",`, `      "service": "-t 192.0.2.1:80",`,
				`      "rule": "-A -t 192.0.2.1:80 -s rr"`, `    }`, `  ]`, `}`),
			wantReq: api.Request{Op: api.OpDiff, Text: "-A -t 192.0.2.1:80 -s rr\n"}},
		{name: "diff missing file", args: []string{"-S", "--diff", missing}, wantCode: 2,
			wantStderr: "lbctl: -S --diff: open " + missing + ": no such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = api.Request{}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), append(tt.args, "--socket", sock), env(nil), strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode || stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Fatalf("code %d stdout:\n%s\nstderr:\n%s\nwant %d:\n%s\n%s", code, stdout.String(), stderr.String(),
					tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
			if tt.wantReq.Op != "" {
				tt.wantReq.Version = api.Version
			}
			if got != tt.wantReq {
				t.Fatalf("request %+v, want %+v", got, tt.wantReq)
			}
		})
	}
}

func TestRunTrace(t *testing.T) {
	var got api.Request
	sock := serveFunc(t, func(req api.Request) api.Response {
		got = req
		return api.Response{Trace: &api.Trace{Flow: "TCP 203.0.113.7:40000 -> 192.0.2.10:80",
			Steering: api.TraceSteering{Owner: 1, Workers: 2, Hash: 0xabc, Key: "per-boot", Port: "wan", RSS: "software"},
			Verdict:  api.TraceVerdict{Drop: "no_service", Why: api.DropWords("no_service")}}}
	})
	var stdout, stderr bytes.Buffer
	// Options may come before the word, as for reload.
	code := run(context.Background(), []string{"--socket", sock, "trace", "-t", "192.0.2.10:80", "--client", "203.0.113.7:40000", "--reply=198.51.100.11:8080"},
		env(nil), strings.NewReader(""), &stdout, &stderr)
	if code != 0 || stderr.Len() != 0 {
		t.Fatalf("code %d stderr %s", code, stderr.String())
	}
	want := api.Request{Version: api.Version, Op: api.OpTrace, Service: got.Service, Client: "203.0.113.7:40000", Reply: "198.51.100.11:8080"}
	if got != want || got.Service == nil || *got.Service != (api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80}) {
		t.Fatalf("request %+v", got)
	}
	for _, s := range []string{"Owner     lcore 1 of 2: Toeplitz hash 0x00000abc", "arrives on port wan, RSS in software", "Verdict   drop (no_service): the VIP has no service"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, stdout.String())
		}
	}
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"trace", "--client", "203.0.113.7:1"}, "trace needs a service"},
		{[]string{"trace", "-t", "192.0.2.10:80"}, "trace needs the client"},
		{[]string{"trace", "-t", "192.0.2.10:80", "--client", "203.0.113.7"}, `--client "203.0.113.7": want an address and a port`},
		{[]string{"trace", "-t", "192.0.2.10:80", "--client", "203.0.113.7:1", "--reply", "2001:db8::1:80"}, "--reply"},
		{[]string{"trace", "-t", "192.0.2.10:80", "-u", "192.0.2.10:53", "--client", "203.0.113.7:1"}, "one service at a time"},
		{[]string{"trace", "-t", "192.0.2.10:80", "--client", "203.0.113.7:1", "-w", "3"}, `trace: unknown option "-w"`},
	} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), append(tc.args, "--socket", sock), env(nil), strings.NewReader(""), &stdout, &stderr); code != exitUsage ||
			!strings.Contains(stderr.String(), tc.err) {
			t.Errorf("%q: code %d stderr %q, want %q", tc.args, code, stderr.String(), tc.err)
		}
	}
}
