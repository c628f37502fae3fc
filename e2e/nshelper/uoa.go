package main

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// uoaWatch prints the UDP option of address (DPVS's UOA: option 31,
// length 8 with the client's port and IPv4 address, 20 with an IPv6 one)
// of every datagram (IPv4 or IPv6) to -port that arrives on -dev, as the uoa kernel
// module on a real server would read it: "uoa CLIENT from SRC:SPORT mode
// ipo len N" for an IPv4 option, "mode opp" for DPVS's option protocol
// header (IP protocol 248), N the UDP length (8: an empty datagram
// carrying the option alone), after "ready". It only watches (copies of the
// frames, from AF_PACKET sockets): the kernel takes the datagrams as
// usual, and drops those of protocol 248, which it does not know.
func uoaWatch(args []string) error {
	return watchOptions("uoa", "UDP", args, []uint8{unix.IPPROTO_UDP, 248}, uoaLine)
}

// uoaLine describes the option of IP packet p, a UDP datagram to port
// (IPv4: in an option protocol header or not; IPv6, without extension
// headers: in one); false when p is not one or carries no option.
func uoaLine(p []byte, port uint16) (string, bool) {
	var opts, l4 []byte
	var src netip.Addr
	mode, proto := "ipo", byte(0)
	switch {
	case len(p) >= 20 && p[0]>>4 == 4:
		ihl := int(p[0]&0x0f) * 4
		if len(p) < ihl {
			return "", false
		}
		opts, l4, src, proto = p[20:ihl], p[ihl:], netip.AddrFrom4([4]byte(p[12:16])), p[9]
	case len(p) >= 40 && p[0]>>4 == 6:
		l4, src, proto = p[40:], netip.AddrFrom16([16]byte(p[8:24])), p[6]
	default:
		return "", false
	}
	if proto == 248 {
		// Version, protocol 17, the header's length with its options.
		if len(l4) < 4 || l4[1] != unix.IPPROTO_UDP || int(binary.BigEndian.Uint16(l4[2:])) > len(l4) {
			return "", false
		}
		n := int(binary.BigEndian.Uint16(l4[2:]))
		opts, l4, mode = l4[4:n], l4[n:], "opp"
	}
	if len(l4) < 8 || binary.BigEndian.Uint16(l4[2:]) != port {
		return "", false
	}
	from := netip.AddrPortFrom(src, binary.BigEndian.Uint16(l4[0:]))
	client, ok := clientOption(opts, 31)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("uoa %s from %s mode %s len %d", client, from, mode, binary.BigEndian.Uint16(l4[4:])), true
}
