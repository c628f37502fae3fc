package hdr

import "encoding/binary"

// Address and port rewrites for NAT, on a TCP or UDP packet: ip is its IPv4
// header, l4 its transport header and whatever of it the caller holds (the
// whole segment, or the 8 bytes an ICMP error quotes). Ports sit at the same
// offsets in TCP and UDP.

// RewriteSrc changes the source address and port. With offload false the
// checksums are updated incrementally (RFC 1624): the IPv4 header's, and the
// transport checksum when l4 holds it (the 8 quoted bytes hold UDP's, not
// TCP's; IPVS leaves the quoted TCP checksum alone too). With offload true
// the checksums are left for PrepareTxOffload and the NIC.
func RewriteSrc(ip IPv4, l4 []byte, addr uint32, port uint16, offload bool) {
	rewrite(ip, l4, ipv4Src, tcpSrcPort, addr, port, offload)
}

// RewriteDst is RewriteSrc for the destination.
func RewriteDst(ip IPv4, l4 []byte, addr uint32, port uint16, offload bool) {
	rewrite(ip, l4, ipv4Dst, tcpDstPort, addr, port, offload)
}

// rewrite writes the address at ip[addrOff:] and the port at l4[portOff:].
func rewrite(ip IPv4, l4 []byte, addrOff, portOff int, addr uint32, port uint16, offload bool) {
	old, oldPort := binary.BigEndian.Uint32(ip[addrOff:]), binary.BigEndian.Uint16(l4[portOff:])
	if !offload {
		ip.SetChecksum(Update32(ip.Checksum(), old, addr))
		updateL4Checksum(ip.Protocol(), l4, old, addr, oldPort, port)
	}
	binary.BigEndian.PutUint32(ip[addrOff:], addr)
	binary.BigEndian.PutUint16(l4[portOff:], port)
}

// updateL4Checksum folds an address and a port change into the TCP or UDP
// checksum, when l4 holds it. A UDP checksum of 0 means "none" and stays 0.
func updateL4Checksum(proto uint8, l4 []byte, oldAddr, newAddr uint32, oldPort, newPort uint16) {
	switch off := transportChecksumOffset(proto); {
	case off < 0 || len(l4) < off+2:
	case proto == ProtoTCP:
		cs := binary.BigEndian.Uint16(l4[off:])
		binary.BigEndian.PutUint16(l4[off:], Update16(Update32(cs, oldAddr, newAddr), oldPort, newPort))
	default:
		cs := binary.BigEndian.Uint16(l4[off:])
		binary.BigEndian.PutUint16(l4[off:], UpdateUDP16(UpdateUDP32(cs, oldAddr, newAddr), oldPort, newPort))
	}
}

// PrepareTxOffload readies a TCP or UDP packet for checksum offload as
// DPDK's TX offload API asks: the IPv4 checksum zeroed and the transport
// checksum set to the pseudo-header sum. It reports whether the NIC is to
// compute the transport checksum: not for UDP sent without one.
func PrepareTxOffload(ip IPv4, l4 []byte) (transport bool) {
	proto := ip.Protocol()
	ip.SetChecksum(0)
	off := transportChecksumOffset(proto)
	if off < 0 || (proto == ProtoUDP && binary.BigEndian.Uint16(l4[off:]) == 0) {
		return false
	}
	binary.BigEndian.PutUint16(l4[off:], Fold(PseudoHeaderSum(ip.Src(), ip.Dst(), proto, uint16(len(l4)))))
	return true
}
