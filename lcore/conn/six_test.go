package conn

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

func a6(s string) hdr.Addr6 { return hdr.Addr6From(netip.MustParseAddr(s)) }

// foldTwin returns an address other than a that folds to the same value
// (the fold's first round is a bijection of the high half; the low half
// then cancels the difference).
func foldTwin(a hdr.Addr6) hdr.Addr6 {
	round := func(h0 uint64) uint64 {
		x := (h0 ^ foldKey[0]) * mulA
		return x ^ x>>32
	}
	h0 := binary.BigEndian.Uint64(a[:8])
	h1 := binary.BigEndian.Uint64(a[8:])
	var b hdr.Addr6
	binary.BigEndian.PutUint64(b[:8], h0+1)
	binary.BigEndian.PutUint64(b[8:], round(h0)^h1^round(h0+1))
	return b
}

// TestInsert6: an IPv6 entry is found in both directions by its full
// addresses, never by an IPv4 lookup of its folds nor by another address
// with the same fold; Delete frees it.
func TestInsert6(t *testing.T) {
	tb, err := NewWithSeed(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := &Addrs6{Client: a6("2001:db8::1"), VIP: a6("2001:db8::10"), RIP: a6("fd00::11")}
	c := &Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}
	if _, err := tb.Insert6(c, a); !errors.Is(err, ErrNoSix) {
		t.Fatalf("without EnableSix: %v", err)
	}
	tb.EnableSix()
	id, err := tb.Insert6(c, a)
	if err != nil {
		t.Fatal(err)
	}
	if got, d, ok := tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80); !ok || got != id || d != Original {
		t.Fatalf("original: %d %v %v", got, d, ok)
	}
	if got, d, ok := tb.Lookup6(6, &a.RIP, 8080, &a.Client, 1000); !ok || got != id || d != Reply {
		t.Fatalf("reply: %d %v %v", got, d, ok)
	}
	e := tb.Get(id)
	if !e.IsIPv6() || tb.Addrs6(id) == nil || *tb.Addrs6(id) != *a {
		t.Fatalf("entry %+v addrs %+v", e, tb.Addrs6(id))
	}
	if _, _, ok := tb.Lookup(6, e.ClientIP, 1000, e.VIP, 80); ok {
		t.Fatal("an IPv4 lookup of the folds matched an IPv6 entry")
	}
	twin := foldTwin(a.Client)
	if twin == a.Client || Fold6(&twin) != Fold6(&a.Client) {
		t.Fatal("foldTwin did not make a twin")
	}
	if _, _, ok := tb.Lookup6(6, &twin, 1000, &a.VIP, 80); ok {
		t.Fatal("another address with the same fold matched")
	}
	// The twin is a connection of its own.
	b := *a
	b.Client = twin
	id2, err := tb.Insert6(&Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}, &b)
	if err != nil || id2 == id {
		t.Fatalf("twin insert: %d %v", id2, err)
	}
	if got, _, ok := tb.Lookup6(6, &a.RIP, 8080, &twin, 1000); !ok || got != id2 {
		t.Fatalf("twin reply: %d %v", got, ok)
	}
	if _, err := tb.Insert6(&Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}, a); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	tb.Delete(id)
	if _, _, ok := tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80); ok || tb.Addrs6(id) != nil {
		t.Fatal("deleted entry still found")
	}
	if got, _, ok := tb.Lookup6(6, &twin, 1000, &a.VIP, 80); !ok || got != id2 {
		t.Fatal("twin lost by the delete")
	}
}

// TestLookup6DoesNotAllocate guards the IPv6 lookup of the packet path.
func TestLookup6DoesNotAllocate(t *testing.T) {
	tb, _ := NewWithSeed(64, 1)
	tb.EnableSix()
	a := &Addrs6{Client: a6("2001:db8::1"), VIP: a6("2001:db8::10"), RIP: a6("fd00::11")}
	if _, err := tb.Insert6(&Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}, a); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80) }); n != 0 {
		t.Fatalf("Lookup6 allocates %v times", n)
	}
}

// TestInsert6Ext: a NAT64 entry is found by the IPv6 client's packet and
// by the IPv4 server's reply to the local address, by nothing else.
func TestInsert6Ext(t *testing.T) {
	tb, _ := NewWithSeed(64, 1)
	tb.EnableSix()
	tb.EnableExt()
	a := &Addrs6{Client: a6("2001:db8::1"), VIP: a6("2001:db8::10")}
	x := &Ext{LIP: 0xC6336401, LPort: 2000}
	c := &Conn{Proto: 6, ClientPort: 1000, VPort: 80, RIP: 0xC633640B, RPort: 8080, Fwd: 3}
	id, err := tb.Insert6Ext(c, a, x)
	if err != nil {
		t.Fatal(err)
	}
	if got, d, ok := tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80); !ok || got != id || d != Original {
		t.Fatalf("client side: %d %v %v", got, d, ok)
	}
	if got, d, ok := tb.Lookup(6, 0xC633640B, 8080, 0xC6336401, 2000); !ok || got != id || d != Reply {
		t.Fatalf("server side: %d %v %v", got, d, ok)
	}
	e := tb.Get(id)
	if _, _, ok := tb.Lookup(6, e.ClientIP, 1000, e.VIP, 80); ok {
		t.Fatal("an IPv4 lookup of the client's folds matched")
	}
	if tb.Ext(id) == nil || tb.Addrs6(id) == nil {
		t.Fatal("extension or addresses missing")
	}
	if _, err := tb.Insert6Ext(&Conn{Proto: 6, ClientPort: 1001, VPort: 80, RIP: 0xC633640B, RPort: 8080}, a, x); !errors.Is(err, ErrExists) {
		t.Fatalf("same local port: %v", err)
	}
	tb.Delete(id)
	if _, _, ok := tb.Lookup(6, 0xC633640B, 8080, 0xC6336401, 2000); ok {
		t.Fatal("deleted entry found")
	}
}

// TestInsert6Full: an FNAT66 entry is found by the client's packet and by
// the server's reply to the local address, both IPv6, by their full
// addresses: never by an IPv4 lookup of the folds, nor by the reply to
// the client (NAT66's key), nor by a local address that folds alike.
func TestInsert6Full(t *testing.T) {
	tb, _ := NewWithSeed(64, 1)
	tb.EnableSix()
	tb.EnableExt()
	a := &Addrs6{Client: a6("2001:db8::1"), VIP: a6("2001:db8::10"), RIP: a6("2001:db8:1::11"), LIP: a6("2001:db8:1::100")}
	x := &Ext{LPort: 2000}
	c := &Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080, Fwd: 3}
	id, err := tb.Insert6Full(c, a, x)
	if err != nil {
		t.Fatal(err)
	}
	if got, d, ok := tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80); !ok || got != id || d != Original {
		t.Fatalf("client side: %d %v %v", got, d, ok)
	}
	if got, d, ok := tb.Lookup6(6, &a.RIP, 8080, &a.LIP, 2000); !ok || got != id || d != Reply {
		t.Fatalf("server side: %d %v %v", got, d, ok)
	}
	if tb.Ext(id).LIP != Fold6(&a.LIP) || *tb.Addrs6(id) != *a {
		t.Fatalf("extension %+v, addresses %+v", tb.Ext(id), tb.Addrs6(id))
	}
	e := tb.Get(id)
	twin := foldTwin(a.LIP)
	for _, miss := range []func() bool{
		func() bool { _, _, ok := tb.Lookup(6, e.RIP, 8080, tb.Ext(id).LIP, 2000); return ok },
		func() bool { _, _, ok := tb.Lookup6(6, &a.RIP, 8080, &a.Client, 1000); return ok },
		func() bool { _, _, ok := tb.Lookup6(6, &a.RIP, 8080, &twin, 2000); return ok },
	} {
		if miss() {
			t.Fatal("found by a key that is not the entry's")
		}
	}
	if _, err := tb.Insert6Full(&Conn{Proto: 6, ClientPort: 1001, VPort: 80, RPort: 8080}, a, &Ext{LPort: 2000}); !errors.Is(err, ErrExists) {
		t.Fatalf("same local port: %v", err)
	}
	tb.Delete(id)
	if _, _, ok := tb.Lookup6(6, &a.RIP, 8080, &a.LIP, 2000); ok {
		t.Fatal("deleted entry found")
	}
}

// TestInsert6Seq: a NAT66 connection with an extension keeps NAT66's
// keys (its Reply key the server -> client one, IPv6), never an IPv4
// lookup's, and its extension is its own until deleted.
func TestInsert6Seq(t *testing.T) {
	tb, _ := NewWithSeed(64, 1)
	tb.EnableSix()
	tb.EnableExt()
	a := &Addrs6{Client: a6("2001:db8::1"), VIP: a6("2001:db8::10"), RIP: a6("fd00::11")}
	c := &Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}
	id, err := tb.Insert6Seq(c, a, &Ext{ClientISN: 7, ServerISN: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got, d, ok := tb.Lookup6(6, &a.Client, 1000, &a.VIP, 80); !ok || got != id || d != Original {
		t.Fatalf("client side: %d %v %v", got, d, ok)
	}
	if got, d, ok := tb.Lookup6(6, &a.RIP, 8080, &a.Client, 1000); !ok || got != id || d != Reply {
		t.Fatalf("server side: %d %v %v", got, d, ok)
	}
	e := tb.Get(id)
	if _, _, ok := tb.Lookup(6, e.RIP, 8080, e.ClientIP, 1000); ok {
		t.Fatal("an IPv4 lookup of the reply's folds matched")
	}
	if x := tb.Ext(id); x == nil || x.ClientISN != 7 || x.ServerISN != 9 || tb.Addrs6(id) == nil {
		t.Fatalf("extension %+v or addresses missing", x)
	}
	if _, err := tb.Insert6Seq(&Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}, a, &Ext{}); !errors.Is(err, ErrExists) {
		t.Fatalf("same connection again: %v", err)
	}
	tb.Delete(id)
	if _, _, ok := tb.Lookup6(6, &a.RIP, 8080, &a.Client, 1000); ok {
		t.Fatal("deleted entry found")
	}
	id2, err := tb.Insert6(&Conn{Proto: 6, ClientPort: 1000, VPort: 80, RPort: 8080}, a)
	if err != nil || tb.Ext(id2) != nil {
		t.Fatalf("a plain NAT66 entry after it: %v, extension %+v", err, tb.Ext(id2))
	}
}

// TestBytesPerConn: an IPv4 connection costs its 64-byte entry, four
// 8-byte index cells, a 4-byte free-list slot and a 4-byte expiry bound
// (104 bytes); an IPv6 one the 64-byte address array besides (168); the
// FullNAT extension 32.
func TestBytesPerConn(t *testing.T) {
	for _, tc := range []struct {
		six, ext bool
		want     float64
	}{{false, false, 104}, {true, false, 168}, {false, true, 136}, {true, true, 200}} {
		got, err := BytesPerConn(1<<16, tc.six, tc.ext)
		if err != nil || got != tc.want {
			t.Errorf("six %v ext %v: %v bytes per connection (%v), want %v", tc.six, tc.ext, got, err, tc.want)
		}
	}
	if Addrs6Size != 64 {
		t.Errorf("Addrs6Size %d", Addrs6Size)
	}
}
