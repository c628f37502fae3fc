package feedback

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
)

// cfg returns the default feedback with edits.
func cfg(edit func(*conf.Feedback)) conf.Feedback {
	c := conf.DefaultFeedback()
	c.Type = conf.FeedbackHTTP
	if edit != nil {
		edit(&c)
	}
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestNext(t *testing.T) {
	tests := []struct {
		name      string
		c         conf.Feedback
		start     State
		loads     []float64
		wantLoad  float64
		wantShare float64
	}{
		{"first load taken as is", cfg(nil), State{}, []float64{30}, 30, 0.7},
		{"first load within the band keeps the configured weight", cfg(nil), State{}, []float64{5}, 5, 1},
		{"load 0 from no data: full weight", cfg(nil), State{}, []float64{0}, 0, 1},
		{"load 100: the floor", cfg(nil), State{}, []float64{100}, 100, 0.1},
		{"load 100 with min 0: quiescent", cfg(func(c *conf.Feedback) { c.MinWeightPercent = 0 }), State{}, []float64{100}, 100, 0},
		{"load 0 with max 80: the ceiling", cfg(func(c *conf.Feedback) { c.MaxWeightPercent = 80 }), State{}, []float64{0}, 0, 0.8},
		{"smoothing halves a step", cfg(nil), State{}, []float64{0, 80}, 40, 0.6},
		{"smoothing 0.75", cfg(func(c *conf.Feedback) { c.Smoothing = 0.75 }), State{}, []float64{0, 80}, 20, 0.8},
		{"no smoothing follows each load", cfg(func(c *conf.Feedback) { c.Smoothing, c.HysteresisPercent = 0, 0 }),
			State{}, []float64{20, 40}, 40, 0.6},
		{"hysteresis holds a small move", cfg(nil), State{}, []float64{50, 55}, 52.5, 0.5},
		{"hysteresis holds a move of exactly the band", cfg(func(c *conf.Feedback) { c.Smoothing = 0 }),
			State{}, []float64{50, 60}, 60, 0.5},
		{"a move beyond the band applies", cfg(func(c *conf.Feedback) { c.Smoothing = 0 }),
			State{}, []float64{50, 61}, 61, 0.39},
		{"a bound applies within the band", cfg(func(c *conf.Feedback) { c.Smoothing, c.HysteresisPercent = 0, 50 }),
			State{}, []float64{50, 100}, 100, 0.1},
		{"an idle server gets its whole weight back", cfg(nil), State{},
			[]float64{50, 0, 0, 0, 0, 0, 0, 0, 0}, 0, 1},
		{"a saturated server reaches the floor", cfg(nil), State{},
			[]float64{0, 100, 100, 100, 100, 100, 100, 100, 100}, 100, 0.1},
		{"new bounds apply at once", cfg(func(c *conf.Feedback) { c.MaxWeightPercent = 50 }),
			State{Samples: 3, Load: 0, Share: 1}, []float64{0}, 0, 0.5},
		{"min above max is read as max", cfg(func(c *conf.Feedback) { c.MinWeightPercent, c.MaxWeightPercent = 90, 50 }),
			State{}, []float64{100}, 100, 0.5},
		{"zero config means defaults but no smoothing or band", conf.Feedback{}, State{}, []float64{10, 30}, 30, 0.7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.start
			for i, l := range tt.loads {
				var err error
				if s, err = Next(s, l, tt.c); err != nil {
					t.Fatalf("Next(load %d: %g) = %v", i, l, err)
				}
			}
			if !near(s.Load, tt.wantLoad) || !near(s.Share, tt.wantShare) {
				t.Errorf("after %v: load %g share %g, want load %g share %g", tt.loads, s.Load, s.Share, tt.wantLoad, tt.wantShare)
			}
			if want := tt.start.Samples + uint64(len(tt.loads)); s.Samples != want || s.Last != tt.loads[len(tt.loads)-1] {
				t.Errorf("samples %d last %g, want %d %g", s.Samples, s.Last, want, tt.loads[len(tt.loads)-1])
			}
		})
	}
}

func TestNextNoFlapping(t *testing.T) {
	// Loads jumping around 50 within the band never move the weight,
	// even unsmoothed.
	for _, smoothing := range []float64{0, 0.5, 0.9} {
		c := cfg(func(c *conf.Feedback) { c.Smoothing = smoothing })
		s, _ := Next(State{}, 50, c)
		for i := range 200 {
			l := 50 + float64(i%9-4)*2.2 // 41.2 .. 58.8
			var err error
			if s, err = Next(s, l, c); err != nil {
				t.Fatal(err)
			}
			if s.Share != 0.5 {
				t.Fatalf("smoothing %g: load %g moved the share to %g", smoothing, l, s.Share)
			}
		}
	}
}

func TestNextRefusesGarbage(t *testing.T) {
	s0 := State{Samples: 4, Last: 30, Load: 31, Share: 0.7}
	for _, tt := range []struct {
		load float64
		want error
	}{
		{math.NaN(), ErrNotNumber},
		{math.Inf(1), ErrNotNumber},
		{math.Inf(-1), ErrNotNumber},
		{-0.5, ErrOutOfRange},
		{100.01, ErrOutOfRange},
		{1e9, ErrOutOfRange},
	} {
		s, err := Next(s0, tt.load, cfg(nil))
		if !errors.Is(err, tt.want) {
			t.Errorf("Next(%g) error = %v, want %v", tt.load, err, tt.want)
		}
		if s != s0 {
			t.Errorf("Next(%g) changed the state to %+v", tt.load, s)
		}
	}
}

func TestWeight(t *testing.T) {
	tests := []struct {
		name       string
		s          State
		configured int
		c          conf.Feedback
		want       int
	}{
		{"no data: configured", State{}, 100, cfg(nil), 100},
		{"share", State{Samples: 1, Share: 0.7}, 100, cfg(nil), 70},
		{"rounds to nearest", State{Samples: 1, Share: 0.55}, 3, cfg(nil), 2},
		{"at least 1 with a floor", State{Samples: 1, Share: 0.1}, 1, cfg(nil), 1},
		{"at least 1 with a floor, small share", State{Samples: 1, Share: 0.1}, 4, cfg(nil), 1},
		{"0 with min 0", State{Samples: 1, Share: 0}, 100, cfg(func(c *conf.Feedback) { c.MinWeightPercent = 0 }), 0},
		{"quiescent stays", State{Samples: 1, Share: 1}, 0, cfg(nil), 0},
		{"quiescent stays without data", State{}, 0, cfg(nil), 0},
		{"negative is 0", State{Samples: 1, Share: 1}, -3, cfg(nil), 0},
		{"bounds of the current config", State{Samples: 1, Share: 1}, 100, cfg(func(c *conf.Feedback) { c.MaxWeightPercent = 50 }), 50},
		{"floor of the current config", State{Samples: 1, Share: 0.1}, 100, cfg(func(c *conf.Feedback) { c.MinWeightPercent = 30 }), 30},
		{"large weight", State{Samples: 1, Share: 0.333}, 65535, cfg(nil), 21823},
	}
	for _, tt := range tests {
		if got := Weight(tt.s, tt.configured, tt.c); got != tt.want {
			t.Errorf("%s: Weight(%+v, %d) = %d, want %d", tt.name, tt.s, tt.configured, got, tt.want)
		}
	}
}

func TestParseLoad(t *testing.T) {
	good := map[string]float64{
		"37": 37, " 37.5\n": 37.5, "37.5%": 37.5, "0": 0, "100": 100, "100.0": 100,
		".5": 0.5, "5.": 5, "+5": 5, "\t42\r\n": 42, "007": 7,
	}
	for in, want := range good {
		got, err := ParseLoad(in)
		if err != nil || got != want {
			t.Errorf("ParseLoad(%q) = %g, %v, want %g", in, got, err, want)
		}
	}
	bad := []struct {
		in, want string
		err      error
	}{
		{"", `"" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"abc", `"abc" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"NaN", `"NaN" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"inf", `"inf" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"1e2", `"1e2" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"0x10", `"0x10" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"1 2", `"1 2" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"1,5", `"1,5" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"42\n43", `"42\n43" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{"50%%", `"50%%" is not a number (want the load in percent, e.g. 37.5)`, ErrNotNumber},
		{strings.Repeat("1", 65), "not a number: 65 bytes, want one number", ErrNotNumber},
		{"150", "150 is out of range 0..100", ErrOutOfRange},
		{"-1", "-1 is out of range 0..100", ErrOutOfRange},
		{"100.01", "100.01 is out of range 0..100", ErrOutOfRange},
	}
	for _, tt := range bad {
		_, err := ParseLoad(tt.in)
		if err == nil || err.Error() != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("ParseLoad(%q) = %v, want %s", tt.in, err, tt.want)
		}
	}
}
