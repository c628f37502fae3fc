package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// ICMP types handled as errors about a connection (RFC 792).
const (
	icmpParamProblem = 12
	icmpErrorMinLen  = hdr.ICMPLen + hdr.IPv4MinLen + 8 // header, quoted IP header, 8 bytes of its payload
)

// handleICMP answers echo requests to the VIPs and our own addresses, and
// delivers ICMP errors about tracked connections to where they belong.
func (w *Worker) handleICMP(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, in int) {
	icmp := hdr.ICMP(ip.Payload())
	if !icmp.IsValid() {
		w.drop(m, DropBadICMP)
		return
	}
	switch icmp.Type() {
	case hdr.ICMPEchoRequest:
		dst := ip.Dst()
		if !w.snap.IsVIP(dst) && !w.snap.isLocal(dst) {
			w.drop(m, DropNoConn)
			return
		}
		w.echoReply(m, eth, ip, icmp, in)
	case hdr.ICMPDestUnreachable, hdr.ICMPTimeExceeded, icmpParamProblem:
		w.icmpError(m, eth, ip, icmp)
	default:
		w.drop(m, DropICMPType)
	}
}

// echoReply turns an echo request into its reply in place and sends it
// back where it came from.
func (w *Worker) echoReply(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, icmp hdr.ICMP, in int) {
	src, dst := ip.Src(), ip.Dst()
	ip.SetSrc(dst) // swapping the addresses leaves the header checksum as it is
	ip.SetDst(src)
	ip.SetTTLWithChecksumUpdate(64)
	icmp.SetTypeCodeWithChecksumUpdate(hdr.ICMPEchoReply, 0)
	m.SetOlFlags(0)
	w.cnt.own[ICMPEchoReplies]++
	w.transmit(m, eth, in, eth.Src())
}

// icmpError handles an ICMP error quoting a packet of a tracked connection.
// The quoted packet is one that left the balancer (or a real server, for
// DR/TUN), so its reverse is the connection's key. For VS/NAT the outer
// and quoted addresses and ports are translated like the connection's
// packets; for DR/TUN the error goes to the real server unchanged.
func (w *Worker) icmpError(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, icmp hdr.ICMP) {
	quoted := hdr.IPv4(icmp.Payload())
	if len(icmp) < icmpErrorMinLen || len(quoted) < hdr.IPv4MinLen || quoted[0]>>4 != 4 ||
		quoted.HeaderLen() < hdr.IPv4MinLen || len(quoted) < quoted.HeaderLen()+8 {
		w.drop(m, DropBadICMP)
		return
	}
	proto := quoted.Protocol()
	if proto != hdr.ProtoTCP && proto != hdr.ProtoUDP {
		w.drop(m, DropNoConn)
		return
	}
	ql4 := quoted[quoted.HeaderLen():]
	qsport, qdport := binary.BigEndian.Uint16(ql4[l4SrcPort:]), binary.BigEndian.Uint16(ql4[l4DstPort:])
	id, dir, ok := w.table.Lookup(proto, quoted.Dst(), qdport, quoted.Src(), qsport)
	if !ok {
		w.drop(m, DropNoConn)
		return
	}
	c := w.table.Get(id)
	w.cnt.own[ICMPErrors]++
	switch {
	case c.Fwd == FwdNAT && dir == conn.Original:
		// From the client's side, about a reply we sent as VIP:vport: the
		// real server must hear of it as RIP:rport.
		ip.SetDstWithChecksumUpdate(c.RIP)
		translateQuoted(quoted, ql4, proto, true, c.RIP, c.RPort)
		fixICMPChecksum(icmp)
		m.SetOlFlags(0)
		w.output(m, eth, c.RIP)
	case c.Fwd == FwdNAT:
		// From the real server's side, about a packet we sent it: the client
		// must hear of it from VIP:vport.
		ip.SetSrcWithChecksumUpdate(c.VIP)
		translateQuoted(quoted, ql4, proto, false, c.VIP, c.VPort)
		fixICMPChecksum(icmp)
		m.SetOlFlags(0)
		w.output(m, eth, c.ClientIP)
	case c.Fwd == FwdDR:
		m.SetOlFlags(0)
		w.output(m, eth, c.RIP)
	default:
		w.forwardTUN(m, eth, ip, -1, c.RIP)
	}
}

// translateQuoted rewrites the packet quoted in an ICMP error: its source
// (src true) or destination address and port, with its IP header checksum
// and, for UDP whose checksum lies in the quoted 8 bytes, its UDP checksum.
func translateQuoted(q hdr.IPv4, l4 []byte, proto uint8, src bool, addr uint32, port uint16) {
	var old uint32
	var oldPort uint16
	if src {
		old, oldPort = q.Src(), binary.BigEndian.Uint16(l4[l4SrcPort:])
		q.SetSrcWithChecksumUpdate(addr)
		binary.BigEndian.PutUint16(l4[l4SrcPort:], port)
	} else {
		old, oldPort = q.Dst(), binary.BigEndian.Uint16(l4[l4DstPort:])
		q.SetDstWithChecksumUpdate(addr)
		binary.BigEndian.PutUint16(l4[l4DstPort:], port)
	}
	if proto == hdr.ProtoUDP {
		cs := binary.BigEndian.Uint16(l4[udpChecksum:])
		cs = hdr.UpdateUDP16(hdr.UpdateUDP32(cs, old, addr), oldPort, port)
		binary.BigEndian.PutUint16(l4[udpChecksum:], cs)
	}
	// A quoted TCP checksum lies beyond the 8 bytes an error must carry;
	// like IPVS, it is left as it is.
}

// fixICMPChecksum recomputes an ICMP error's checksum: the message is a
// few dozen bytes of headers (a quoted header, not a payload), and its
// quoted part changed in several places.
func fixICMPChecksum(icmp hdr.ICMP) {
	icmp.SetChecksum(0)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
}

// fragNeeded turns a packet that is too big for the tunnel into an ICMP
// "fragmentation needed" (type 3 code 4) for its sender, in place: the
// original IP header and 8 bytes of its payload become the quoted part.
// It goes back out of the port the packet came in on (in < 0: dropped).
func (w *Worker) fragNeeded(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, in int, mtu uint16) {
	if in < 0 {
		w.drop(m, DropTooBig)
		return
	}
	quotedLen := ip.HeaderLen() + 8
	client, clientMAC := ip.Src(), eth.Src()
	const grow = hdr.IPv4MinLen + hdr.ICMPLen
	if _, err := m.Prepend(grow); err != nil {
		w.drop(m, DropNoHeadroom)
		return
	}
	data := m.Data()
	// [grow bytes][eth][orig IP ...] -> [eth][IP][ICMP][orig IP + 8]
	copy(data[:hdr.EthernetLen], data[grow:grow+hdr.EthernetLen])
	total := hdr.IPv4MinLen + hdr.ICMPLen + quotedLen
	if err := m.SetLen(hdr.EthernetLen + total); err != nil {
		w.drop(m, DropBadIPv4)
		return
	}
	data = m.Data()
	out := hdr.IPv4(data[hdr.EthernetLen : hdr.EthernetLen+hdr.IPv4MinLen])
	out.SetVersionIHL(hdr.IPv4MinLen)
	out.SetTOS(0)
	out.SetTotalLength(uint16(total))
	out.SetID(0)
	out.SetFlagsFragmentOffset(0, 0)
	out.SetTTL(64)
	out.SetProtocol(hdr.ProtoICMP)
	out.SetSrc(w.snap.Ports[in].Addr)
	out.SetDst(client)
	out.SetChecksum(0)
	out.SetChecksum(out.CalculateChecksum())
	icmp := hdr.ICMP(data[hdr.EthernetLen+hdr.IPv4MinLen : hdr.EthernetLen+total])
	icmp.SetType(hdr.ICMPDestUnreachable)
	icmp.SetCode(hdr.ICMPCodeFragNeeded)
	icmp.SetID(0)
	icmp.SetMTU(mtu)
	fixICMPChecksum(icmp)
	m.SetOlFlags(0)
	w.cnt.own[ICMPFragNeeded]++
	w.transmit(m, hdr.Ethernet(data), in, clientMAC)
}
