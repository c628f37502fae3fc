package conf

import "strconv"

// EALArgs returns the argument list for rte_eal_init, starting with prog:
//
//	prog --file-prefix P (--no-huge | --huge-unlink) -m MB -l CPU --main-lcore CPU
//	     {--vdev DEV | -a PCI}... [--no-pci] ExtraArgs...
//
// --huge-unlink removes the hugepage files as soon as they are mapped, so
// lbd never leaves hugepages reserved behind it, even when it is killed.
// Only the main lcore is an EAL lcore: the workers are Go threads that
// register with DPDK later. --vdev and -a follow the order of the ports;
// --no-pci is added when no port is a PCI device.
func (c Config) EALArgs(prog string) []string {
	cpu := strconv.Itoa(c.EAL.MainCPU)
	args := []string{prog, "--file-prefix", c.EAL.FilePrefix}
	if c.EAL.HugePages {
		args = append(args, "--huge-unlink")
	} else {
		args = append(args, "--no-huge")
	}
	args = append(args, "-m", strconv.Itoa(c.EAL.MemoryMB), "-l", cpu, "--main-lcore", cpu)
	pci := false
	for _, p := range c.Ports {
		if p.IsPCI() {
			pci = true
			args = append(args, "-a", p.Device)
		} else {
			args = append(args, "--vdev", p.Device)
		}
	}
	if !pci {
		args = append(args, "--no-pci")
	}
	return append(args, c.EAL.ExtraArgs...)
}
