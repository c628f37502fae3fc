package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dplb/dplb/conf"
)

const nic = "0000:03:00.0"

// fakeHost writes a /proc and /sys tree: files by path, symlinks by path.
func fakeHost(t *testing.T, files, links map[string]string) Host {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return Host{Root: root}
}

// goodFiles is a tuned two-node host: the NIC, CPUs 2-3 and hugepages on
// node 0, CPUs 2-3 isolated, IRQs kept on 0-1.
func goodFiles() (map[string]string, map[string]string) {
	files := map[string]string{
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":                 "512",
		"sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages":               "512",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages":              "0",
		"sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages": "512",
		"sys/devices/system/node/node0/cpulist":                                 "0-3",
		"proc/mounts":                                                           "sysfs /sys sysfs rw 0 0\nnodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0",
		"sys/bus/pci/devices/" + nic + "/vendor":                                "0x8086",
		"sys/bus/pci/devices/" + nic + "/device":                                "0x1572",
		"sys/bus/pci/devices/" + nic + "/numa_node":                             "0",
		"sys/bus/pci/drivers/vfio-pci/bind":                                     "",
		"sys/kernel/iommu_groups/17/type":                                       "DMA",
		"sys/devices/system/cpu/online":                                         "0-3",
		"sys/devices/system/cpu/isolated":                                       "2-3",
		"sys/devices/system/cpu/nohz_full":                                      "2-3",
		"sys/devices/system/cpu/cpu2/node0/x":                                   "",
		"sys/devices/system/cpu/cpu3/node0/x":                                   "",
		"proc/cmdline":                                                          "BOOT_IMAGE=/vmlinuz ro isolcpus=2-3 nohz_full=2-3 irqaffinity=0-1",
		"proc/irq/24/smp_affinity_list":                                         "0-1",
		"proc/irq/25/smp_affinity_list":                                         "1",
	}
	links := map[string]string{"sys/bus/pci/devices/" + nic + "/driver": "../../../bus/pci/drivers/vfio-pci"}
	return files, links
}

func testConfig() conf.Config {
	return conf.Config{
		EAL:       conf.EAL{MemoryMB: 512, HugePages: true, MainCPU: 0},
		Dataplane: conf.Dataplane{Workers: []int{2, 3}},
		Ports: []conf.Port{
			{Name: "client", Device: nic + ",rxq_pkt_fill=2"}, // arguments after the address
			{Name: "server", Device: "net_af_packet1,iface=eth1"},
		},
	}
}

func byCheck(fs []Finding) map[string][]Finding {
	m := map[string][]Finding{}
	for _, f := range fs {
		m[f.Check] = append(m[f.Check], f)
	}
	return m
}

func TestDoctorTunedHost(t *testing.T) {
	files, links := goodFiles()
	fs := Run(fakeHost(t, files, links), testConfig(), nil)
	for _, f := range fs {
		if f.Status == Warn || f.Status == Fail {
			t.Errorf("%s: %s: %s", f.Check, f.Status, f.Message)
		}
	}
	if Failed(fs) {
		t.Fatal("Failed on a tuned host")
	}
	m := byCheck(fs)
	for _, check := range []string{"config", "hugepages", "hugetlbfs", "nic client", "nic client numa", "iommu", "isolation", "irqs"} {
		if len(m[check]) == 0 || m[check][0].Status != OK {
			t.Errorf("check %q: %+v, want ok", check, m[check])
		}
	}
	if f := m["nic client offloads"]; len(f) != 1 || f[0].Status != Info || !strings.Contains(f[0].Message, "once DPDK probes") {
		t.Errorf("offloads: %+v: want an info that says they are known only after probing", f)
	}
	if f := m["nic server"]; len(f) != 1 || !strings.Contains(f[0].Message, "no checksum offload") {
		t.Errorf("af_packet port: %+v", f)
	}
}

func TestDoctorUntunedHost(t *testing.T) {
	files, _ := goodFiles()
	files["sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"] = "0"
	files["sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"] = "0"
	files["proc/mounts"] = "sysfs /sys sysfs rw 0 0"
	files["sys/bus/pci/devices/"+nic+"/numa_node"] = "1"
	files["sys/devices/system/node/node1/cpulist"] = "4-7"
	files["sys/devices/system/cpu/isolated"] = ""
	files["sys/devices/system/cpu/nohz_full"] = ""
	files["proc/cmdline"] = "BOOT_IMAGE=/vmlinuz ro"
	files["proc/irq/30/smp_affinity_list"] = "0-3"
	files["sys/devices/system/cpu/cpu0/node0/x"] = ""
	delete(files, "sys/kernel/iommu_groups/17/type")
	links := map[string]string{"sys/bus/pci/devices/" + nic + "/driver": "../../../bus/pci/drivers/i40e"}
	cfg := testConfig()
	cfg.Dataplane.Workers = []int{0, 2, 3}
	fs := Run(fakeHost(t, files, links), cfg, nil)
	if !Failed(fs) {
		t.Fatal("not Failed on an untuned host")
	}
	m := byCheck(fs)
	for _, c := range []struct {
		check  string
		status Status
		msg    string
		fix    string
	}{
		{"hugepages", Fail, "no hugepages reserved", "hugepages=256"},
		{"hugetlbfs", Fail, "no hugetlbfs", "mount -t hugetlbfs"},
		{"nic client", Fail, "kernel driver i40e", "dpdk-devbind.py -b vfio-pci " + nic},
		{"nic client numa", Warn, "NUMA node 1, worker CPUs 0,2,3", "node 1's CPUs (4-7)"},
		{"nic client numa", Warn, "NUMA node 1 (of " + nic + ") has no hugepages", "node1/hugepages"},
		{"iommu", Fail, "no IOMMU groups", "intel_iommu=on"},
		{"cpus", Warn, "also eal.main_cpu", "outside dataplane.workers"},
		{"isolation", Warn, "CPUs 0,2,3 are not isolated", "isolcpus=0,2,3 nohz_full=0,2,3"},
		{"irqs", Warn, "2 IRQs may run on worker CPUs 0,2,3 (IRQs 24 30)", "IRQBALANCE_BANNED_CPULIST=0,2,3"},
	} {
		var got *Finding
		for i, f := range m[c.check] {
			if f.Status == c.status && strings.Contains(f.Message, c.msg) {
				got = &m[c.check][i]
			}
		}
		if got == nil || !strings.Contains(got.Fix, c.fix) {
			t.Errorf("%s: %+v, want %s with %q, fix with %q", c.check, m[c.check], c.status, c.msg, c.fix)
		}
	}
}

func TestDoctorMissingDeviceAndBadConfig(t *testing.T) {
	files, links := goodFiles()
	cfg := testConfig()
	cfg.Ports[0].Device = "0000:04:00.1"
	m := byCheck(Run(fakeHost(t, files, links), cfg, nil))
	if f := m["nic client"]; len(f) != 1 || f[0].Status != Fail || !strings.Contains(f[0].Message, "no such PCI device") {
		t.Errorf("missing device: %+v", f)
	}
	fs := Run(fakeHost(t, files, links), conf.Config{}, errors.New(`ports[0].device: required`))
	if len(fs) != 1 || fs[0].Check != "config" || fs[0].Status != Fail || !strings.Contains(fs[0].Message, "ports[0].device") {
		t.Fatalf("bad config: %+v", fs)
	}
}

func TestDoctorOutput(t *testing.T) {
	files, links := goodFiles()
	fs := Run(fakeHost(t, files, links), testConfig(), nil)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, fs); err != nil {
		t.Fatal(err)
	}
	var back []Finding
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != len(fs) || back[0] != fs[0] {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
	buf.Reset()
	if err := WriteText(&buf, []Finding{{"iommu", Fail, "no IOMMU groups", "boot with intel_iommu=on"}}); err != nil {
		t.Fatal(err)
	}
	want := "[FAIL] iommu      no IOMMU groups\n                  fix: boot with intel_iommu=on\n"
	if buf.String() != want {
		t.Fatalf("text:\n%q\nwant\n%q", buf.String(), want)
	}
}

func TestCPUList(t *testing.T) {
	got := cpuList("managed_irq,domain,1-3,8, 10")
	for _, c := range []int{1, 2, 3, 8, 10} {
		if !got[c] {
			t.Errorf("%d missing from %v", c, got)
		}
	}
	if len(got) != 5 {
		t.Errorf("%v: want 5 CPUs", got)
	}
}

// TestDoctorKNI: a port's kernel interface needs /dev/net/tun.
func TestDoctorKNI(t *testing.T) {
	cfg := conf.Default()
	cfg.Ports = []conf.Port{{Name: "server", Device: "net_af_packet0,iface=veth0", Address: "198.51.100.1/24", KNI: "dpdk0.kni"}}
	find := func(fs []Finding) []Finding {
		var out []Finding
		for _, f := range fs {
			if f.Check == "kni server" {
				out = append(out, f)
			}
		}
		return out
	}
	f := find(Run(fakeHost(t, map[string]string{}, nil), cfg, nil))
	if len(f) != 1 || f[0].Status != Fail || !strings.Contains(f[0].Message, "no /dev/net/tun") || !strings.Contains(f[0].Fix, "modprobe tun") {
		t.Fatalf("without /dev/net/tun: %+v", f)
	}
	f = find(Run(fakeHost(t, map[string]string{"dev/net/tun": ""}, nil), cfg, nil))
	if len(f) != 1 || f[0].Status != OK {
		t.Fatalf("with /dev/net/tun: %+v", f)
	}
}
