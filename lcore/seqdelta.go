package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// Sequence-number adjustment. When the director changes a TCP
// connection's byte streams (a PROXY protocol header put before the
// client's first byte, a SYN proxy's cookie as the server's ISN), the two
// ends number the same bytes differently for the whole connection; each
// segment is moved between the two numberings here. The deltas live in
// the connection's extension (conn.Ext):
//
//   - SeqIn: bytes added to the client's stream just after its ISN (ISN+1
//     onwards). Client -> server: seq += SeqIn past ISN+1. Server ->
//     client: ack and SACK edges -= SeqIn, those inside the added bytes
//     mapped to ISN+1.
//   - SeqOut: offset of the server's numbering as the client sees it.
//     Server -> client: seq += SeqOut. Client -> server: ack and SACK
//     edges -= SeqOut.
//
// csum false leaves the checksum to the NIC (offload).

// adjustSeq moves a segment travelling dir into the numbering of its
// receiver.
func adjustSeq(tcp hdr.TCP, x *conn.Ext, dir conn.Dir, csum bool) {
	if x.Flags&(extSynTS|extWSCliLeg|extWSSrvLeg) != 0 {
		adjustSpliced(tcp, x, dir, csum) // timestamps and window scale (synopts.go)
	}
	if x.SeqIn == 0 && x.SeqOut == 0 {
		return
	}
	hasAck := tcp.Flags()&hdr.TCPFlagACK != 0
	if dir == conn.Original {
		if seq := tcp.Seq(); x.SeqIn != 0 && int32(seq-(x.ClientISN+1)) > 0 {
			setSeq(tcp, seq+x.SeqIn, csum)
		}
		if x.SeqOut != 0 && hasAck {
			rsISN := x.ServerISN - x.SeqOut
			setAck(tcp, hdr.UnshiftSeq(tcp.Ack(), x.SeqOut, rsISN), csum)
			tcp.UnshiftSACK(x.SeqOut, rsISN, csum)
		}
		return
	}
	if x.SeqOut != 0 {
		setSeq(tcp, tcp.Seq()+x.SeqOut, csum)
	}
	if x.SeqIn != 0 && hasAck {
		setAck(tcp, hdr.UnshiftSeq(tcp.Ack(), x.SeqIn, x.ClientISN+1), csum)
		tcp.UnshiftSACK(x.SeqIn, x.ClientISN+1, csum)
	}
}

func setSeq(tcp hdr.TCP, v uint32, csum bool) {
	if csum {
		tcp.SetChecksum(hdr.Update32(tcp.Checksum(), tcp.Seq(), v))
	}
	tcp.SetSeq(v)
}

func setAck(tcp hdr.TCP, v uint32, csum bool) {
	if csum {
		tcp.SetChecksum(hdr.Update32(tcp.Checksum(), tcp.Ack(), v))
	}
	tcp.SetAck(v)
}
