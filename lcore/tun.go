package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// ipipHeaderLen is the outer IPv4 header VS/TUN adds.
const ipipHeaderLen = 20

// protoIPIP is IP-in-IP (RFC 2003).
const protoIPIP = 4

// forwardTUN encapsulates the client's packet, unchanged, in an outer IPv4
// header from the output port's address to the real server, which
// decapsulates it and answers the client directly. A packet that would
// exceed the output port's MTU once encapsulated is answered, when it
// forbids fragmentation, with an ICMP "fragmentation needed" carrying the
// reduced MTU, so the client's path MTU discovery adapts.
func (w *Worker) forwardTUN(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, in int, rip uint32) {
	port, mac, ok := w.nextHopOrDrop(m, rip)
	if !ok {
		return
	}
	out := &w.snap.Ports[port]
	inner := int(ip.TotalLength())
	if inner+ipipHeaderLen > int(out.MTU) {
		if ip.DF() {
			w.fragNeeded(m, eth, ip, in, out.MTU-ipipHeaderLen)
			return
		}
		w.drop(m, DropTooBig)
		return
	}
	// Trim Ethernet padding, then make room for the outer header and move
	// the Ethernet header in front of it.
	if err := m.SetLen(hdr.EthernetLen + inner); err != nil {
		w.drop(m, DropBadIPv4)
		return
	}
	front, err := m.Prepend(ipipHeaderLen)
	if err != nil {
		w.drop(m, DropNoHeadroom)
		return
	}
	data := m.Data()
	copy(data[:hdr.EthernetLen], data[len(front):len(front)+hdr.EthernetLen])
	outer := hdr.IPv4(data[hdr.EthernetLen : hdr.EthernetLen+ipipHeaderLen])
	tos, df := ip.TOS(), ip.DF()
	outer.SetVersionIHL(ipipHeaderLen)
	outer.SetTOS(tos)
	outer.SetTotalLength(uint16(inner + ipipHeaderLen))
	outer.SetID(0)
	var flags uint8
	if df {
		flags = hdr.IPv4FlagDontFragment
	}
	outer.SetFlagsFragmentOffset(flags, 0)
	outer.SetTTL(64)
	outer.SetProtocol(protoIPIP)
	outer.SetSrc(out.Addr)
	outer.SetDst(rip)
	outer.SetChecksum(0)
	outer.SetChecksum(outer.CalculateChecksum()) // 20 header bytes, never the payload
	m.SetOlFlags(0)
	w.cnt.own[Encapsulated]++
	w.transmit(m, hdr.Ethernet(data), port, mac)
}
