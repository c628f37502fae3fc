package conn_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
)

// testDefense is lbd's default defense.
var testDefense = conn.Defense{
	DropEntryPercent: 90, SecurePercent: 75, IdleAfter: time.Minute,
	SecureSYN: 10 * time.Second, SecureUDP: 10 * time.Second,
}

func defendedTable(t testing.TB, capacity int, d conn.Defense) *conn.Table {
	t.Helper()
	tb := newTable(t, capacity)
	if err := tb.SetDefense(d); err != nil {
		t.Fatal(err)
	}
	return tb
}

// spoofedSYN is the entry a spoofed SYN from client address i leaves: a
// NAT connection in SYN_RECV whose server's SYN-ACK goes nowhere.
func spoofedSYN(i int) conn.Conn {
	return conn.Conn{
		Proto: tcp, ClientIP: 0xC6330000 + uint32(i>>8), ClientPort: uint16(1024 + i&0xff),
		VIP: vip, VPort: 80, RIP: rs1, RPort: 8080, State: conn.StateSynRecv,
	}
}

// open inserts c as a new connection does in the worker: Relieve, Insert,
// then Touch with the packet that made it.
func open(t testing.TB, tb *conn.Table, c conn.Conn, now int64, to *conn.Timeouts) (uint32, error) {
	t.Helper()
	tb.Relieve(now, nil)
	id, err := tb.Insert(&c)
	if err == nil {
		tb.Touch(tb.Get(id), conn.Original, now, to)
	}
	return id, err
}

// TestFloodLeavesRoomForRealFlows: ten times the capacity in spoofed SYNs
// never evicts an established connection that is still active, never fills
// the table, and a real client connects during and after the flood.
func TestFloodLeavesRoomForRealFlows(t *testing.T) {
	const capacity = 1024
	tb := defendedTable(t, capacity, testDefense)
	to := conn.DefaultTimeouts()
	now := int64(time.Hour)

	established := make([]uint32, 300)
	for i := range established {
		c := natConn(uint16(10000+i), rs2)
		c.State = conn.StateEstablished
		id, err := open(t, tb, c, now, &to)
		if err != nil {
			t.Fatal(err)
		}
		established[i] = id
	}
	for i := range 10 * capacity {
		now += int64(time.Millisecond)
		if _, err := open(t, tb, spoofedSYN(i), now, &to); err != nil {
			t.Fatalf("spoofed SYN %d refused (%d entries): %v", i, tb.Len(), err)
		}
		if i%50 == 0 { // the established connections keep talking
			for _, id := range established {
				tb.Touch(tb.Get(id), conn.Reply, now, &to)
			}
		}
		switch i {
		case 5 * capacity: // a real client's SYN
			id, err := open(t, tb, natConn(40000, rs1), now, &to)
			if err != nil {
				t.Fatalf("real client during the flood: %v", err)
			}
			established = append(established, id)
		case 5*capacity + capacity/4: // its ACK, a few hundred spoofed SYNs later
			id, dir, ok := tb.Lookup(tcp, client, 40000, vip, 80)
			if !ok {
				t.Fatal("the real client's SYN_RECV entry was evicted before its ACK: eviction is not oldest first")
			}
			c := tb.Get(id)
			c.State = conn.NextTCPState(c.State, dir, conn.TCPFlagACK, false)
			tb.Touch(c, dir, now, &to)
		}
	}
	if tb.Len() == capacity {
		t.Error("the flood filled the table")
	}
	for i, id := range established {
		c := tb.Get(id)
		if c == nil || c.ClientIP != client || c.State != conn.StateEstablished {
			t.Fatalf("established connection %d evicted", i)
		}
		if _, _, ok := tb.Lookup(tcp, client, c.ClientPort, vip, 80); !ok {
			t.Fatalf("established connection %d not found", i)
		}
	}
	if tb.Evictions() == 0 {
		t.Error("Evictions() = 0 after the flood")
	}
	if secure, drop := tb.Pressure(); !secure || !drop {
		t.Errorf("Pressure() = (%v, %v) at the threshold, want both on", secure, drop)
	}
	if err := tb.CheckIndex(); err != nil {
		t.Fatal(err)
	}
}

// TestActiveEstablishedNeverEvicted: a table full of connections that are
// past their handshake and active refuses a new flow rather than cut one,
// from Relieve and from the expiry sweep alike; once they are idle for
// IdleAfter, they may go.
func TestActiveEstablishedNeverEvicted(t *testing.T) {
	const capacity = 256
	tb := defendedTable(t, capacity, testDefense)
	to := conn.DefaultTimeouts()
	for s := range to.ByState {
		to.ByState[s] = time.Hour // nothing times out here: only eviction could remove
	}
	now := int64(time.Hour)
	states := []conn.State{conn.StateEstablished, conn.StateFinWait, conn.StateCloseWait, conn.StateLastAck}
	for i := range capacity {
		c := natConn(uint16(10000+i), rs1)
		c.State = states[i%len(states)]
		if _, err := open(t, tb, c, now, &to); err != nil {
			t.Fatal(err)
		}
	}
	now += int64(testDefense.IdleAfter) - int64(time.Second)
	for i := range 4 * capacity {
		if tb.Relieve(now, nil) {
			t.Fatalf("Relieve %d evicted an active connection", i)
		}
	}
	if n := tb.Expire(now, capacity, nil); n != 0 {
		t.Fatalf("Expire removed %d active connections", n)
	}
	syn := spoofedSYN(1)
	if _, err := tb.Insert(&syn); !errors.Is(err, conn.ErrFull) {
		t.Fatalf("Insert into a table of active connections: %v, want ErrFull", err)
	}

	now += 2 * int64(time.Second) // now idle for IdleAfter
	if !tb.Relieve(now, nil) {
		t.Fatal("Relieve found no idle connection to evict")
	}
	if _, err := tb.Insert(&syn); err != nil {
		t.Fatalf("Insert after evicting an idle connection: %v", err)
	}
}

// TestNoPressureNoEviction: below drop_entry, and with the defense off,
// nothing is evicted however embryonic.
func TestNoPressureNoEviction(t *testing.T) {
	to := conn.DefaultTimeouts()
	for _, tc := range []struct {
		name string
		d    conn.Defense
		fill int
	}{
		{"below threshold", testDefense, 900},
		{"defense off", conn.Defense{}, 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := defendedTable(t, 1024, tc.d)
			for i := range tc.fill {
				if _, err := open(t, tb, spoofedSYN(i), 0, &to); err != nil {
					t.Fatal(err)
				}
			}
			if tb.Relieve(int64(time.Hour), nil) || tb.Expire(0, 1024, nil) != 0 || tb.Evictions() != 0 {
				t.Errorf("evicted with %d of 1024 entries, defense %+v", tb.Len(), tc.d)
			}
		})
	}
}

// TestShortTimeoutsUnderPressure: above the secure threshold embryonic
// entries get the short timeouts; connections past their handshake, and
// confirmed UDP, keep the configured ones.
func TestShortTimeoutsUnderPressure(t *testing.T) {
	to := conn.DefaultTimeouts()
	d := testDefense
	d.DropEntryPercent = 0
	tb := defendedTable(t, 128, d) // secure at 96 entries
	const now = int64(time.Hour)
	for i := range 95 {
		if _, err := open(t, tb, spoofedSYN(i), now, &to); err != nil {
			t.Fatal(err)
		}
	}
	if c := tb.Get(0); c.Expires != now+to.For(conn.StateSynRecv) {
		t.Fatalf("below the threshold: SYN_RECV expires in %v, want %v", time.Duration(c.Expires-now), to.ByState[conn.StateSynRecv])
	}
	if secure, _ := tb.Pressure(); secure {
		t.Fatal("secure on at 95 of 128")
	}
	for i := 95; i < 100; i++ {
		if _, err := open(t, tb, spoofedSYN(i), now, &to); err != nil {
			t.Fatal(err)
		}
	}

	udpNAT := func(port uint16) conn.Conn {
		return conn.Conn{Proto: udp, ClientIP: client, ClientPort: port, VIP: vip, VPort: 53, RIP: rs1, RPort: 53, State: conn.StateUDP}
	}
	udpDR := func(port uint16) conn.Conn {
		c := udpNAT(port)
		c.Flags = conn.FlagOneWay
		return c
	}
	est := natConn(30000, rs1)
	est.State = conn.StateEstablished
	tests := []struct {
		name    string
		c       conn.Conn
		packets []conn.Dir // after the first, Original
		want    time.Duration
	}{
		{"SYN_RECV", natConn(30001, rs1), nil, d.SecureSYN},
		{"ESTABLISHED", est, nil, to.ByState[conn.StateEstablished]},
		{"UDP, no reply", udpNAT(1), []conn.Dir{conn.Original}, d.SecureUDP},
		{"UDP, replied", udpNAT(2), []conn.Dir{conn.Reply}, to.ByState[conn.StateUDP]},
		{"UDP one-way, one packet", udpDR(3), nil, d.SecureUDP},
		{"UDP one-way, two packets", udpDR(4), []conn.Dir{conn.Original}, to.ByState[conn.StateUDP]},
	}
	for _, tt := range tests {
		id, err := open(t, tb, tt.c, now, &to)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		c := tb.Get(id)
		for _, dir := range tt.packets {
			tb.Touch(c, dir, now, &to)
		}
		if got := time.Duration(c.Expires - now); got != tt.want {
			t.Errorf("%s under pressure: timeout %v, want %v", tt.name, got, tt.want)
		}
	}
	if tb.ShortTimeouts() == 0 {
		t.Error("ShortTimeouts() = 0")
	}
}

func TestSetDefenseErrors(t *testing.T) {
	tb := newTable(t, 16)
	for _, tc := range []struct {
		d    conn.Defense
		want string
	}{
		{conn.Defense{DropEntryPercent: 101}, "DropEntryPercent"},
		{conn.Defense{SecurePercent: -1}, "SecurePercent"},
		{conn.Defense{IdleAfter: -1}, "IdleAfter"},
		{conn.Defense{SecureUDP: -time.Second}, "SecureUDP"},
	} {
		err := tb.SetDefense(tc.d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetDefense(%+v) = %v, want an error naming %s", tc.d, err, tc.want)
		}
	}
	if secure, drop := tb.Pressure(); secure || drop {
		t.Error("a refused defense was armed")
	}
}

func TestDefensePathDoesNotAllocate(t *testing.T) {
	to := conn.DefaultTimeouts()
	tb := defendedTable(t, 1024, testDefense)
	for i := range 1000 {
		if _, err := open(t, tb, spoofedSYN(i), 0, &to); err != nil {
			t.Fatal(err)
		}
	}
	onEvict := func(uint32, *conn.Conn) {}
	i := 1000
	fn := func() {
		c := spoofedSYN(i)
		i++
		tb.Relieve(0, onEvict)
		id, err := tb.Insert(&c)
		if err != nil {
			t.Fatal(err)
		}
		tb.Touch(tb.Get(id), conn.Original, 0, &to)
	}
	if got := testing.AllocsPerRun(1000, fn); got != 0 {
		t.Errorf("Relieve+Insert+Touch: %v allocs/op, want 0", got)
	}
}

// BenchmarkInsertUnderPressure is a new connection's table work at the
// drop_entry threshold: evict one entry, insert, touch. "flood" has only
// spoofed SYNs to evict; "active" has only active connections, so every
// Relieve scans its whole window in vain (the worst case) before the
// insert, which is then undone to stay at the threshold.
func BenchmarkInsertUnderPressure(b *testing.B) {
	to := conn.DefaultTimeouts()
	for _, bc := range []struct {
		name   string
		active bool
	}{{"flood", false}, {"active", true}} {
		for _, capacity := range []int{1 << 16, 1 << 20} {
			b.Run(fmt.Sprintf("%s/cap=%d", bc.name, capacity), func(b *testing.B) {
				tb := defendedTable(b, capacity, testDefense)
				fill := capacity * 90 / 100
				for i := range fill {
					c := spoofedSYN(i)
					if bc.active {
						c.State = conn.StateEstablished
					}
					if _, err := open(b, tb, c, 0, &to); err != nil {
						b.Fatal(err)
					}
				}
				i, now := fill, int64(time.Hour) // the fill is an hour old
				b.ReportAllocs()
				for b.Loop() {
					c := spoofedSYN(i)
					i++
					now += int64(time.Millisecond)
					tb.Relieve(now, nil)
					id, err := tb.Insert(&c)
					if err != nil {
						b.Fatal(err)
					}
					tb.Touch(tb.Get(id), conn.Original, now, &to)
					if bc.active {
						tb.Delete(id)
					}
				}
			})
		}
	}
}

// TestYoungEmbryonicSpared: a connection between its SYN and its ACK is
// not evicted while older embryonic entries can go instead; when all are
// that young (a flood faster than the grace), the oldest goes anyway.
func TestYoungEmbryonicSpared(t *testing.T) {
	to := conn.DefaultTimeouts()
	tb := defendedTable(t, 64, testDefense) // drop_entry at 57
	old := int64(time.Hour)
	for i := range 57 {
		if _, err := open(t, tb, spoofedSYN(i), old+int64(i)*int64(time.Millisecond), &to); err != nil {
			t.Fatal(err)
		}
	}
	now := old + int64(time.Second)
	tb.Touch(tb.Get(0), conn.Original, now, &to) // id 0, first under the hand: just seen
	if !tb.Relieve(now, nil) {
		t.Fatal("Relieve evicted nothing")
	}
	if tb.Get(0) == nil || tb.Get(1) != nil {
		t.Fatalf("evicted the young entry instead of the next old one (0 live: %v, 1 live: %v)", tb.Get(0) != nil, tb.Get(1) != nil)
	}

	// Everything younger than the grace: the oldest in the window goes.
	tb = defendedTable(t, 64, testDefense)
	for i := range 57 {
		if _, err := open(t, tb, spoofedSYN(i), old+int64(56-i)*int64(time.Millisecond), &to); err != nil {
			t.Fatal(err)
		}
	}
	if !tb.Relieve(old+int64(60*time.Millisecond), nil) {
		t.Fatal("a flood faster than the grace filled the table: nothing evicted")
	}
	if tb.Get(56) != nil { // inserted first, so seen longest ago
		t.Error("did not evict the oldest young entry")
	}
}
