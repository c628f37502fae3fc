package conn

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkDependentLoad is the machine's memory latency as a table's
// lookups meet it: one random 64-byte line after another, each load
// waiting for the last, in memory mapped as the tables are (hugeSlice:
// 2 MiB transparent huge pages). Past the last-level cache every size
// costs a DRAM access; what grows beyond that is the page walk. On
// bare metal with huge pages, 512 MiB costs about what 64 MiB does; a
// VM whose host backs the guest's memory with 4 KiB pages walks two
// page tables on every miss of its TLB reach (perf/README.md, round
// ten).
func BenchmarkDependentLoad(b *testing.B) {
	for _, mib := range []int{8, 16, 64, 512} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			const line = 8 // uint64s in a 64-byte line
			n := mib << 20 / 64
			owner := &Table{} // the mapping lives as long as it does
			mem := hugeSlice[uint64](n*line, owner)
			// One cycle through every line in random order.
			order := rand.Perm(n)
			for i, l := range order {
				mem[l*line] = uint64(order[(i+1)%n] * line)
			}
			at := uint64(order[0] * line)
			for range n { // fault everything in, warm the TLB as it can be
				at = mem[at]
			}
			for b.Loop() {
				at = mem[at]
			}
			sink = at
			runtime.KeepAlive(owner)
		})
	}
}

var sink uint64
