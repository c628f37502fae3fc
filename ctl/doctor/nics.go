package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
)

// PCI vendors whose NICs DPDK drives through their kernel driver
// (bifurcated): no vfio-pci binding.
var bifurcated = map[string]string{"0x15b3": "Mellanox/NVIDIA (mlx5)"}

// nics: each PCI port bound to vfio-pci (or a bifurcated driver), the
// IOMMU on, the NIC's NUMA node shared with the workers and holding
// hugepages, and what is known of its offloads.
func (h Host) nics(cfg conf.Config) []Finding {
	var out []Finding
	anyPCI := false
	for _, p := range cfg.Ports {
		check := "nic " + p.Name
		if !p.IsPCI() {
			out = append(out, vdevFinding(check, p.DeviceName()))
			continue
		}
		anyPCI = true
		addr := p.DeviceName()
		dev := "sys/bus/pci/devices/" + strings.ToLower(addr)
		if _, err := os.Stat(h.path(dev)); err != nil {
			out = append(out, Finding{check, Fail, fmt.Sprintf("%s: no such PCI device", addr),
				"check the address with lspci -D or dpdk-devbind.py --status"})
			continue
		}
		vendor, device := h.read(dev+"/vendor"), h.read(dev+"/device")
		driver := ""
		if l, err := os.Readlink(h.path(dev + "/driver")); err == nil {
			driver = filepath.Base(l)
		}
		switch {
		case driver == "vfio-pci":
			out = append(out, Finding{check, OK, fmt.Sprintf("%s (%s:%s) is bound to vfio-pci", addr, vendor, device), ""})
		case bifurcated[vendor] != "":
			out = append(out, Finding{check, OK, fmt.Sprintf("%s is a %s NIC: DPDK uses its kernel driver %q, no binding needed", addr, bifurcated[vendor], driver), ""})
		case driver == "":
			out = append(out, Finding{check, Fail, fmt.Sprintf("%s (%s:%s) has no driver", addr, vendor, device),
				fmt.Sprintf("modprobe vfio-pci && dpdk-devbind.py -b vfio-pci %s", addr)})
		default:
			out = append(out, Finding{check, Fail, fmt.Sprintf("%s (%s:%s) is bound to the kernel driver %s, not vfio-pci", addr, vendor, device, driver),
				fmt.Sprintf("ip link set <its interface> down; modprobe vfio-pci; dpdk-devbind.py -b vfio-pci %s (persist with driverctl set-override %s vfio-pci)", addr, addr)})
		}
		out = append(out, h.numa(check, addr, dev, cfg)...)
		out = append(out, Finding{check + " offloads", Info,
			fmt.Sprintf("RSS and checksum offload of %s are known only once DPDK probes it: lbd logs them at start (\"port up\": queues, tx_checksum_offload, rss_aligned)", addr),
			""})
	}
	if anyPCI {
		out = append(out, h.iommu())
	}
	return append(out, h.kernelInterfaces(cfg)...)
}

// kernelInterfaces: a port with a kernel interface (kni) needs the
// kernel's TUN/TAP driver.
func (h Host) kernelInterfaces(cfg conf.Config) []Finding {
	var out []Finding
	for _, p := range cfg.Ports {
		if p.KNI == "" {
			continue
		}
		check := "kni " + p.Name
		if _, err := os.Stat(h.path("dev/net/tun")); err != nil {
			out = append(out, Finding{check, Fail, fmt.Sprintf("kernel interface %s: no /dev/net/tun, so no TAP interface can be made", p.KNI),
				"load the tun module (modprobe tun), or drop the port's kni"})
			continue
		}
		out = append(out, Finding{check, OK, fmt.Sprintf("kernel interface %s: a TAP through /dev/net/tun", p.KNI), ""})
	}
	return out
}

// vdevFinding says what a virtual device means for performance.
func vdevFinding(check, name string) Finding {
	switch {
	case strings.HasPrefix(name, "net_af_packet"), strings.HasPrefix(name, "net_af_xdp"):
		return Finding{check, Info, fmt.Sprintf("%s is a kernel-socket virtual device: no binding, no checksum offload (checksums in software), and the kernel bounds its rate", name), ""}
	case strings.HasPrefix(name, "net_tap"):
		return Finding{check, Info, fmt.Sprintf("%s: a TAP device, checksum offload emulated in software; for tests", name), ""}
	}
	return Finding{check, Info, fmt.Sprintf("%s is a DPDK virtual device: no binding needed", name), ""}
}

// numa: the NIC's node against the workers' and the hugepages'.
func (h Host) numa(check, addr, dev string, cfg conf.Config) []Finding {
	node, ok := h.readInt(dev + "/numa_node")
	if !ok || node < 0 {
		return []Finding{{check + " numa", Info, fmt.Sprintf("%s reports no NUMA node (a single-node machine)", addr), ""}}
	}
	var out []Finding
	var far []int
	for _, c := range cfg.Dataplane.Workers {
		if n, ok := h.cpuNode(c); ok && n != node {
			far = append(far, c)
		}
	}
	if len(far) > 0 {
		out = append(out, Finding{check + " numa", Warn,
			fmt.Sprintf("%s is on NUMA node %d, worker CPUs %s are not: every packet crosses the interconnect", addr, node, formatCPUs(far)),
			fmt.Sprintf("put dataplane.workers on node %d's CPUs (%s)", node, h.read(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node)))})
	} else {
		out = append(out, Finding{check + " numa", OK, fmt.Sprintf("%s and the worker CPUs share NUMA node %d", addr, node), ""})
	}
	if cfg.EAL.HugePages {
		pages := 0
		for _, sz := range []string{"hugepages-2048kB", "hugepages-1048576kB"} {
			n, _ := h.readInt(fmt.Sprintf("sys/devices/system/node/node%d/hugepages/%s/nr_hugepages", node, sz))
			pages += n
		}
		if pages == 0 {
			out = append(out, Finding{check + " numa", Warn, fmt.Sprintf("NUMA node %d (of %s) has no hugepages: its packet buffers come from another node", node, addr),
				fmt.Sprintf("echo N > /sys/devices/system/node/node%d/hugepages/hugepages-2048kB/nr_hugepages", node)})
		}
	}
	return out
}

// cpuNode is the NUMA node of a CPU, from its nodeN link in sysfs.
func (h Host) cpuNode(cpu int) (int, bool) {
	m, _ := filepath.Glob(h.path(fmt.Sprintf("sys/devices/system/cpu/cpu%d/node*", cpu)))
	for _, p := range m {
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), "node")); err == nil {
			return n, true
		}
	}
	return 0, false
}

// iommu: vfio-pci needs an IOMMU (or the unsafe no-IOMMU mode).
func (h Host) iommu() Finding {
	groups, _ := os.ReadDir(h.path("sys/kernel/iommu_groups"))
	if len(groups) > 0 {
		return Finding{"iommu", OK, fmt.Sprintf("IOMMU on (%d groups)", len(groups)), ""}
	}
	if h.read("sys/module/vfio/parameters/enable_unsafe_noiommu_mode") == "Y" {
		return Finding{"iommu", Warn, "no IOMMU; vfio runs in unsafe no-IOMMU mode (the NIC can DMA anywhere)",
			"enable VT-d/AMD-Vi in the firmware and boot with intel_iommu=on iommu=pt (or amd_iommu=on)"}
	}
	return Finding{"iommu", Fail, "no IOMMU groups: vfio-pci cannot take the NICs",
		"enable VT-d/AMD-Vi in the firmware and boot with intel_iommu=on iommu=pt (or amd_iommu=on); in a VM without vIOMMU: echo Y > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode"}
}
