package conn_test

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/dplb/dplb/lcore/conn"
)

const (
	tcp = 6
	udp = 17

	client = 0xC6336401 // 198.51.100.1
	vip    = 0xC0000201 // 192.0.2.1
	rs1    = 0x0A000001 // 10.0.0.1
	rs2    = 0x0A000002 // 10.0.0.2
)

func natConn(clientPort uint16, rip uint32) conn.Conn {
	return conn.Conn{
		Proto: tcp, ClientIP: client, ClientPort: clientPort,
		VIP: vip, VPort: 80, RIP: rip, RPort: 8080,
		State: conn.StateSynRecv, Dest: 7, Service: 3, Fwd: 1, Expires: 1000,
	}
}

func newTable(t testing.TB, capacity int) *conn.Table {
	t.Helper()
	tb, err := conn.NewWithSeed(capacity, 42)
	if err != nil {
		t.Fatalf("NewWithSeed(%d): %v", capacity, err)
	}
	return tb
}

func mustInsert(t testing.TB, tb *conn.Table, c conn.Conn) uint32 {
	t.Helper()
	id, err := tb.Insert(&c)
	if err != nil {
		t.Fatalf("Insert(%+v): %v", c, err)
	}
	return id
}

func TestConnLayout(t *testing.T) {
	if got := unsafe.Sizeof(conn.Conn{}); got != 64 {
		t.Fatalf("sizeof(Conn) = %d, want 64", got)
	}
	// Pointer-free: the GC must never scan the entry array.
	typ := reflect.TypeOf(conn.Conn{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Int64:
		case reflect.Array:
			if f.Type.Elem().Kind() != reflect.Uint8 {
				t.Errorf("field %s: array of %s", f.Name, f.Type.Elem())
			}
		default:
			t.Errorf("field %s has kind %s, want a plain integer", f.Name, f.Type.Kind())
		}
	}
}

func TestNewCapacity(t *testing.T) {
	tests := []struct {
		capacity int
		wantCap  int
		wantErr  error
	}{
		{capacity: -1, wantErr: conn.ErrCapacity},
		{capacity: 0, wantErr: conn.ErrCapacity},
		{capacity: conn.MaxCapacity + 1, wantErr: conn.ErrCapacity},
		{capacity: 1, wantCap: 1},
		{capacity: 2, wantCap: 2},
		{capacity: 3, wantCap: 4},
		{capacity: 1000, wantCap: 1024},
		{capacity: 1024, wantCap: 1024},
	}
	for _, tt := range tests {
		tb, err := conn.NewWithSeed(tt.capacity, 1)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("NewWithSeed(%d) error = %v, want %v", tt.capacity, err, tt.wantErr)
			continue
		}
		if err != nil {
			continue
		}
		if tb.Cap() != tt.wantCap || tb.Len() != 0 {
			t.Errorf("NewWithSeed(%d): Cap %d Len %d, want Cap %d Len 0", tt.capacity, tb.Cap(), tb.Len(), tt.wantCap)
		}
		if tb.IndexCells() != 4*tt.wantCap {
			t.Errorf("NewWithSeed(%d): %d index cells, want %d", tt.capacity, tb.IndexCells(), 4*tt.wantCap)
		}
	}
	if _, err := conn.New(16); err != nil {
		t.Errorf("New(16): %v", err)
	}
}

func TestLookupBothDirections(t *testing.T) {
	tb := newTable(t, 16)
	nat := natConn(40000, rs1)
	natID := mustInsert(t, tb, nat)
	dr := natConn(40001, rs2)
	dr.Flags = conn.FlagOneWay
	drID := mustInsert(t, tb, dr)

	type tuple struct {
		proto   uint8
		srcIP   uint32
		srcPort uint16
		dstIP   uint32
		dstPort uint16
	}
	tests := []struct {
		name    string
		pkt     tuple
		wantOK  bool
		wantID  uint32
		wantDir conn.Dir
	}{
		{"nat original", tuple{tcp, client, 40000, vip, 80}, true, natID, conn.Original},
		{"nat reply", tuple{tcp, rs1, 8080, client, 40000}, true, natID, conn.Reply},
		{"oneway original", tuple{tcp, client, 40001, vip, 80}, true, drID, conn.Original},
		{"oneway reply not indexed", tuple{tcp, rs2, 8080, client, 40001}, false, 0, 0},
		{"wrong proto", tuple{udp, client, 40000, vip, 80}, false, 0, 0},
		{"wrong client port", tuple{tcp, client, 40002, vip, 80}, false, 0, 0},
		{"wrong vport", tuple{tcp, client, 40000, vip, 443}, false, 0, 0},
		{"reversed original", tuple{tcp, vip, 80, client, 40000}, false, 0, 0},
		{"reply from other rs", tuple{tcp, rs2, 8080, client, 40000}, false, 0, 0},
		{"reply to vip instead of client", tuple{tcp, rs1, 8080, vip, 40000}, false, 0, 0},
	}
	for _, tt := range tests {
		p := tt.pkt
		id, dir, ok := tb.Lookup(p.proto, p.srcIP, p.srcPort, p.dstIP, p.dstPort)
		if ok != tt.wantOK || id != tt.wantID || dir != tt.wantDir {
			t.Errorf("%s: Lookup = (%d, %v, %v), want (%d, %v, %v)", tt.name, id, dir, ok, tt.wantID, tt.wantDir, tt.wantOK)
		}
	}

	got := tb.Get(natID)
	want := nat
	if got == nil || got.ClientIP != want.ClientIP || got.RIP != want.RIP || got.Dest != 7 ||
		got.Service != 3 || got.Fwd != 1 || got.Expires != 1000 || got.State != conn.StateSynRecv {
		t.Errorf("Get(%d) = %+v, want fields of %+v", natID, got, want)
	}
	if tb.Len() != 2 {
		t.Errorf("Len = %d, want 2", tb.Len())
	}
	if err := tb.CheckIndex(); err != nil {
		t.Error(err)
	}
}

func TestInsertErrors(t *testing.T) {
	base := natConn(40000, rs1)
	oneWay := natConn(41000, rs2)
	oneWay.Flags = conn.FlagOneWay

	sameOrig := natConn(40000, rs2) // same client->VIP key, other server
	sameReply := natConn(40000, rs1)
	sameReply.VPort = 443 // other original key, same rs1:8080 -> client:40000 reply key
	// The one-way entry's reply tuple is not indexed, so a NAT entry whose
	// reply key equals it is allowed.
	replyOfOneWay := natConn(41000, rs2)
	replyOfOneWay.VPort = 443
	degenerate := conn.Conn{Proto: tcp, ClientIP: rs1, ClientPort: 1, VIP: rs1, VPort: 1, RIP: rs1, RPort: 1}
	degenerateOneWay := degenerate
	degenerateOneWay.Flags = conn.FlagOneWay

	tests := []struct {
		name    string
		c       *conn.Conn
		wantErr error
	}{
		{"nil", nil, conn.ErrNilConn},
		{"same original key", &sameOrig, conn.ErrExists},
		{"same reply key", &sameReply, conn.ErrExists},
		{"one-way duplicate original", &oneWay, conn.ErrExists},
		{"reply key equals unindexed one-way reply", &replyOfOneWay, nil},
		{"original equals reply", &degenerate, conn.ErrExists},
		{"original equals reply but one-way", &degenerateOneWay, nil},
	}
	for _, tt := range tests {
		tb := newTable(t, 8)
		mustInsert(t, tb, base)
		mustInsert(t, tb, oneWay)
		_, err := tb.Insert(tt.c)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: Insert error = %v, want %v", tt.name, err, tt.wantErr)
		}
		wantLen := 2
		if tt.wantErr == nil {
			wantLen = 3
		}
		if tb.Len() != wantLen {
			t.Errorf("%s: Len = %d, want %d", tt.name, tb.Len(), wantLen)
		}
		if err := tb.CheckIndex(); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestFullNeverEvicts(t *testing.T) {
	tb := newTable(t, 4)
	ids := make([]uint32, 4)
	for i := range ids {
		c := natConn(uint16(50000+i), rs1)
		c.State = conn.StateEstablished
		ids[i] = mustInsert(t, tb, c)
	}
	extra := natConn(60000, rs2)
	if _, err := tb.Insert(&extra); !errors.Is(err, conn.ErrFull) {
		t.Fatalf("Insert into full table: %v, want ErrFull", err)
	}
	if tb.Len() != 4 {
		t.Fatalf("Len = %d after ErrFull, want 4", tb.Len())
	}
	for i, id := range ids {
		got, dir, ok := tb.Lookup(tcp, rs1, 8080, client, uint16(50000+i))
		if !ok || got != id || dir != conn.Reply || tb.Get(id).State != conn.StateEstablished {
			t.Errorf("entry %d after ErrFull: Lookup = (%d, %v, %v)", i, got, dir, ok)
		}
	}
	if _, _, ok := tb.Lookup(tcp, client, 60000, vip, 80); ok {
		t.Error("rejected connection is findable")
	}
	tb.Delete(ids[2])
	id, err := tb.Insert(&extra)
	if err != nil || id != ids[2] {
		t.Errorf("Insert after Delete = (%d, %v), want (%d, nil)", id, err, ids[2])
	}
	if err := tb.CheckIndex(); err != nil {
		t.Error(err)
	}
}

func TestDeleteAndReinsert(t *testing.T) {
	tb := newTable(t, 8)
	c := natConn(40000, rs1)
	id := mustInsert(t, tb, c)
	tb.Delete(id)
	if tb.Get(id) != nil || tb.Len() != 0 {
		t.Fatalf("after Delete: Get = %v, Len = %d", tb.Get(id), tb.Len())
	}
	for _, k := range [][5]uint32{{tcp, client, 40000, vip, 80}, {tcp, rs1, 8080, client, 40000}} {
		if _, _, ok := tb.Lookup(uint8(k[0]), k[1], uint16(k[2]), k[3], uint16(k[4])); ok {
			t.Errorf("key %v still found after Delete", k)
		}
	}
	// Deleting again, or an id that never existed, changes nothing.
	tb.Delete(id)
	tb.Delete(1 << 30)
	if tb.Get(1<<30) != nil || tb.Len() != 0 {
		t.Fatalf("Get(out of range) = %v, Len = %d", tb.Get(1<<30), tb.Len())
	}
	id2 := mustInsert(t, tb, c)
	if got, dir, ok := tb.Lookup(tcp, rs1, 8080, client, 40000); !ok || got != id2 || dir != conn.Reply {
		t.Errorf("reinserted reply Lookup = (%d, %v, %v), want (%d, Reply, true)", got, dir, ok, id2)
	}
	// Mutating Flags after Insert must not desynchronise Delete.
	tb.Get(id2).Flags |= conn.FlagOneWay
	tb.Delete(id2)
	if err := tb.CheckIndex(); err != nil {
		t.Error(err)
	}
	if _, _, ok := tb.Lookup(tcp, rs1, 8080, client, 40000); ok {
		t.Error("reply key survived Delete after Flags change")
	}
}

func TestExpireBudgetAndWrap(t *testing.T) {
	tb := newTable(t, 8)
	// Entries 0..7; the odd ones expire at 100, the even ones at 1000.
	for i := 0; i < 8; i++ {
		c := natConn(uint16(40000+i), rs1)
		c.Expires = 1000
		if i%2 == 1 {
			c.Expires = 100
		}
		if id := mustInsert(t, tb, c); id != uint32(i) {
			t.Fatalf("insert %d got id %d", i, id)
		}
	}
	var expired []uint32
	onExpire := func(id uint32, c *conn.Conn) {
		if c.ClientPort != uint16(40000+id) {
			t.Errorf("onExpire(%d) got port %d", id, c.ClientPort)
		}
		expired = append(expired, id)
	}
	steps := []struct {
		now         int64
		budget      int
		wantRemoved int
		wantIDs     []uint32
	}{
		{now: 50, budget: 8, wantRemoved: 0},                           // full pass, nothing due; cursor back at 0
		{now: 100, budget: 3, wantRemoved: 1, wantIDs: []uint32{1}},    // slots 0,1,2
		{now: 100, budget: 3, wantRemoved: 2, wantIDs: []uint32{3, 5}}, // slots 3,4,5
		{now: 100, budget: 3, wantRemoved: 1, wantIDs: []uint32{7}},    // slots 6,7, wraps to 0
		{now: 100, budget: 0, wantRemoved: 0},                          // no budget, no work
		{now: 100, budget: -5, wantRemoved: 0},                         // negative budget, no work
		{now: 2000, budget: 2, wantRemoved: 1, wantIDs: []uint32{2}},   // slots 1 (free), 2
	}
	for i, s := range steps {
		expired = expired[:0]
		got := tb.Expire(s.now, s.budget, onExpire)
		if got != s.wantRemoved || !reflect.DeepEqual(append([]uint32{}, expired...), append([]uint32{}, s.wantIDs...)) {
			t.Errorf("step %d: Expire(%d, %d) = %d, ids %v; want %d, ids %v", i, s.now, s.budget, got, expired, s.wantRemoved, s.wantIDs)
		}
	}
	// Survivors: 0, 4, 6 (not yet examined at now=2000) and nothing else.
	wantLive := map[uint32]bool{0: true, 4: true, 6: true}
	for id := uint32(0); id < 8; id++ {
		if (tb.Get(id) != nil) != wantLive[id] {
			t.Errorf("entry %d live = %v, want %v", id, tb.Get(id) != nil, wantLive[id])
		}
	}
	// A budget past Cap examines each slot once: all three go, in cursor order.
	expired = expired[:0]
	if got := tb.Expire(2000, 100, onExpire); got != 3 || !reflect.DeepEqual(expired, []uint32{4, 6, 0}) {
		t.Errorf("full sweep removed %d, ids %v; want 3, [4 6 0]", got, expired)
	}
	if tb.Len() != 0 {
		t.Errorf("Len = %d after full sweep", tb.Len())
	}
	if err := tb.CheckIndex(); err != nil {
		t.Error(err)
	}
	// A nil callback is allowed.
	mustInsert(t, tb, natConn(40000, rs1))
	if got := tb.Expire(5000, 8, nil); got != 1 || tb.Len() != 0 {
		t.Errorf("Expire with nil callback removed %d, Len %d", got, tb.Len())
	}
}

func TestRange(t *testing.T) {
	tb := newTable(t, 8)
	for i := 0; i < 5; i++ {
		mustInsert(t, tb, natConn(uint16(40000+i), rs1))
	}
	tb.Delete(1)
	var ids []uint32
	tb.Range(func(id uint32, c *conn.Conn) bool {
		if c.ClientPort != uint16(40000+id) {
			t.Errorf("Range(%d) port %d", id, c.ClientPort)
		}
		ids = append(ids, id)
		return true
	})
	if !reflect.DeepEqual(ids, []uint32{0, 2, 3, 4}) {
		t.Errorf("Range visited %v, want [0 2 3 4]", ids)
	}
	ids = ids[:0]
	tb.Range(func(id uint32, _ *conn.Conn) bool {
		ids = append(ids, id)
		return len(ids) < 2
	})
	if !reflect.DeepEqual(ids, []uint32{0, 2}) {
		t.Errorf("Range with early stop visited %v, want [0 2]", ids)
	}
	// Deleting the visited entry during Range is allowed.
	tb.Range(func(id uint32, _ *conn.Conn) bool { tb.Delete(id); return true })
	if tb.Len() != 0 {
		t.Errorf("Len = %d after deleting during Range", tb.Len())
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	tb := newTable(t, 1024)
	for i := 0; i < 512; i++ {
		mustInsert(t, tb, natConn(uint16(1000+i), rs1))
	}
	fresh := natConn(9999, rs2)
	single := newTable(t, 1)
	var n int
	onExpire := func(uint32, *conn.Conn) { n++ }
	timeouts := conn.DefaultTimeouts()
	tests := []struct {
		name string
		fn   func()
	}{
		{"Lookup hit", func() { tb.Lookup(tcp, rs1, 8080, client, 1100) }},
		{"Lookup miss", func() { tb.Lookup(tcp, rs2, 8080, client, 1100) }},
		{"Insert+Get+Delete", func() {
			id, err := tb.Insert(&fresh)
			if err != nil {
				t.Fatal(err)
			}
			tb.Get(id).State = conn.StateEstablished
			tb.Delete(id)
		}},
		{"Expire scan", func() { tb.Expire(0, 64, onExpire) }},
		{"Insert+Expire removal", func() {
			if _, err := single.Insert(&fresh); err != nil {
				t.Fatal(err)
			}
			if single.Expire(fresh.Expires, 1, onExpire) != 1 {
				t.Fatal("entry not expired")
			}
		}},
		{"NextTCPState", func() { conn.NextTCPState(conn.StateNone, conn.Original, conn.TCPFlagSYN, false) }},
		{"Timeouts.For", func() { _ = timeouts.For(conn.StateEstablished) }},
	}
	for _, tt := range tests {
		if got := testing.AllocsPerRun(1000, tt.fn); got != 0 {
			t.Errorf("%s: %v allocs/op, want 0", tt.name, got)
		}
	}
}

// TestExpireKeepsExtended: a callback that moves Expires past now keeps the
// entry (persistence templates with live connections).
func TestExpireKeepsExtended(t *testing.T) {
	tb, err := conn.NewWithSeed(16, 1)
	if err != nil {
		t.Fatal(err)
	}
	id, err := tb.Insert(&conn.Conn{Proto: 6, ClientIP: 1, ClientPort: 1, VIP: 2, VPort: 80, RIP: 3, RPort: 80, Expires: 100})
	if err != nil {
		t.Fatal(err)
	}
	keep := func(_ uint32, c *conn.Conn) { c.Expires = 500 }
	if n := tb.Expire(200, 16, keep); n != 0 || tb.Len() != 1 || tb.Get(id).Expires != 500 {
		t.Fatalf("extended entry removed: n %d len %d", n, tb.Len())
	}
	if n := tb.Expire(600, 16, func(uint32, *conn.Conn) {}); n != 1 || tb.Len() != 0 {
		t.Fatalf("entry not removed once the callback let it go: n %d", n)
	}
}

func TestScanInSteps(t *testing.T) {
	tb, _ := conn.NewWithSeed(64, 3)
	for i := 0; i < 20; i++ {
		if _, err := tb.Insert(&conn.Conn{Proto: 6, ClientIP: uint32(i + 1), ClientPort: 1, VIP: 2, VPort: 80, RIP: 3, RPort: 80}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint32]bool{}
	cursor, steps := uint32(0), 0
	for done := false; !done; steps++ {
		cursor, done = tb.Scan(cursor, 10, func(_ uint32, c *conn.Conn) { seen[c.ClientIP] = true })
	}
	if len(seen) != 20 || steps != 7 { // 64 slots, 10 a step
		t.Fatalf("saw %d connections in %d steps", len(seen), steps)
	}
}

// TestInsertHashed: InsertHashed and LookupHashed with the key's Hash are
// Insert and Lookup.
func TestInsertHashed(t *testing.T) {
	tab, err := conn.NewWithSeed(16, 7)
	if err != nil {
		t.Fatal(err)
	}
	c := conn.Conn{Proto: 6, ClientIP: 1, ClientPort: 1000, VIP: 2, VPort: 80, RIP: 3, RPort: 8080}
	h := tab.Hash(6, 1, 1000, 2, 80)
	id, err := tab.InsertHashed(&c, h)
	if err != nil {
		t.Fatal(err)
	}
	if got, dir, ok := tab.LookupHashed(h, 6, 1, 1000, 2, 80); !ok || got != id || dir != conn.Original {
		t.Fatalf("original: %d %v %v", got, dir, ok)
	}
	if got, dir, ok := tab.Lookup(6, 3, 8080, 1, 1000); !ok || got != id || dir != conn.Reply {
		t.Fatalf("reply: %d %v %v", got, dir, ok)
	}
	if _, err := tab.InsertHashed(&c, h); !errors.Is(err, conn.ErrExists) {
		t.Fatalf("second insertion: %v", err)
	}
	if _, err := tab.InsertHashed(nil, h); !errors.Is(err, conn.ErrNilConn) {
		t.Fatalf("nil: %v", err)
	}
	for i := uint16(1); tab.Len() < tab.Cap(); i++ {
		d := c
		d.ClientPort += i
		if _, err := tab.InsertHashed(&d, tab.Hash(6, 1, d.ClientPort, 2, 80)); err != nil {
			t.Fatal(err)
		}
	}
	d := c
	d.ClientPort = 1
	if _, err := tab.InsertHashed(&d, tab.Hash(6, 1, 1, 2, 80)); !errors.Is(err, conn.ErrFull) {
		t.Fatalf("full: %v", err)
	}
	if err := tab.CheckIndex(); err != nil {
		t.Fatal(err)
	}
}
