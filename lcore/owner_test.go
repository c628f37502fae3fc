package lcore

import (
	"encoding/binary"
	"encoding/hex"
	"testing"
)

// toeplitzRef is the Toeplitz hash bit by bit, as the RSS specification
// writes it: for every set input bit, the 32 key bits from its position.
func toeplitzRef(key, in []byte) uint32 {
	var h uint32
	for i := 0; i < 8*len(in); i++ {
		if in[i/8]>>(7-i%8)&1 == 0 {
			continue
		}
		var w uint32
		for j := 0; j < 32; j++ {
			b := i + j
			w = w<<1 | uint32(key[b/8]>>(7-b%8)&1)
		}
		h ^= w
	}
	return h
}

// msKey is the RSS verification key of Microsoft's specification (and of
// DPDK's test_thash.c).
var msKey, _ = hex.DecodeString("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")

// TestToeplitz: the reference gives the specification's verification
// values, and the table-driven hash of an endpoint (what a NIC hashes
// with L3/L4_SRC_ONLY) agrees with it, under that key and under the boot
// key.
func TestToeplitz(t *testing.T) {
	in := []byte{66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6} // src, dst, 2794, 1766
	if got := toeplitzRef(msKey, in[:8]); got != 0x323e8fc2 {
		t.Fatalf("IPv4 hash %#08x, want 0x323e8fc2", got)
	}
	if got := toeplitzRef(msKey, in); got != 0x51ccc178 {
		t.Fatalf("IPv4/TCP hash %#08x, want 0x51ccc178", got)
	}
	ms := toeplitzTable(msKey)
	for _, k := range []struct {
		name  string
		key   []byte
		table *[6][256]uint32
	}{{"specification key", msKey, &ms}, {"boot key", steerKey[:], &toeplitz}} {
		for i := uint32(0); i < 5000; i++ {
			ip, port := i*2654435761, uint16(i*40503)
			var b [6]byte
			binary.BigEndian.PutUint32(b[:], ip)
			binary.BigEndian.PutUint16(b[4:], port)
			if got, want := hashWith(k.table, ip, port), toeplitzRef(k.key, b[:]); got != want {
				t.Fatalf("%s: %x:%d hashes to %#08x, the reference to %#08x", k.name, ip, port, got, want)
			}
		}
	}
	if string(RSSKey(52)[40:]) != string(steerKey[:12]) || string(RSSKey(40)) != string(steerKey[:]) {
		t.Fatal("RSSKey is not the steering key")
	}
}

// TestOwnerIsKeyed: source ports a sender picked so that the old, public
// owner hash put all of them on worker 0 spread over every worker under
// the keyed one.
func TestOwnerIsKeyed(t *testing.T) {
	public := func(ip uint32, port uint16, n int) int { // the owner hash before it was keyed
		h := (ip * 0x9E3779B1) ^ (uint32(port) * 0x85EBCA77)
		h ^= h >> 15
		h *= 0x2C1B3C6D
		h ^= h >> 12
		return int(uint64(h) * uint64(n) >> 32)
	}
	var per [4]int
	crafted := 0
	for port := 1024; port < 65536 && crafted < 4000; port++ {
		if public(clientIP, uint16(port), 4) != 0 {
			continue
		}
		crafted++
		per[Owner(clientIP, uint16(port), 4)]++
	}
	for w, n := range per {
		if n < crafted/8 || n > crafted*3/8 {
			t.Fatalf("worker %d got %d of %d crafted flows: %v", w, n, crafted, per)
		}
	}
}

// TestSetSteeringKey: a configured key replaces the boot key for Owner
// and RSSKey; a wrong one is refused and changes nothing.
func TestSetSteeringKey(t *testing.T) {
	before := steerKey
	for _, bad := range [][]byte{nil, make([]byte, 40), make([]byte, 39)} {
		if SetSteeringKey(bad) == nil || steerKey != before {
			t.Fatalf("key %x accepted", bad)
		}
	}
	if err := SetSteeringKey(msKey); err != nil { // the key TestMain installs
		t.Fatal(err)
	}
	s, err := NewSteering(msKey)
	if err != nil {
		t.Fatal(err)
	}
	if string(RSSKey(40)) != string(msKey) {
		t.Fatal("RSSKey is not the configured key")
	}
	for i := uint32(0); i < 1000; i++ {
		ip, port := i*2654435761, uint16(i*40503)
		if a, b := Owner(ip, port, 4), s.Owner(ip, port, 4); a != b {
			t.Fatalf("%x:%d: Owner %d, Steering.Owner %d", ip, port, a, b)
		}
	}
}
