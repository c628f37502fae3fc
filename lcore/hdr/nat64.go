package hdr

// UpdatePseudo64 returns a TCP or UDP checksum adjusted for its segment
// moving from an IPv6 packet (src6 -> dst6) to an IPv4 one (src4 ->
// dst4), NAT64's header translation: the two pseudo-headers differ in
// their addresses only (the length and protocol words sum alike, RFC 8200
// 8.1 and RFC 768), so the update is RFC 1624's for the addresses.
func UpdatePseudo64(csum uint16, src6, dst6 Addr6, src4, dst4 uint32) uint16 {
	return UpdateBlock(csum, sum6(src6, dst6), sum4(src4, dst4))
}

// UpdatePseudo46 is UpdatePseudo64 the other way, IPv4 to IPv6.
func UpdatePseudo46(csum uint16, src4, dst4 uint32, src6, dst6 Addr6) uint16 {
	return UpdateBlock(csum, sum4(src4, dst4), sum6(src6, dst6))
}

func sum6(a, b Addr6) uint32 { return Checksum(b[:], Checksum(a[:], 0)) }

func sum4(a, b uint32) uint32 {
	return uint32(Fold(a>>16 + a&0xffff + b>>16 + b&0xffff))
}
