package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
)

func TestSeriesAndEvents(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("bob", "bob-pw")
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 5 {
		e.lbd.traffic(3)
		e.srv.mon.sample(ctx, t0.Add(time.Duration(i)*time.Second))
	}
	e.lbd.mu.Lock()
	e.lbd.services[0].Servers[1].Health, e.lbd.services[0].Servers[1].HealthReason = "down", "connection refused"
	e.lbd.mu.Unlock()
	e.srv.mon.sample(ctx, t0.Add(5*time.Second))

	resp, body := b.get("/api/series?entity=total&window=10m")
	var ser Series
	if err := json.Unmarshal([]byte(body), &ser); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("series: %d %s", resp.StatusCode, body)
	}
	// 6 samples give 5 rates; 3 new connections per second on each of 2 servers.
	if len(ser.Times) != 5 || ser.Metrics["conns_per_s"][0] != 6 || ser.Metrics["in_pps"][0] != 60 || ser.Metrics["out_Bps"][0] != 6000 {
		t.Errorf("total series: %+v", ser)
	}
	if tot := ser.Metrics["conns_total"]; tot[len(tot)-1] != 30 || tot[0] != 12 {
		t.Errorf("total connections %v, want 12 .. 30", tot)
	}
	if fill := ser.Metrics["table_fill_pct"]; fill[0] != 1 {
		t.Errorf("table fill %v, want 1%%", fill)
	}
	_, body = b.get("/api/series?entity=" + url.QueryEscape("rs TCP 192.0.2.10:80 -> 198.51.100.12:8080") + "&window=10m")
	if json.Unmarshal([]byte(body), &ser); ser.Metrics["conns_per_s"][0] != 3 {
		t.Errorf("server series: %s", body)
	}
	_, body = b.get("/api/series?entity=lcores&window=10m")
	if json.Unmarshal([]byte(body), &ser); ser.Metrics["rx_pps_1"][0] != 60 {
		t.Errorf("lcore series: %s", body)
	}
	for _, q := range []string{"entity=total&window=5m", "entity=nothing&window=10m"} {
		if resp, body := b.get("/api/series?" + q); resp.StatusCode != http.StatusBadRequest || errorOf(body) == "" {
			t.Errorf("%s: %d %s", q, resp.StatusCode, body)
		}
	}
	_, body = b.get("/api/events")
	if !strings.Contains(body, "server TCP 192.0.2.10:80 -> 198.51.100.12:8080 is down: connection refused") {
		t.Errorf("events: %s", body)
	}
}

func TestWindowsAverage(t *testing.T) {
	e := newEntity([]string{"x"})
	t0 := time.Unix(1_800_000_000, 0) // a multiple of 60 s
	for i := range 125 {
		e.add(t0.Add(time.Duration(i)*time.Second), []float64{float64(i)})
	}
	s := e.series("x", 1) // 10 s steps: 12 closed, 0..9 averages 4.5
	if len(s.Times) != 12 || s.Metrics["x"][0] != 4.5 || s.Times[1]-s.Times[0] != 10 {
		t.Errorf("10 s window: %+v", s)
	}
	if s := e.series("x", 2); len(s.Times) != 2 || s.Metrics["x"][1] != 89.5 {
		t.Errorf("1 min window: %+v", s)
	}
	for i := 125; i < 700; i++ {
		e.add(t0.Add(time.Duration(i)*time.Second), []float64{float64(i)})
	}
	if s := e.series("x", 0); len(s.Times) != 600 || s.Metrics["x"][0] != 100 || s.Metrics["x"][599] != 699 {
		t.Errorf("1 s window keeps the last 600: %d points, first %v", len(s.Times), s.Metrics["x"][0])
	}
}

func TestDrainRemovesAnIdleServer(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.login("alice", "alice-pw")
	ctx := context.Background()
	e.srv.mon.sample(ctx, time.Now())
	e.lbd.mu.Lock()
	e.lbd.services[0].Servers[0].ActiveConns = 2
	e.lbd.mu.Unlock()
	code, out := b.edit("/api/drain", api.Request{Service: &api.ServiceSpec{Protocol: "tcp", VIP: "192.0.2.10", Port: 80}, Server: &api.ServerSpec{Address: "198.51.100.11", Port: 8080}})
	if code != http.StatusOK {
		t.Fatalf("drain: %d %s", code, out)
	}
	e.srv.mon.sample(ctx, time.Now())
	e.srv.mon.checkDrains(ctx)
	if got := e.lbd.edits(); len(got) != 1 || *got[0].Server.Weight != 0 {
		t.Fatalf("drain with active connections: lbd got %+v", got)
	}
	if _, body := b.get("/api/list"); !strings.Contains(body, `"draining":["TCP 192.0.2.10:80 -> 198.51.100.11:8080"]`) {
		t.Errorf("list does not show the drain: %s", body)
	}
	e.lbd.mu.Lock()
	e.lbd.services[0].Servers[0].ActiveConns = 0
	e.lbd.mu.Unlock()
	e.srv.mon.sample(ctx, time.Now())
	e.srv.mon.checkDrains(ctx)
	got := e.lbd.edits()
	if len(got) != 2 || got[1].Op != api.OpDeleteServer || got[1].Server.Address != "198.51.100.11" {
		t.Fatalf("drained server not removed: %+v", got)
	}
	if _, body := b.get("/api/audit"); !strings.Contains(body, `"op":"delete-server"`) || !strings.Contains(body, `"user":"alice"`) {
		t.Errorf("audit: %s", body)
	}
}
