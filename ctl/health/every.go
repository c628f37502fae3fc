package health

import (
	"context"
	"math/rand/v2"
	"time"
)

// Every runs probe once per interval until ctx ends, each run bounded by
// timeout, and hands each result to record with the time it came. The
// first run comes at a random point within a tenth of the interval, so
// that many targets spread out. A run cut short by ctx's end is not
// recorded: its result means nothing. The health monitor and the feedback
// poller both run their targets this way.
func Every[T any](ctx context.Context, interval, timeout time.Duration, probe func(context.Context) T, record func(T, time.Time)) {
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
		record(res, time.Now())
		timer.Reset(max(interval-time.Since(start), 0))
	}
}
