package health_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
)

// TestProbeFile: a file check's verdict and weight for what its file
// holds, keepalived's track_file rules: with weight 0 a number other than
// 0 is down; else the number times the weight is added.
func TestProbeFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rs1")
	check := func(weight int, reverse bool) conf.HealthCheck {
		return conf.HealthCheck{Type: "file", File: file, FileWeight: weight, FileReverse: reverse}
	}
	up := health.Result{OK: true, Weight: -1}
	tests := []struct {
		name     string
		contents string // "-" for no file
		check    conf.HealthCheck
		want     health.Result
	}{
		{"absent: 0", "-", check(0, false), up},
		{"empty: 0", "", check(0, false), up},
		{"0", "0\n", check(0, false), up},
		{"1: down", "1\n", check(0, false), health.Result{Reason: "file " + file + " reads 1", Weight: -1}},
		{"-3: down", " -3 drained for maintenance\n", check(0, false), health.Result{Reason: "file " + file + " reads -3", Weight: -1}},
		{"reverse, 0: down", "0", check(0, true), health.Result{Reason: "file " + file + " reads 0", Weight: -1}},
		{"reverse, absent: down", "-", check(0, true), health.Result{Reason: "file " + file + " reads 0", Weight: -1}},
		{"reverse, 1: up", "1", check(0, true), up},
		{"weight 2, 5: +10", "5\n", check(2, false), health.Result{OK: true, Weight: -1, Delta: 10}},
		{"weight 2, hex 0x10: +32", "0x10", check(2, false), health.Result{OK: true, Weight: -1, Delta: 32}},
		{"weight 3, -4: -12", "-4", check(3, false), health.Result{OK: true, Weight: -1, Delta: -12}},
		{"weight 2 reverse, 5: -10", "5", check(2, true), health.Result{OK: true, Weight: -1, Delta: -10}},
		{"weight -1, 7: -7", "7", check(-1, false), health.Result{OK: true, Weight: -1, Delta: -7}},
		{"bounded", "2147483648", check(65535, false), health.Result{OK: true, Weight: -1, Delta: 2 * 65535}},
		{"not a number", "up\n", check(0, false), health.Result{Reason: `file: ` + file + ` holds "up", not a number in -2147483648..2147483648`, Weight: -1}},
		{"too big", "2147483649", check(1, false), health.Result{Reason: `file: ` + file + ` holds "2147483649", not a number in -2147483648..2147483648`, Weight: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(file)
			if tt.contents != "-" {
				if err := os.WriteFile(file, []byte(tt.contents), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := health.Check(context.Background(), target("127.0.0.1:8080", tt.check)); got != tt.want {
				t.Errorf("Check = %+v, want %+v", got, tt.want)
			}
		})
	}
	// A directory cannot be read: the probe fails and says so.
	got := health.Check(context.Background(), target("127.0.0.1:8080", conf.HealthCheck{Type: "file", File: dir}))
	if want := "file: read " + dir + ": is a directory"; got.OK || got.Reason != want {
		t.Errorf("a directory: Check = %+v, want reason %q", got, want)
	}
}

// TestProbeFileAlso: an also file check adds its weight to the main
// check's verdict.
func TestProbeFileAlso(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rs1")
	if err := os.WriteFile(file, []byte("3"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := shCheck("exit 0")
	c.Also = []conf.HealthCheck{{Type: "file", File: file, FileWeight: 2}, {Type: "file", File: file, FileWeight: -1}}
	if got, want := health.Check(context.Background(), target("127.0.0.1:8080", c)), (health.Result{OK: true, Weight: -1, Delta: 3}); got != want {
		t.Errorf("Check = %+v, want %+v", got, want)
	}
}
