package conf

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"time"
)

// Feedback is a service's dynamic weight feedback (LVS's "dynamic feedback
// load balancing"): lbd polls every real server of the service for its
// load, one number that is the server's load in percent (0 idle .. 100
// saturated), and schedules it with
//
//	weight = configured weight * (1 - smoothed load / 100)
//
// bounded to [MinWeightPercent, MaxWeightPercent] of the configured
// weight. The load is smoothed by an exponential moving average
// (Smoothing), and the applied weight only moves when the new one differs
// from it by more than HysteresisPercent of the configured weight (or
// reaches a bound), so weights do not flap. A failed poll keeps the last
// weight; a server with no answer yet has its configured weight. Health
// checks still decide whether a server is up: feedback only scales the
// weight of an up server (see ctl/feedback).
//
// Polls leave from the LB host's own network stack, like health checks.
//
// Zero values in Go literals mean the defaults for Type, Interval,
// Timeout, Path and MaxWeightPercent (Effective); a zero MinWeightPercent,
// Smoothing or HysteresisPercent means zero (none), as it does in YAML.
// Load fills the defaults in for absent keys.
type Feedback struct {
	Type              string        `mapstructure:"type"`               // http (GET a load endpoint), exec (run a command) or none (weights stay as configured); default "none"; reload: yes
	Interval          time.Duration `mapstructure:"interval"`           // time between the starts of two polls of a server, 100ms..1h; default 5s; reload: yes
	Timeout           time.Duration `mapstructure:"timeout"`            // a poll not done within this fails (the weight stays), 10ms..1h and less than interval; default 1s; reload: yes
	Port              int           `mapstructure:"port"`               // http: port of the load endpoint on the real server's address, 0 = the real server's port, 0..65535; default 0; reload: yes
	Path              string        `mapstructure:"path"`               // http: request path of the load endpoint, starting with "/"; its 2xx body is one number, the load in percent 0..100; default "/load"; reload: yes
	Source            string        `mapstructure:"source"`             // IPv4 address polls leave from (the management interface's), "" = the kernel's choice; default ""; reload: yes
	Command           []string      `mapstructure:"command"`            // exec: argv, the first an absolute path; exit 0 and stdout one number, the load in percent 0..100; env DPLB_RS_ADDR, DPLB_RS_PORT, DPLB_VIP, DPLB_VPORT; default none; reload: yes
	MinWeightPercent  float64       `mapstructure:"min_weight_percent"` // lowest weight, in percent of the configured weight, 0..100 (0 lets a saturated server go quiescent; above 0 a server keeps weight >= 1); default 10; reload: yes
	MaxWeightPercent  float64       `mapstructure:"max_weight_percent"` // highest weight, in percent of the configured weight, 1..100 and >= min_weight_percent; default 100; reload: yes
	Smoothing         float64       `mapstructure:"smoothing"`          // share of the previous smoothed load kept at each poll (exponential moving average), 0 (none) up to but excluding 1; default 0.5; reload: yes
	HysteresisPercent float64       `mapstructure:"hysteresis_percent"` // the weight changes only when the new one differs by more than this percent of the configured weight (or reaches a bound), 0..50; default 10; reload: yes
}

// Values of Feedback.Type.
const (
	FeedbackNone = "none"
	FeedbackHTTP = "http"
	FeedbackExec = "exec"
)

// FeedbackTypes lists the values of Feedback.Type.
var FeedbackTypes = []string{FeedbackHTTP, FeedbackExec, FeedbackNone}

// Limits of the feedback settings.
const (
	minFeedbackInterval = 100 * time.Millisecond
	maxFeedbackInterval = time.Hour
	minFeedbackTimeout  = 10 * time.Millisecond
	maxHysteresis       = 50
)

// DefaultFeedback returns the feedback of a service without a "feedback"
// key: none, with every other default filled in.
func DefaultFeedback() Feedback {
	return Feedback{
		Type:              FeedbackNone,
		Interval:          5 * time.Second,
		Timeout:           time.Second,
		Path:              "/load",
		MinWeightPercent:  10,
		MaxWeightPercent:  100,
		Smoothing:         0.5,
		HysteresisPercent: 10,
	}
}

// feedbackDefaults are the values Load fills in for absent keys of a
// "feedback" map.
func feedbackDefaults() map[string]any {
	d := DefaultFeedback()
	return map[string]any{
		"type": d.Type, "interval": d.Interval, "timeout": d.Timeout, "path": d.Path,
		"min_weight_percent": d.MinWeightPercent, "max_weight_percent": d.MaxWeightPercent,
		"smoothing": d.Smoothing, "hysteresis_percent": d.HysteresisPercent,
	}
}

// Effective returns f with the zero values of Type, Interval, Timeout,
// Path and MaxWeightPercent replaced by the defaults (the other zeros mean
// zero).
func (f Feedback) Effective() Feedback {
	d := DefaultFeedback()
	if f.Type == "" {
		f.Type = d.Type
	}
	if f.Interval == 0 {
		f.Interval = d.Interval
	}
	if f.Timeout == 0 {
		f.Timeout = d.Timeout
	}
	if f.Path == "" {
		f.Path = d.Path
	}
	if f.MaxWeightPercent == 0 {
		f.MaxWeightPercent = d.MaxWeightPercent
	}
	return f
}

// Enabled reports whether the feedback polls anything (its type is not none).
func (f Feedback) Enabled() bool {
	return f.Type != "" && f.Type != FeedbackNone
}

// SourceAddr returns the polls' source address, the zero Addr for the
// kernel's choice (or an invalid Source, which Validate rules out).
func (f Feedback) SourceAddr() netip.Addr {
	a, err := netip.ParseAddr(f.Source)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// checkFloat refuses v outside lo..hi (and NaN).
func checkFloat(field string, v, lo, hi float64) error {
	if !(v >= lo && v <= hi) {
		return fieldErrorf(field, "%g is out of range %g..%g", v, lo, hi)
	}
	return nil
}

// validate checks a feedback policy written at field path f ("services[0].feedback").
func (fb Feedback) validate(f string) error {
	if fb.Type != "" {
		if err := checkOneOf(f+".type", fb.Type, FeedbackTypes...); err != nil {
			return err
		}
	}
	e := fb.Effective()
	if err := checkDuration(f+".interval", e.Interval, minFeedbackInterval, maxFeedbackInterval, "100ms..1h"); err != nil {
		return err
	}
	if err := checkDuration(f+".timeout", e.Timeout, minFeedbackTimeout, maxFeedbackInterval, "10ms..1h"); err != nil {
		return err
	}
	if e.Timeout >= e.Interval {
		return fieldErrorf(f+".timeout", "%s is not less than %s.interval %s", e.Timeout, f, e.Interval)
	}
	if err := checkRange(f+".port", e.Port, 0, 65535); err != nil {
		return err
	}
	if !strings.HasPrefix(e.Path, "/") || strings.ContainsAny(e.Path, " \t\r\n") {
		return fieldErrorf(f+".path", "%q is not a request path (want e.g. /load)", e.Path)
	}
	if e.Source != "" {
		if _, err := parseHost(f+".source", e.Source); err != nil {
			return err
		}
	}
	if e.Type == FeedbackExec && len(e.Command) == 0 {
		return fieldErrorf(f+".command", "must not be empty for exec feedback")
	}
	for i, a := range e.Command {
		g := fmt.Sprintf("%s.command[%d]", f, i)
		if a == "" {
			return fieldErrorf(g, "must not be empty")
		}
		if i == 0 && !filepath.IsAbs(a) {
			return fieldErrorf(g, "%q is not an absolute path", a)
		}
	}
	if err := checkFloat(f+".min_weight_percent", e.MinWeightPercent, 0, 100); err != nil {
		return err
	}
	if err := checkFloat(f+".max_weight_percent", e.MaxWeightPercent, 1, 100); err != nil {
		return err
	}
	if e.MaxWeightPercent < e.MinWeightPercent {
		return fieldErrorf(f+".max_weight_percent", "%g is less than %s.min_weight_percent %g", e.MaxWeightPercent, f, e.MinWeightPercent)
	}
	if !(e.Smoothing >= 0 && e.Smoothing < 1) {
		return fieldErrorf(f+".smoothing", "%g is out of range 0..1 (1 excluded: the load would never move)", e.Smoothing)
	}
	return checkFloat(f+".hysteresis_percent", e.HysteresisPercent, 0, maxHysteresis)
}
