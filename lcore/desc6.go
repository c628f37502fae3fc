package lcore

import "github.com/dplb/dplb/lcore/hdr"

// IPv6 parsing. Kept apart from IPv4's so that IPv4 pays one more case
// of the EtherType switch and nothing else. TCP and UDP are flows
// (classFlow6: d.flow has the ports and protocol, its addresses stay 0;
// the packet path reads them from the header); neighbour solicitations,
// advertisements and echo requests are classified for nd6.go;
// fragments and ICMPv6 errors are classified for frag6.go and icmp6err.go.

// ip6 views the IPv6 header and what follows it.
func (d *desc) ip6() hdr.IPv6 { return hdr.IPv6(d.m.Data()[l3:]) }

// l4Bytes6 views the IPv6 packet's upper-layer message (after the
// extension headers, to the payload's end).
func (d *desc) l4Bytes6() []byte {
	ip := d.ip6()
	return ip[int(d.l4)-l3 : hdr.IPv6Len+int(ip.PayloadLength())]
}

// segment is the transport header and data of a TCP packet of either
// family.
func (d *desc) segment() hdr.TCP {
	if d.class == classFlow6 {
		return d.l4Bytes6()
	}
	return d.l4Bytes()
}

func parse6(d *desc, eth hdr.Ethernet) {
	ip := hdr.IPv6(eth.Payload())
	if !ip.IsValid(d.m.PktLen() - l3) {
		d.invalid(DropBadIPv6)
		return
	}
	x, v := ip.WalkExt()
	switch v {
	case hdr.ExtOK:
	case hdr.ExtTruncated:
		d.invalid(DropBadIPv6)
		return
	default:
		d.invalid(DropIPv6ExtHeader)
		return
	}
	d.l4 = uint16(l3 + x.Off)
	if x.Fragment {
		if !parseFragment6(d, ip, x) {
			return
		}
		if d.frag == fragLater {
			d.class = classFragment6
			return
		}
	}
	switch x.Proto {
	case hdr.ProtoICMPv6:
	case hdr.ProtoTCP:
		tcp := hdr.TCP(d.l4Bytes6())
		if !tcp.IsValid() {
			d.invalid(DropBadL4)
			return
		}
		d.flow = flowKey{sport: tcp.SrcPort(), dport: tcp.DstPort(), proto: hdr.ProtoTCP}
		d.flags = tcp.Flags()
		d.class = classFlow6
		return
	case hdr.ProtoUDP:
		// The checksum is mandatory over IPv6 (RFC 8200 8.1).
		// A first fragment holds the header, not the whole Length.
		udp := hdr.UDP(d.l4Bytes6())
		if !udp.IsValid() && d.frag == fragNone || len(udp) < hdr.UDPLen || udp.Checksum() == 0 {
			d.invalid(DropBadL4)
			return
		}
		d.flow = flowKey{sport: udp.SrcPort(), dport: udp.DstPort(), proto: hdr.ProtoUDP}
		d.class = classFlow6
		return
	default:
		d.invalid(DropIPv6Unserved)
		return
	}
	icmp := hdr.ICMP(d.l4Bytes6())
	if len(icmp) < 4 {
		d.invalid(DropBadICMP)
		return
	}
	switch icmp.Type() {
	case hdr.ICMPv6EchoRequest, hdr.ICMPv6EchoReply:
		if !icmp.IsValid() {
			d.invalid(DropBadICMP)
			return
		}
		d.class = classEcho6
		if icmp.Type() == hdr.ICMPv6EchoReply {
			d.class = classEchoReply6
		}
	case hdr.ICMPv6NeighSolicit, hdr.ICMPv6NeighAdvert:
		// RFC 4861 7.1: hop limit 255 (not forwarded), code 0, the
		// lengths, and the checksum (ND is rare: summed in full).
		if ip.HopLimit() != hdr.NDHopLimit || icmp.Code() != 0 || !hdr.ND(icmp).IsValid() ||
			hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, icmp) != icmp.Checksum() {
			d.invalid(DropBadND)
			return
		}
		d.class = classND6
	case hdr.ICMPv6DestUnreachable, hdr.ICMPv6PacketTooBig, hdr.ICMPv6TimeExceeded, hdr.ICMPv6ParamProblem:
		parseICMPv6Error(d, icmp)
	default:
		d.invalid(DropICMPType)
	}
}
