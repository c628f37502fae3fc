package doctor

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/dplb/dplb/conf"
)

// cpus: worker CPUs exist, are isolated from the scheduler (isolcpus) and
// the tick (nohz_full), are not the main lcore's, and no IRQ may run on them.
func (h Host) cpus(cfg conf.Config) []Finding {
	var out []Finding
	workers := slices.Clone(cfg.Dataplane.Workers)
	slices.Sort(workers)
	workers = slices.Compact(workers)
	online := cpuList(h.read("sys/devices/system/cpu/online"))
	var missing []int
	for _, c := range append(slices.Clone(workers), cfg.EAL.MainCPU) {
		if len(online) > 0 && !online[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		out = append(out, Finding{"cpus", Fail, fmt.Sprintf("CPUs %s (eal.main_cpu, dataplane.workers) are not online (online: %s)", formatCPUs(missing), h.read("sys/devices/system/cpu/online")),
			"pick CPUs from /sys/devices/system/cpu/online"})
	}
	if slices.Contains(workers, cfg.EAL.MainCPU) {
		out = append(out, Finding{"cpus", Warn, fmt.Sprintf("worker CPU %d is also eal.main_cpu: the control plane and a worker share it", cfg.EAL.MainCPU),
			"give eal.main_cpu a CPU of its own, outside dataplane.workers"})
	}
	if len(workers) < len(cfg.Dataplane.Workers) {
		out = append(out, Finding{"cpus", Warn, "dataplane.workers repeats CPUs: polling lcores sharing a CPU take turns (tests only)",
			"one CPU per worker"})
	}
	cmdline := h.read("proc/cmdline")
	isolated := cpuList(h.read("sys/devices/system/cpu/isolated"))
	nohz := cpuList(h.read("sys/devices/system/cpu/nohz_full"))
	for _, arg := range strings.Fields(cmdline) {
		k, v, _ := strings.Cut(arg, "=")
		switch k {
		case "isolcpus":
			for c := range cpuList(v) {
				isolated[c] = true
			}
		case "nohz_full":
			for c := range cpuList(v) {
				nohz[c] = true
			}
		}
	}
	var notIso, notNohz []int
	for _, c := range workers {
		if !isolated[c] {
			notIso = append(notIso, c)
		}
		if !nohz[c] {
			notNohz = append(notNohz, c)
		}
	}
	list := formatCPUs(workers)
	bootFix := fmt.Sprintf("boot with isolcpus=%s nohz_full=%s rcu_nocbs=%s (and irqaffinity= the other CPUs)", list, list, list)
	switch {
	case len(notIso) > 0:
		out = append(out, Finding{"isolation", Warn, fmt.Sprintf("worker CPUs %s are not isolated: other tasks get scheduled on them (latency spikes, drops)", formatCPUs(notIso)), bootFix})
	case len(notNohz) > 0:
		out = append(out, Finding{"isolation", Warn, fmt.Sprintf("worker CPUs %s are isolated but still take the scheduler tick", formatCPUs(notNohz)), bootFix})
	default:
		out = append(out, Finding{"isolation", OK, fmt.Sprintf("worker CPUs %s are isolated (isolcpus, nohz_full)", list), ""})
	}
	out = append(out, h.irqs(workers))
	return out
}

// irqs lists the IRQs whose affinity includes a worker CPU.
func (h Host) irqs(workers []int) Finding {
	entries, err := os.ReadDir(h.path("proc/irq"))
	if err != nil {
		return Finding{"irqs", Info, "cannot read /proc/irq: IRQ affinity not checked", ""}
	}
	var shared []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		aff := cpuList(h.read("proc/irq/" + e.Name() + "/smp_affinity_list"))
		for _, c := range workers {
			if aff[c] {
				shared = append(shared, e.Name())
				break
			}
		}
	}
	if len(shared) == 0 {
		return Finding{"irqs", OK, "no IRQ may run on a worker CPU", ""}
	}
	sample := shared
	if len(sample) > 8 {
		sample = append(slices.Clone(sample[:8]), "...")
	}
	return Finding{"irqs", Warn, fmt.Sprintf("%d IRQs may run on worker CPUs %s (IRQs %s)", len(shared), formatCPUs(workers), strings.Join(sample, " ")),
		fmt.Sprintf("boot with irqaffinity=<the other CPUs>, or write them to /proc/irq/N/smp_affinity_list and keep irqbalance off the workers (IRQBALANCE_BANNED_CPULIST=%s)", formatCPUs(workers))}
}
