package conn_test

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

// TestPrefault: Prefault leaves no page of a mapped table's entries and
// index to be faulted in by a later insertion, and does nothing to a
// table already in use.
func TestPrefault(t *testing.T) {
	tab, err := conn.NewWithSeed(1<<16, 1) // 4 MiB of entries, 16 MiB of index: mapped
	if err != nil {
		t.Fatal(err)
	}
	if tab.MappedBytes() == 0 {
		t.Skip("the table is in the Go heap (mapping failed)")
	}
	if r, n, err := tab.ResidentMapped(); err != nil {
		t.Fatal(err)
	} else if r == n {
		t.Fatalf("all %d pages resident before Prefault: the test shows nothing", n)
	}
	tab.Prefault()
	if r, n, err := tab.ResidentMapped(); err != nil {
		t.Fatal(err)
	} else if r != n {
		t.Fatalf("%d of %d pages resident after Prefault", r, n)
	}

	c := conn.Conn{Proto: 6, ClientIP: 1, ClientPort: 2, VIP: 3, VPort: 4, RIP: 5, RPort: 6}
	id, err := tab.Insert(&c)
	if err != nil {
		t.Fatal(err)
	}
	tab.Prefault() // in use: a no-op
	if got, dir, ok := tab.Lookup(6, 5, 6, 1, 2); !ok || got != id || dir != conn.Reply {
		t.Fatalf("after a second Prefault: %d %v %v", got, dir, ok)
	}
	if err := tab.CheckIndex(); err != nil {
		t.Fatal(err)
	}
}
