package conn_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
)

type tupleKey struct {
	proto            uint8
	srcIP, dstIP     uint32
	srcPort, dstPort uint16
}

type modelRef struct {
	id  uint32
	dir conn.Dir
}

// model is the reference the table is checked against: plain Go maps.
type model struct {
	keys  map[tupleKey]modelRef
	conns map[uint32]conn.Conn
}

func origKey(c *conn.Conn) tupleKey {
	return tupleKey{c.Proto, c.ClientIP, c.VIP, c.ClientPort, c.VPort}
}

func replyKey(c *conn.Conn) tupleKey {
	return tupleKey{c.Proto, c.RIP, c.ClientIP, c.RPort, c.ClientPort}
}

// randomConn draws from a small tuple space so that duplicate keys,
// shared reply keys and long probe runs all happen often.
func randomConn(r *rand.Rand) conn.Conn {
	c := conn.Conn{
		Proto:      []uint8{tcp, udp}[r.IntN(2)],
		ClientIP:   0xC6336400 + uint32(r.IntN(4)),
		ClientPort: uint16(1024 + r.IntN(64)),
		VIP:        vip + uint32(r.IntN(2)),
		VPort:      []uint16{80, 443}[r.IntN(2)],
		RIP:        rs1 + uint32(r.IntN(4)),
		RPort:      8080,
		Expires:    r.Int64(),
	}
	if r.IntN(4) == 0 {
		c.Flags = conn.FlagOneWay
	}
	return c
}

func TestModelRandomOps(t *testing.T) {
	for _, capacity := range []int{64, 256} {
		runModel(t, capacity, 100_000, uint64(capacity))
	}
}

func runModel(t *testing.T, capacity, ops int, seed uint64) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0xdead))
	tb, err := conn.NewWithSeed(capacity, seed)
	if err != nil {
		t.Fatal(err)
	}
	m := model{keys: map[tupleKey]modelRef{}, conns: map[uint32]conn.Conn{}}
	var counts [3]int // inserted, rejected, deleted

	for op := 0; op < ops; op++ {
		switch k := r.IntN(10); {
		case k < 5: // insert
			c := randomConn(r)
			var wantErr error
			ok, rk := origKey(&c), replyKey(&c)
			_, origTaken := m.keys[ok]
			_, replyTaken := m.keys[rk]
			twoWay := c.Flags&conn.FlagOneWay == 0
			switch {
			case len(m.conns) == tb.Cap():
				wantErr = conn.ErrFull
			case origTaken, twoWay && (replyTaken || ok == rk):
				wantErr = conn.ErrExists
			}
			id, err := tb.Insert(&c)
			if !errors.Is(err, wantErr) {
				t.Fatalf("cap %d op %d: Insert(%+v) = %v, want %v", capacity, op, c, err, wantErr)
			}
			if err != nil {
				counts[1]++
				break
			}
			counts[0]++
			if _, used := m.conns[id]; used {
				t.Fatalf("op %d: Insert returned live id %d", op, id)
			}
			m.conns[id] = c
			m.keys[ok] = modelRef{id, conn.Original}
			if twoWay {
				m.keys[rk] = modelRef{id, conn.Reply}
			}
		case k < 8: // delete a random live id, or a free one
			id := uint32(r.IntN(tb.Cap()))
			c, live := m.conns[id]
			tb.Delete(id)
			if !live {
				break
			}
			counts[2]++
			delete(m.conns, id)
			delete(m.keys, origKey(&c))
			if c.Flags&conn.FlagOneWay == 0 {
				delete(m.keys, replyKey(&c))
			}
		default: // lookup a random tuple in either shape
			c := randomConn(r)
			key := origKey(&c)
			if r.IntN(2) == 0 {
				key = replyKey(&c)
			}
			checkLookup(t, tb, key, m)
		}
		if tb.Len() != len(m.conns) {
			t.Fatalf("cap %d op %d: Len = %d, model %d", capacity, op, tb.Len(), len(m.conns))
		}
		if op%500 == 0 || op == ops-1 {
			verifyModel(t, tb, m)
		}
	}
	// The run must have exercised every path, or it proves little.
	if counts[0] < ops/10 || counts[1] < ops/50 || counts[2] < ops/10 {
		t.Errorf("cap %d: weak run: inserted %d, rejected %d, deleted %d", capacity, counts[0], counts[1], counts[2])
	}
}

func checkLookup(t *testing.T, tb *conn.Table, key tupleKey, m model) {
	t.Helper()
	want, wantOK := m.keys[key]
	id, dir, ok := tb.Lookup(key.proto, key.srcIP, key.srcPort, key.dstIP, key.dstPort)
	if ok != wantOK || (ok && (id != want.id || dir != want.dir)) {
		t.Fatalf("Lookup(%+v) = (%d, %v, %v), model (%d, %v, %v)", key, id, dir, ok, want.id, want.dir, wantOK)
	}
}

func verifyModel(t *testing.T, tb *conn.Table, m model) {
	t.Helper()
	if err := tb.CheckIndex(); err != nil {
		t.Fatal(err)
	}
	for key := range m.keys {
		checkLookup(t, tb, key, m)
	}
	for id, want := range m.conns {
		got := tb.Get(id)
		if got == nil || origKey(got) != origKey(&want) || replyKey(got) != replyKey(&want) || got.Expires != want.Expires {
			t.Fatalf("Get(%d) = %+v, model %+v", id, got, want)
		}
	}
}
