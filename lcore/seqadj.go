package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/hdr"
)

// Sequence adjustment for a byte stream the director rewrote in the
// middle (the FTP helper's 227 replies), after IPVS's ip_vs_seq: once a
// segment's data changed length, every later byte of that direction is
// numbered differently on the two sides, for the rest of the connection.
// A streamSeq keeps, for one direction, the sequence number (in the
// sender's numbering) of the last segment rewritten, the total shift of
// the bytes after it, and the shift before it (for a retransmission of
// data from before that segment). The sender's sequence numbers move by
// it on the way to the receiver; the receiver's acknowledgements and
// SACK edges move back by it on the way to the sender. Checksums are
// updated incrementally.
type streamSeq struct {
	init  uint32 // seq of the last segment whose length changed
	delta int32  // shift of the bytes from that segment on
	prev  int32  // shift of the bytes before it
}

// SeqShift is a streamSeq as connection sync and the handover carry it.
type SeqShift struct {
	Init        uint32
	Delta, Prev int32
}

func (s *streamSeq) shift() SeqShift { return SeqShift{Init: s.init, Delta: s.delta, Prev: s.prev} }

func (s SeqShift) stream() streamSeq { return streamSeq{init: s.Init, delta: s.Delta, prev: s.Prev} }

// Possible reports whether s could be a stream's: one never shifted has
// its Init 0 too (a shift is never 0, so Delta and Prev are never both 0
// after one).
func (s SeqShift) Possible() bool { return s.Delta != 0 || s.Prev != 0 || s.Init == 0 }

// after reports whether a comes after b in sequence space (RFC 1982).
func seqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// active reports whether the stream was ever shifted.
func (s *streamSeq) active() bool { return s.delta != 0 || s.prev != 0 }

// fixSeq moves a segment's seq into the receiver's numbering.
func (s *streamSeq) fixSeq(tcp hdr.TCP) {
	if !s.active() {
		return
	}
	seq := tcp.Seq()
	d := s.prev
	if seqAfter(seq, s.init) {
		d = s.delta
	}
	tcp.SetChecksum(hdr.Update32(tcp.Checksum(), seq, seq+uint32(d)))
	tcp.SetSeq(seq + uint32(d))
}

// fixAck moves an acknowledgement (and SACK edges) of this stream, sent
// by its receiver, back into the sender's numbering.
func (s *streamSeq) fixAck(tcp hdr.TCP) {
	if !s.active() || tcp.Flags()&hdr.TCPFlagACK == 0 {
		return
	}
	ack := tcp.Ack()
	tcp.SetChecksum(hdr.Update32(tcp.Checksum(), ack, s.back(ack)))
	tcp.SetAck(s.back(ack))
	s.fixSACK(tcp)
}

// back is a receiver's number for a byte of this stream, in the sender's
// numbering.
func (s *streamSeq) back(n uint32) uint32 {
	if seqAfter(n, s.init+uint32(s.delta)) {
		return n - uint32(s.delta)
	}
	return n - uint32(s.prev)
}

// fixSACK moves the edges of a SACK option (RFC 2018) back like the ack.
func (s *streamSeq) fixSACK(tcp hdr.TCP) {
	opts := tcp[hdr.TCPMinLen:tcp.DataOffset()]
	for i := 0; i < len(opts); {
		switch kind := opts[i]; kind {
		case 0: // end of options
			return
		case 1: // no-op
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return // malformed: the receiver will ignore it too
		}
		n := int(opts[i+1])
		if opts[i] == 5 { // SACK: pairs of 32-bit edges
			for e := i + 2; e+4 <= i+n; e += 4 {
				old := binary.BigEndian.Uint32(opts[e:])
				nu := s.back(old)
				binary.BigEndian.PutUint32(opts[e:], nu)
				tcp.SetChecksum(hdr.Update32(tcp.Checksum(), old, nu))
			}
		}
		i += n
	}
}

// shifted records that the segment at seq (sender's numbering) changed
// length by diff. A retransmission of a segment already counted (seq not
// after the last one) changes nothing: it was rewritten alike.
func (s *streamSeq) shifted(seq uint32, diff int32) {
	if s.delta == 0 && s.prev == 0 || seqAfter(seq, s.init) {
		s.prev = s.delta
		s.delta += diff
		s.init = seq
	}
}
