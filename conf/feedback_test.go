package conf_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

func TestDefaultFeedback(t *testing.T) {
	want := conf.Feedback{Type: "none", Interval: 5 * time.Second, Timeout: time.Second, Path: "/load",
		MinWeightPercent: 10, MaxWeightPercent: 100, Smoothing: 0.5, HysteresisPercent: 10}
	if got := conf.DefaultFeedback(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultFeedback() =\n%+v\nwant\n%+v", got, want)
	}
	// In a Go literal, zero min, smoothing and hysteresis mean zero.
	eff := want
	eff.MinWeightPercent, eff.Smoothing, eff.HysteresisPercent = 0, 0, 0
	if got := (conf.Feedback{}).Effective(); !reflect.DeepEqual(got, eff) {
		t.Errorf("Feedback{}.Effective() =\n%+v\nwant\n%+v", got, eff)
	}
	if (conf.Feedback{}).Enabled() || (conf.Feedback{Type: "none"}).Enabled() || !(conf.Feedback{Type: "http"}).Enabled() {
		t.Error("Enabled() wrong")
	}
	if got := (conf.Feedback{Source: "192.0.2.1"}).SourceAddr().String(); got != "192.0.2.1" {
		t.Errorf("SourceAddr() = %s", got)
	}
	if (conf.Feedback{}).SourceAddr().IsValid() {
		t.Error("SourceAddr() of no source is valid")
	}
}

const feedbackBase = `
ports:
  - name: s
    device: net_ring0
    address: 198.51.100.1/24
services:
  - protocol: tcp
    vip: 203.0.113.10
    port: 80
    servers:
      - address: 198.51.100.11
`

func TestFeedbackLoadDefaultsAndOverride(t *testing.T) {
	c, err := conf.Parse([]byte(feedbackBase))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Services[0].Feedback; !reflect.DeepEqual(got, conf.DefaultFeedback()) {
		t.Errorf("absent feedback =\n%+v\nwant\n%+v", got, conf.DefaultFeedback())
	}

	// Explicit zeros stay zero; absent keys get their defaults.
	c, err = conf.Parse([]byte(feedbackBase + `    feedback:
      type: http
      interval: 2s
      port: 8081
      min_weight_percent: 0
      smoothing: 0
      hysteresis_percent: 2.5
`))
	if err != nil {
		t.Fatal(err)
	}
	want := conf.DefaultFeedback()
	want.Type, want.Interval, want.Port = "http", 2*time.Second, 8081
	want.MinWeightPercent, want.Smoothing, want.HysteresisPercent = 0, 0, 2.5
	if got := c.Services[0].Feedback; !reflect.DeepEqual(got, want) {
		t.Errorf("feedback =\n%+v\nwant\n%+v", got, want)
	}

	c, err = conf.Parse([]byte(feedbackBase + `    feedback: {type: exec, command: [/usr/local/bin/load, "-q"], max_weight_percent: 80}
`))
	if err != nil {
		t.Fatal(err)
	}
	want = conf.DefaultFeedback()
	want.Type, want.Command, want.MaxWeightPercent = "exec", []string{"/usr/local/bin/load", "-q"}, 80
	if got := c.Services[0].Feedback; !reflect.DeepEqual(got, want) {
		t.Errorf("feedback =\n%+v\nwant\n%+v", got, want)
	}
}

func TestFeedbackLoadErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown key", "    feedback: {type: http, hysteresis: 10}\n",
			"services[0].feedback.hysteresis: unknown key"},
		{"duration without unit", "    feedback: {type: http, interval: 5}\n",
			`services[0].feedback.interval: 5 has no unit (want e.g. "5s")`},
		{"bad type", "    feedback: {type: snmp}\n",
			`services[0].feedback.type: "snmp" is not one of http, exec, none`},
		{"timeout not less than interval", "    feedback: {type: http, interval: 1s}\n",
			"services[0].feedback.timeout: 1s is not less than services[0].feedback.interval 1s"},
		{"max below min", "    feedback: {type: http, min_weight_percent: 50, max_weight_percent: 40}\n",
			"services[0].feedback.max_weight_percent: 40 is less than services[0].feedback.min_weight_percent 50"},
		{"smoothing 1", "    feedback: {type: http, smoothing: 1}\n",
			"services[0].feedback.smoothing: 1 is out of range 0..1 (1 excluded: the load would never move)"},
		{"exec without command", "    feedback: {type: exec}\n",
			"services[0].feedback.command: must not be empty for exec feedback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := conf.Parse([]byte(feedbackBase + tt.text))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse() = %v, want %s", err, tt.want)
			}
		})
	}
}

func TestFeedbackValidate(t *testing.T) {
	valid := conf.Feedback{Type: "http", Interval: time.Second, Timeout: 500 * time.Millisecond, Port: 8081, Path: "/load",
		Source: "192.0.2.1", MinWeightPercent: 5, MaxWeightPercent: 90, Smoothing: 0.8, HysteresisPercent: 5}
	tests := []struct {
		name string
		edit func(*conf.Feedback)
		want string // "" = valid
	}{
		{"valid http", func(*conf.Feedback) {}, ""},
		{"zero (none)", func(f *conf.Feedback) { *f = conf.Feedback{} }, ""},
		{"defaults", func(f *conf.Feedback) { *f = conf.DefaultFeedback() }, ""},
		{"valid exec", func(f *conf.Feedback) { f.Type, f.Command = "exec", []string{"/bin/load", "x"} }, ""},
		{"min = max", func(f *conf.Feedback) { f.MinWeightPercent, f.MaxWeightPercent = 50, 50 }, ""},
		{"min 0 max 100", func(f *conf.Feedback) { f.MinWeightPercent, f.MaxWeightPercent = 0, 100 }, ""},
		{"hysteresis 50", func(f *conf.Feedback) { f.HysteresisPercent = 50 }, ""},
		{"type", func(f *conf.Feedback) { f.Type = "HTTP" }, `feedback.type: "HTTP" is not one of http, exec, none`},
		{"interval short", func(f *conf.Feedback) { f.Interval = 50 * time.Millisecond; f.Timeout = 20 * time.Millisecond },
			"feedback.interval: 50ms is out of range 100ms..1h"},
		{"interval long", func(f *conf.Feedback) { f.Interval = 2 * time.Hour }, "feedback.interval: 2h0m0s is out of range 100ms..1h"},
		{"timeout short", func(f *conf.Feedback) { f.Timeout = time.Millisecond }, "feedback.timeout: 1ms is out of range 10ms..1h"},
		{"timeout = interval", func(f *conf.Feedback) { f.Timeout = time.Second },
			"feedback.timeout: 1s is not less than services[0].feedback.interval 1s"},
		{"port", func(f *conf.Feedback) { f.Port = 65536 }, "feedback.port: 65536 is out of range 0..65535"},
		{"negative port", func(f *conf.Feedback) { f.Port = -1 }, "feedback.port: -1 is out of range 0..65535"},
		{"path", func(f *conf.Feedback) { f.Path = "load" }, `feedback.path: "load" is not a request path (want e.g. /load)`},
		{"path with space", func(f *conf.Feedback) { f.Path = "/lo ad" }, `feedback.path: "/lo ad" is not a request path (want e.g. /load)`},
		{"source", func(f *conf.Feedback) { f.Source = "mgmt0" }, `feedback.source: "mgmt0" is not an IPv4 address`},
		{"source multicast", func(f *conf.Feedback) { f.Source = "224.0.0.1" }, "feedback.source: 224.0.0.1 is not a unicast host address"},
		{"exec no command", func(f *conf.Feedback) { f.Type = "exec" }, "feedback.command: must not be empty for exec feedback"},
		{"relative command", func(f *conf.Feedback) { f.Type, f.Command = "exec", []string{"load"} },
			`feedback.command[0]: "load" is not an absolute path`},
		{"empty arg", func(f *conf.Feedback) { f.Type, f.Command = "exec", []string{"/bin/load", ""} },
			"feedback.command[1]: must not be empty"},
		{"min negative", func(f *conf.Feedback) { f.MinWeightPercent = -1 }, "feedback.min_weight_percent: -1 is out of range 0..100"},
		{"min NaN", func(f *conf.Feedback) { f.MinWeightPercent = math.NaN() }, "feedback.min_weight_percent: NaN is out of range 0..100"},
		{"max 0.5", func(f *conf.Feedback) { f.MinWeightPercent, f.MaxWeightPercent = 0, 0.5 },
			"feedback.max_weight_percent: 0.5 is out of range 1..100"},
		{"max 150", func(f *conf.Feedback) { f.MaxWeightPercent = 150 }, "feedback.max_weight_percent: 150 is out of range 1..100"},
		{"max < min", func(f *conf.Feedback) { f.MinWeightPercent = 95 },
			"feedback.max_weight_percent: 90 is less than services[0].feedback.min_weight_percent 95"},
		{"smoothing negative", func(f *conf.Feedback) { f.Smoothing = -0.1 },
			"feedback.smoothing: -0.1 is out of range 0..1 (1 excluded: the load would never move)"},
		{"smoothing NaN", func(f *conf.Feedback) { f.Smoothing = math.NaN() },
			"feedback.smoothing: NaN is out of range 0..1 (1 excluded: the load would never move)"},
		{"hysteresis", func(f *conf.Feedback) { f.HysteresisPercent = 60 }, "feedback.hysteresis_percent: 60 is out of range 0..50"},
		{"hysteresis inf", func(f *conf.Feedback) { f.HysteresisPercent = math.Inf(1) }, "feedback.hysteresis_percent: +Inf is out of range 0..50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			fb := valid
			tt.edit(&fb)
			c.Services[0].Feedback = fb
			err := c.Validate(nil)
			want := tt.want
			if want != "" {
				want = "services[0]." + want
			}
			switch {
			case want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case want != "" && (err == nil || err.Error() != want):
				t.Errorf("Validate() = %v, want %s", err, want)
			}
			if want != "" {
				var fe *conf.FieldError
				if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "services[0].feedback.") {
					t.Errorf("error %v is not a *FieldError on the feedback", err)
				}
			}
		})
	}
}
