package health

import (
	"context"
	"math/rand/v2"
	"time"
)

// Every runs probe once per interval until ctx ends, each run bounded by
// timeout, and hands each result to record with the time it came; record
// may ask for the next run sooner or later than interval (0: at the
// interval), counted from the start of the run it recorded. The
// first run comes at a random point within a tenth of the interval, so
// that many targets spread out. A run cut short by ctx's end is not
// recorded: its result means nothing. The health monitor and the feedback
// poller both run their targets this way.
func Every[T any](ctx context.Context, interval, timeout time.Duration, probe func(context.Context) T, record func(T, time.Time) time.Duration) {
	timer := time.NewTimer(rand.N(interval/10 + 1))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, timeout)
		res := probe(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		next := interval
		if d := record(res, time.Now()); d > 0 {
			next = d
		}
		timer.Reset(max(next-time.Since(start), 0))
	}
}
