// Package ethdev binds DPDK's Ethernet device library: device discovery and
// information, configuration of RX/TX queues (with optional RSS), start and
// stop, MAC address, link, promiscuous mode, MTU, statistics, and the RX/TX
// burst functions of the poll loop.
package ethdev

/*
#include "dplb.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"unsafe"

	"github.com/dplb/dplb/dpdk/internal/rteerr"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
)

// Port is an Ethernet device's port id.
type Port uint16

// Offload capabilities and requests the dataplane cares about.
const (
	TxOffloadIPv4Cksum = uint64(C.RTE_ETH_TX_OFFLOAD_IPV4_CKSUM)
	TxOffloadTCPCksum  = uint64(C.RTE_ETH_TX_OFFLOAD_TCP_CKSUM)
	TxOffloadUDPCksum  = uint64(C.RTE_ETH_TX_OFFLOAD_UDP_CKSUM)
	RxOffloadIPv4Cksum = uint64(C.RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
	RxOffloadTCPCksum  = uint64(C.RTE_ETH_RX_OFFLOAD_TCP_CKSUM)
	RxOffloadUDPCksum  = uint64(C.RTE_ETH_RX_OFFLOAD_UDP_CKSUM)
	RxOffloadRSSHash   = uint64(C.RTE_ETH_RX_OFFLOAD_RSS_HASH)

	RSSIP  = uint64(C.RTE_ETH_RSS_IP)
	RSSTCP = uint64(C.RTE_ETH_RSS_TCP)
	RSSUDP = uint64(C.RTE_ETH_RSS_UDP)

	// Hash only the source (or destination) fields: lets a balancer make
	// the client's packets and the real server's replies hash alike.
	RSSL3SrcOnly = uint64(C.RTE_ETH_RSS_L3_SRC_ONLY)
	RSSL3DstOnly = uint64(C.RTE_ETH_RSS_L3_DST_ONLY)
	RSSL4SrcOnly = uint64(C.RTE_ETH_RSS_L4_SRC_ONLY)
	RSSL4DstOnly = uint64(C.RTE_ETH_RSS_L4_DST_ONLY)
)

// Count is the number of usable ports.
func Count() int { return int(C.rte_eth_dev_count_avail()) }

// ByName finds a port by device name: a PCI address or a vdev name such as "net_ring0".
func ByName(name string) (Port, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if ret := C.rte_eth_dev_get_port_by_name(cname, &id); ret != 0 {
		return 0, fmt.Errorf("port %q: %w", name, rteerr.FromRet("rte_eth_dev_get_port_by_name", int(ret)))
	}
	return Port(id), nil
}

// DevInfo is what a device says about itself.
type DevInfo struct {
	Driver              string
	IfIndex             uint32 // kernel interface bound to the device (af_packet, tap), or 0
	MaxRxQueues         uint16
	MaxTxQueues         uint16
	RxOffloadCapa       uint64
	TxOffloadCapa       uint64
	FlowTypeRSSOffloads uint64 // RSS hash functions the device supports; 0 = no RSS
	RetaSize            uint16
	HashKeySize         uint8
	MinMTU, MaxMTU      uint16
	SocketID            int
}

// Info reads the device's information.
func (p Port) Info() (DevInfo, error) {
	var di C.struct_rte_eth_dev_info
	if ret := C.rte_eth_dev_info_get(C.uint16_t(p), &di); ret != 0 {
		return DevInfo{}, p.err("rte_eth_dev_info_get", ret)
	}
	return DevInfo{
		Driver:              C.GoString(di.driver_name),
		IfIndex:             uint32(di.if_index),
		MaxRxQueues:         uint16(di.max_rx_queues),
		MaxTxQueues:         uint16(di.max_tx_queues),
		RxOffloadCapa:       uint64(di.rx_offload_capa),
		TxOffloadCapa:       uint64(di.tx_offload_capa),
		FlowTypeRSSOffloads: uint64(di.flow_type_rss_offloads),
		RetaSize:            uint16(di.reta_size),
		HashKeySize:         uint8(di.hash_key_size),
		MinMTU:              uint16(di.min_mtu),
		MaxMTU:              uint16(di.max_mtu),
		SocketID:            int(int32(C.rte_eth_dev_socket_id(C.uint16_t(p)))),
	}, nil
}

// Config is a port's queue and offload configuration.
type Config struct {
	RxQueues, TxQueues uint16
	// RSSHashFunctions spreads RX over the queues (RSS*); 0 disables RSS. It
	// is masked by what the device supports, and refused if nothing is left.
	RSSHashFunctions uint64
	// RSSKey is the Toeplitz key, of the device's HashKeySize; nil keeps
	// the driver's. Ports that must hash alike need the same key.
	RSSKey     []byte
	RxOffloads uint64
	TxOffloads uint64
}

// Configure applies c. Queue counts and offloads are checked against the
// device's capabilities first, so the error names what the device lacks.
func (p Port) Configure(c Config) error {
	info, err := p.Info()
	if err != nil {
		return err
	}
	if c.RxQueues == 0 || c.TxQueues == 0 {
		return fmt.Errorf("port %d (%s): need at least one RX and one TX queue", p, info.Driver)
	}
	if c.RxQueues > info.MaxRxQueues || c.TxQueues > info.MaxTxQueues {
		return fmt.Errorf("port %d (%s): %d RX / %d TX queues requested, the device has at most %d / %d",
			p, info.Driver, c.RxQueues, c.TxQueues, info.MaxRxQueues, info.MaxTxQueues)
	}
	rss := c.RSSHashFunctions & info.FlowTypeRSSOffloads
	if rss&^(RSSL3SrcOnly|RSSL3DstOnly|RSSL4SrcOnly|RSSL4DstOnly) == 0 {
		rss = 0 // modifiers alone select no packet type
	}
	if c.RSSHashFunctions != 0 && rss == 0 {
		return fmt.Errorf("port %d (%s): RSS requested but the device supports none of hash functions %#x", p, info.Driver, c.RSSHashFunctions)
	}
	if miss := c.RxOffloads &^ info.RxOffloadCapa; miss != 0 {
		return fmt.Errorf("port %d (%s): RX offloads %#x not supported", p, info.Driver, miss)
	}
	if miss := c.TxOffloads &^ info.TxOffloadCapa; miss != 0 {
		return fmt.Errorf("port %d (%s): TX offloads %#x not supported", p, info.Driver, miss)
	}
	var key *C.uint8_t
	if rss != 0 && len(c.RSSKey) > 0 {
		if len(c.RSSKey) != int(info.HashKeySize) {
			return fmt.Errorf("port %d (%s): RSS key of %d bytes, the device takes %d", p, info.Driver, len(c.RSSKey), info.HashKeySize)
		}
		key = (*C.uint8_t)(C.CBytes(c.RSSKey))
		defer C.free(unsafe.Pointer(key))
	}
	ret := C.dplb_eth_configure(C.uint16_t(p), C.uint16_t(c.RxQueues), C.uint16_t(c.TxQueues),
		C.uint64_t(rss), key, C.uint8_t(len(c.RSSKey)), C.uint64_t(c.RxOffloads), C.uint64_t(c.TxOffloads), 0)
	return p.err("rte_eth_dev_configure", ret)
}

// RxQueueSetup sets up RX queue q with n descriptors, filled from pool.
func (p Port) RxQueueSetup(q, n uint16, socket int, pool *mempool.Mempool) error {
	return p.err(fmt.Sprint("rte_eth_rx_queue_setup(queue ", q, ")"), C.dplb_eth_rx_queue_setup(C.uint16_t(p), C.uint16_t(q), C.uint16_t(n),
		C.uint(socketOrAny(socket)), (*C.struct_rte_mempool)(unsafe.Pointer(pool))))
}

// TxQueueSetup sets up TX queue q with n descriptors and per-queue offloads.
func (p Port) TxQueueSetup(q, n uint16, socket int, offloads uint64) error {
	return p.err(fmt.Sprint("rte_eth_tx_queue_setup(queue ", q, ")"), C.dplb_eth_tx_queue_setup(C.uint16_t(p), C.uint16_t(q), C.uint16_t(n),
		C.uint(socketOrAny(socket)), C.uint64_t(offloads)))
}

func socketOrAny(s int) int32 {
	if s < 0 {
		return int32(C.SOCKET_ID_ANY)
	}
	return int32(s)
}

// Start starts the port.
func (p Port) Start() error { return p.err("rte_eth_dev_start", C.rte_eth_dev_start(C.uint16_t(p))) }

// Stop stops the port; RX and TX bursts must have ceased.
func (p Port) Stop() error { return p.err("rte_eth_dev_stop", C.rte_eth_dev_stop(C.uint16_t(p))) }

// Close releases the port's queues (and the mbufs they hold).
func (p Port) Close() error { return p.err("rte_eth_dev_close", C.rte_eth_dev_close(C.uint16_t(p))) }

// MACAddr is the port's Ethernet address.
func (p Port) MACAddr() ([6]byte, error) {
	var a C.struct_rte_ether_addr
	if ret := C.rte_eth_macaddr_get(C.uint16_t(p), &a); ret != 0 {
		return [6]byte{}, p.err("rte_eth_macaddr_get", ret)
	}
	return *(*[6]byte)(unsafe.Pointer(&a.addr_bytes[0])), nil
}

// Link is a port's link state.
type Link struct {
	Up         bool
	SpeedMbps  uint32
	FullDuplex bool
	Autoneg    bool
}

func (l Link) String() string {
	if !l.Up {
		return "down"
	}
	d := "half-duplex"
	if l.FullDuplex {
		d = "full-duplex"
	}
	return fmt.Sprintf("up %d Mbps %s", l.SpeedMbps, d)
}

// Link reads the link state without waiting.
func (p Port) Link() (Link, error) {
	var l C.struct_dplb_link
	if ret := C.dplb_link_get(C.uint16_t(p), &l); ret != 0 {
		return Link{}, p.err("rte_eth_link_get_nowait", ret)
	}
	return Link{Up: l.up != 0, SpeedMbps: uint32(l.speed), FullDuplex: l.full_duplex != 0, Autoneg: l.autoneg != 0}, nil
}

// SetPromiscuous turns promiscuous mode on or off.
func (p Port) SetPromiscuous(on bool) error {
	if on {
		return p.err("rte_eth_promiscuous_enable", C.rte_eth_promiscuous_enable(C.uint16_t(p)))
	}
	return p.err("rte_eth_promiscuous_disable", C.rte_eth_promiscuous_disable(C.uint16_t(p)))
}

// Promiscuous reports whether promiscuous mode is on.
func (p Port) Promiscuous() bool { return C.rte_eth_promiscuous_get(C.uint16_t(p)) == 1 }

// ErrMTUUnsupported matches (errors.Is) an MTU the device cannot set: callers
// treat it as a warning (DPDK 22.11's memif, for one, cannot set any).
var ErrMTUUnsupported = syscall.ENOTSUP

// SetMTU sets the MTU.
func (p Port) SetMTU(mtu uint16) error {
	return p.err(fmt.Sprint("rte_eth_dev_set_mtu(", mtu, ")"), C.rte_eth_dev_set_mtu(C.uint16_t(p), C.uint16_t(mtu)))
}

// MTU reads the MTU.
func (p Port) MTU() (uint16, error) {
	var m C.uint16_t
	if ret := C.rte_eth_dev_get_mtu(C.uint16_t(p), &m); ret != 0 {
		return 0, p.err("rte_eth_dev_get_mtu", ret)
	}
	return uint16(m), nil
}

// Stats are the basic port counters.
type Stats struct {
	IPackets, OPackets uint64
	IBytes, OBytes     uint64
	IMissed            uint64 // dropped by the NIC: RX queues full
	IErrors, OErrors   uint64
	RxNoMbuf           uint64 // RX mbuf allocation failures
}

// Stats reads the basic counters.
func (p Port) Stats() (Stats, error) {
	var s C.struct_rte_eth_stats
	if ret := C.rte_eth_stats_get(C.uint16_t(p), &s); ret != 0 {
		return Stats{}, p.err("rte_eth_stats_get", ret)
	}
	return Stats{
		IPackets: uint64(s.ipackets), OPackets: uint64(s.opackets),
		IBytes: uint64(s.ibytes), OBytes: uint64(s.obytes),
		IMissed: uint64(s.imissed), IErrors: uint64(s.ierrors), OErrors: uint64(s.oerrors),
		RxNoMbuf: uint64(s.rx_nombuf),
	}, nil
}

// ResetStats zeroes the basic counters.
func (p Port) ResetStats() error {
	return p.err("rte_eth_stats_reset", C.rte_eth_stats_reset(C.uint16_t(p)))
}

// XStat is one extended statistic.
type XStat struct {
	Name  string
	Value uint64
}

// XStats reads the extended statistics (driver-specific names).
func (p Port) XStats() ([]XStat, error) {
	n := C.rte_eth_xstats_get_names(C.uint16_t(p), nil, 0)
	if n < 0 {
		return nil, p.err("rte_eth_xstats_get_names", n)
	}
	if n == 0 {
		return nil, nil
	}
	names := (*C.struct_rte_eth_xstat_name)(C.calloc(C.size_t(n), C.sizeof_struct_rte_eth_xstat_name))
	defer C.free(unsafe.Pointer(names))
	vals := (*C.struct_rte_eth_xstat)(C.calloc(C.size_t(n), C.sizeof_struct_rte_eth_xstat))
	defer C.free(unsafe.Pointer(vals))
	if got := C.rte_eth_xstats_get_names(C.uint16_t(p), names, C.uint(n)); got != n {
		return nil, fmt.Errorf("port %d: xstats names changed size (%d, then %d)", p, n, got)
	}
	if got := C.rte_eth_xstats_get(C.uint16_t(p), vals, C.uint(n)); got != n {
		return nil, fmt.Errorf("port %d: xstats changed size (%d, then %d)", p, n, got)
	}
	ns, vs := unsafe.Slice(names, n), unsafe.Slice(vals, n)
	out := make([]XStat, n)
	for i := range out {
		out[i] = XStat{Name: C.GoString(&ns[vs[i].id].name[0]), Value: uint64(vs[i].value)}
	}
	return out, nil
}

// RxBurst receives up to len(pkts) packets from queue q. pkts must live in
// C memory (mbuf.Array), so the call costs one cgo crossing and no scan.
func (p Port) RxBurst(q uint16, pkts []*mbuf.Mbuf) int {
	if len(pkts) == 0 {
		return 0
	}
	return int(C.dplb_rx_burst(C.uint16_t(p), C.uint16_t(q), (**C.struct_rte_mbuf)(unsafe.Pointer(&pkts[0])), C.uint16_t(len(pkts))))
}

// TxBurst hands up to len(pkts) packets to queue q and returns how many the
// driver took; the caller still owns the rest.
func (p Port) TxBurst(q uint16, pkts []*mbuf.Mbuf) int {
	if len(pkts) == 0 {
		return 0
	}
	return int(C.dplb_tx_burst(C.uint16_t(p), C.uint16_t(q), (**C.struct_rte_mbuf)(unsafe.Pointer(&pkts[0])), C.uint16_t(len(pkts))))
}

// TxBurstOrFree is TxBurst that frees what the driver did not take, in the
// same cgo call; it returns how many were sent.
func (p Port) TxBurstOrFree(q uint16, pkts []*mbuf.Mbuf) int {
	if len(pkts) == 0 {
		return 0
	}
	return int(C.dplb_tx_burst_or_free(C.uint16_t(p), C.uint16_t(q), (**C.struct_rte_mbuf)(unsafe.Pointer(&pkts[0])), C.uint16_t(len(pkts))))
}

// HardwareAddr formats a MAC as net.HardwareAddr, for logs.
func HardwareAddr(mac [6]byte) net.HardwareAddr { return net.HardwareAddr(mac[:]) }

func (p Port) err(op string, ret C.int) error {
	if ret >= 0 {
		return nil
	}
	return fmt.Errorf("port %d: %w", p, rteerr.FromRet(op, int(ret)))
}

// IsUnsupported reports whether err says the device cannot do it.
func IsUnsupported(err error) bool {
	return errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP)
}
