package sched

import (
	"reflect"
	"testing"
)

// The kernel's hash_32, golden values computed independently
// ((v * 0x61C88647) mod 2^32) >> 24.
func TestHash32(t *testing.T) {
	for _, tc := range []struct{ v, want uint32 }{
		{0xC0A80001, 192}, {0xC0A80002, 34}, {0x0A000001, 39}, {0xCB007105, 185}, {0x08080808, 188},
	} {
		if got := hash32(tc.v, 8); got != tc.want {
			t.Errorf("hash32(%#x, 8) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// The table fill of ip_vs_sh_reassign: each dest takes weight consecutive
// buckets in turn (a quiescent one takes one).
func TestHashTableFill(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int32
		head    []int32
		shares  []int
	}{
		{"4,3,2", []int32{4, 3, 2}, []int32{0, 0, 0, 0, 1, 1, 1, 2, 2, 0, 0, 0}, []int{116, 84, 56}},
		{"equal", []int32{1, 1, 1}, []int32{0, 1, 2, 0, 1, 2}, []int{86, 85, 85}},
		{"quiescent keeps one bucket", []int32{2, 0, 1}, []int32{0, 0, 1, 2, 0, 0, 1, 2}, []int{128, 64, 64}},
		{"one", []int32{7}, []int32{0, 0, 0}, []int{256}},
		{"heavier than the table", []int32{300, 1}, []int32{0, 0, 0}, []int{256, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := newHashTable(dests(tc.weights...), Options{})
			if got := tab.buckets[:len(tc.head)]; !reflect.DeepEqual(got, tc.head) {
				t.Errorf("buckets start %v, want %v", got, tc.head)
			}
			shares := make([]int, len(tc.weights))
			for _, b := range tab.buckets {
				shares[b]++
			}
			if !reflect.DeepEqual(shares, tc.shares) {
				t.Errorf("shares %v, want %v", shares, tc.shares)
			}
		})
	}
	if tab := newHashTable(nil, Options{}); tab.buckets[0] != -1 || tab.buckets[255] != -1 {
		t.Errorf("empty table not empty")
	}
}

// dh and sh lookups against independently computed buckets of the 4,3,2
// table, with and without fallback (IPVS's probe of bucket
// (roffset + hash) for roffset = hash, hash+1, ...).
func TestHashLookups(t *testing.T) {
	for _, tc := range []struct {
		sched  string
		flags  Flags
		ip     uint32
		port   uint16
		upper  [3]uint32 // 1 with counts {0,1} marks the dest overloaded
		quiet  int       // dest made quiescent, -1 none
		want   int
		reason string
	}{
		{"dh", 0, 0xC0A80001, 0, [3]uint32{}, -1, A, "bucket 192"},
		{"dh", 0, 0xC0A80002, 0, [3]uint32{}, -1, C, "bucket 34"},
		{"dh", 0, 0xCB007105, 0, [3]uint32{}, -1, B, "bucket 185"},
		{"dh", 0, 0xC0A80001, 0, [3]uint32{1, 0, 0}, -1, -1, "overloaded, no fallback"},
		{"dh", 0, 0xC0A80001, 0, [3]uint32{}, A, -1, "quiescent, no fallback"},
		{"dh", FlagFallback, 0xC0A80001, 0, [3]uint32{1, 0, 0}, -1, B, "probe offset 2: bucket 130"},
		{"dh", FlagFallback, 0xC0A80001, 0, [3]uint32{1, 1, 0}, -1, C, "probe offset 5: bucket 133"},
		{"dh", FlagFallback, 0x0A000001, 0, [3]uint32{}, A, B, "probe offset 0: bucket 78"},
		{"dh", FlagFallback, 0xCB007105, 0, [3]uint32{0, 1, 0}, -1, C, "probe offset 1: bucket 115"},
		{"dh", FlagFallback, 0xCB007105, 0, [3]uint32{1, 1, 1}, -1, -1, "all overloaded"},
		{"dh", FlagPort, 0x0A000001, 1236, [3]uint32{}, -1, A, "dh ignores ports"},
		{"sh", 0, 0x0A000001, 1236, [3]uint32{}, -1, A, "port not hashed: bucket 39"},
		{"sh", FlagPort, 0x0A000001, 1234, [3]uint32{}, -1, A, "bucket 128"},
		{"sh", FlagPort, 0x0A000001, 1236, [3]uint32{}, -1, B, "bucket 67"},
		{"sh", FlagPort, 0x0A000001, 1238, [3]uint32{}, -1, C, "bucket 7"},
		{"sh", 0, 0xC0A80001, 0, [3]uint32{1, 0, 0}, -1, -1, "overloaded, no fallback"},
		{"sh", FlagFallback, 0xC0A80001, 0, [3]uint32{1, 0, 0}, -1, B, "probe offset 2"},
		{"sh", FlagFallback | FlagPort, 0x0A000001 - 1236, 1236, [3]uint32{1, 0, 0}, -1, B, "same key as dh's 0x0A000001"},
	} {
		t.Run(tc.sched+"/"+tc.reason, func(t *testing.T) {
			d := dests(4, 3, 2)
			c := counts{}
			for i, u := range tc.upper {
				d[i].Upper = u
				c[uint32(i)] = [2]uint32{0, 1}
			}
			if tc.quiet >= 0 {
				// keep the 4,3,2 table, then quiesce one dest in it
				s := mustNew(t, tc.sched, dests(4, 3, 2), Options{Flags: tc.flags})
				switch s := s.(type) {
				case *destHashing:
					s.dests[tc.quiet].Weight = 0
				case *sourceHashing:
					s.dests[tc.quiet].Weight = 0
				}
				got := s.Schedule(&Flow{SrcIP: tc.ip, DstIP: tc.ip, SrcPort: tc.port}, c)
				if got != tc.want {
					t.Fatalf("got %d, want %d", got, tc.want)
				}
				return
			}
			s := mustNew(t, tc.sched, d, Options{Flags: tc.flags})
			if got := s.Schedule(&Flow{SrcIP: tc.ip, DstIP: tc.ip, SrcPort: tc.port}, c); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

// dh hashes the destination only, sh the source only: the same key gives
// the same server whatever else changes, and every lcore's instance agrees.
func TestHashStatic(t *testing.T) {
	d := dests(1, 2, 3, 4)
	dh1, dh2 := mustNew(t, "dh", d, Options{}), mustNew(t, "dh", d, Options{})
	sh1, sh2 := mustNew(t, "sh", d, Options{}), mustNew(t, "sh", d, Options{})
	for i, f := range flows(500) {
		g := f
		g.SrcIP, g.SrcPort, g.Now = g.SrcIP+1, g.SrcPort+1, g.Now+1e12
		if a, b := dh1.Schedule(&f, nil), dh2.Schedule(&g, nil); a != b || a < 0 {
			t.Fatalf("dh flow %d: %d vs %d", i, a, b)
		}
		g = f
		g.DstIP, g.SrcPort = g.DstIP+1, g.SrcPort+1
		if a, b := sh1.Schedule(&f, nil), sh2.Schedule(&g, nil); a != b || a < 0 {
			t.Fatalf("sh flow %d: %d vs %d", i, a, b)
		}
	}
}
