package conn_test

import (
	"encoding/binary"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// benchConn6 is benchConn's connection with IPv6 addresses: the client's
// low 32 bits and the real server's low byte vary as benchConn's IPv4
// ones do.
func benchConn6(i int) (conn.Conn, conn.Addrs6) {
	c := benchConn(i)
	var a conn.Addrs6
	for _, x := range []struct {
		p   *hdr.Addr6
		low uint32
	}{{&a.Client, c.ClientIP}, {&a.VIP, c.VIP}, {&a.RIP, c.RIP}} {
		x.p[0], x.p[1], x.p[2], x.p[3] = 0x20, 0x01, 0x0d, 0xb8
		binary.BigEndian.PutUint32(x.p[12:], x.low)
	}
	return c, a
}

// memAvailable is the kernel's estimate of memory available for a new
// allocation (MemAvailable), or 0 when unknown.
func memAvailable() int {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.Atoi(f[1])
			return kb << 10
		}
	}
	return 0
}

// BenchmarkLookup6 is BenchmarkLookupHit for IPv6 connections (NAT66):
// one lookup at a time, alternating directions, each waiting for the
// previous, at the same sizes. A hit reads the index cell, the entry and
// the entry's 64-byte address array slot (six.go). A size whose table
// would take more than half the available memory is skipped.
func BenchmarkLookup6(b *testing.B) {
	per, err := conn.BytesPerConn(1<<10, true, false)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCaps {
		b.Run(bc.name, func(b *testing.B) {
			type key struct {
				c conn.Conn
				a conn.Addrs6
			}
			if need := int(per * float64(bc.cap)); 2*need > memAvailable() {
				b.Skipf("a %d-entry IPv6 table needs %d MB: more than half of the available memory", bc.cap, need>>20)
			}
			tb, err := conn.NewWithSeed(bc.cap, 7)
			if err != nil {
				b.Fatal(err)
			}
			tb.EnableSix()
			for i := range bc.live {
				c, a := benchConn6(i) // Insert6 folds c's addresses
				if _, err := tb.Insert6(&c, &a); err != nil {
					b.Fatalf("insert %d: %v", i, err)
				}
			}
			b.ReportAllocs()
			i := 0
			var k key // the key in cache, as in a packet just received (benchConnIn)
			for b.Loop() {
				k.c, k.a = benchConn6(i)
				c, a := &k.c, &k.a
				var ok bool
				var id uint32
				if i&1 == 0 {
					id, _, ok = tb.Lookup6(c.Proto, &a.Client, c.ClientPort, &a.VIP, c.VPort)
				} else {
					id, _, ok = tb.Lookup6(c.Proto, &a.RIP, c.RPort, &a.Client, c.ClientPort)
				}
				if !ok {
					b.Fatal("miss")
				}
				i = (i + 7919 + int(id>>31)) % bc.live
			}
		})
	}
}
