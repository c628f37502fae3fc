package lcore

import "github.com/dplb/dplb/lcore/hdr"

// icmpToSender turns a packet, in place, into an ICMP error (typ, code)
// for its sender, from the address of the port it came in on, and sends
// it back out of that port: the packet's IP header and the first 8 bytes
// of its payload become the quoted part. mtu is the next-hop MTU of a
// "fragmentation needed"; for other errors those bytes are unused (0).
// sent counts the error once it is built.
func (w *Worker) icmpToSender(d *desc, typ, code uint8, mtu uint16, sent Stat) exit {
	m, ip := d.m, d.ip()
	quotedLen := ip.HeaderLen() + 8
	sender, senderMAC := ip.Src(), d.eth().Src()
	const grow = hdr.IPv4MinLen + hdr.ICMPLen
	if _, err := m.Prepend(grow); err != nil {
		return drop(DropNoHeadroom)
	}
	data := m.Data()
	// [grow bytes][eth][IP ...] -> [eth][IP][ICMP][IP + 8]
	copy(data[:hdr.EthernetLen], data[grow:grow+hdr.EthernetLen])
	total := hdr.IPv4MinLen + hdr.ICMPLen + quotedLen
	if err := m.SetLen(hdr.EthernetLen + total); err != nil {
		return drop(DropBadIPv4)
	}
	data = m.Data()
	hdr.IPv4(data[hdr.EthernetLen:]).Encode(&hdr.IPv4Fields{
		TotalLength: uint16(total), TTL: hdr.DefaultTTL, Protocol: hdr.ProtoICMP,
		Src: w.snap.Ports[d.in].Addr, Dst: sender,
	})
	icmp := hdr.ICMP(data[hdr.EthernetLen+hdr.IPv4MinLen : hdr.EthernetLen+total])
	icmp.SetType(typ)
	icmp.SetCode(code)
	icmp.SetMTU(mtu) // zeroes the unused word before it too
	icmp.SetChecksumFull()
	m.SetOlFlags(0)
	w.cnt.own[sent]++
	return transmit(d.in, senderMAC)
}
