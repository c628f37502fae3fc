package runtime

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/spsc"
)

// The ports' kernel interfaces (ports[].kni; the lcores' side is
// lcore/kernel.go). Each is a TAP device lbd makes in its own network
// namespace, with the port's MAC, MTU and addresses, up. A pump goroutine
// writes what the workers hand to the kernel into it, and a reader per
// interface takes what the kernel writes, copies it into an mbuf and
// queues it for worker 0, which sends it out of the port. The syscalls and
// the copies are here, off the lcores.
//
// The interface is persistent: it outlives lbd (with no carrier while no
// lbd runs, so the kernel sends nothing through it), and the next lbd,
// after a restart, an upgrade or a crash, takes it up again, so what the
// operator put on it (routes, more addresses, firewall rules) stays, as
// on a NIC. `ip link delete NAME` removes it.

const (
	kernelRingSize = 1024
	// kernelIdleMin and kernelIdleMax bound the pump's sleep while the
	// workers hand it nothing: it doubles from the one to the other, and
	// a packet waits at most kernelIdleMax for the kernel.
	kernelIdleMin = 50 * time.Microsecond
	kernelIdleMax = time.Millisecond
	// kernelFrameMax is the largest frame read from an interface: a
	// frame of the largest MTU a port takes, with its Ethernet header.
	kernelFrameMax = 9702 + hdr.EthernetLen
)

// kernelPath is every port's kernel interface and the rings to and from
// the workers.
type kernelPath struct {
	log  *zap.Logger
	pool *mempool.Mempool
	taps []*os.File          // by port; nil: the port has none
	out  []*lcore.KernelRing // one per worker: the workers' packets for the kernel
	in   *lcore.KernelRing   // the kernel's frames, for worker 0
	inMu sync.Mutex          // the readers share in's producer side

	stop chan struct{}
	wg   sync.WaitGroup
	lost atomic.Uint64 // packets or frames dropped here (a write or read failed, no mbuf, a full ring)
}

// openKernelPath makes the kernel interfaces of the ports that ask for
// one (ports[i].kni) and the rings of workers workers; nil when no port
// does.
func openKernelPath(cfg conf.Config, ports []openPort, pool *mempool.Mempool, workers int, log *zap.Logger) (*kernelPath, error) {
	k := &kernelPath{log: log, pool: pool, taps: make([]*os.File, len(ports)), stop: make(chan struct{})}
	some := false
	for i, pc := range cfg.Ports {
		if pc.KNI == "" {
			continue
		}
		f, err := openTap(pc, ports[i].hw)
		if err != nil {
			k.closeTaps()
			return nil, fmt.Errorf("ports[%d] (%s).kni %q: %w", i, pc.Name, pc.KNI, err)
		}
		k.taps[i], some = f, true
		log.Info("kernel interface up", zap.String("port", pc.Name), zap.String("kni", pc.KNI),
			zap.String("mac", ports[i].hw.MAC.String()), zap.String("address", pc.Address), zap.String("address6", pc.Address6))
	}
	if !some {
		return nil, nil
	}
	for range workers {
		r, _ := spsc.New[*mbuf.Mbuf](kernelRingSize)
		k.out = append(k.out, r)
	}
	k.in, _ = spsc.New[*mbuf.Mbuf](kernelRingSize)
	k.wg.Add(1)
	go k.pump()
	for i, f := range k.taps {
		if f != nil {
			k.wg.Add(1)
			go k.read(i, f)
		}
	}
	return k, nil
}

// io is worker i's rings.
func (k *kernelPath) io(i int) lcore.KernelIO {
	if k == nil {
		return lcore.KernelIO{}
	}
	io := lcore.KernelIO{Out: k.out[i]}
	if i == 0 {
		io.In = k.in
	}
	return io
}

// has reports whether port i has a kernel interface.
func (k *kernelPath) has(i int) bool { return k != nil && k.taps[i] != nil }

// pump writes the workers' packets into their ports' interfaces until
// stop (close frees what is left).
func (k *kernelPath) pump() {
	defer k.wg.Done()
	idle := kernelIdleMin
	wake := time.NewTimer(idle)
	defer wake.Stop()
	for {
		moved := 0
		for _, r := range k.out {
			for {
				m, ok := r.Pop()
				if !ok {
					break
				}
				k.write(m)
				moved++
			}
		}
		if moved > 0 {
			idle = kernelIdleMin
			continue
		}
		wake.Reset(idle)
		select {
		case <-k.stop:
			return
		case <-wake.C:
		}
		idle = min(2*idle, kernelIdleMax)
	}
}

// write gives one packet to its port's interface and frees it.
func (k *kernelPath) write(m *mbuf.Mbuf) {
	defer m.Free()
	p := int(m.Port())
	if p >= len(k.taps) || k.taps[p] == nil {
		k.lose("a packet for a port without a kernel interface", nil)
		return
	}
	if _, err := k.taps[p].Write(m.Data()); err != nil {
		k.lose("writing to the kernel interface", err)
	}
}

// read queues the frames the kernel writes on port's interface for
// worker 0, until the interface is closed.
func (k *kernelPath) read(port int, f *os.File) {
	defer k.wg.Done()
	buf := make([]byte, kernelFrameMax)
	for {
		n, err := f.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				k.log.Warn("kernel interface: reading stopped", zap.Int("port", port), zap.Error(err))
			}
			return
		}
		if n < hdr.EthernetLen {
			continue
		}
		m, err := mbuf.Alloc(k.pool)
		if err != nil {
			k.lose("no mbuf for a frame from the kernel", err)
			continue
		}
		b, err := m.Append(n)
		if err != nil {
			m.Free()
			k.lose("a frame from the kernel larger than an mbuf", err)
			continue
		}
		copy(b, buf[:n])
		m.SetPort(uint16(port))
		k.inMu.Lock()
		ok := k.in.Push(m)
		k.inMu.Unlock()
		if !ok {
			m.Free()
			k.lose("the ring to worker 0 is full", nil)
		}
	}
}

// lose counts a packet lost here and logs the first of them.
func (k *kernelPath) lose(what string, err error) {
	if k.lost.Add(1) == 1 {
		k.log.Warn("kernel interface: a packet lost (further losses are counted, not logged)", zap.String("why", what), zap.Error(err))
	}
}

// close stops the pump and the readers (the workers have stopped), frees
// every packet still in the rings and lets go of the interfaces, which
// stay (persistent) for the next lbd.
func (k *kernelPath) close() {
	if k == nil {
		return
	}
	close(k.stop)
	k.closeTaps()
	k.wg.Wait()
	for _, r := range append(k.out, k.in) {
		for m, ok := r.Pop(); ok; m, ok = r.Pop() {
			m.Free()
		}
	}
	if n := k.lost.Load(); n > 0 {
		k.log.Info("kernel interfaces: packets lost", zap.Uint64("lost", n))
	}
}

func (k *kernelPath) closeTaps() {
	for _, f := range k.taps {
		if f != nil {
			f.Close()
		}
	}
}

// openTap makes (or takes up again) port pc's TAP interface, persistent,
// and gives it the port's MAC, MTU and addresses, up.
func openTap(pc conf.Port, hw lcore.PortInfo) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("/dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(pc.KNI)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("making the TAP interface (another interface of that name, or another lbd on it?): %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("making it persistent: %w", err)
	}
	f := os.NewFile(uintptr(fd), pc.KNI) // non-blocking: reads wait in the runtime's poller
	if err := configureTap(pc, hw); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// configureTap gives interface pc.KNI the port's MAC, MTU (within an
// mbuf's data room) and addresses, and brings it up.
func configureTap(pc conf.Port, hw lcore.PortInfo) error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	name := pc.KNI
	// The kernel's frames leave with the port's MAC, and the port's
	// neighbours answer the kernel at it.
	var hwReq struct {
		name   [unix.IFNAMSIZ]byte
		family uint16
		data   [14]byte
		_      [8]byte
	}
	copy(hwReq.name[:], name)
	hwReq.family = unix.ARPHRD_ETHER
	copy(hwReq.data[:], hw.MAC[:])
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s), unix.SIOCSIFHWADDR, uintptr(unsafe.Pointer(&hwReq))); e != 0 {
		return fmt.Errorf("setting its MAC address: %w", e)
	}
	mtu := min(int(hw.MTU), int(mempool.DefaultDataRoom)-mbufHeadroom-hdr.EthernetLen)
	if err := ifreqSet(s, name, unix.SIOCSIFMTU, func(r *unix.Ifreq) error { r.SetUint32(uint32(mtu)); return nil }); err != nil {
		return fmt.Errorf("setting its MTU to %d: %w", mtu, err)
	}
	pfx, err := netip.ParsePrefix(pc.Address)
	if err != nil {
		return fmt.Errorf("address %q: %w", pc.Address, err)
	}
	addr := pfx.Addr().As4()
	m := uint32(0)
	if pfx.Bits() > 0 {
		m = ^uint32(0) << (32 - pfx.Bits())
	}
	mask := [4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}
	if err := ifreqSet(s, name, unix.SIOCSIFADDR, func(r *unix.Ifreq) error { return r.SetInet4Addr(addr[:]) }); err != nil {
		return fmt.Errorf("giving it %s: %w", pc.Address, err)
	}
	if err := ifreqSet(s, name, unix.SIOCSIFNETMASK, func(r *unix.Ifreq) error { return r.SetInet4Addr(mask[:]) }); err != nil {
		return fmt.Errorf("giving it %s's prefix: %w", pc.Address, err)
	}
	if pc.Address6 != "" {
		if err := addAddr6(name, pc.Address6); err != nil {
			return err
		}
	}
	flags, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, flags); err != nil {
		return fmt.Errorf("reading its flags: %w", err)
	}
	flags.SetUint16(flags.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, flags); err != nil {
		return fmt.Errorf("bringing it up: %w", err)
	}
	return nil
}

// mbufHeadroom is RTE_PKTMBUF_HEADROOM, what the data room keeps before
// a frame.
const mbufHeadroom = 128

// ifreqSet runs one interface ioctl on socket s with a request set by set.
func ifreqSet(s int, name string, req uint, set func(*unix.Ifreq) error) error {
	r, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := set(r); err != nil {
		return err
	}
	return unix.IoctlIfreq(s, req, r)
}

// addAddr6 gives interface name the port's IPv6 address, with IPv6 on
// and without duplicate address detection (lbd answers for the address
// on the wire; the kernel's probe would only ask the network about lbd),
// unless it has it already (a persistent interface, taken up again).
func addAddr6(name, address6 string) error {
	pfx, err := netip.ParsePrefix(address6)
	if err != nil {
		return fmt.Errorf("address6 %q: %w", address6, err)
	}
	// IPv6 on (a host may turn it off for new interfaces), without
	// duplicate address detection.
	for _, set := range [][2]string{{"disable_ipv6", "0"}, {"accept_dad", "0"}} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/"+set[0], []byte(set[1]), 0o644); err != nil {
			return fmt.Errorf("setting net.ipv6.conf.%s.%s to %s: %w", name, set[0], set[1], err)
		}
	}
	s, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(s)
	idx, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFINDEX, idx); err != nil {
		return fmt.Errorf("reading its index: %w", err)
	}
	req := struct {
		addr   [16]byte
		prefix uint32
		index  int32
	}{addr: pfx.Addr().As16(), prefix: uint32(pfx.Bits()), index: int32(idx.Uint32())}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(s), unix.SIOCSIFADDR, uintptr(unsafe.Pointer(&req))); e != 0 && e != unix.EEXIST {
		return fmt.Errorf("giving it %s: %w", address6, e)
	}
	return nil
}

// KernelLost is how many packets the kernel interfaces lost (lose), and
// whether any port has one.
func (d *DPDK) KernelLost() (lost uint64, on bool) {
	if d.kernel == nil {
		return 0, false
	}
	return d.kernel.lost.Load(), true
}
