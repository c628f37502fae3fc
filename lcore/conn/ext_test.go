package conn

import (
	"errors"
	"testing"
)

// TestInsertExt: a FullNAT entry is found from the client's side and from
// the server's reply to its local address, never from a reply to the
// client; deleting it frees both keys and clears the extension.
func TestInsertExt(t *testing.T) {
	tb, err := NewWithSeed(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	c := &Conn{Proto: 6, ClientIP: 1, ClientPort: 1000, VIP: 2, VPort: 80, RIP: 3, RPort: 8080}
	x := &Ext{LIP: 4, LPort: 2000, SeqIn: 28}
	if _, err := tb.InsertExt(c, x); !errors.Is(err, ErrNoExt) {
		t.Fatalf("without EnableExt: %v", err)
	}
	tb.EnableExt()
	id, err := tb.InsertExt(c, x)
	if err != nil {
		t.Fatal(err)
	}
	if got, d, ok := tb.Lookup(6, 1, 1000, 2, 80); !ok || got != id || d != Original {
		t.Fatalf("client side: %d %v %v", got, d, ok)
	}
	if got, d, ok := tb.Lookup(6, 3, 8080, 4, 2000); !ok || got != id || d != Reply {
		t.Fatalf("reply to the LIP: %d %v %v", got, d, ok)
	}
	if _, _, ok := tb.Lookup(6, 3, 8080, 1, 1000); ok {
		t.Fatal("a reply to the client matched a FullNAT entry")
	}
	if e := tb.Ext(id); e == nil || e.LIP != 4 || e.SeqIn != 28 {
		t.Fatalf("Ext = %+v", e)
	}
	// Another client on the same local port and server is refused.
	if _, err := tb.InsertExt(&Conn{Proto: 6, ClientIP: 9, ClientPort: 1, VIP: 2, VPort: 80, RIP: 3, RPort: 8080}, x); !errors.Is(err, ErrExists) {
		t.Fatalf("same reply key: %v", err)
	}
	// A NAT entry beside it has no extension.
	nid, err := tb.Insert(&Conn{Proto: 6, ClientIP: 5, ClientPort: 1, VIP: 2, VPort: 80, RIP: 3, RPort: 8080})
	if err != nil || tb.Ext(nid) != nil {
		t.Fatalf("NAT entry: %v, ext %v", err, tb.Ext(nid))
	}
	if err := tb.CheckIndex(); err != nil {
		t.Fatal(err)
	}
	tb.Delete(id)
	if _, _, ok := tb.Lookup(6, 3, 8080, 4, 2000); ok {
		t.Fatal("deleted entry still found")
	}
	if tb.ext[id] != (Ext{}) {
		t.Fatal("extension not cleared")
	}
	if err := tb.CheckIndex(); err != nil {
		t.Fatal(err)
	}
}
