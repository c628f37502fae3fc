package gen

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/dplb/dplb/lcore/hdr"
)

// Pcap file constants (libpcap's classic format, microsecond stamps).
const (
	pcapMagic    = 0xa1b2c3d4
	pcapSnapLen  = 65535
	pcapEthernet = 1 // LINKTYPE_ETHERNET
)

// MaxPcapFlows bounds WriteSYNPcap's file (a million 60-byte SYNs is
// about 76 MiB).
const MaxPcapFlows = 1 << 20

// RangeFlows is the number of client address:port pairs of the ranges:
// addresses x ports. A generator that steps the source address and the
// source port together, one step per packet (Pktgen's range mode with
// src_ip inc 0.0.0.1 and src_port inc 1), sends only lcm(addresses, ports)
// of them, but which ones depends on where each counter started; every
// pair covers any start.
func RangeFlows(clients Range, ports [2]uint16) int {
	return clients.Len() * (int(ports[1]) - int(ports[0]) + 1)
}

// WriteSYNPcap writes to w a pcap file with one TCP SYN per client
// address:port pair of the ranges (frames from the builder's MACs to its
// VIP:port), port by port for each address. Replayed before a range run, it
// lets a load balancer that opens connections only on a SYN (lbd, IPVS)
// see every flow of the run start. It returns the number of SYNs.
func WriteSYNPcap(w io.Writer, b *Builder, clients Range, ports [2]uint16) (int, error) {
	if b.proto != hdr.ProtoTCP {
		return 0, fmt.Errorf("SYN pcap: the builder is not TCP")
	}
	if ports[1] < ports[0] || ports[0] == 0 {
		return 0, fmt.Errorf("SYN pcap: port range %d-%d: want 1 <= first <= last", ports[0], ports[1])
	}
	n := RangeFlows(clients, ports)
	if n > MaxPcapFlows {
		return 0, fmt.Errorf("SYN pcap: %d flows (addresses x ports) is more than %d: narrow the ranges", n, MaxPcapFlows)
	}
	bw := bufio.NewWriter(w)
	var gh [24]byte
	binary.LittleEndian.PutUint32(gh[0:], pcapMagic)
	binary.LittleEndian.PutUint16(gh[4:], 2)
	binary.LittleEndian.PutUint16(gh[6:], 4)
	binary.LittleEndian.PutUint32(gh[16:], pcapSnapLen)
	binary.LittleEndian.PutUint32(gh[20:], pcapEthernet)
	bw.Write(gh[:])
	frame := make([]byte, b.Size())
	nports := uint32(ports[1]) - uint32(ports[0]) + 1
	var rh [16]byte
	for k := uint32(0); k < uint32(n); k++ {
		src := clients.First + k/nports
		sport := ports[0] + uint16(k%nports)
		b.Build(frame, src, sport, hdr.TCPFlagSYN, k, 0)
		// One microsecond apart: the stamps only keep the order.
		binary.LittleEndian.PutUint32(rh[0:], k/1000000)
		binary.LittleEndian.PutUint32(rh[4:], k%1000000)
		binary.LittleEndian.PutUint32(rh[8:], uint32(len(frame)))
		binary.LittleEndian.PutUint32(rh[12:], uint32(len(frame)))
		bw.Write(rh[:])
		bw.Write(frame)
	}
	return n, bw.Flush()
}
