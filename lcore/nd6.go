package lcore

import "github.com/dplb/dplb/lcore/hdr"

// Neighbour discovery (RFC 4861) and ICMPv6 echo for the ports' own IPv6
// addresses: what a host on a port's link needs to reach lbd over IPv6.
// Learning neighbours from NS and NA (to resolve IPv6 real servers) is not
// done yet: nothing forwards IPv6 so far.

// naLen is an NA with a target link-layer option, from the IPv6 header on.
const naLen = hdr.IPv6Len + hdr.NDLen + hdr.NDOptLen

// handleND6 answers a neighbour solicitation for the port's own IPv6
// address with an advertisement, rewriting the packet in place; an
// advertisement is counted and freed.
func (w *Worker) handleND6(d *desc) exit {
	ip := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	if icmp.Type() == hdr.ICMPv6NeighAdvert {
		return consume(NDReceived)
	}
	p := &w.snap.Ports[d.in]
	nd := hdr.ND(icmp)
	target := nd.Target()
	if p.Addr6.IsUnspecified() || target != p.Addr6 {
		return drop(DropNDNotOurs)
	}
	src := ip.Src()
	// From the unspecified address (another host's duplicate address
	// detection), the answer goes to all nodes, not solicited (RFC 4861
	// 7.2.4); otherwise to the sender, at its link-layer address option
	// if it gave one (it must not without a source address).
	dst, dstMAC, flags := src, d.eth().Src(), uint8(hdr.NAFlagSolicited|hdr.NAFlagOverride)
	if src.IsUnspecified() {
		dst, dstMAC, flags = hdr.AllNodes, hdr.AllNodes.MulticastMAC(), hdr.NAFlagOverride
	} else if mac, ok := nd.LinkAddr(hdr.NDOptSourceLL); ok {
		dstMAC = mac
	}
	if d.m.SetLen(l3+naLen) != nil {
		return drop(DropNoHeadroom)
	}
	d.m.SetOlFlags(0)
	w.encodeNA(d.m.Data()[l3:], p, dst, flags)
	return transmit(d.in, dstMAC)
}

// encodeNA writes an IPv6 NA for port p's address to dst into b (naLen
// bytes from the IPv6 header on).
func (w *Worker) encodeNA(b []byte, p *PortInfo, dst hdr.Addr6, flags uint8) {
	ip := hdr.IPv6(b)
	ip.Encode(hdr.NDLen+hdr.NDOptLen, hdr.ProtoICMPv6, hdr.NDHopLimit, p.Addr6, dst)
	na := hdr.ND(b[hdr.IPv6Len:naLen])
	na.EncodeND(hdr.ICMPv6NeighAdvert, flags, p.Addr6, hdr.NDOptTargetLL, p.MAC)
	hdr.ICMP(na).SetChecksum(hdr.TransportChecksum6(p.Addr6, dst, hdr.ProtoICMPv6, na))
	w.cnt.own[NDAdverts]++
}

// echo6 answers an ICMPv6 echo request to one of the ports' IPv6
// addresses in place. Swapping the addresses leaves the pseudo-header's
// sum, so only the type's change updates the checksum.
func (w *Worker) echo6(d *desc) exit {
	ip := d.ip6()
	src, dst := ip.Src(), ip.Dst()
	if !w.snap.isLocal6(dst) {
		return drop(DropNoConn)
	}
	ip.SetSrc(dst)
	ip.SetDst(src)
	ip.SetHopLimit(hdr.DefaultTTL)
	hdr.ICMP(d.l4Bytes6()).SetTypeCodeWithChecksumUpdate(hdr.ICMPv6EchoReply, 0)
	d.m.SetOlFlags(0)
	w.cnt.own[ICMPv6EchoReplies]++
	return transmit(d.in, d.eth().Src())
}

// isLocal6 reports whether a is one of the ports' IPv6 addresses.
func (s *Snapshot) isLocal6(a hdr.Addr6) bool {
	for i := range s.Ports {
		if s.Ports[i].Addr6 == a && !a.IsUnspecified() {
			return true
		}
	}
	return false
}

// announce6 sends an unsolicited NA (override, to all nodes) for each
// port's IPv6 address, so the link's caches point it at this port (RFC
// 4861 7.2.6). Worker 0 does it once when it starts; control work.
func (w *Worker) announce6() {
	for i := range w.snap.Ports {
		p := &w.snap.Ports[i]
		if p.Addr6.IsUnspecified() {
			continue
		}
		m, b := w.newFrame(hdr.EthernetLen + naLen)
		if m == nil {
			return
		}
		hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv6)
		w.encodeNA(b[l3:], p, hdr.AllNodes, hdr.NAFlagOverride)
		w.leave(m, -1, transmit(i, hdr.AllNodes.MulticastMAC()))
	}
}
