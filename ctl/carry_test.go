package ctl

import (
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/api"
)

// saveText is lbctl -S -n of o's running table.
func saveText(t *testing.T, o *Ops) string {
	t.Helper()
	resp := do(o, api.Request{Version: api.Version, Op: api.OpSave})
	if resp.Error != "" {
		t.Fatal(resp.Error)
	}
	return resp.Text
}

// TestServicesCarriedAcrossHandover: the running table with lbctl's
// edits goes to the next lbd when its configuration is the one the lbd
// before last read; the configuration wins when it changed.
func TestServicesCarriedAcrossHandover(t *testing.T) {
	before, _, _ := newTestOps(t)
	for _, l := range []string{
		"-a -t 203.0.113.100:80 -r 198.51.100.13:80 -w 5",
		"-e -t 203.0.113.100:80 -r 198.51.100.11:80 -w 3",
		"--add-blklst -t 203.0.113.100:80 -k 192.0.2.0/24",
		"--set 600 30 200",
	} {
		if resp := do(before, rule(t, l)); resp.Error != "" {
			t.Fatalf("%s: %s", l, resp.Error)
		}
	}
	carried := before.servicesHandover()
	if len(carried) == 0 {
		t.Fatal("no services handed over")
	}

	// The same configuration: the edits are kept.
	next, _, _ := newTestOps(t)
	if note := next.adoptServices(carried); !strings.Contains(note, "kept the running table") {
		t.Fatalf("adoptServices: %q", note)
	}
	if got, want := saveText(t, next), saveText(t, before); got != want {
		t.Errorf("the next lbd's table:\n%s\nwant the one before's:\n%s", got, want)
	}
	if _, to := next.c.Services(); to.TCP.Seconds() != 600 || to.UDP.Seconds() != 200 {
		t.Errorf("timeouts %+v, want --set's", to)
	}
	// Its own handover carries them on, and the file it read is still
	// the configuration's.
	third, _, _ := newTestOps(t)
	third.adoptServices(next.servicesHandover())
	if got, want := saveText(t, third), saveText(t, before); got != want {
		t.Errorf("a second handover lost edits:\n%s\nwant\n%s", got, want)
	}

	// A configuration edited since: it wins, and the log says so.
	c, _, cfg := controllerFor(t, strings.Replace(testConfig, "weight: 2", "weight: 4", 1))
	edited := NewOps(c, cfg, "", nil, nil, zap.NewNop())
	fileTable := saveText(t, edited)
	if note := edited.adoptServices(carried); !strings.Contains(note, "changed since") {
		t.Errorf("adoptServices over an edited configuration: %q", note)
	}
	if got := saveText(t, edited); got != fileTable {
		t.Errorf("an edited configuration's table became:\n%s\nwant the file's:\n%s", got, fileTable)
	}

	// Nothing edited, nothing to say; a writer before this handover's
	// services, nothing either.
	plain, _, _ := newTestOps(t)
	if note := plain.adoptServices(newTestOpsHandover(t)); note != "" {
		t.Errorf("an unedited table: %q", note)
	}
	if note := plain.adoptServices(nil); note != "" {
		t.Errorf("no services handed over: %q", note)
	}
	if note := plain.adoptServices([]byte("{")); !strings.Contains(note, "unreadable") {
		t.Errorf("garbage: %q", note)
	}
}

// newTestOpsHandover is the services handover of an lbd that ran
// testConfig unedited.
func newTestOpsHandover(t *testing.T) []byte {
	o, _, _ := newTestOps(t)
	return o.servicesHandover()
}
