// Package runtime runs the DPDK dataplane: it initialises the EAL, opens
// the ports (queues, RSS, offloads), confines the control threads off the
// workers' CPUs, creates the handoff rings and starts the lcore workers.
// The control plane (package ctl) drives it only through its Dataplane
// interface, which DPDK implements; cmd/lbd wires the two.
package runtime

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/dpdk/eal"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// DPDK is the running dataplane: the EAL, one packet pool, the ports and
// the worker lcores. It implements the control plane's ctl.Dataplane.
type DPDK struct {
	log     *zap.Logger
	cfg     conf.Config
	pool    *mempool.Mempool
	ports   []openPort
	workers []*lcore.Worker
	rings   []*ring.Ring // handoff rings between workers
	cmdMu   sync.Mutex   // the command rings have one producer: whoever holds this
	holdRX  bool         // the workers receive nothing (HoldRX)
	kernel  *kernelPath  // the ports' kernel interfaces (kni.go); nil: none
}

type openPort struct {
	name   string
	id     ethdev.Port
	info   ethdev.DevInfo
	hw     lcore.PortInfo // what the device tells: name, MAC, MTU, offloads, RSS
	queues uint16         // queue pairs: one per worker, or fewer if the device has fewer
}

// txCsumOffloads are the TX offloads lbd uses when a port has all of them.
const txCsumOffloads = ethdev.TxOffloadIPv4Cksum | ethdev.TxOffloadTCPCksum | ethdev.TxOffloadUDPCksum

// rxCsumOffloads are the RX checks lbd asks for when a port has them all:
// a segment leaves with an offloaded checksum only if the NIC that
// received it found its checksum good (else it is updated incrementally,
// so a corrupt segment stays corrupt).
const rxCsumOffloads = ethdev.RxOffloadIPv4Cksum | ethdev.RxOffloadTCPCksum | ethdev.RxOffloadUDPCksum

// publishTimeout bounds the wait for the workers' acknowledgements.
const publishTimeout = 2 * time.Second

// handoffRingSize is the capacity of each worker-to-worker ring.
const handoffRingSize = 2048

// Open initialises the EAL and starts the ports; the workers start
// later (StartWorkers) with the first snapshot, which needs the ports' MAC
// addresses. The calling goroutine must be locked to its thread: it
// becomes the EAL main lcore. On error everything opened is closed again.
func Open(cfg conf.Config, log *zap.Logger) (d *DPDK, err error) {
	args := cfg.EALArgs("lbd")
	log.Info("starting DPDK", zap.Strings("eal_args", args))
	if err := eal.Init(args); err != nil {
		return nil, err
	}
	d = &DPDK{log: log, cfg: cfg}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	dp := cfg.Dataplane
	// A configured steering key replaces the boot key before any port or
	// lcore uses it (Owner and the NICs' RSS key).
	key, err := conf.ParseSteeringKey(dp.SteeringKey)
	if err != nil {
		return nil, fmt.Errorf("dataplane.steering_key: %w", err)
	}
	if key != nil {
		if err := lcore.SetSteeringKey(key); err != nil {
			return nil, fmt.Errorf("dataplane.steering_key: %w", err)
		}
		log.Info("steering key from the configuration (not drawn at boot)")
	}
	d.pool, err = mempool.CreatePktmbufPool(mempool.PktmbufPool{
		Name: "dplb_pkt", N: uint(dp.Mbufs), Cache: uint(dp.MbufCache), Socket: eal.SocketAny,
	})
	if err != nil {
		return nil, fmt.Errorf("dataplane.mbufs: %w", err)
	}
	nq := uint16(len(dp.Workers))
	for i, pc := range cfg.Ports {
		p, err := d.openPort(i, pc, nq)
		if err != nil {
			return nil, err
		}
		d.ports = append(d.ports, p)
	}
	if d.kernel, err = openKernelPath(cfg, d.ports, d.pool, int(nq), log); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *DPDK) openPort(i int, pc conf.Port, nq uint16) (openPort, error) {
	field := fmt.Sprintf("ports[%d] (%s)", i, pc.Name)
	id, err := ethdev.ByName(pc.DeviceName())
	if err != nil {
		return openPort{}, fmt.Errorf("%s.device %q: no such DPDK port (is the device bound to a DPDK driver, or the vdev string right?): %w", field, pc.Device, err)
	}
	info, err := id.Info()
	if err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	if most := min(info.MaxRxQueues, info.MaxTxQueues); nq > most {
		// Fewer queues than workers: the first ones poll the port, the
		// others hand it what they send (software steering).
		d.log.Warn("port has fewer queues than workers; the others reach it through them",
			zap.String("port", pc.Name), zap.Uint16("queues", most), zap.Uint16("workers", nq),
			zap.String("hint", fmt.Sprintf("for net_af_packet add qpairs=%d to the device string, for net_tap queues=%d", nq, nq)))
		nq = most
	}
	c := ethdev.Config{RxQueues: nq, TxQueues: nq}
	offload := info.TxOffloadCapa&txCsumOffloads == txCsumOffloads
	if offload {
		c.TxOffloads = txCsumOffloads
	}
	if info.RxOffloadCapa&rxCsumOffloads == rxCsumOffloads {
		c.RxOffloads = rxCsumOffloads
	}
	// Spread flows over the queues: aligned with the lcores' ownership
	// where the device can, else any spread (the lcores hand packets over).
	// Decided once, here: ownership never depends on the services.
	var rssMode uint8
	c.RSSHashFunctions, rssMode = rssFor(info, pc.Role, nq)
	if rssMode != lcore.RSSSoftware {
		// The lcores' steering key: the NIC then computes each packet's
		// owner as the lcores do.
		c.RSSKey = lcore.RSSKey(int(info.HashKeySize))
	}
	if err := id.Configure(c); err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	dp := d.cfg.Dataplane
	for q := uint16(0); q < nq; q++ {
		if err := id.RxQueueSetup(q, uint16(dp.RxDescriptors), info.SocketID, d.pool); err != nil {
			return openPort{}, fmt.Errorf("%s: %w", field, err)
		}
		if err := id.TxQueueSetup(q, uint16(dp.TxDescriptors), info.SocketID, c.TxOffloads); err != nil {
			return openPort{}, fmt.Errorf("%s: %w", field, err)
		}
	}
	if pc.MTU != 0 {
		if err := id.SetMTU(uint16(pc.MTU)); err != nil {
			if !ethdev.IsUnsupported(err) {
				return openPort{}, fmt.Errorf("%s.mtu: %w", field, err)
			}
			d.log.Warn("port cannot set its MTU; keeping the device's", zap.String("port", pc.Name), zap.Error(err))
		}
	}
	if err := id.Start(); err != nil {
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	p := openPort{name: pc.Name, id: id, info: info, queues: nq}
	if pc.Promiscuous {
		if err := id.SetPromiscuous(true); err != nil {
			d.log.Warn("port cannot enter promiscuous mode", zap.String("port", pc.Name), zap.Error(err))
		}
	}
	mac, err := id.MACAddr()
	if err != nil {
		id.Stop()
		id.Close()
		return openPort{}, fmt.Errorf("%s: %w", field, err)
	}
	link, _ := id.Link()
	mtu, err := id.MTU()
	if err != nil || mtu == 0 {
		mtu = 1500
	}
	p.hw = lcore.PortInfo{Name: pc.Name, MAC: hdr.MAC(mac), MTU: mtu, CsumOffload: offload, RSS: rssMode}
	d.log.Info("port up", zap.String("port", pc.Name), zap.Uint16("port_id", uint16(id)),
		zap.String("driver", info.Driver), zap.String("mac", p.hw.MAC.String()), zap.String("address", pc.Address),
		zap.String("role", pc.Role), zap.String("link", link.String()), zap.Uint16("mtu", mtu),
		zap.Uint16("queues", nq), zap.Bool("tx_checksum_offload", offload), zap.Bool("rss_aligned", rssMode != lcore.RSSSoftware))
	if info.Driver == "net_af_packet" {
		// Its driver says up from start to stop: lbd's link watch (lbctl
		// --ha-check, BGP) cannot see this port's link fail.
		d.log.Warn("port's driver reports its link up whatever the interface's state: a link failure on it goes unseen by lbctl --ha-check and BGP",
			zap.String("port", pc.Name), zap.String("driver", info.Driver))
	}
	return p, nil
}

// Hardware describes the started ports, in configuration order: name,
// MAC address, MTU, checksum offload and RSS mode (the addresses come from
// the configuration).
func (d *DPDK) Hardware() []lcore.PortInfo {
	out := make([]lcore.PortInfo, len(d.ports))
	for i, p := range d.ports {
		out[i] = p.hw
	}
	return out
}

// Close stops the workers (each frees the mbufs it holds), stops and
// closes the ports (releasing their queues' mbufs), checks that every mbuf
// came back, and releases DPDK. It returns the mbufs still in use, which
// must be 0.
func (d *DPDK) Close() (inUse int, err error) {
	for _, w := range d.workers {
		w.Stop()
	}
	d.kernel.close() // the packets on their way to or from the kernel go back to the pool
	// Packets still in flight between lcores go back to the pool.
	objs := ring.NewObjs(256)
	for _, r := range d.rings {
		for n := r.SCDequeueBurst(objs); n > 0; n = r.SCDequeueBurst(objs) {
			for _, o := range objs[:n] {
				mbuf.FromPointer(o).Free()
			}
		}
		r.Free()
	}
	ring.FreeObjs(objs)
	d.rings = nil
	var errs []error
	for _, p := range d.ports {
		if e := p.id.Stop(); e != nil {
			errs = append(errs, e)
		}
		if e := p.id.Close(); e != nil {
			errs = append(errs, e)
		}
	}
	for _, w := range d.workers {
		w.Free()
	}
	d.workers, d.ports = nil, nil
	if d.pool != nil {
		inUse = d.pool.InUse()
		if inUse == 0 {
			d.pool.Free()
		}
		d.pool = nil
	}
	if e := eal.Cleanup(); e != nil {
		errs = append(errs, e)
	}
	return inUse, errors.Join(errs...)
}
