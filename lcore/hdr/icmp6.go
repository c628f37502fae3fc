package hdr

import "encoding/binary"

// ICMPv6 (RFC 4443) shares ICMPv4's first word (type, code, checksum), so
// the ICMP view serves both; its checksum covers the IPv6 pseudo-header
// (TransportChecksum6 with ProtoICMPv6). Neighbour discovery (RFC 4861)
// messages are ICMPv6 types 135 and 136:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|R|S|O|                     Reserved                            |  NA (NS: reserved)
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                       Target Address (128 bits)               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Options (type, length in 8 bytes, value) ...
const (
	ICMPv6DestUnreachable = 1
	ICMPv6PacketTooBig    = 2
	ICMPv6TimeExceeded    = 3
	ICMPv6ParamProblem    = 4
	ICMPv6EchoRequest     = 128
	ICMPv6EchoReply       = 129
	ICMPv6NeighSolicit    = 135
	ICMPv6NeighAdvert     = 136

	// NDLen is an NS or NA without options.
	NDLen = 24
	// NDOptLen is a link-layer address option for Ethernet.
	NDOptLen = 8

	NDOptSourceLL = 1
	NDOptTargetLL = 2

	NAFlagRouter    = 0x80
	NAFlagSolicited = 0x40
	NAFlagOverride  = 0x20

	// NDHopLimit is the hop limit every ND message carries, proof that
	// it was not forwarded (RFC 4861 section 7.1).
	NDHopLimit = 255
)

// IsICMPv6Error reports whether an ICMPv6 type is an error (types below
// 128, RFC 4443 section 2.1).
func IsICMPv6Error(typ uint8) bool { return typ < 128 }

// ND is a view over a neighbour solicitation or advertisement.
type ND []byte

// IsValid checks RFC 4861's length rules (section 7.1.1 and 7.1.2): the
// fixed part, and options that each have a non-zero length and end
// within the message. The hop limit and code are the caller's to check.
func (b ND) IsValid() bool {
	if len(b) < NDLen {
		return false
	}
	for o := b[NDLen:]; len(o) > 0; {
		if len(o) < 2 || o[1] == 0 || int(o[1])*8 > len(o) {
			return false
		}
		o = o[int(o[1])*8:]
	}
	return true
}

// Target returns the target address.
func (b ND) Target() Addr6 { return Addr6(b[8:24]) }

// Flags returns an NA's R, S and O bits (NAFlag*).
func (b ND) Flags() uint8 { return b[4] & 0xe0 }

// LinkAddr returns the Ethernet address of the first option of type typ
// (NDOptSourceLL in an NS, NDOptTargetLL in an NA); false when absent or
// not of Ethernet's length.
func (b ND) LinkAddr(typ uint8) (MAC, bool) {
	for o := b[NDLen:]; len(o) >= 8 && o[1] != 0 && int(o[1])*8 <= len(o); o = o[int(o[1])*8:] {
		if o[0] == typ {
			if o[1] != 1 {
				return MAC{}, false
			}
			return MAC(o[2:8]), true
		}
	}
	return MAC{}, false
}

// EncodeND writes an NS or NA of NDLen+NDOptLen bytes: type, flags (NA),
// target, and a link-layer option of optType carrying mac. The checksum
// is the caller's (TransportChecksum6, once the addresses are known).
func (b ND) EncodeND(typ, flags uint8, target Addr6, optType uint8, mac MAC) {
	b[0], b[1] = typ, 0
	binary.BigEndian.PutUint16(b[2:], 0)
	binary.BigEndian.PutUint32(b[4:], uint32(flags)<<24)
	copy(b[8:24], target[:])
	b[24], b[25] = optType, 1
	copy(b[26:32], mac[:])
}
