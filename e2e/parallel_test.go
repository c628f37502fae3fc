package e2e

import "testing"

// waitBound marks a test that spends most of its time waiting and little
// of it on a CPU: VRRP and BGP timers, a shutdown grace, TCP's
// retransmission backoff across a restart, streams that must keep moving
// for seconds. Such tests run in parallel with each other (up to go
// test's -parallel at a time; make test gives 4), after every sequential
// test has finished, so that the CPU-bound ones (floods, storms, rates)
// still run alone. Their assertions measure against their own timers
// (a takeover against keepalived's, a stall against the takeover it
// followed), not against the machine being idle.
func waitBound(t *testing.T) {
	t.Helper()
	t.Parallel()
}
