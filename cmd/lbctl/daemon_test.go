package main

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

// TestRunDaemonVerbs: lbctl sends the sync daemon verbs to lbd and
// prints -L --daemon as ipvsadm does.
func TestRunDaemonVerbs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lbd.sock")
	l, err := api.Listen(path, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []api.Request
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	srv := &api.Server{AllowGID: -1, Handler: api.HandlerFunc(func(_ context.Context, req api.Request) api.Response {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		switch req.Op {
		case api.OpDaemons:
			return api.Response{Daemons: []api.Daemon{{Mode: "master", McastInterface: "eth0", SyncID: 1}}}
		case api.OpStopDaemon:
			return api.Response{Error: "the backup sync daemon is not running"}
		}
		return api.Response{}
	})}
	go func() { srv.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, tc := range []struct {
		args           string
		code           int
		stdout, stderr string
	}{
		{"--start-daemon master --mcast-interface eth0 --syncid 1", 0, "", ""},
		{"-L --daemon", 0, "master sync daemon (mcast=eth0, syncid=1)\n", ""},
		{"--stop-daemon backup", 1, "", "lbctl: the backup sync daemon is not running\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append(strings.Fields(tc.args), "--socket", path), env(nil), strings.NewReader(""), &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || stderr.String() != tc.stderr {
			t.Errorf("%s: code %d stdout %q stderr %q", tc.args, code, stdout.String(), stderr.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	id := 1
	want := &api.DaemonSpec{Mode: "master", McastInterface: "eth0", SyncID: &id}
	if len(got) != 3 || got[0].Op != api.OpStartDaemon || !reflect.DeepEqual(got[0].Daemon, want) {
		t.Errorf("lbd was asked %+v", got)
	}
}
