package gen

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// TestUnsendNewSendsRefusedTuplesAgain: the SYN pattern hands out the
// client space in turn, and tuples given back (their frames refused by
// the TX queue) come out again next, across the wrap too, so that no
// tuple comes round again before the whole space has been sent.
func TestUnsendNewSendsRefusedTuplesAgain(t *testing.T) {
	g := &Gen{cfg: Config{Pattern: SYN, Clients: Range{First: 10, Last: 12}, ClientPorts: [2]uint16{1000, 1001}}}
	type tuple struct {
		src   uint32
		sport uint16
	}
	next := func() tuple {
		src, sport, fl := g.next(0, 0)
		if fl != hdr.TCPFlagSYN {
			t.Fatalf("flags %#x, want a SYN", fl)
		}
		return tuple{src, sport}
	}
	if g.tuples() != 6 {
		t.Fatalf("%d tuples, want 6", g.tuples())
	}
	var first []tuple
	for range 4 {
		first = append(first, next())
	}
	g.unsendNew(2) // the burst's last two were refused
	if a, b := next(), next(); a != first[2] || b != first[3] {
		t.Fatalf("after giving back two: %v %v, want %v %v", a, b, first[2], first[3])
	}
	seen := map[tuple]bool{}
	for _, k := range first {
		seen[k] = true
	}
	for range 2 {
		seen[next()] = true
	}
	if len(seen) != 6 {
		t.Fatalf("%d distinct tuples in one pass of 6: %v", len(seen), seen)
	}
	// At the wrap: newK is 0 again, and giving back one goes to the last.
	g.unsendNew(1)
	if k := next(); k != (tuple{12, 1001}) {
		t.Fatalf("given back across the wrap: %v, want the last tuple", k)
	}
	if k := next(); k != first[0] {
		t.Fatalf("then %v, want the first again", k)
	}
}
