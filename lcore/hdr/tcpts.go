package hdr

import "encoding/binary"

// The options a SYN proxy must carry between two handshakes: window
// scale (RFC 7323 section 2) and timestamps (section 3), read from SYNs
// and, for timestamps, moved on every segment of a spliced connection.

// More TCP option kinds.
const (
	TCPOptWScale    = 3
	TCPOptTimestamp = 8
)

// WScale returns the window scale option's shift, and whether there is one.
func (b TCP) WScale() (uint8, bool) {
	opts := b.Options()
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			return 0, false
		}
		if kind == TCPOptWScale && n == 3 {
			return opts[off+2], true
		}
		off += n
	}
}

// Timestamps returns the timestamps option's TSval and TSecr, and whether
// there is one.
func (b TCP) Timestamps() (tsval, tsecr uint32, ok bool) {
	opts := b.Options()
	if off := tsOption(opts); off >= 0 {
		return binary.BigEndian.Uint32(opts[off+2:]), binary.BigEndian.Uint32(opts[off+6:]), true
	}
	return 0, 0, false
}

// tsOption is the offset of the timestamps option in opts, or -1.
func tsOption(opts []byte) int {
	for off := 0; ; {
		kind, n, ok := nextOption(opts, off)
		if !ok {
			return -1
		}
		if kind == TCPOptTimestamp && n == 10 {
			return off
		}
		off += n
	}
}

// ShiftTimestamps adds valDelta to the TSval and takes ecrDelta off the
// TSecr of the timestamps option, if there is one. updateChecksum false
// leaves the checksum to offload.
func (b TCP) ShiftTimestamps(valDelta, ecrDelta uint32, updateChecksum bool) {
	opts := b.Options()
	off := tsOption(opts)
	if off < 0 {
		return
	}
	var before uint32
	if updateChecksum {
		before = Checksum(opts, 0)
	}
	binary.BigEndian.PutUint32(opts[off+2:], binary.BigEndian.Uint32(opts[off+2:])+valDelta)
	binary.BigEndian.PutUint32(opts[off+6:], binary.BigEndian.Uint32(opts[off+6:])-ecrDelta)
	if updateChecksum {
		b.SetChecksum(UpdateBlock(b.Checksum(), before, Checksum(opts, 0)))
	}
}
