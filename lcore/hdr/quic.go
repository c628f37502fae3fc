package hdr

import "encoding/binary"

// A QUIC server that wants its connections to follow their clients to
// new addresses encodes its own address in the connection IDs it issues,
// DPVS's format (draft-ietf-quic-load-balancers' first octet kept):
//
//	First Octet (8), not read
//	L3 Address Length (3): bytes of the address, less 1 (1..8)
//	L4 Address Flag (1): the port follows the address
//	L3 Address (8..64): the address's last bytes
//	[L4 Address (16)]
//	Nonce (32..)
//
// The fields after the first octet start at its second byte's low nibble
// (each byte shifted by four bits).

// QUICMinCID is the shortest destination connection ID that names a
// server (DPVS's DPVS_QUIC_DCID_BYTES_MIN): a first octet, the lengths,
// an address byte and a 32-bit nonce.
const QUICMinCID = 7

// QUICServer reads the server a QUIC packet (payload, the UDP datagram's
// data) names: the address's last bytes (into addr, right-aligned, n of
// them) and the port (0 when not given). ok is false for a packet that is
// not QUIC version 1 (or version negotiation), or whose connection ID is
// too short to name one.
func QUICServer(payload []byte) (addr [8]byte, n int, port uint16, ok bool) {
	if len(payload) < 1 || payload[0]&0x40 == 0 { // the fixed bit
		return addr, 0, 0, false
	}
	var cid []byte
	if payload[0]&0x80 != 0 { // a long header: version, then the ID's length
		if len(payload) < 6 || binary.BigEndian.Uint32(payload[1:]) > 1 {
			return addr, 0, 0, false
		}
		l := int(payload[5])
		if l < QUICMinCID || l > 20 || len(payload) < 6+l {
			return addr, 0, 0, false
		}
		cid = payload[6 : 6+l]
	} else { // a short header: the ID right after the first byte, its length the server's to know
		cid = payload[1:]
	}
	if len(cid) < QUICMinCID {
		return addr, 0, 0, false
	}
	n = int(cid[1]>>5) + 1
	hasPort := cid[1]&0x10 != 0
	need := n + 2 // the nibbles of the address straddle one more byte
	if hasPort {
		need += 2
	}
	if len(cid) < need {
		return addr, 0, 0, false
	}
	nibbles := cid[1:]
	for i := range n {
		addr[8-n+i] = nibbles[i]<<4 | nibbles[i+1]>>4
	}
	if hasPort {
		p := nibbles[n:]
		port = uint16(p[0]<<4|p[1]>>4)<<8 | uint16(p[1]<<4|p[2]>>4)
	}
	return addr, n, port, true
}

// AppendQUICCID appends a connection ID of length cidLen (QUICMinCID..20)
// naming a server, as a server issues it: addr's last n bytes (1..8),
// port when not 0, random bits from nonce (at least cidLen bytes) for
// the rest. ok is false for lengths that cannot hold them.
func AppendQUICCID(b []byte, cidLen int, addr []byte, n int, port uint16, nonce []byte) ([]byte, bool) {
	l4 := 0
	if port != 0 {
		l4 = 2
	}
	if cidLen < QUICMinCID || cidLen > 20 || n < 1 || n > 8 || n > len(addr) || cidLen < n+l4+5 || len(nonce) < cidLen {
		return b, false
	}
	// The server's fields as bytes, then written four bits right of
	// their place, after the first octet and the 4-bit lengths.
	fields := append(append([]byte(nil), addr[len(addr)-n:]...), byte(port>>8), byte(port))[:n+l4]
	cid := make([]byte, cidLen)
	copy(cid, nonce[:cidLen])
	flag := byte(0)
	if l4 > 0 {
		flag = 0x10
	}
	cid[1] = byte(n-1)<<5 | flag | fields[0]>>4
	for i, f := range fields {
		cid[2+i] = f << 4
		if i+1 < len(fields) {
			cid[2+i] |= fields[i+1] >> 4
		} else {
			cid[2+i] |= nonce[0] & 0x0f
		}
	}
	return append(b, cid...), true
}
