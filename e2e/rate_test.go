package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/e2e/harness"
)

// TestRates sends requests through the VIP for about 6 s (three of the
// estimator's 2-second samples) and checks that lbctl -L -n --rate shows
// a non-zero CPS for the service and its servers, and that /metrics
// reports the same rates.
func TestRates(t *testing.T) {
	e := startNAT(t)
	e.warmUp(t)
	vip := e.nat.VIP.String()

	start := time.Now()
	sent := 0
	for time.Since(start) < 6*time.Second {
		for _, r := range e.get(t, e.url, 20, 5*time.Second) {
			if r.Err != "" {
				t.Errorf("request %d failed: %s", sent+r.I, r.Err)
			}
		}
		sent += 20
	}
	elapsed := time.Since(start)
	t.Logf("%d requests in %v (%.0f/s)", sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds())

	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "--rate")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lbctl -L -n --rate:\n%s", out)
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS") {
		t.Errorf("--rate header: %q", lines[1:min(3, len(lines))])
	}
	var cps uint64
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) == 7 && f[0] == "TCP" && f[1] == vip+":80" {
			fmt.Sscan(f[2], &cps)
		}
	}
	if cps == 0 {
		t.Errorf("lbctl --rate shows no CPS for TCP %s:80", vip)
	}

	// lbctl's JSON and /metrics, read between two identical listings so
	// that no estimator sample fell between them.
	var resp api.Response
	agreed := false
	for try := 0; try < 5 && !agreed; try++ {
		before := e.rateListing(t)
		body := e.scrapeMetrics(t)
		resp = e.rateListing(t)
		if !sameRates(before, resp) {
			continue // a sample came in between; read again
		}
		agreed = true
		svc := findService(resp, vip, 80)
		if svc == nil {
			t.Fatalf("lbctl lists no TCP %s:80", vip)
		}
		if svc.Rates.CPS == 0 || svc.Rates.InPPS == 0 || svc.Rates.OutPPS == 0 || svc.Rates.InBPS == 0 || svc.Rates.OutBPS == 0 {
			t.Errorf("service rates %+v, want every one > 0", svc.Rates)
		}
		for _, k := range rateKinds(svc.Rates) {
			labels := map[string]string{"protocol": "TCP", "vip": vip, "port": "80", "kind": k.kind}
			if v, ok := metric(body, "dplb_service_rate", labels); !ok || uint64(v) != k.v {
				t.Errorf("/metrics dplb_service_rate{kind=%q} = %v (found %v), lbctl says %d", k.kind, v, ok, k.v)
			}
		}
		for _, rs := range svc.Servers {
			if rs.Rates.CPS == 0 {
				t.Errorf("server %s:%d: CPS 0 after round-robin traffic", rs.Address, rs.Port)
			}
			for _, k := range rateKinds(rs.Rates) {
				labels := map[string]string{"protocol": "TCP", "vip": vip, "port": "80",
					"server": fmt.Sprintf("%s:%d", rs.Address, rs.Port), "kind": k.kind}
				if v, ok := metric(body, "dplb_real_server_rate", labels); !ok || uint64(v) != k.v {
					t.Errorf("/metrics dplb_real_server_rate{server=%q,kind=%q} = %v (found %v), lbctl says %d",
						labels["server"], k.kind, v, ok, k.v)
				}
			}
		}
	}
	if !agreed {
		t.Error("the rates changed between every pair of listings (samples every 2 s?)")
	}
	e.stopLBD(t)
}

// rateListing is lbctl -L -n --rate -o json.
func (e *natEnv) rateListing(t *testing.T) api.Response {
	t.Helper()
	out, err := harness.LBCtl(e.ctx, e.lbctl, e.cfg.Socket, "-L", "-n", "--rate", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var resp api.Response
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("lbctl -o json: %v: %q", err, out)
	}
	return resp
}

func sameRates(a, b api.Response) bool {
	if len(a.Services) != len(b.Services) {
		return false
	}
	for i := range a.Services {
		sa, sb := a.Services[i], b.Services[i]
		if sa.Rates != sb.Rates || len(sa.Servers) != len(sb.Servers) {
			return false
		}
		for j := range sa.Servers {
			if sa.Servers[j].Rates != sb.Servers[j].Rates {
				return false
			}
		}
	}
	return true
}

type rateKind struct {
	kind string
	v    uint64
}

func rateKinds(r api.Rates) []rateKind {
	return []rateKind{{"cps", r.CPS}, {"inpps", r.InPPS}, {"outpps", r.OutPPS}, {"inbps", r.InBPS}, {"outbps", r.OutBPS}}
}
