package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// haLBD serves OpHAState: it takes the state asked for and answers the
// one it holds.
func haLBD(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	state := "master"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := &api.Server{AllowGID: -1, Handler: api.HandlerFunc(func(_ context.Context, req api.Request) api.Response {
		if req.Op != api.OpHAState {
			return api.Response{Error: "unexpected op " + req.Op}
		}
		mu.Lock()
		defer mu.Unlock()
		if req.HAState != "" {
			state = req.HAState
		}
		return api.Response{HAState: state}
	})}
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

// TestHAState: lbctl --ha-state [master|backup] asks lbd and prints the
// state it answers; anything else is a usage error.
func TestHAState(t *testing.T) {
	sock := haLBD(t)
	for _, tc := range []struct {
		args []string
		want string
	}{{[]string{"--ha-state"}, "master"}, {[]string{"--ha-state", "backup"}, "backup"}, {[]string{"--ha-state"}, "backup"}, {[]string{"--ha-state=master"}, "master"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(tc.args, "--socket", sock), env(nil), strings.NewReader(""), &stdout, &stderr); code != 0 || stdout.String() != tc.want+"\n" {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", tc.args, code, stdout.String(), stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--ha-state", "standby"}, env(nil), strings.NewReader(""), &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), `--ha-state "standby": want master or backup`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	for _, tc := range []struct {
		args  []string
		state string
	}{{[]string{"--ha-state"}, ""}, {[]string{"--ha-state", "master"}, "master"}, {[]string{"--ha-state=backup", "-o", "json"}, "backup"}} {
		c, err := api.ParseArgs(tc.args)
		if err != nil || c.Op != api.OpHAState || c.HAState != tc.state {
			t.Fatalf("%v: %+v %v", tc.args, c.Request, err)
		}
	}
}

// TestHACheck: lbctl --ha-check exits 0 while every port's link is up
// and 1 (keepalived's vrrp_script fails) while one is down.
func TestHACheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	lanUp := true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := &api.Server{AllowGID: -1, Handler: api.HandlerFunc(func(_ context.Context, req api.Request) api.Response {
		if req.Op != api.OpHACheck {
			return api.Response{Error: "unexpected op " + req.Op}
		}
		mu.Lock()
		defer mu.Unlock()
		return api.Response{HAState: "master", Links: []api.PortLink{{Port: "wan", Up: true}, {Port: "lan", Up: lanUp}}}
	})}
	go func() { srv.Serve(ctx, l); close(done) }()
	defer func() { cancel(); <-done }()
	for _, tc := range []struct {
		up   bool
		code int
		out  string
	}{{true, 0, "master: every port's link is up\n"}, {false, exitError, "master: link down on lan\n"}} {
		mu.Lock()
		lanUp = tc.up
		mu.Unlock()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"--ha-check", "--socket", path}, env(nil), strings.NewReader(""), &stdout, &stderr); code != tc.code || stdout.String() != tc.out {
			t.Errorf("lan up %v: exit %d, stdout %q, stderr %q", tc.up, code, stdout.String(), stderr.String())
		}
		// -o json prints the answer and exits alike.
		stdout.Reset()
		if code := run(context.Background(), []string{"--ha-check", "-o", "json", "--socket", path}, env(nil), strings.NewReader(""), &stdout, &stderr); code != tc.code ||
			!strings.Contains(stdout.String(), `"port": "lan"`) {
			t.Errorf("lan up %v, -o json: exit %d, stdout %q", tc.up, code, stdout.String())
		}
	}
}
