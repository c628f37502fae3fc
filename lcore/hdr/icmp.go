package hdr

import "encoding/binary"

// ICMPv4 header (RFC 792), with the echo and "fragmentation needed" layouts
// of the second word:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Type      |     Code      |          Checksum             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Identifier          |        Sequence Number        |  echo
//	|             unused            |         Next-Hop MTU          |  frag needed (RFC 1191)
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Data (echo) or original IP header + 64 bits (errors) ...
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-
const (
	icmpType     = 0
	icmpCode     = 1
	icmpChecksum = 2
	icmpID       = 4
	icmpSeq      = 6
	icmpMTU      = 6
)

// ICMPLen is the length of the fixed ICMPv4 header.
const ICMPLen = 8

// ICMPv4 types and codes the dataplane answers or forwards.
const (
	ICMPEchoReply           = 0
	ICMPDestUnreachable     = 3
	ICMPEchoRequest         = 8
	ICMPTimeExceeded        = 11
	ICMPParamProblem        = 12
	ICMPCodeFragNeeded      = 4 // with ICMPDestUnreachable
	ICMPCodeTTLExceeded     = 0 // with ICMPTimeExceeded
	ICMPCodePortUnreachable = 3 // with ICMPDestUnreachable
)

// ICMPErrorMinLen is the shortest ICMP error the dataplane can relate to a
// connection: the header, a quoted IPv4 header and the 8 bytes of its
// payload that hold the ports (RFC 792).
const ICMPErrorMinLen = ICMPLen + IPv4MinLen + 8

// IsICMPError reports whether an ICMP type reports an error about a packet
// it quotes (RFC 792).
func IsICMPError(typ uint8) bool {
	return typ == ICMPDestUnreachable || typ == ICMPTimeExceeded || typ == ICMPParamProblem
}

// ICMP is a view over an ICMPv4 message, bounded to the IPv4 payload because
// the checksum covers the whole message. Accessors assume IsValid.
type ICMP []byte

// IsValid reports whether b holds the fixed 8-byte header.
func (b ICMP) IsValid() bool { return len(b) >= ICMPLen }

// Type returns the message type.
func (b ICMP) Type() uint8 { return b[icmpType] }

// Code returns the message code.
func (b ICMP) Code() uint8 { return b[icmpCode] }

// Checksum returns the checksum field as it stands.
func (b ICMP) Checksum() uint16 { return binary.BigEndian.Uint16(b[icmpChecksum:]) }

// ID returns the echo identifier (echo request and reply only).
func (b ICMP) ID() uint16 { return binary.BigEndian.Uint16(b[icmpID:]) }

// Seq returns the echo sequence number (echo request and reply only).
func (b ICMP) Seq() uint16 { return binary.BigEndian.Uint16(b[icmpSeq:]) }

// MTU returns the next-hop MTU of a "fragmentation needed" message.
func (b ICMP) MTU() uint16 { return binary.BigEndian.Uint16(b[icmpMTU:]) }

// Payload returns the data after the fixed header: echo data, or for error
// messages the offending packet's IP header and first 8 bytes.
func (b ICMP) Payload() []byte { return b[ICMPLen:] }

// SetType writes the message type without touching the checksum.
func (b ICMP) SetType(t uint8) { b[icmpType] = t }

// SetCode writes the message code without touching the checksum.
func (b ICMP) SetCode(c uint8) { b[icmpCode] = c }

// SetChecksum writes the checksum field.
func (b ICMP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[icmpChecksum:], c) }

// SetID writes the echo identifier.
func (b ICMP) SetID(id uint16) { binary.BigEndian.PutUint16(b[icmpID:], id) }

// SetIDWithChecksumUpdate rewrites the echo identifier and folds the
// change into the checksum (RFC 1624): no pseudo-header, so an address
// change leaves an ICMP checksum as it is.
func (b ICMP) SetIDWithChecksumUpdate(id uint16) {
	b.SetChecksum(Update16(b.Checksum(), b.ID(), id))
	b.SetID(id)
}

// SetSeq writes the echo sequence number.
func (b ICMP) SetSeq(s uint16) { binary.BigEndian.PutUint16(b[icmpSeq:], s) }

// SetMTU writes the next-hop MTU of a "fragmentation needed" message and
// zeroes the unused half of the word.
func (b ICMP) SetMTU(mtu uint16) {
	binary.BigEndian.PutUint16(b[icmpID:], 0)
	binary.BigEndian.PutUint16(b[icmpMTU:], mtu)
}

// SetTypeCodeWithChecksumUpdate rewrites type and code together (they share
// a 16-bit word), e.g. turning an echo request into a reply in place without
// re-reading the echo data.
func (b ICMP) SetTypeCodeWithChecksumUpdate(typ, code uint8) {
	old := binary.BigEndian.Uint16(b[icmpType:])
	b[icmpType] = typ
	b[icmpCode] = code
	b.SetChecksum(Update16(b.Checksum(), old, uint16(typ)<<8|uint16(code)))
}

// SetChecksumFull computes and writes the checksum over the whole message.
// For messages of a few dozen bytes (an error quoting a header) that changed
// in several places; an echo reply uses SetTypeCodeWithChecksumUpdate.
func (b ICMP) SetChecksumFull() { b.SetChecksum(ICMPChecksum(b)) }
