package api_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

func TestParseDaemonVerbs(t *testing.T) {
	for _, tc := range []struct {
		args string
		op   string
		spec *api.DaemonSpec
	}{
		{"--start-daemon master --mcast-interface eth0 --syncid 1", api.OpStartDaemon,
			&api.DaemonSpec{Mode: "master", McastInterface: "eth0", SyncID: ip(1)}},
		{"--start-daemon=backup", api.OpStartDaemon, &api.DaemonSpec{Mode: "backup"}},
		{"--start-daemon backup --syncid=0", api.OpStartDaemon, &api.DaemonSpec{Mode: "backup", SyncID: ip(0)}},
		{"--stop-daemon master", api.OpStopDaemon, &api.DaemonSpec{Mode: "master"}},
		{"-L --daemon", api.OpDaemons, nil},
		{"-Ln --daemon", api.OpDaemons, nil},
		{"--list --daemon -o json", api.OpDaemons, nil},
	} {
		c, err := api.ParseArgs(strings.Fields(tc.args))
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		if c.Op != tc.op || !reflect.DeepEqual(c.Daemon, tc.spec) {
			t.Errorf("%s: op %s daemon %+v, want %s %+v", tc.args, c.Op, c.Daemon, tc.op, tc.spec)
		}
	}
}

func TestParseDaemonErrors(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--start-daemon primary", `--start-daemon "primary": want master or backup`},
		{"--stop-daemon", `option "--stop-daemon" needs a value`},
		{"--start-daemon master --syncid 256", `--syncid "256": want 0..255`},
		{"--start-daemon master --syncid x", `--syncid "x": want 0..255`},
		{"--stop-daemon master --syncid 1", "option --syncid is not allowed with --stop-daemon"},
		{"-L --daemon --stats", "option --stats is not allowed with -L --daemon"},
		{"-A -t 192.0.2.1:80 --mcast-interface eth0", "option --mcast-interface is not allowed with -A"},
		{"--start-daemon master --stop-daemon master", "only one command at a time"},
	} {
		_, err := api.ParseArgs(strings.Fields(tc.args))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
	if _, err := api.ParseRestore("--start-daemon master\n"); err == nil {
		t.Error("a restore file started a sync daemon")
	}
}

func TestWriteDaemons(t *testing.T) {
	var b bytes.Buffer
	api.WriteDaemons(&b, api.Response{Daemons: []api.Daemon{
		{Mode: "master", McastInterface: "eth0", SyncID: 1},
		{Mode: "backup", Peers: []string{"192.0.2.2", "192.0.2.3"}, SyncID: 0},
	}})
	want := "master sync daemon (mcast=eth0, syncid=1)\nbackup sync daemon (peers=192.0.2.2,192.0.2.3, syncid=0)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
