package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/hdr"
)

// QUIC connection migration, DPVS's way. A QUIC connection outlives its
// client's address: a phone that changes networks, a NAT that rebinds,
// sends the next packets from another address or port, which no
// connection here knows, and a scheduler would send them to any server,
// which would answer with a stateless reset. A service with QUIC set
// reads the server out of the packet's destination connection ID instead,
// where a server that wants its connections to migrate encodes its
// address in DPVS's format (hdr.QUICServer), so that servers set up for
// DPVS (its patched nginx, its quic-go generator) need nothing new. A new
// flow of a QUIC service whose connection ID names one of the service's
// servers (its address's last bytes, and port when given) goes to that
// server, whatever its weight (a quiescent server's connections go on);
// any other goes to the scheduler: a client's first Initial carries a
// random ID.

// quicDest returns the index in svc.Dests of the server the QUIC packet
// d names, -1 if it names none of them. six: an IPv6 service.
func quicDest(svc *Service, d *desc, six bool) int {
	data := d.m.Data()
	start := int(d.l4) + hdr.UDPLen
	if start >= len(data) {
		return -1
	}
	end := len(data)
	if l := int(binary.BigEndian.Uint16(data[d.l4+4:])) + int(d.l4); l < end && l >= start {
		end = l // the frame's padding is not the datagram's
	}
	addr, n, port, ok := hdr.QUICServer(data[start:end])
	if !ok {
		return -1
	}
	for i := range svc.Dests {
		dst := &svc.Dests[i]
		if port != 0 && dst.Port != port {
			continue
		}
		var full []byte
		var a4 [4]byte
		if six && dst.Addr6 != (hdr.Addr6{}) {
			full = dst.Addr6[:]
		} else { // an IPv4 server, of an IPv4 service or by NAT64
			binary.BigEndian.PutUint32(a4[:], dst.Addr)
			full = a4[:]
		}
		if n <= len(full) && string(full[len(full)-n:]) == string(addr[8-n:]) {
			return i
		}
	}
	return -1
}
