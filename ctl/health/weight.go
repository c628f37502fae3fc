package health

import "time"

// EffectiveWeight is the weight to schedule a server that came up at
// upSince with, given its configured weight and the slow-start time: it
// ramps linearly from 1 (at upSince) to configured (at upSince+slowStart),
// rounding down. It is configured when slow start is off (slowStart <= 0),
// when upSince is zero (up from the start: no ramp), once the ramp is
// over, or when configured is 1 or less (a weight of 0 stays 0, a quiescent
// server). A clock before upSince gives 1.
//
// A down server's weight is 0 whatever this says: the caller applies it
// only to servers that are up.
func EffectiveWeight(configured int, upSince time.Time, now time.Time, slowStart time.Duration) int {
	if configured <= 1 || slowStart <= 0 || upSince.IsZero() {
		return max(configured, 0)
	}
	elapsed := now.Sub(upSince)
	switch {
	case elapsed <= 0:
		return 1
	case elapsed >= slowStart:
		return configured
	}
	return 1 + int(float64(configured-1)*float64(elapsed)/float64(slowStart))
}
