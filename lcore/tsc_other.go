//go:build !amd64

package lcore

import "time"

var tscEpoch = time.Now()

// readTSC stands in for the time-stamp counter where this package reads
// none: nanoseconds, so stage "cycles" are nanoseconds there.
func readTSC() uint64 { return uint64(time.Since(tscEpoch)) }
