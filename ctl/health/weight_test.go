package health_test

import (
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/health"
)

func TestEffectiveWeight(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ramp = 100 * time.Second
	tests := []struct {
		name       string
		configured int
		upSince    time.Time
		now        time.Time
		slowStart  time.Duration
		want       int
	}{
		{"slow start off", 10, t0, t0, 0, 10},
		{"negative slow start is off", 10, t0, t0, -time.Second, 10},
		{"up from the start", 10, time.Time{}, t0, ramp, 10},
		{"at recovery", 10, t0, t0, ramp, 1},
		{"clock before recovery", 10, t0, t0.Add(-time.Second), ramp, 1},
		{"a tenth in", 11, t0, t0.Add(10 * time.Second), ramp, 2},
		{"half way", 11, t0, t0.Add(50 * time.Second), ramp, 6},
		{"rounds down", 11, t0, t0.Add(59 * time.Second), ramp, 6},
		{"just before the end", 11, t0, t0.Add(ramp - time.Nanosecond), ramp, 10},
		{"at the end", 11, t0, t0.Add(ramp), ramp, 11},
		{"long after", 11, t0, t0.Add(time.Hour), ramp, 11},
		{"weight 1", 1, t0, t0, ramp, 1},
		{"quiescent stays 0", 0, t0, t0.Add(time.Second), ramp, 0},
		{"negative is 0", -5, t0, t0, ramp, 0},
		{"max weight, long ramp", 65535, t0, t0.Add(500 * time.Hour), 1000 * time.Hour, 32768},
	}
	for _, tt := range tests {
		if got := health.EffectiveWeight(tt.configured, tt.upSince, tt.now, tt.slowStart); got != tt.want {
			t.Errorf("%s: EffectiveWeight(%d, %v, %v, %v) = %d, want %d", tt.name, tt.configured, tt.upSince, tt.now, tt.slowStart, got, tt.want)
		}
	}
	// Monotonic over the ramp.
	prev := 0
	for d := time.Duration(0); d <= ramp; d += time.Second {
		w := health.EffectiveWeight(50, t0, t0.Add(d), ramp)
		if w < prev || w < 1 || w > 50 {
			t.Fatalf("EffectiveWeight at %s = %d after %d", d, w, prev)
		}
		prev = w
	}
}
