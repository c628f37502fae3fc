package ctl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
)

func TestTimeoutsOp(t *testing.T) {
	o, _, _ := newTestOps(t)
	if r := do(o, rule(t, "--set 600 0 200")); r.Error != "" {
		t.Fatal(r.Error)
	}
	r := do(o, rule(t, "-L --timeout"))
	if r.Error != "" || r.Timeouts == nil {
		t.Fatalf("response %+v", r)
	}
	// tcpfin kept its default (0 keeps one).
	if want := (api.TimeoutsSpec{TCP: 600, TCPFin: 60, UDP: 200}); *r.Timeouts != want {
		t.Fatalf("timeouts %+v, want %+v", *r.Timeouts, want)
	}
}

func TestStagedChanges(t *testing.T) {
	o, c, f := newTestOps(t)
	before, beforeT := c.Services()
	gen, published := c.Snapshot().Gen, len(f.published)
	edits := len(do(o, api.Request{Op: api.OpEdits}).Edits)
	unchanged := func(t *testing.T) {
		t.Helper()
		after, afterT := c.Services()
		if !reflect.DeepEqual(after, before) || afterT != beforeT || c.Snapshot().Gen != gen || len(f.published) != published {
			t.Fatal("a staged change changed the running state")
		}
		if n := len(do(o, api.Request{Op: api.OpEdits}).Edits); n != edits {
			t.Fatalf("edit log grew from %d to %d", edits, n)
		}
	}
	tests := []struct {
		name    string
		req     api.Request
		want    []string // the changes' kinds and rules
		wantErr string
	}{
		{
			name: "dry run adds onto the running table",
			req: api.Request{Op: api.OpRestore, DryRun: true, Text: "-e -t 203.0.113.100:80 -r 198.51.100.12:8000 -w 5\n" +
				"-A -u 203.0.113.100:53 -s wrr\n-a -u 203.0.113.100:53 -r 198.51.100.30 -w 2\n--set 0 0 120\n"},
			want: []string{"change --set 900 60 120", "change -a -t 203.0.113.100:80 -r 198.51.100.12:8000 -m -w 5",
				"add -A -u 203.0.113.100:53 -s wrr", "add -a -u 203.0.113.100:53 -r 198.51.100.30:53 -m -w 2"},
		},
		{name: "dry run that changes nothing", req: api.Request{Op: api.OpRestore, DryRun: true, Text: "# nothing\n"}},
		{
			name:    "dry run refused as -R would be",
			req:     api.Request{Op: api.OpRestore, DryRun: true, Text: "-A -t 203.0.113.100:80\n"},
			wantErr: "line 1: -A -t 203.0.113.100:80: service already exists",
		},
		{
			name:    "dry run checked against the ports",
			req:     api.Request{Op: api.OpRestore, DryRun: true, Text: "-a -t 203.0.113.100:80 -r 10.0.0.5:80\n"},
			wantErr: "10.0.0.5 is not on any server-facing port's subnet",
		},
		{
			name: "diff against a saved file, the whole table",
			req: api.Request{Op: api.OpDiff, Text: "-A -t 203.0.113.100:80 -s wlc\n" +
				"-a -t 203.0.113.100:80 -r 198.51.100.11:80 -m -w 1\n-a -t 203.0.113.100:80 -r 198.51.100.12:8000 -m -w 2\n"},
			want: []string{"remove -A -t 203.0.113.100:21 -s rr", "remove -a -t 203.0.113.100:21 -r 198.51.100.12:21 -m -w 1",
				"change -A -t 203.0.113.100:80 -s wlc"},
		},
		{name: "diff against the table's own save", req: api.Request{Op: api.OpDiff, Text: do(o, api.Request{Op: api.OpSave}).Text}},
		{
			name:    "a dry run of anything but a restore is refused, not applied",
			req:     api.Request{Op: api.OpAddService, DryRun: true, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 443}},
			wantErr: `a dry run is for restores (-R --dry-run), not "add-service"`,
		},
		{name: "diff of an unreadable file", req: api.Request{Op: api.OpDiff, Text: "-A -t 203.0.113.100:80 -w x\n"}, wantErr: "line 1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(o, tt.req)
			if tt.wantErr != "" {
				if !strings.Contains(r.Error, tt.wantErr) {
					t.Fatalf("error %q, want it to contain %q", r.Error, tt.wantErr)
				}
			} else if r.Error != "" {
				t.Fatal(r.Error)
			}
			var got []string
			for _, ch := range r.Changes {
				got = append(got, ch.Kind+" "+ch.Rule)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			unchanged(t)
		})
	}
}
