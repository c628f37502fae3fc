package hdr

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Ethernet II header (IEEE 802.3, no VLAN tag):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                 Destination MAC (6 bytes)                     |
//	+                               +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                               |                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+                               +
//	|                   Source MAC (6 bytes)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           EtherType           |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
const (
	ethDst       = 0
	ethSrc       = 6
	ethEtherType = 12
)

// EtherType values the dataplane dispatches on, and the header length.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	EtherTypeIPv6 = 0x86DD
	EthernetLen   = 14
)

// MAC is an Ethernet hardware address. An array rather than net.HardwareAddr
// so it is comparable, usable as a map key and copied without allocation.
type MAC [6]byte

// BroadcastMAC is ff:ff:ff:ff:ff:ff. Treat it as a constant.
var BroadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ErrInvalidMAC is wrapped by ParseMAC errors so callers can test with errors.Is.
var ErrInvalidMAC = errors.New("invalid MAC address")

// IsZero reports whether m is 00:00:00:00:00:00, the "unknown" MAC in an ARP request.
func (m MAC) IsZero() bool { return m == MAC{} }

// String formats m as lower-case aa:bb:cc:dd:ee:ff. It allocates, so keep it
// off the per-packet path (logs, CLI, tests).
func (m MAC) String() string {
	const hexDigits = "0123456789abcdef"
	var buf [17]byte
	for i, b := range m {
		if i > 0 {
			buf[i*3-1] = ':'
		}
		buf[i*3] = hexDigits[b>>4]
		buf[i*3+1] = hexDigits[b&0x0f]
	}
	return string(buf[:])
}

// ParseMAC parses six two-digit hex groups separated by ':' or '-' (one
// separator style per address), in either case.
func ParseMAC(s string) (MAC, error) {
	var m MAC
	if len(s) != 17 {
		return m, fmt.Errorf("parse MAC %q: want 17 characters, got %d: %w", s, len(s), ErrInvalidMAC)
	}
	sep := s[2]
	if sep != ':' && sep != '-' {
		return m, fmt.Errorf("parse MAC %q: separator must be ':' or '-': %w", s, ErrInvalidMAC)
	}
	for i := range m {
		if i > 0 && s[i*3-1] != sep {
			return m, fmt.Errorf("parse MAC %q: mixed or missing separator at %d: %w", s, i*3-1, ErrInvalidMAC)
		}
		hi, okHi := fromHex(s[i*3])
		lo, okLo := fromHex(s[i*3+1])
		if !okHi || !okLo {
			return m, fmt.Errorf("parse MAC %q: bad hex digit in group %d: %w", s, i, ErrInvalidMAC)
		}
		m[i] = hi<<4 | lo
	}
	return m, nil
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Ethernet is a view over an Ethernet II header followed by its payload.
// The gate is len(e) >= EthernetLen; accessors assume it.
type Ethernet []byte

// IsValid reports whether e is long enough to hold the header.
func (e Ethernet) IsValid() bool { return len(e) >= EthernetLen }

// Dst returns the destination MAC.
func (e Ethernet) Dst() MAC { return MAC(e[ethDst : ethDst+6]) }

// Src returns the source MAC.
func (e Ethernet) Src() MAC { return MAC(e[ethSrc : ethSrc+6]) }

// EtherType returns the protocol of the payload.
func (e Ethernet) EtherType() uint16 { return binary.BigEndian.Uint16(e[ethEtherType:]) }

// SetDst writes the destination MAC. An array assignment, not copy: a
// 6-byte copy is a memmove call on every forwarded packet.
func (e Ethernet) SetDst(m MAC) { *(*MAC)(e[ethDst : ethDst+6]) = m }

// SetDstPacked writes the destination MAC from the low 48 bits of m,
// most significant first. A MAC built as bytes from such a number went
// through the stack as two stores read back by one wider load, which
// stalls store forwarding on every forwarded packet.
func (e Ethernet) SetDstPacked(m uint64) {
	binary.BigEndian.PutUint32(e[ethDst:], uint32(m>>16))
	binary.BigEndian.PutUint16(e[ethDst+4:], uint16(m))
}

// SetSrc writes the source MAC (see SetDst).
func (e Ethernet) SetSrc(m MAC) { *(*MAC)(e[ethSrc : ethSrc+6]) = m }

// SetEtherType writes the payload protocol.
func (e Ethernet) SetEtherType(t uint16) { binary.BigEndian.PutUint16(e[ethEtherType:], t) }

// Payload returns everything after the header, including any padding a short
// frame carries; the L3 header's own length field bounds the real data.
func (e Ethernet) Payload() []byte { return e[EthernetLen:] }
