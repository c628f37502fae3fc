package feedback

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
)

// State is what is known of one server's load: the arithmetic's whole
// memory between two polls. The zero State is "no data yet": the server
// keeps its configured weight.
type State struct {
	Samples uint64  // good polls folded in so far; 0 = no data (Load, Share meaningless)
	Last    float64 // the last polled load, percent 0..100
	Load    float64 // the smoothed load, percent 0..100
	Share   float64 // the applied share of the configured weight, within the bounds
}

// snap is how close (in load points) the smoothed load must come to the
// polled one to take its value: a moving average otherwise only
// approaches a steady load, and an idle server would never get back its
// full weight.
const snap = 0.5

// Errors of ParseLoad and Next.
var (
	ErrNotNumber  = errors.New("not a number")
	ErrOutOfRange = errors.New("out of range 0..100")
)

// loadRE is what a load may look like: a plain decimal number, with an
// optional "%" (the unit, not a second meaning).
var loadRE = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)%?$`)

// maxLoadText is the longest load text ParseLoad reads.
const maxLoadText = 64

// ParseLoad parses a server's answer: one decimal number, the load in
// percent 0..100 ("37", "37.5", " 37.5%\n"), surrounded by white space at
// most. Anything else (two numbers, NaN, 1e2, 0x10, 150) is refused.
func ParseLoad(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if len(t) > maxLoadText {
		return 0, fmt.Errorf("%w: %d bytes, want one number", ErrNotNumber, len(t))
	}
	if !loadRE.MatchString(t) {
		return 0, fmt.Errorf("%q is %w (want the load in percent, e.g. 37.5)", t, ErrNotNumber)
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(t, "%"), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is %w: %v", t, ErrNotNumber, err)
	}
	if err := checkLoad(v); err != nil {
		return 0, err
	}
	return v, nil
}

func checkLoad(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%g is %w", v, ErrNotNumber)
	}
	if v < 0 || v > 100 {
		return fmt.Errorf("%g is %w", v, ErrOutOfRange)
	}
	return nil
}

// bounds returns the lowest and highest share of c (effective).
func bounds(c conf.Feedback) (lo, hi float64) {
	lo, hi = c.MinWeightPercent/100, c.MaxWeightPercent/100
	return min(lo, hi), hi
}

// Next folds one polled load (percent 0..100) into s under c and returns
// the new state. A load that is not a finite number in 0..100 is refused
// with s unchanged.
//
// The arithmetic (LVS's dynamic feedback, simplified to one load figure):
//
//	smoothed = c.Smoothing*previous + (1-c.Smoothing)*load   (the first load is taken as is;
//	                                                          within 0.5 points of load: load)
//	wanted   = 1 - smoothed/100, bounded to [min, max]_weight_percent/100
//	share    = wanted if |wanted - share| > hysteresis_percent/100,
//	           or wanted is a bound, or share is out of the bounds;
//	           else share unchanged
//
// where the share before the first load is 1 (the configured weight).
func Next(s State, load float64, c conf.Feedback) (State, error) {
	if err := checkLoad(load); err != nil {
		return s, err
	}
	c = c.Effective()
	prev := 1.0
	if s.Samples == 0 {
		s.Load = load
	} else {
		prev = s.Share
		s.Load = c.Smoothing*s.Load + (1-c.Smoothing)*load
		if math.Abs(s.Load-load) < snap {
			s.Load = load
		}
	}
	s.Samples++
	s.Last = load

	lo, hi := bounds(c)
	wanted := min(max(1-s.Load/100, lo), hi)
	switch {
	case math.Abs(wanted-prev) > c.HysteresisPercent/100,
		wanted != prev && (wanted == lo || wanted == hi),
		prev < lo || prev > hi:
		s.Share = wanted
	default:
		s.Share = prev
	}
	return s, nil
}

// Weight is the weight to schedule a server with, given its configured
// weight and its state under c: the configured weight with no data (or a
// configured weight of 0 or less: a quiescent server stays so), else the
// configured weight times the applied share, rounded to the nearest,
// kept within c's bounds (which a change of c may have moved) and at
// least 1 if c's min_weight_percent is above 0.
func Weight(s State, configured int, c conf.Feedback) int {
	if configured <= 0 {
		return max(configured, 0)
	}
	if s.Samples == 0 {
		return configured
	}
	c = c.Effective()
	lo, hi := bounds(c)
	share := min(max(s.Share, lo), hi)
	w := int(math.Round(float64(configured) * share))
	if c.MinWeightPercent > 0 {
		w = max(w, 1)
	}
	return min(w, configured)
}
