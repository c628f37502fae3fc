package hdr

import "encoding/binary"

// TCP header (RFC 9293 section 3.1):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source Port          |       Destination Port        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                        Sequence Number                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Acknowledgment Number                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  Data |       |C|E|U|A|P|R|S|F|                               |
//	| Offset| Rsrvd |W|C|R|C|S|S|Y|I|            Window             |
//	|       |       |R|E|G|K|H|T|N|N|                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           Checksum            |         Urgent Pointer        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           [Options]                           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	tcpSrcPort    = 0
	tcpDstPort    = 2
	tcpSeq        = 4
	tcpAck        = 8
	tcpDataOffset = 12
	tcpFlags      = 13
	tcpWindow     = 14
	tcpChecksum   = 16
	tcpUrgent     = 18
)

// TCPMinLen is the length of a TCP header without options; TCPMaxLen
// the longest a data offset can say (15 words).
const (
	TCPMinLen = 20
	TCPMaxLen = 60
)

// TCP flag bits as returned by Flags.
const (
	TCPFlagFIN = 0x01
	TCPFlagSYN = 0x02
	TCPFlagRST = 0x04
	TCPFlagPSH = 0x08
	TCPFlagACK = 0x10
	TCPFlagURG = 0x20
	TCPFlagECE = 0x40
	TCPFlagCWR = 0x80
)

// TCP is a view over a TCP segment, bounded to the segment (IPv4.Payload),
// since the checksum and Payload depend on where it ends. Accessors assume
// IsValid passed.
type TCP []byte

// IsValid reports whether b holds a full TCP header, options included.
func (b TCP) IsValid() bool {
	if len(b) < TCPMinLen {
		return false
	}
	off := b.DataOffset()
	return off >= TCPMinLen && off <= len(b)
}

// SrcPort returns the source port.
func (b TCP) SrcPort() uint16 { return binary.BigEndian.Uint16(b[tcpSrcPort:]) }

// DstPort returns the destination port.
func (b TCP) DstPort() uint16 { return binary.BigEndian.Uint16(b[tcpDstPort:]) }

// Seq returns the sequence number.
func (b TCP) Seq() uint32 { return binary.BigEndian.Uint32(b[tcpSeq:]) }

// Ack returns the acknowledgment number.
func (b TCP) Ack() uint32 { return binary.BigEndian.Uint32(b[tcpAck:]) }

// DataOffset returns the header length in bytes, options included.
func (b TCP) DataOffset() int { return int(b[tcpDataOffset]>>4) * 4 }

// Flags returns the flag byte (TCPFlagFIN ... TCPFlagCWR).
func (b TCP) Flags() uint8 { return b[tcpFlags] }

// Window returns the receive window.
func (b TCP) Window() uint16 { return binary.BigEndian.Uint16(b[tcpWindow:]) }

// Checksum returns the checksum field as it stands.
func (b TCP) Checksum() uint16 { return binary.BigEndian.Uint16(b[tcpChecksum:]) }

// UrgentPointer returns the urgent pointer.
func (b TCP) UrgentPointer() uint16 { return binary.BigEndian.Uint16(b[tcpUrgent:]) }

// Payload returns the data after the header and options.
func (b TCP) Payload() []byte { return b[b.DataOffset():] }

// SetSrcPort writes the source port without touching the checksum.
func (b TCP) SetSrcPort(p uint16) { binary.BigEndian.PutUint16(b[tcpSrcPort:], p) }

// SetDstPort writes the destination port without touching the checksum.
func (b TCP) SetDstPort(p uint16) { binary.BigEndian.PutUint16(b[tcpDstPort:], p) }

// SetSeq writes the sequence number.
func (b TCP) SetSeq(n uint32) { binary.BigEndian.PutUint32(b[tcpSeq:], n) }

// SetAck writes the acknowledgment number.
func (b TCP) SetAck(n uint32) { binary.BigEndian.PutUint32(b[tcpAck:], n) }

// SetDataOffset writes the header length in bytes (a multiple of 4, 20 to 60).
func (b TCP) SetDataOffset(n int) { b[tcpDataOffset] = uint8(n/4) << 4 }

// SetFlags writes the flag byte.
func (b TCP) SetFlags(f uint8) { b[tcpFlags] = f }

// SetWindow writes the receive window.
func (b TCP) SetWindow(w uint16) { binary.BigEndian.PutUint16(b[tcpWindow:], w) }

// SetChecksum writes the checksum field.
func (b TCP) SetChecksum(c uint16) { binary.BigEndian.PutUint16(b[tcpChecksum:], c) }

// SetUrgentPointer writes the urgent pointer.
func (b TCP) SetUrgentPointer(p uint16) { binary.BigEndian.PutUint16(b[tcpUrgent:], p) }

// SetSrcPortWithChecksumUpdate rewrites the source port (SNAT, replies in
// VS/NAT) and adjusts the checksum incrementally without reading the payload.
func (b TCP) SetSrcPortWithChecksumUpdate(p uint16) {
	b.SetChecksum(Update16(b.Checksum(), b.SrcPort(), p))
	b.SetSrcPort(p)
}

// SetDstPortWithChecksumUpdate rewrites the destination port (DNAT to the
// real server) and adjusts the checksum incrementally.
func (b TCP) SetDstPortWithChecksumUpdate(p uint16) {
	b.SetChecksum(Update16(b.Checksum(), b.DstPort(), p))
	b.SetDstPort(p)
}

// UpdateChecksumForAddr adjusts the checksum for an IPv4 address in the
// pseudo-header changing from old to new. Call it alongside
// IPv4.SetSrcWithChecksumUpdate or SetDstWithChecksumUpdate.
func (b TCP) UpdateChecksumForAddr(old, new uint32) {
	b.SetChecksum(Update32(b.Checksum(), old, new))
}

// TCPFields are the fields of an option-less TCP header, for Encode.
type TCPFields struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8
	Window           uint16
}

// Encode writes a 20-byte header (no options, urgent pointer 0) from f and
// the checksum over the pseudo-header of src and dst and the whole of b,
// which must be the segment (header plus data).
func (b TCP) Encode(f *TCPFields, src, dst uint32) {
	_ = b[TCPMinLen-1]
	b.SetSrcPort(f.SrcPort)
	b.SetDstPort(f.DstPort)
	b.SetSeq(f.Seq)
	b.SetAck(f.Ack)
	b.SetDataOffset(TCPMinLen)
	b.SetFlags(f.Flags)
	b.SetWindow(f.Window)
	b.SetUrgentPointer(0)
	b.SetChecksum(TransportChecksum(src, dst, ProtoTCP, b))
}
