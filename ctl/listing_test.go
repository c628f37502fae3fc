package ctl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/ctl/feedback"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
)

const checkedConfig = `
ports:
  - {name: wan, device: net_ring0, address: 203.0.113.1/24, role: client}
  - {name: lan, device: net_ring1, address: 198.51.100.1/24, role: server}
services:
  - protocol: tcp
    vip: 203.0.113.100
    port: 80
    health: {type: tcp, interval: 100ms, timeout: 50ms, rise: 1, fall: 1, slow_start: 1h}
    feedback: {type: http, interval: 100ms, timeout: 50ms, smoothing: 0, hysteresis_percent: 5}
    servers:
      - {address: 198.51.100.11, weight: 100}
      - {address: 198.51.100.12, weight: 100}
`

// TestListingCarriesChecks: the listing carries each server's last probe
// and its age, the slow start after a recovery (the weight below the
// configured one) and the dynamic-feedback weight.
func TestListingCarriesChecks(t *testing.T) {
	c, _, _ := controllerFor(t, checkedConfig)
	sw := &switchable{down: map[string]bool{}}
	mon := health.New(zap.NewNop(), c.HealthChanged, health.WithChecker(health.Plain(sw.check)))
	var mu sync.Mutex
	load := map[string]float64{"198.51.100.11": 50, "198.51.100.12": 0}
	fb := feedback.New(zap.NewNop(), c.FeedbackChanged, feedback.WithProber(func(_ context.Context, t feedback.Target) (float64, error) {
		mu.Lock()
		defer mu.Unlock()
		return load[t.Addr.Addr().String()], nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go mon.Run(ctx)
	defer mon.Close()
	go fb.Run(ctx)
	defer fb.Close()
	c.SetHealth(mon)
	c.SetFeedback(fb)

	servers := func() []api.RealServer { return c.view(nil).Response().Services[0].Servers }
	waitFor := func(what string, ok func([]api.RealServer) bool) []api.RealServer {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rss := servers()
			if ok(rss) {
				return rss
			}
			if time.Now().After(deadline) {
				b, _ := json.Marshal(rss)
				t.Fatalf("timed out waiting for %s; listing: %s", what, b)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	rss := waitFor("probes and polls", func(rss []api.RealServer) bool {
		return rss[0].Probe != nil && rss[1].Probe != nil && rss[0].Feedback != nil && rss[0].Feedback.LastPollAgeSecs != nil &&
			rss[0].Feedback.Weight == 50 && rss[0].Weight == 50 // the poller's callback republishes after
	})
	rs1 := rss[0]
	if !rs1.Probe.Passed || rs1.Probe.AgeSecs < 0 || rs1.Probe.AgeSecs > 5 || rs1.Probe.At.IsZero() || rs1.Probe.PassedTotal == 0 {
		t.Fatalf("probe %+v", *rs1.Probe)
	}
	if rs1.ConfiguredWeight != 100 || rs1.Weight != 50 || rs1.SlowStart != nil {
		t.Fatalf("weight %d of %d, slow start %+v: want 50 of 100 (feedback at 50%% load), no slow start", rs1.Weight, rs1.ConfiguredWeight, rs1.SlowStart)
	}
	if fbk := rs1.Feedback; fbk.Load != 50 || fbk.Share != 0.5 || fbk.LastError != "" {
		t.Fatalf("feedback %+v", *fbk)
	}

	// Down: the last probe failed, and says why.
	sw.set("198.51.100.11", true)
	rs1 = waitFor("rs1 down", func(rss []api.RealServer) bool { return rss[0].Health == "down" })[0]
	if rs1.Probe.Passed || rs1.Probe.Reason != "connect: connection refused" || rs1.Probe.FailedTotal == 0 {
		t.Fatalf("probe of a down server %+v", *rs1.Probe)
	}

	// Up again: the weight ramps from 1 towards the feedback weight over
	// the hour of slow start.
	sw.set("198.51.100.11", false)
	rs1 = waitFor("rs1 ramping", func(rss []api.RealServer) bool {
		return rss[0].Health == "up" && rss[0].SlowStart != nil && rss[0].Weight > 0
	})[0]
	ss := rs1.SlowStart
	if ss.DurationSecs != 3600 || ss.TargetWeight != 50 || ss.ElapsedSecs < 0 || ss.ElapsedSecs > 60 || rs1.Weight >= 50 || rs1.Weight < 1 {
		t.Fatalf("slow start %+v at weight %d", *ss, rs1.Weight)
	}
	if rs2 := servers()[1]; rs2.SlowStart != nil || rs2.Weight != 100 || rs2.Feedback.Weight != 100 {
		t.Fatalf("idle rs2: weight %d, slow start %+v, feedback %+v", rs2.Weight, rs2.SlowStart, rs2.Feedback)
	}
}

// TestListingDropsByReason: each lcore's drops by reason reach the
// listing, their sum the total; the ipvsadm text is as it was.
func TestListingDropsByReason(t *testing.T) {
	o, _, f := newTestOps(t)
	var a, b lcore.Stats
	a[lcore.DropNoService], a[lcore.DropBadIPChecksum] = 5, 2
	b[lcore.DropNotSYN] = 7
	f.stats = []lcore.Stats{a, b}
	resp := do(o, api.Request{Op: api.OpList})
	want := []map[string]uint64{{"no_service": 5, "bad_ip_checksum": 2}, {"not_syn": 7}}
	for i, l := range resp.Lcores {
		if !reflect.DeepEqual(l.DropsByReason, want[i]) {
			t.Errorf("lcore %d drops by reason %v, want %v", i, l.DropsByReason, want[i])
		}
	}
	if resp.Lcores[0].Drops != 7 || resp.Lcores[1].Drops != 7 {
		t.Errorf("drop totals %d %d, want 7 7", resp.Lcores[0].Drops, resp.Lcores[1].Drops)
	}
	text := listing(t, o, api.ListFormat{PerLcore: true})
	if strings.Contains(text, "no_service") {
		t.Errorf("the text listing grew reasons:\n%s", text)
	}
}

// TestEditsCarryAuthor: an edit is logged and kept with its author, a
// refusal too; a reload by signal is the signal's.
func TestEditsCarryAuthor(t *testing.T) {
	c, _ := newTestController(t)
	cfg, err := conf.Parse([]byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "lbd.yaml")
	if err := os.WriteFile(path, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	o := NewOps(c, cfg, path, nil, nil, zap.New(core))
	alice := api.WithAuthor(context.Background(), api.Author{User: "alice", Via: api.ViaSocket})

	if r := o.Handle(alice, rule(t, "-e -t 203.0.113.100:80 -r 198.51.100.11 -w 3")); r.Error != "" {
		t.Fatal(r.Error)
	}
	if r := o.Handle(alice, rule(t, "-e -t 203.0.113.100:80 -r 198.51.100.77 -w 2")); r.Error == "" {
		t.Fatal("an out of range weight was taken")
	}
	if _, err := o.Reload(api.Author{User: "signal", Via: api.ViaSignal}); err != nil {
		t.Fatal(err)
	}
	do(o, api.Request{Op: api.OpList}) // not an edit: not kept

	edits := do(o, api.Request{Op: api.OpEdits}).Edits
	type short struct{ user, via, op, target, result string }
	var got []short
	for _, e := range edits {
		got = append(got, short{e.User, e.Via, e.Op, e.Target, strings.SplitN(e.Result, ":", 2)[0]})
	}
	want := []short{
		{"alice", "lbctl", api.OpEditServer, "-t 203.0.113.100:80 -r 198.51.100.11 -w 3", "ok"},
		{"alice", "lbctl", api.OpEditServer, "-t 203.0.113.100:80 -r 198.51.100.77 -w 2", "refused"},
		{"signal", "signal", api.OpReload, "", "ok"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("edits %+v\nwant %+v", got, want)
	}
	if edits[0].Seq+1 != edits[1].Seq || edits[0].Time.IsZero() {
		t.Errorf("edits not numbered or not timed: %+v", edits)
	}
	for _, msg := range []string{"server edited", "refused", "reloaded"} {
		entries := logs.FilterMessage(msg).All()
		if len(entries) != 1 {
			t.Fatalf("%d log lines %q", len(entries), msg)
		}
		user := entries[0].ContextMap()["user"]
		if wantUser := map[bool]string{true: "signal", false: "alice"}[msg == "reloaded"]; user != wantUser {
			t.Errorf("log line %q names user %v, want %s", msg, user, wantUser)
		}
	}
}
