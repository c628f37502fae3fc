package hdr

import "encoding/binary"

// TCP options the dataplane edits in place: the MSS of a SYN (clamped
// where the director grows segments) and the SACK blocks of a connection
// whose sequence numbers it moves. Each edit keeps the checksum right by
// an incremental update over the options area (an even length at an even
// offset), so a wrong checksum stays wrong; with offload the caller lets
// the NIC compute it.

// TCP option kinds.
const (
	TCPOptEnd      = 0
	TCPOptNOP      = 1
	TCPOptMSS      = 2
	TCPOptSACKPerm = 4
	TCPOptSACK     = 5
)

// Options views the options area (empty without options).
func (b TCP) Options() []byte { return b[TCPMinLen:b.DataOffset()] }

// nextOption returns the offset and length of the option at off in opts,
// or ok false at the end of the list or on a malformed option.
func nextOption(opts []byte, off int) (kind byte, n int, ok bool) {
	for off < len(opts) {
		switch k := opts[off]; k {
		case TCPOptEnd:
			return 0, 0, false
		case TCPOptNOP:
			return k, 1, true
		default:
			if off+1 >= len(opts) || opts[off+1] < 2 || off+int(opts[off+1]) > len(opts) {
				return 0, 0, false
			}
			return k, int(opts[off+1]), true
		}
	}
	return 0, 0, false
}

// ClampMSS lowers the MSS option to at most mss, reporting whether it
// changed anything. updateChecksum false leaves the checksum to offload.
func (b TCP) ClampMSS(mss uint16, updateChecksum bool) bool {
	opts := b.Options()
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			return false
		}
		if kind == TCPOptMSS && n == 4 {
			old := binary.BigEndian.Uint16(opts[off+2:])
			if old <= mss {
				return false
			}
			before := Checksum(opts, 0)
			binary.BigEndian.PutUint16(opts[off+2:], mss)
			if updateChecksum {
				b.SetChecksum(UpdateBlock(b.Checksum(), before, Checksum(opts, 0)))
			}
			return true
		}
		off += n
	}
}

// HasOption reports whether the options hold one of the given kind.
func (b TCP) HasOption(kind byte) bool {
	opts := b.Options()
	for off := 0; ; {
		k, n, ok := nextOption(opts, off)
		if !ok {
			return false
		}
		if k == kind {
			return true
		}
		off += n
	}
}

// MSS returns the MSS option's value, or 0 without one.
func (b TCP) MSS() uint16 {
	opts := b.Options()
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			return 0
		}
		if kind == TCPOptMSS && n == 4 {
			return binary.BigEndian.Uint16(opts[off+2:])
		}
		off += n
	}
}

// UnshiftSeq maps a sequence number of a stream the director lengthened
// by delta bytes just after floor back to the sender's: e - delta, and
// floor for the numbers inside the added bytes.
func UnshiftSeq(e, delta, floor uint32) uint32 {
	if int32(e-(floor+delta)) < 0 {
		if int32(e-floor) > 0 {
			return floor
		}
		return e // at or before floor: not moved
	}
	return e - delta
}

// UnshiftSACK rewrites each SACK block edge e as UnshiftSeq(e, delta,
// floor). updateChecksum false leaves the checksum to offload.
func (b TCP) UnshiftSACK(delta, floor uint32, updateChecksum bool) {
	opts := b.Options()
	if len(opts) == 0 {
		return
	}
	var before uint32
	changed := false
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			break
		}
		if kind == TCPOptSACK && n >= 10 && (n-2)%8 == 0 {
			if !changed && updateChecksum {
				before = Checksum(opts, 0)
			}
			changed = true
			for e := off + 2; e < off+n; e += 4 {
				binary.BigEndian.PutUint32(opts[e:], UnshiftSeq(binary.BigEndian.Uint32(opts[e:]), delta, floor))
			}
		}
		off += n
	}
	if changed && updateChecksum {
		b.SetChecksum(UpdateBlock(b.Checksum(), before, Checksum(opts, 0)))
	}
}

// SynOptions are the options a SYN offers, as the SYN proxy reads them.
type SynOptions struct {
	MSS          uint16 // 0: none
	SACKPerm     bool
	WScale       uint8
	HasWScale    bool
	TSval, TSecr uint32
	HasTS        bool
}

// SynOptions reads MSS, SACK-permitted, window scale and timestamps in
// one pass over the options, each the first well-formed one of its kind
// as MSS, HasOption, WScale and Timestamps find it: a SYN cookie answers
// every SYN of a flood, and four passes cost as much as the cookie. It
// fills o rather than returning a SynOptions: the returned struct was
// copied through the stack, a wide load of narrow stores that stalled
// store forwarding on every SYN.
func (b TCP) SynOptions(o *SynOptions) {
	*o = SynOptions{}
	opts := b.Options()
	hasMSS := false
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			return
		}
		switch {
		case kind == TCPOptMSS && n == 4 && !hasMSS:
			o.MSS, hasMSS = binary.BigEndian.Uint16(opts[off+2:]), true
		case kind == TCPOptSACKPerm:
			o.SACKPerm = true
		case kind == TCPOptWScale && n == 3 && !o.HasWScale:
			o.WScale, o.HasWScale = opts[off+2], true
		case kind == TCPOptTimestamp && n == 10 && !o.HasTS:
			o.TSval, o.TSecr, o.HasTS = binary.BigEndian.Uint32(opts[off+2:]), binary.BigEndian.Uint32(opts[off+6:]), true
		}
		off += n
	}
}
