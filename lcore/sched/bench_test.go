package sched

import (
	"fmt"
	"testing"
)

// sliceCounts is Counts as the lcore keeps them: arrays indexed by ID.
type sliceCounts struct{ active, inactive []uint32 }

func (s *sliceCounts) Active(id uint32) uint32   { return s.active[id] }
func (s *sliceCounts) Inactive(id uint32) uint32 { return s.inactive[id] }

// BenchmarkSchedule reports ns/op and allocs/op of Schedule for every
// algorithm over 2, 32 and 1024 real servers with mixed weights, uneven
// counts and thresholds on, over flows from many clients to 4096
// destination addresses.
func BenchmarkSchedule(b *testing.B) {
	for _, name := range Names() {
		for _, n := range []int{2, 32, 1024} {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				d := make([]Dest, n)
				c := &sliceCounts{active: make([]uint32, n), inactive: make([]uint32, n)}
				for i := range d {
					d[i] = Dest{ID: uint32(i), Addr: 0x0A000000 + uint32(i), Port: 80, Weight: int32(1 + i%5), Upper: 1 << 20}
					c.active[i] = uint32(i * 7 % 13)
					c.inactive[i] = uint32(i * 3 % 17)
				}
				s, err := New(name, d, Options{Flags: FlagFallback | FlagPort})
				if err != nil {
					b.Fatal(err)
				}
				fs := make([]Flow, 4096)
				for i := range fs {
					fs[i] = Flow{SrcIP: 0xC0000000 + uint32(i)*2654435761, DstIP: 0xCB000000 + uint32(i), SrcPort: uint16(i), DstPort: 80, Proto: 6}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					f := &fs[i&4095]
					f.Now = int64(i)
					s.Schedule(f, c)
				}
			})
		}
	}
}

// BenchmarkRoundRobinPlain: rr over 2 weighted real servers without
// thresholds (its turn without a search); x-search is the ratio to the
// same scheduler made to search (as with thresholds) in the same run.
func BenchmarkRoundRobinPlain(b *testing.B) {
	c := &sliceCounts{active: make([]uint32, 2), inactive: make([]uint32, 2)}
	var s Scheduler
	s, _ = New("rr", []Dest{{ID: 0, Weight: 1}, {ID: 1, Weight: 1}}, Options{})
	searched := *s.(*roundRobin)
	searched.pool = s.(*roundRobin).pool.copy()
	searched.plain = false
	var ref Scheduler = &searched
	f := &Flow{}
	sum := 0
	start := b.Elapsed()
	for i := 0; i < b.N; i++ {
		sum += ref.Schedule(f, c)
	}
	refTime := b.Elapsed() - start
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += s.Schedule(f, c)
	}
	b.StopTimer()
	if refTime > 0 {
		b.ReportMetric(float64(b.Elapsed())/float64(refTime), "x-search")
	}
	if sum < 0 {
		b.Fatal(sum)
	}
}
