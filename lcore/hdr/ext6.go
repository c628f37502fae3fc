package hdr

import "encoding/binary"

// IPv6 extension headers (RFC 8200 section 4) the walk understands.
const (
	ExtHopByHop = 0
	ExtRouting  = 43
	ExtFragment = 44
	ExtDestOpts = 60
	ExtNoNext   = 59
)

// MaxExtHeaders bounds the walk: a chain longer than this is dropped
// rather than followed (RFC 8200 expects at most one of each, two
// destination options headers; RFC 7045 lets a node drop the rest).
const MaxExtHeaders = 6

// ExtVerdict says why a walk stopped short of a transport header.
type ExtVerdict uint8

const (
	ExtOK          ExtVerdict = iota
	ExtTruncated              // a header runs past the payload
	ExtTooMany                // more than MaxExtHeaders headers
	ExtUnknown                // a next header neither an extension we walk nor a transport (ESP, AH, mobility, ...)
	ExtRoutingLeft            // a routing header with segments left: the packet is not for its destination field
	ExtBadFragment            // a second fragment header
)

// Ext6 is what the walk found: the transport protocol and its offset
// from the start of the IPv6 header, and the fragment header if any.
type Ext6 struct {
	Proto      uint8
	Off        int  // offset of the transport header in the IPv6 view
	Fragment   bool // a fragment header was seen
	MoreFrags  bool
	FragOffset uint16 // in bytes
	FragID     uint32
	FragHdrOff int // offset of the fragment header in the IPv6 view
}

// WalkExt follows b's extension headers (b passed IsValid) to the first
// header that is not one: hop-by-hop, routing (segments left 0 only),
// fragment and destination options are walked, at most MaxExtHeaders of
// them. Any other next header stops the walk with ExtOK and its number
// in Proto when it is a transport the caller may handle (TCP, UDP,
// ICMPv6, no next header), ExtUnknown otherwise. A later fragment
// (offset > 0) stops at its fragment header: what follows has no
// headers to read.
func (b IPv6) WalkExt() (Ext6, ExtVerdict) { return b.walkExt(IPv6Len + int(b.PayloadLength())) }

// WalkExtQuote is WalkExt for the IPv6 packet an ICMPv6 error quotes: b
// is the quote, which holds the fixed header (len(b) >= IPv6Len, version
// not checked) and may stop short of the payload length; the walk stays
// within both.
func (b IPv6) WalkExtQuote() (Ext6, ExtVerdict) {
	return b.walkExt(min(len(b), IPv6Len+int(b.PayloadLength())))
}

func (b IPv6) walkExt(end int) (Ext6, ExtVerdict) {
	x := Ext6{Proto: b.NextHeader(), Off: IPv6Len}
	for n := 0; ; n++ {
		switch x.Proto {
		case ProtoTCP, ProtoUDP, ProtoICMPv6, ExtNoNext:
			return x, ExtOK
		case ExtHopByHop:
			if n > 0 { // only right after the fixed header (RFC 8200 section 4.1)
				return x, ExtUnknown
			}
		case ExtRouting, ExtDestOpts, ExtFragment:
		default:
			return x, ExtUnknown
		}
		if n == MaxExtHeaders {
			return x, ExtTooMany
		}
		if x.Off+8 > end {
			return x, ExtTruncated
		}
		h := b[x.Off:end]
		size := 8
		switch x.Proto {
		case ExtFragment:
			if x.Fragment {
				return x, ExtBadFragment
			}
			fo := binary.BigEndian.Uint16(h[2:])
			x.Fragment, x.FragHdrOff = true, x.Off
			x.FragOffset, x.MoreFrags = fo&^7, fo&1 != 0
			x.FragID = binary.BigEndian.Uint32(h[4:])
		case ExtRouting:
			if h[3] != 0 {
				return x, ExtRoutingLeft
			}
			size = 8 * (int(h[1]) + 1)
		default:
			size = 8 * (int(h[1]) + 1)
		}
		if x.Off+size > end {
			return x, ExtTruncated
		}
		x.Proto, x.Off = h[0], x.Off+size
		if x.Fragment && x.FragOffset != 0 {
			return x, ExtOK
		}
	}
}
