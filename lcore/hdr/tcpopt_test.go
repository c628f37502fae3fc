package hdr

import (
	"encoding/binary"
	"testing"
)

// seg builds a TCP segment with the given options and a valid checksum.
func seg(opts []byte) TCP {
	b := make(TCP, TCPMinLen+len(opts))
	b.SetDataOffset(len(b))
	copy(b[TCPMinLen:], opts)
	b.SetChecksum(TransportChecksum(1, 2, ProtoTCP, b))
	return b
}

func TestTCPOptions(t *testing.T) {
	opts := []byte{TCPOptNOP, TCPOptMSS, 4, 0x05, 0xb4, TCPOptNOP, TCPOptNOP, TCPOptSACKPerm, 2, TCPOptNOP,
		TCPOptNOP, TCPOptNOP, TCPOptSACK, 10, 0, 0, 0, 100, 0, 0, 0, 200, TCPOptEnd, 0}
	b := seg(opts)
	if b.MSS() != 1460 || !b.HasOption(TCPOptSACKPerm) || b.HasOption(3) {
		t.Fatalf("MSS %d, SACK-permitted %v", b.MSS(), b.HasOption(TCPOptSACKPerm))
	}
	// An MSS at an odd offset, clamped: the checksum stays right.
	if !b.ClampMSS(1400, true) || b.MSS() != 1400 || b.ClampMSS(1450, true) {
		t.Fatal("clamp")
	}
	if b.Checksum() != TransportChecksum(1, 2, ProtoTCP, b) {
		t.Fatal("checksum after the clamp")
	}
	b.UnshiftSACK(28, 50, true)
	sack := b.Options()[14:]
	if binary.BigEndian.Uint32(sack) != 72 || binary.BigEndian.Uint32(sack[4:]) != 172 {
		t.Fatalf("SACK %d-%d", binary.BigEndian.Uint32(sack), binary.BigEndian.Uint32(sack[4:]))
	}
	if b.Checksum() != TransportChecksum(1, 2, ProtoTCP, b) {
		t.Fatal("checksum after SACK")
	}
	// Malformed options end the walk.
	if seg([]byte{TCPOptMSS, 1, 0, 0}).MSS() != 0 || seg([]byte{TCPOptMSS, 40, 0, 0}).MSS() != 0 {
		t.Fatal("malformed MSS read")
	}
}

func TestUnshiftSeq(t *testing.T) {
	for _, c := range []struct{ e, want uint32 }{
		{1000, 1000}, // at the floor: unchanged
		{999, 999},   // before it
		{1010, 1000}, // inside the added bytes
		{1028, 1000}, // just past them
		{1100, 1072},
		{^uint32(0) - 5, ^uint32(0) - 5}, // far before the floor (wrapped)
	} {
		if got := UnshiftSeq(c.e, 28, 1000); got != c.want {
			t.Errorf("UnshiftSeq(%d) = %d, want %d", c.e, got, c.want)
		}
	}
	// Across the wrap of the sequence space.
	floor := ^uint32(0) - 5
	if got := UnshiftSeq(30, 28, floor); got != 2 {
		t.Errorf("past the added bytes, across the wrap: %d, want 2", got)
	}
	if got := UnshiftSeq(10, 28, floor); got != floor {
		t.Errorf("inside the added bytes, across the wrap: %d, want %d", got, floor)
	}
}
