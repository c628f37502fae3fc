package conn

import (
	"testing"
	"time"
)

// TestSweepBoundsFollowExpiry: the sweep's per-entry bound never lets an
// entry outlive its Expires: a connection whose state takes a shorter
// timeout (ESTABLISHED to CLOSE) is removed at the new time, one moved
// earlier by SetExpires too; one kept alive by its packets survives
// every sweep, and the sweep raises its bound so later sweeps skip its
// entry; a deleted entry's bound is never due.
func TestSweepBoundsFollowExpiry(t *testing.T) {
	tb, err := NewWithSeed(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	to := DefaultTimeouts()
	sec := int64(time.Second)
	insert := func(port uint16, now int64) (uint32, *Conn) {
		id, err := tb.Insert(&Conn{Proto: 6, ClientIP: 1, ClientPort: port, VIP: 2, VPort: 80, RIP: 3, RPort: 8080, State: StateEstablished})
		if err != nil {
			t.Fatal(err)
		}
		c := tb.Get(id)
		tb.Touch(c, Original, now, &to)
		return id, c
	}
	now := 10 * sec
	closing, cc := insert(1000, now)
	moved, _ := insert(1001, now)
	alive, ac := insert(1002, now)
	gone, _ := insert(1003, now)
	tb.Delete(gone)
	if tb.due[gone] != dueNever {
		t.Fatal("a deleted entry's bound can come due")
	}

	tb.Expire(now, tb.Cap(), nil) // nothing due: the bounds rise to 900 s on
	if tb.due[closing] != dueBound(now+900*sec) {
		t.Fatalf("bound %d after a sweep, want %d", tb.due[closing], dueBound(now+900*sec))
	}
	// The closing connection's FIN exchange ends in CLOSE (10 s), far
	// sooner than ESTABLISHED's 900 s it was last touched with.
	cc.State = StateClose
	tb.Touch(cc, Reply, now, &to)
	tb.SetExpires(moved, now+5*sec)
	for step := int64(1); step <= 20; step++ {
		now += sec
		tb.Touch(ac, Original, now, &to) // its packets keep it alive
		tb.Expire(now, tb.Cap(), nil)
		if got := tb.Get(moved) != nil; got != (now < 15*sec) {
			t.Fatalf("at %d s the moved connection live=%v", now/sec, got)
		}
		if got := tb.Get(closing) != nil; got != (now < 20*sec) {
			t.Fatalf("at %d s the closing connection live=%v", now/sec, got)
		}
		if tb.Get(alive) == nil {
			t.Fatalf("at %d s the busy connection expired", now/sec)
		}
	}
	if b := tb.due[alive]; b <= dueBound(now) || b > dueBound(ac.Expires) {
		t.Fatalf("the busy connection's bound %d: not raised past now (%d) to at most its expiry (%d)", b, dueBound(now), dueBound(ac.Expires))
	}
}
