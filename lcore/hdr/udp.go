package hdr

import "encoding/binary"

// UDP header (RFC 768):
//
//	 0      7 8     15 16    23 24    31
//	+--------+--------+--------+--------+
//	|     Source      |   Destination   |
//	|      Port       |      Port       |
//	+--------+--------+--------+--------+
//	|                 |                 |
//	|     Length      |    Checksum     |
//	+--------+--------+--------+--------+
//	|          data octets ...
//	+---------------- ...
const (
	udpSrcPort  = 0
	udpDstPort  = 2
	udpLength   = 4
	udpChecksum = 6
)

// UDPLen is the length of the UDP header.
const UDPLen = 8

// UDP is a view over a UDP datagram, bounded to the IPv4 payload. A checksum
// of 0 means the sender sent none (RFC 768); the ...WithChecksumUpdate
// methods keep it 0 and never produce 0 themselves. Accessors assume IsValid.
type UDP []byte

// IsValid reports whether b holds the header and the Length field fits in b.
func (b UDP) IsValid() bool {
	if len(b) < UDPLen {
		return false
	}
	n := int(b.Length())
	return n >= UDPLen && n <= len(b)
}

// SrcPort returns the source port.
func (b UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[udpSrcPort:]) }

// DstPort returns the destination port.
func (b UDP) DstPort() uint16 { return binary.BigEndian.Uint16(b[udpDstPort:]) }

// Length returns the length of header plus data.
func (b UDP) Length() uint16 { return binary.BigEndian.Uint16(b[udpLength:]) }

// Checksum returns the checksum field; 0 means none was sent.
func (b UDP) Checksum() uint16 { return binary.BigEndian.Uint16(b[udpChecksum:]) }

// Payload returns the data, bounded by the Length field.
func (b UDP) Payload() []byte { return b[UDPLen:b.Length()] }

// SetSrcPort writes the source port without touching the checksum.
func (b UDP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(b[udpSrcPort:], p) }

// SetDstPort writes the destination port without touching the checksum.
func (b UDP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(b[udpDstPort:], p) }

// SetLength writes the length field.
func (b UDP) SetLength(n uint16) { binary.BigEndian.PutUint16(b[udpLength:], n) }

// SetChecksum writes the checksum field.
func (b UDP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[udpChecksum:], c) }

// SetSrcPortWithChecksumUpdate rewrites the source port and adjusts the
// checksum incrementally, keeping an absent (0) checksum absent.
func (b UDP) SetSrcPortWithChecksumUpdate(p uint16) {
	b.SetChecksum(UpdateUDP16(b.Checksum(), b.SrcPort(), p))
	b.SetSrcPort(p)
}

// SetDstPortWithChecksumUpdate rewrites the destination port and adjusts the
// checksum incrementally, keeping an absent (0) checksum absent.
func (b UDP) SetDstPortWithChecksumUpdate(p uint16) {
	b.SetChecksum(UpdateUDP16(b.Checksum(), b.DstPort(), p))
	b.SetDstPort(p)
}

// UpdateChecksumForAddr adjusts the checksum for an IPv4 address in the
// pseudo-header changing from old to new, keeping an absent checksum absent.
func (b UDP) UpdateChecksumForAddr(old, new uint32) {
	b.SetChecksum(UpdateUDP32(b.Checksum(), old, new))
}
