package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

// TestDropsByReasonSeries: drops are charted per reason, summed over the
// lcores; a reason that appears later is a new series, 0 before.
func TestDropsByReasonSeries(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("bob", "bob-pw")
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	e.lbd.mu.Lock()
	e.lbd.lcores = []api.Lcore{{ID: 1}, {ID: 2}}
	e.lbd.mu.Unlock()
	for i := range 4 {
		e.lbd.mu.Lock()
		e.lbd.lcores[0].DropsByReason = map[string]uint64{"no_service": uint64(5 * i)}
		e.lbd.lcores[1].DropsByReason = map[string]uint64{"no_service": uint64(3 * i)}
		if i >= 2 {
			e.lbd.lcores[1].DropsByReason["not_syn"] = uint64(2 * i)
		}
		e.lbd.mu.Unlock()
		e.srv.mon.sample(ctx, t0.Add(time.Duration(i)*time.Second))
	}
	resp, body := b.get("/api/series?entity=drops&window=10m")
	var ser Series
	if err := json.Unmarshal([]byte(body), &ser); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("drops series: %d %s", resp.StatusCode, body)
	}
	// 4 samples, 3 rates; not_syn, absent until the third sample, had
	// dropped nothing before: 0, then 4 in that second, then 2.
	if ns := ser.Metrics["drops_per_s_no_service"]; len(ns) != 3 || ns[0] != 8 || ns[2] != 8 {
		t.Errorf("no_service drops per second %v, want 8 8 8", ns)
	}
	if ns := ser.Metrics["drops_per_s_not_syn"]; len(ns) != 3 || ns[0] != 0 || ns[1] != 4 || ns[2] != 2 {
		t.Errorf("not_syn drops per second %v, want 0 4 2", ns)
	}
}

// TestEditsOfOthersHaveAuthors: an edit made with lbctl and a reload by
// SIGHUP appear in the events and the audit with their authors; the
// console's own edits reach lbd naming the console user, once each.
func TestEditsOfOthersHaveAuthors(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	ctx := context.Background()
	e.srv.mon.sample(ctx, time.Now())

	svc := &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80}
	e.lbd.lbctl("carol", api.Request{Op: api.OpEditServer, Service: svc, Server: &api.ServerSpec{Address: "198.51.100.12", Port: 8080, Weight: intp(5)}})
	e.lbd.lbctl("carol", api.Request{Op: api.OpEditServer, Service: svc, Server: &api.ServerSpec{Address: "198.51.100.99", Port: 8080, Weight: intp(5)}})
	e.lbd.Handle(api.WithAuthor(ctx, api.Author{User: "signal", Via: api.ViaSignal}), api.Request{Op: api.OpReload})
	if code, out := b.edit("/api/edit", api.Request{Op: api.OpEditServer, Service: svc, Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080, Weight: intp(3)}}); code != http.StatusOK {
		t.Fatalf("edit: %d %s", code, out)
	}
	e.lbd.mu.Lock()
	last := e.lbd.log[len(e.lbd.log)-1]
	e.lbd.mu.Unlock()
	if last.User != "alice" || last.Via != api.ViaConsole {
		t.Errorf("the console's edit reached lbd as %q via %q", last.User, last.Via)
	}
	e.srv.mon.sample(ctx, time.Now())
	e.srv.mon.sample(ctx, time.Now()) // taken once

	_, body := b.get("/api/events")
	var evs []Event
	json.Unmarshal([]byte(body), &evs)
	var got []string
	for _, ev := range evs {
		if ev.Kind == "edit" || ev.Kind == "reload" {
			got = append(got, ev.Kind+" "+ev.User+" "+ev.Text)
		}
	}
	// Newest first; the refused lbctl edit is no event.
	want := []string{"edit alice edit-server tcp 192.0.2.10:80 -> 198.51.100.11:8080 weight 3", "reload signal reload (signal)", "edit carol edit-server (lbctl)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	_, body = b.get("/api/audit")
	var audit []AuditEntry
	json.Unmarshal([]byte(body), &audit)
	got = nil
	for _, a := range audit {
		got = append(got, a.User+" "+a.Via+" "+a.Role+" "+strings.SplitN(a.Result, ":", 2)[0])
	}
	want = []string{"alice console admin ok", "signal signal  ok", "carol lbctl  refused", "carol lbctl  ok"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
