package doctor

import (
	"fmt"
	"strings"

	"github.com/dplb/dplb/conf"
)

// hugepages: enough 2 MiB or 1 GiB pages for eal.memory_mb, and hugetlbfs
// mounted.
func (h Host) hugepages(cfg conf.Config) []Finding {
	if !cfg.EAL.HugePages {
		return []Finding{{"hugepages", Warn, "eal.huge_pages is false: DPDK runs with --no-huge (fine for tests, slow and not for production)",
			"set eal.huge_pages: true and reserve hugepages"}}
	}
	var out []Finding
	totalMB, freeMB := 0, 0
	var sizes []string
	for _, sz := range []struct {
		dir string
		mb  int
	}{{"hugepages-2048kB", 2}, {"hugepages-1048576kB", 1024}} {
		nr, ok := h.readInt("sys/kernel/mm/hugepages/" + sz.dir + "/nr_hugepages")
		if !ok {
			continue
		}
		free, _ := h.readInt("sys/kernel/mm/hugepages/" + sz.dir + "/free_hugepages")
		totalMB += nr * sz.mb
		freeMB += free * sz.mb
		if nr > 0 {
			sizes = append(sizes, fmt.Sprintf("%d x %s (%d free)", nr, map[int]string{2: "2 MiB", 1024: "1 GiB"}[sz.mb], free))
		}
	}
	want := cfg.EAL.MemoryMB
	switch {
	case totalMB == 0:
		out = append(out, Finding{"hugepages", Fail, fmt.Sprintf("no hugepages reserved; eal.memory_mb needs %d MiB", want),
			fmt.Sprintf("reserve them at boot (kernel command line: default_hugepagesz=1G hugepagesz=1G hugepages=%d, or hugepages=%d for 2 MiB pages) or now: echo %d > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
				(want+1023)/1024, (want+1)/2, (want+1)/2)})
	case freeMB < want:
		out = append(out, Finding{"hugepages", Fail, fmt.Sprintf("%s: %d MiB free, eal.memory_mb needs %d MiB", strings.Join(sizes, ", "), freeMB, want),
			fmt.Sprintf("reserve more (at least %d more 2 MiB pages) or lower eal.memory_mb; another DPDK process may hold the rest", (want-freeMB+1)/2)})
	default:
		out = append(out, Finding{"hugepages", OK, fmt.Sprintf("%s: %d MiB free for eal.memory_mb %d MiB", strings.Join(sizes, ", "), freeMB, want), ""})
	}
	mounted := false
	for _, line := range strings.Split(h.read("proc/mounts"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "hugetlbfs" {
			mounted = true
		}
	}
	if mounted {
		out = append(out, Finding{"hugetlbfs", OK, "hugetlbfs is mounted", ""})
	} else {
		out = append(out, Finding{"hugetlbfs", Fail, "no hugetlbfs mounted: DPDK cannot map hugepages",
			"mkdir -p /dev/hugepages && mount -t hugetlbfs nodev /dev/hugepages (lbd.service does it before start)"})
	}
	return out
}
