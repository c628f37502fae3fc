package deploy

import (
	"runtime"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

// connBytes is what docs/deploy.md's sizing uses: bytes of memory per
// connection a table can hold (the entry, its free-list slot, its expiry
// bound and its index cells).
const connBytes = 104

// TestConnTableSizing measures a connection table's memory per entry, so
// that the sizing in docs/deploy.md follows the table if it changes.
func TestConnTableSizing(t *testing.T) {
	const capacity = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab, err := conn.New(capacity)
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// Large tables live partly outside the Go heap (huge-page mappings).
	per := float64(after.TotalAlloc-before.TotalAlloc+uint64(tab.MappedBytes())) / float64(tab.Cap())
	runtime.KeepAlive(tab)
	if tab.Cap() != capacity {
		t.Fatalf("capacity %d, want %d", tab.Cap(), capacity)
	}
	if per < connBytes*0.97 || per > connBytes*1.03 {
		t.Fatalf("the table takes %.1f bytes per connection; docs/deploy.md sizes with %d: update it", per, connBytes)
	}
	t.Logf("%.1f bytes per connection: %.1f M connections per GiB", per, float64(1<<30)/per/1e6)
}
