package hdr

import "encoding/binary"

// RewriteSrc6 changes an IPv6 TCP or UDP packet's source address and
// port, updating the transport checksum incrementally (RFC 1624) for the
// 16-byte address (through the pseudo-header) and the port. IPv6 has no
// header checksum, and a UDP checksum is mandatory: 0 never comes out.
func RewriteSrc6(ip IPv6, l4 []byte, proto uint8, addr Addr6, port uint16) {
	rewrite6(ip, l4, proto, ipv6Src, tcpSrcPort, addr, port)
}

// RewriteDst6 is RewriteSrc6 for the destination.
func RewriteDst6(ip IPv6, l4 []byte, proto uint8, addr Addr6, port uint16) {
	rewrite6(ip, l4, proto, ipv6Dst, tcpDstPort, addr, port)
}

func rewrite6(ip IPv6, l4 []byte, proto uint8, addrOff, portOff int, addr Addr6, port uint16) {
	old := Addr6(ip[addrOff : addrOff+16])
	oldPort := binary.BigEndian.Uint16(l4[portOff:])
	if off := transportChecksumOffset(proto); off >= 0 && len(l4) >= off+2 {
		cs := Update16(UpdateAddr6(binary.BigEndian.Uint16(l4[off:]), old, addr), oldPort, port)
		if proto == ProtoUDP && cs == 0 {
			cs = 0xffff
		}
		binary.BigEndian.PutUint16(l4[off:], cs)
	}
	copy(ip[addrOff:addrOff+16], addr[:])
	binary.BigEndian.PutUint16(l4[portOff:], port)
}
