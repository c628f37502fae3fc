package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/dplb/dplb/e2e/harness"
)

// promQueries returns every PromQL expression of the Grafana dashboard and
// the alert rules in deploy/observability, failing if either does not parse.
func promQueries(t *testing.T) map[string][]string {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy", "observability")
	out := map[string][]string{}

	b, err := os.ReadFile(filepath.Join(dir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out["dashboard: "+p.Title] = append(out["dashboard: "+p.Title], tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			out["dashboard variable"] = append(out["dashboard variable"], q)
		}
	}

	b, err = os.ReadFile(filepath.Join(dir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("alert rule %+v: want alert and expr", r)
			}
			out["alert "+r.Alert] = append(out["alert "+r.Alert], r.Expr)
		}
	}
	for _, want := range []string{"alert DplbRealServerDown", "alert DplbConnectionTableHigh", "alert DplbDropsRising", "alert DplbHandoffRingsFull"} {
		if len(out[want]) == 0 {
			t.Errorf("alerts.yml lacks %s", strings.TrimPrefix(want, "alert "))
		}
	}
	return out
}

var (
	metricName = regexp.MustCompile(`\bdplb_[a-z_]+\b`)
	// labelMatch is name="value" inside a selector: values the test
	// checks exist (reason="handoff_full" must be a real drop reason).
	labelMatch = regexp.MustCompile(`\b(reason|counter|kind|ring|dir|result)(=~?)"([^"]*)"`)
)

// TestObservabilityNamesExist: every dplb_ metric and every label value the
// dashboard and the alert rules select on is in a real lbd's /metrics
// (two workers, so the handoff rings exist; health checks, so
// dplb_real_server_up does).
func TestObservabilityNamesExist(t *testing.T) {
	queries := promQueries(t)
	e := startNATWith(t, natOptions{configure: func(c *harness.Config) {
		twoWorkers(c)
		c.Services[0].Health = "{type: tcp, interval: 200ms, timeout: 150ms, rise: 1, fall: 2}"
	}})
	// The servers' state does not matter here (the probes may not even
	// reach them from this host's stack): only which series exist.
	body := e.scrapeMetrics(t)
	names := map[string]bool{}
	values := map[string][]string{} // label -> values seen
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series, _, _ := strings.Cut(line, " ")
		name, labels, _ := strings.Cut(series, "{")
		names[name] = true
		for _, m := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(labels, -1) {
			values[m[1]] = append(values[m[1]], m[2])
		}
	}
	checked := 0
	for where, exprs := range queries {
		for _, expr := range exprs {
			for _, n := range metricName.FindAllString(expr, -1) {
				checked++
				if !names[n] {
					t.Errorf("%s names %s, which lbd's /metrics does not have", where, n)
				}
			}
			for _, m := range labelMatch.FindAllStringSubmatch(expr, -1) {
				label, op, v := m[1], m[2], m[3]
				re := regexp.MustCompile("^(?:" + v + ")$")
				if op == "=" {
					re = regexp.MustCompile("^" + regexp.QuoteMeta(v) + "$")
				}
				if !slices.ContainsFunc(values[label], re.MatchString) {
					t.Errorf("%s selects %s%s%q, which no series of lbd's /metrics has (have %v)", where, label, op, v, uniq(values[label]))
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d metric names found in the dashboard and alerts", checked)
	}
}

func uniq(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
