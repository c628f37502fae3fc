package sched

import (
	"reflect"
	"testing"
)

// Preview foretells the next Schedule and changes nothing: for every
// scheduler, a run of picks interleaved with previews equals the same run
// without them, and each preview equals the pick that follows it.
func TestPreviewForetellsAndChangesNothing(t *testing.T) {
	for _, name := range allNames {
		t.Run(name, func(t *testing.T) {
			d := dests(3, 0, 2, 1)
			d[3].Upper = 2 // thresholds keep state too
			c := counts{0: {1, 2}, 2: {0, 1}, 3: {2, 0}}
			plain := mustNew(t, name, d, Options{Flags: FlagFallback})
			watched := mustNew(t, name, d, Options{Flags: FlagFallback})
			if tw, ok := watched.(*powerOfTwo); ok { // same random source on both
				tw.seed(7)
				plain.(*powerOfTwo).seed(7)
			}
			for i := 0; i < 40; i++ {
				f := &Flow{SrcIP: 0xCB007100 + uint32(i%7), SrcPort: uint16(1000 + i), DstIP: 0xCB007164 + uint32(i%3), DstPort: 80, Proto: 6, Now: int64(i) * 1e9}
				want := plain.Schedule(f, c)
				got, ok := Preview(watched, f, c)
				again, _ := Preview(watched, f, c)
				if !ok {
					t.Fatalf("Preview does not know %s", name)
				}
				if got != want || again != want {
					t.Fatalf("pick %d: previews %d, %d; Schedule chose %d", i, got, again, want)
				}
				if real := watched.Schedule(f, c); real != want {
					t.Fatalf("pick %d: after previews Schedule chose %d, without them %d", i, real, want)
				}
			}
			if !reflect.DeepEqual(plain, watched) {
				t.Fatal("the previewed scheduler's state differs from the plain one's")
			}
		})
	}
}

func TestPreviewUnknownScheduler(t *testing.T) {
	if _, ok := Preview(unknownScheduler{}, &Flow{}, nil); ok {
		t.Fatal("Preview claims to know a scheduler it cannot copy")
	}
}

type unknownScheduler struct{}

func (unknownScheduler) Schedule(*Flow, Counts) int { return 0 }
