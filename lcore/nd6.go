package lcore

import "github.com/dplb/dplb/lcore/hdr"

// Neighbour discovery (RFC 4861) and ICMPv6 echo: NS for the ports' own
// IPv6 addresses and, on a master, for the IPv6 VIPs on client-facing
// ports, the floating addresses and the IPv6 FullNAT local addresses
// on their ports' links are answered in place; the link-layer addresses that NS and NA
// carry are reported to the control plane (EvNeighbour6), which owns the
// neighbour table and asks worker 0 to solicit the real servers and
// gateways it lacks (CmdSolicit), as ARP does for IPv4.

// naLen is an NA with a target link-layer option, from the IPv6 header on.
const naLen = hdr.IPv6Len + hdr.NDLen + hdr.NDOptLen

// handleND6 answers a neighbour solicitation for one of our addresses
// with an advertisement, rewriting the packet in place; an advertisement
// is learnt from, counted and freed.
func (w *Worker) handleND6(d *desc) exit {
	ip := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	p := &w.snap.Ports[d.in]
	nd := hdr.ND(icmp)
	target := nd.Target()
	if icmp.Type() == hdr.ICMPv6NeighAdvert {
		if mac, ok := nd.LinkAddr(hdr.NDOptTargetLL); ok && w.learnable6(p, &target) {
			w.event(Event{Kind: EvNeighbour6, Port: d.in, IP6: target, MAC: mac})
		}
		if d.eth().Dst() == p.MAC { // unicast to us: the kernel's answer, maybe
			return w.consumeOrKernel(d.in, NDReceived)
		}
		return consume(NDReceived)
	}
	ours := !p.Addr6.IsUnspecified() && target == p.Addr6 ||
		!w.snap.Backup && (p.FacesClients && w.snap.IsVIP6(target) || p.isFloating6(target) ||
			w.snap.IsLIP6(target) && p.OnLink6(&target))
	if !ours {
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
		if w.learnable6(p, &src) {
			w.event(Event{Kind: EvNeighbour6, Port: d.in, IP6: src, MAC: mac})
		}
	}
	if d.m.SetLen(l3+naLen) != nil {
		return drop(DropNoHeadroom)
	}
	d.m.SetOlFlags(0)
	w.encodeNA(d.m.Data()[l3:], p, target, dst, flags)
	return transmit(d.in, dstMAC)
}

// learnable6 reports whether a neighbour's address may enter the table:
// on the port's link and none of ours.
func (w *Worker) learnable6(p *PortInfo, a *hdr.Addr6) bool {
	return p.OnLink6(a) && !w.snap.isLocal6(*a) && !w.snap.IsVIP6(*a) && !p.isFloating6(*a) && !w.snap.IsLIP6(*a)
}

// isFloating6 reports whether a is one of the port's IPv6 floating
// addresses.
func (p *PortInfo) isFloating6(a hdr.Addr6) bool {
	for _, f := range p.Floating6 {
		if f == a {
			return true
		}
	}
	return false
}

// encodeNA writes an IPv6 NA for self, one of port p's addresses, to dst
// into b (naLen bytes from the IPv6 header on).
func (w *Worker) encodeNA(b []byte, p *PortInfo, self, dst hdr.Addr6, flags uint8) {
	ip := hdr.IPv6(b)
	ip.Encode(hdr.NDLen+hdr.NDOptLen, hdr.ProtoICMPv6, hdr.NDHopLimit, self, dst)
	na := hdr.ND(b[hdr.IPv6Len:naLen])
	na.EncodeND(hdr.ICMPv6NeighAdvert, flags, self, hdr.NDOptTargetLL, p.MAC)
	hdr.ICMP(na).SetChecksum(hdr.TransportChecksum6(self, dst, hdr.ProtoICMPv6, na))
	w.cnt.own[NDAdverts]++
}

// sendSolicit sends a neighbour solicitation for target out of a port,
// from its IPv6 address to target's solicited-node group (CmdSolicit).
// Control work, from the commands job.
func (w *Worker) sendSolicit(port int, target hdr.Addr6) {
	if port < 0 || port >= len(w.snap.Ports) || w.snap.Ports[port].Addr6.IsUnspecified() {
		return
	}
	p := &w.snap.Ports[port]
	m, b := w.newFrame(hdr.EthernetLen + naLen)
	if m == nil {
		return
	}
	hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv6)
	group := target.SolicitedNode()
	ip := hdr.IPv6(b[l3:])
	ip.Encode(hdr.NDLen+hdr.NDOptLen, hdr.ProtoICMPv6, hdr.NDHopLimit, p.Addr6, group)
	ns := hdr.ND(b[l3+hdr.IPv6Len:])
	ns.EncodeND(hdr.ICMPv6NeighSolicit, 0, target, hdr.NDOptSourceLL, p.MAC)
	hdr.ICMP(ns).SetChecksum(hdr.TransportChecksum6(p.Addr6, group, hdr.ProtoICMPv6, ns))
	w.cnt.own[NDSolicits]++
	w.leave(m, -1, transmit(port, group.MulticastMAC()))
}

// echo6 answers an ICMPv6 echo request to one of the ports' IPv6
// addresses in place. Swapping the addresses leaves the pseudo-header's
// sum, so only the type's change updates the checksum.
func (w *Worker) echo6(d *desc) exit {
	ip := d.ip6()
	src, dst := ip.Src(), ip.Dst()
	if !w.snap.isLocal6(dst) && !w.snap.IsVIP6(dst) {
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
// port's IPv6 address and, unless a backup, for its IPv6 floating
// addresses and the IPv6 VIPs on ports facing clients, so the link's caches point them at this port (RFC 4861
// 7.2.6). Worker 0 does it once when it starts and when it takes over;
// control work.
func (w *Worker) announce6() {
	for i := range w.snap.Ports {
		w.announce6Port(i)
	}
}

// announce6Port is announce6 for port i alone (CmdAnnounce6: its link
// came back).
func (w *Worker) announce6Port(i int) {
	p := &w.snap.Ports[i]
	if p.Addr6.IsUnspecified() {
		return
	}
	w.sendUnsolicitedNA(i, p.Addr6)
	if w.snap.Backup {
		return
	}
	for _, f := range p.Floating6 {
		w.sendUnsolicitedNA(i, f)
	}
	for lip := range w.snap.six.lips { // FNAT66's, on this port's link
		if p.OnLink6(&lip) {
			w.sendUnsolicitedNA(i, lip)
		}
	}
	if !p.FacesClients {
		return
	}
	for vip := range w.snap.six.vips {
		w.sendUnsolicitedNA(i, vip)
	}
}

func (w *Worker) sendUnsolicitedNA(port int, self hdr.Addr6) {
	m, b := w.newFrame(hdr.EthernetLen + naLen)
	if m == nil {
		return
	}
	hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv6)
	w.encodeNA(b[l3:], &w.snap.Ports[port], self, hdr.AllNodes, hdr.NAFlagOverride)
	w.leave(m, -1, transmit(port, hdr.AllNodes.MulticastMAC()))
}
