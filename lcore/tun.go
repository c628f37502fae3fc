package lcore

import (
	"github.com/dplb/dplb/lcore/hdr"
)

// ipipHeaderLen is the outer IPv4 header VS/TUN adds.
const ipipHeaderLen = hdr.IPv4MinLen

// encapsulate sends the packet, unchanged, inside an outer IPv4 header from
// the output port's address to the real server, which decapsulates it and
// answers the client directly. A packet that would exceed the output
// port's MTU once encapsulated and forbids fragmentation is answered, when
// answerTooBig, with an ICMP "fragmentation needed" carrying the reduced
// MTU, so the client's path MTU discovery adapts; the MTU is the port's,
// or the path MTU to the real server a router reported (pathMTUs). Without
// DF such a packet is dropped as too_big: the outer packet is not
// fragmented. The outer header has its own IP ID (a per-worker counter) and
// copies DF and TOS from the inner one.
func (w *Worker) encapsulate(d *desc, rip uint32, answerTooBig bool) exit {
	e := w.route(rip)
	if e.kind != exitTransmit {
		return e
	}
	out := &w.snap.Ports[e.to]
	mtu := w.pmtu.get(rip, out.MTU, w.now)
	ip := d.ip()
	inner := int(ip.TotalLength())
	if inner+ipipHeaderLen > int(mtu) {
		if ip.DF() && answerTooBig {
			return w.fragNeeded(d, mtu-ipipHeaderLen)
		}
		return drop(DropTooBig)
	}
	decTTL(ip) // the inner header's, as IPVS does
	m := d.m
	// Trim Ethernet padding, then make room for the outer header and move
	// the Ethernet header in front of it.
	if err := m.SetLen(hdr.EthernetLen + inner); err != nil {
		return drop(DropBadIPv4)
	}
	front, err := m.Prepend(ipipHeaderLen)
	if err != nil {
		return drop(DropNoHeadroom)
	}
	data := m.Data()
	copy(data[:hdr.EthernetLen], data[len(front):len(front)+hdr.EthernetLen])
	var flags uint8
	if ip.DF() {
		flags = hdr.IPv4FlagDontFragment
	}
	tos := ip.TOS()
	hdr.IPv4(data[hdr.EthernetLen:]).Encode(&hdr.IPv4Fields{
		TOS: tos, TotalLength: uint16(inner + ipipHeaderLen), ID: w.ipID, Flags: flags,
		TTL: hdr.DefaultTTL, Protocol: hdr.ProtoIPIP, Src: out.Addr, Dst: rip,
	})
	w.ipID++
	m.SetOlFlags(0)
	w.cnt.own[Encapsulated]++
	return e
}

// fragNeeded turns a packet that is too big for the tunnel into an ICMP
// "fragmentation needed" (type 3 code 4) for its sender, in place.
func (w *Worker) fragNeeded(d *desc, mtu uint16) exit {
	return w.icmpToSender(d, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, mtu, ICMPFragNeeded)
}
