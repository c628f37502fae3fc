package e2e

import "testing"

// waitBound marks a test that spends most of its time waiting and little
// of it on a CPU: BGP timers and a shutdown grace (scale-out), TCP's
// retransmission backoff across an upgrade or restart, streams that must
// keep moving for seconds. Such tests run in parallel with each other (up
// to go test's -parallel at a time; make test gives 4), after every
// sequential test has finished, so that the CPU-bound ones (floods,
// storms, rates) still run alone. The keepalived pairs (TestFailover*,
// TestUpgradeMasterKeepsItsRole, TestRestartedBackupPullsTable) stay
// sequential: four at a time on two CPUs, fail back took 5-6 s where
// they allow 3 and streams stalled past their limits.
func waitBound(t *testing.T) {
	t.Helper()
	t.Parallel()
}
