package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// Health probes through lbd, for real servers reachable only through the
// DPDK ports. Three words for three things: a probe is the TCP SYN the
// control plane asks worker 0 to send, from the output port's own address
// and a source port of the probe range; the server's answer (SYN-ACK: the
// port listens, RST: it does not) comes back to that address, and the
// lcore that gets it reports a ProbeResult as an event and, for a SYN-ACK,
// turns the answer into the RST that makes the server forget the half-open
// connection.
//
// HTTP probes go one step further, and the control plane drives them
// segment by segment: their source ports are the upper half of the range,
// where a SYN-ACK is reported (with the server's sequence number) and not
// reset; the control plane then has worker 0 send the request in one
// segment (CmdProbeSegment), and the server's first segment with data (or
// its FIN or RST) is reported with the first ProbeDataLen bytes (the status
// line) and answered with the RST that ends the connection. No lcore keeps
// state for a probe: whoever receives an answer reports it.

// UDP probes are datagrams (CmdProbeDatagram) from a port of the same
// range: the server's reply datagram is reported with the start of its
// data, and an ICMP (ICMPv6) destination unreachable that quotes the
// probe as refused. ICMP probes are echo requests (CmdProbeEcho) whose
// identifier is a number of the range; the echo reply is reported.

// ProbePortFirst and ProbePorts are the source ports probes use; traffic
// to a port address on them is never a connection. TCP probes use the
// first TCPProbePorts of them, HTTP probes the rest, from
// HTTPProbePortFirst on; UDP probes the whole range.
const (
	ProbePortFirst     = 61000
	ProbePorts         = 1000
	TCPProbePorts      = ProbePorts / 2
	HTTPProbePortFirst = ProbePortFirst + TCPProbePorts
	probeFrameLen      = hdr.EthernetLen + hdr.IPv4MinLen + hdr.TCPMinLen
	probeFrameLen6     = hdr.EthernetLen + hdr.IPv6Len + hdr.TCPMinLen
	// MaxProbePayload bounds the data of a probe (an HTTP request, a
	// UDP datagram): one packet within the minimum IPv6 MTU.
	MaxProbePayload = 1024
)

func isProbePort(p uint16) bool { return p >= ProbePortFirst && p < ProbePortFirst+ProbePorts }

func isHTTPProbePort(p uint16) bool {
	return p >= HTTPProbePortFirst && p < ProbePortFirst+ProbePorts
}

// sendProbe builds and sends a SYN with the initial sequence number seq
// to ip, or to ip6 from the port's IPv6 address when ip6 is not zero
// (control work: it allocates an mbuf).
func (w *Worker) sendProbe(ip uint32, ip6 hdr.Addr6, dport, sport uint16, seq uint32) {
	syn := hdr.TCPFields{SrcPort: sport, DstPort: dport, Seq: seq, Flags: hdr.TCPFlagSYN, Window: 1024}
	w.sendProbeSegment(ip, ip6, &syn, nil)
}

// sendProbeSegment builds and sends the TCP segment f with data payload
// (at most MaxProbePayload bytes) to ip, or to ip6 when it is not zero,
// from the output port's address; when it cannot, it reports ProbeNotSent.
func (w *Worker) sendProbeSegment(ip uint32, ip6 hdr.Addr6, f *hdr.TCPFields, payload []byte) {
	notSent := Event{Kind: EvProbe, IP: ip, IP6: ip6, DstPort: f.DstPort, SrcPort: f.SrcPort, Result: ProbeNotSent}
	m, b, e, src, src6 := w.probeFrame(ip, ip6, hdr.TCPMinLen, payload, notSent)
	if m == nil {
		return
	}
	if src6 != nil {
		writeTCP6(b[hdr.EthernetLen:], *src6, ip6, f)
	} else {
		writeTCP(b[hdr.EthernetLen:], src, ip, f)
	}
	w.cnt.own[ProbesSent]++
	w.leave(m, -1, e)
}

// probeFrame routes a probe to ip, or to ip6 when it is not zero, and
// makes its frame: the Ethernet header with the EtherType, room for the
// IP header and a transport header of l4 bytes, then payload (at most
// MaxProbePayload bytes) in place. It returns the output port's address
// (src, or src6 for IPv6). When the probe cannot be sent it reports
// notSent and returns a nil mbuf.
func (w *Worker) probeFrame(ip uint32, ip6 hdr.Addr6, l4 int, payload []byte, notSent Event) (m *mbuf.Mbuf, b []byte, e exit, src uint32, src6 *hdr.Addr6) {
	six := !ip6.IsUnspecified()
	if six {
		e = w.route6(&ip6)
	} else {
		e = w.route(ip)
	}
	if e.kind != exitTransmit || six && w.snap.Ports[e.to].Addr6.IsUnspecified() || len(payload) > MaxProbePayload {
		w.event(notSent)
		return nil, nil, e, 0, nil
	}
	n, et := hdr.EthernetLen+hdr.IPv4MinLen+l4, uint16(hdr.EtherTypeIPv4)
	if six {
		n, et = hdr.EthernetLen+hdr.IPv6Len+l4, hdr.EtherTypeIPv6
		src6 = &w.snap.Ports[e.to].Addr6
	} else {
		src = w.snap.Ports[e.to].Addr
	}
	if m, b = w.newFrame(n + len(payload)); m == nil {
		w.event(notSent)
		return nil, nil, e, 0, nil
	}
	hdr.Ethernet(b).SetEtherType(et)
	copy(b[n:], payload)
	return m, b, e, src, src6
}

// writeTCP writes an IPv4 header and an option-less TCP header into b,
// whose data (if any) follows the header and is in place already: b is
// the packet from its IPv4 header on (probeFrameLen minus the Ethernet
// header, plus the data).
func writeTCP(b []byte, src, dst uint32, f *hdr.TCPFields) {
	hdr.IPv4(b).Encode(&hdr.IPv4Fields{
		TotalLength: uint16(len(b)), Flags: hdr.IPv4FlagDontFragment,
		TTL: hdr.DefaultTTL, Protocol: hdr.ProtoTCP, Src: src, Dst: dst,
	})
	hdr.TCP(b[hdr.IPv4MinLen:]).Encode(f, src, dst)
}

// probeResult is what an answer to a probe says: RST, nothing listens;
// SYN-ACK, the port listens; 0 for anything else.
func probeResult(flags uint8) ProbeResult {
	switch {
	case flags&hdr.TCPFlagRST != 0:
		return ProbeRefused
	case flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK:
		return ProbeOpen
	}
	return 0
}

// probeAnswer reports a server's answer to a probe and, for a SYN-ACK,
// turns the packet into the RST that closes the half-open connection.
// Nothing on the wire is believed that a sender elsewhere could make up:
// the answer must arrive on the port that leads to the server (a client
// cannot speak for it), and the event carries the answer's ack for the
// control plane to check against the probe's random sequence number.
func (w *Worker) probeAnswer(d *desc) exit {
	ip := d.ip()
	if port, _, ok := w.snap.Route(ip.Src()); !ok || port != d.in {
		return drop(DropProbeSpoofed)
	}
	tcp := hdr.TCP(ip.Payload())
	ev := Event{Kind: EvProbe, IP: ip.Src(), DstPort: tcp.SrcPort(), SrcPort: tcp.DstPort(), Ack: tcp.Ack(), Seq: tcp.Seq(), Flags: d.flags, Result: probeResult(d.flags)}
	if isHTTPProbePort(ev.SrcPort) && !w.httpProbeAnswer(&ev, tcp) {
		return consume(ProbeAnswers) // reported as it stands, or nothing to report
	}
	if ev.Result == 0 {
		return consume(ProbeAnswers)
	}
	w.event(ev)
	if ev.Result != ProbeOpen && ev.Result != ProbeData || ip.HeaderLen() != hdr.IPv4MinLen {
		return consume(ProbeAnswers)
	}
	// RST: from us to the server, seq = the answer's ack.
	src, dst := ip.Src(), ip.Dst()
	rst := hdr.TCPFields{SrcPort: tcp.DstPort(), DstPort: tcp.SrcPort(), Seq: tcp.Ack(), Flags: hdr.TCPFlagRST}
	if err := d.m.SetLen(probeFrameLen); err != nil {
		return consume(ProbeAnswers)
	}
	writeTCP(d.m.Data()[l3:], dst, src, &rst)
	d.m.SetOlFlags(0)
	w.cnt.own[ProbeAnswers]++
	return transmit(d.in, d.eth().Src())
}

// writeTCP6 is writeTCP for IPv6 (probeFrameLen6 minus the Ethernet
// header, plus the data).
func writeTCP6(b []byte, src, dst hdr.Addr6, f *hdr.TCPFields) {
	t := hdr.TCP(b[hdr.IPv6Len:])
	hdr.IPv6(b).Encode(uint16(len(t)), hdr.ProtoTCP, hdr.DefaultTTL, src, dst)
	t.Encode(f, 0, 0)
	t.SetChecksum(hdr.TransportChecksum6(src, dst, hdr.ProtoTCP, t))
}

// probeAnswer6 is probeAnswer for an answer from an IPv6 server.
func (w *Worker) probeAnswer6(d *desc) exit {
	ip := d.ip6()
	src, dst := ip.Src(), ip.Dst()
	if port, _, ok := w.snap.Route6(&src); !ok || port != d.in {
		return drop(DropProbeSpoofed)
	}
	tcp := hdr.TCP(d.l4Bytes6())
	ev := Event{Kind: EvProbe, IP6: src, DstPort: tcp.SrcPort(), SrcPort: tcp.DstPort(), Ack: tcp.Ack(), Seq: tcp.Seq(), Flags: d.flags, Result: probeResult(d.flags)}
	if isHTTPProbePort(ev.SrcPort) && !w.httpProbeAnswer(&ev, tcp) {
		return consume(ProbeAnswers)
	}
	if ev.Result == 0 {
		return consume(ProbeAnswers)
	}
	w.event(ev)
	if ev.Result != ProbeOpen && ev.Result != ProbeData || ip.NextHeader() != hdr.ProtoTCP {
		return consume(ProbeAnswers) // (extension headers: no RST; the server's half-open times out)
	}
	rst := hdr.TCPFields{SrcPort: tcp.DstPort(), DstPort: tcp.SrcPort(), Seq: tcp.Ack(), Flags: hdr.TCPFlagRST}
	if err := d.m.SetLen(probeFrameLen6); err != nil {
		return consume(ProbeAnswers)
	}
	writeTCP6(d.m.Data()[l3:], dst, src, &rst)
	d.m.SetOlFlags(0)
	w.cnt.own[ProbeAnswers]++
	return transmit(d.in, d.eth().Src())
}

// httpProbeAnswer handles an answer to an HTTP probe's connection (tcp,
// whose event ev is filled in) and reports whether the caller is to report
// ev and reset the connection as for a TCP probe's SYN-ACK. A SYN-ACK or
// RST is reported and nothing sent: the control plane goes on with the
// request, or ends. A segment with data or FIN becomes ProbeData, with
// the start of its data, to report and reset; one with neither (the
// server's ACK of the request) is not reported.
func (w *Worker) httpProbeAnswer(ev *Event, tcp hdr.TCP) bool {
	if ev.Result != 0 {
		w.event(*ev) // SYN-ACK or RST
		return false
	}
	var data []byte
	if off := tcp.DataOffset(); off >= hdr.TCPMinLen && off <= len(tcp) {
		data = tcp[off:]
	}
	if len(data) == 0 && ev.Flags&hdr.TCPFlagFIN == 0 || ev.Flags&hdr.TCPFlagACK == 0 {
		return false
	}
	ev.Result = ProbeData
	ev.DataLen = uint8(copy(ev.Data[:], data))
	return true
}

// sendProbeDatagram builds and sends a UDP probe, a datagram with data
// payload (at most MaxProbePayload bytes) from the output port's address
// and port sport to ip:dport, or to ip6 when it is not zero; when it
// cannot, it reports ProbeNotSent.
func (w *Worker) sendProbeDatagram(ip uint32, ip6 hdr.Addr6, dport, sport uint16, payload []byte) {
	notSent := Event{Kind: EvProbe, Proto: hdr.ProtoUDP, IP: ip, IP6: ip6, DstPort: dport, SrcPort: sport, Result: ProbeNotSent}
	m, b, e, src, src6 := w.probeFrame(ip, ip6, hdr.UDPLen, payload, notSent)
	if m == nil {
		return
	}
	l3 := b[hdr.EthernetLen:]
	udp := hdr.UDP(b[len(b)-len(payload)-hdr.UDPLen:])
	udp.SetSrcPort(sport)
	udp.SetDstPort(dport)
	udp.SetLength(uint16(len(udp)))
	if src6 != nil {
		hdr.IPv6(l3).Encode(uint16(len(udp)), hdr.ProtoUDP, hdr.DefaultTTL, *src6, ip6)
		udp.SetChecksum(hdr.TransportChecksum6(*src6, ip6, hdr.ProtoUDP, udp))
	} else {
		hdr.IPv4(l3).Encode(&hdr.IPv4Fields{
			TotalLength: uint16(len(l3)), Flags: hdr.IPv4FlagDontFragment,
			TTL: hdr.DefaultTTL, Protocol: hdr.ProtoUDP, Src: src, Dst: ip,
		})
		udp.SetChecksum(hdr.TransportChecksum(src, ip, hdr.ProtoUDP, udp))
	}
	w.cnt.own[ProbesSent]++
	w.leave(m, -1, e)
}

// probeReply reports a UDP probe's reply, data from server (addr, or
// addr6 when it is not zero) port sport to our port dport, with the start
// of its data, if it came in on the port that leads to the server.
func (w *Worker) probeReply(d *desc, addr uint32, addr6 *hdr.Addr6, udp hdr.UDP) exit {
	if !w.cameFrom(d, addr, addr6) {
		return drop(DropProbeSpoofed)
	}
	ev := Event{Kind: EvProbe, Proto: hdr.ProtoUDP, IP: addr, DstPort: udp.SrcPort(), SrcPort: udp.DstPort(), Result: ProbeData}
	if addr6 != nil {
		ev.IP6 = *addr6
	}
	if n := int(udp.Length()); n >= hdr.UDPLen && n <= len(udp) {
		ev.DataLen = uint8(copy(ev.Data[:], udp[hdr.UDPLen:n]))
	}
	w.event(ev)
	return consume(ProbeAnswers)
}

// probeUnreachable reports a destination unreachable that quotes a UDP
// probe (our datagram from src:sport to server dst:dport, dst6 for IPv6)
// as refused, if it came in on the port that leads to the server.
func (w *Worker) probeUnreachable(d *desc, dst uint32, dst6 *hdr.Addr6, dport, sport uint16) exit {
	if !w.cameFrom(d, dst, dst6) {
		return drop(DropProbeSpoofed)
	}
	ev := Event{Kind: EvProbe, Proto: hdr.ProtoUDP, IP: dst, DstPort: dport, SrcPort: sport, Result: ProbeRefused}
	if dst6 != nil {
		ev.IP6 = *dst6
	}
	w.event(ev)
	return consume(ProbeAnswers)
}

// echoProbeData is an echo probe's ICMP message: type, code, checksum,
// identifier and sequence number (filled in), then a fixed payload.
var echoProbeData = [16]byte{8: 'd', 'p', 'l', 'b', '-', 'h', 'c', 0}

// sendProbeEcho builds and sends an ICMP probe, an echo request with
// identifier id and sequence number seq from the output port's address to
// ip, or an ICMPv6 one to ip6 when it is not zero; when it cannot, it
// reports ProbeNotSent.
func (w *Worker) sendProbeEcho(ip uint32, ip6 hdr.Addr6, id, seq uint16) {
	notSent := Event{Kind: EvProbe, Proto: hdr.ProtoICMP, IP: ip, IP6: ip6, SrcPort: id, Result: ProbeNotSent}
	m, b, e, src, src6 := w.probeFrame(ip, ip6, 0, echoProbeData[:], notSent)
	if m == nil {
		return
	}
	l3 := b[hdr.EthernetLen:]
	icmp := hdr.ICMP(b[len(b)-len(echoProbeData):])
	icmp.SetID(id)
	icmp.SetSeq(seq)
	if src6 != nil {
		hdr.IPv6(l3).Encode(uint16(len(icmp)), hdr.ProtoICMPv6, hdr.DefaultTTL, *src6, ip6)
		icmp.SetType(hdr.ICMPv6EchoRequest)
		icmp.SetChecksum(hdr.TransportChecksum6(*src6, ip6, hdr.ProtoICMPv6, icmp))
	} else {
		hdr.IPv4(l3).Encode(&hdr.IPv4Fields{
			TotalLength: uint16(len(l3)), TTL: hdr.DefaultTTL, Protocol: hdr.ProtoICMP, Src: src, Dst: ip,
		})
		icmp.SetType(hdr.ICMPEchoRequest)
		icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	}
	w.cnt.own[ProbesSent]++
	w.leave(m, -1, e)
}

// probeEchoReply reports an echo reply to one of our addresses whose
// identifier is an ICMP probe's, if it came in on the port that leads to
// its sender; another to one of our addresses is to_local (the kernel's,
// through its interface), any other is dropped (icmp_type).
func (w *Worker) probeEchoReply(d *desc) exit {
	var ev Event
	var from6 *hdr.Addr6
	if d.class == classEchoReply6 {
		ip := d.ip6()
		src, dst := ip.Src(), ip.Dst()
		icmp := hdr.ICMP(d.l4Bytes6())
		if !w.snap.isLocal6(dst) {
			return drop(DropICMPType)
		}
		if !isProbePort(icmp.ID()) {
			return drop(DropToLocal) // the kernel's ping, maybe
		}
		ev, from6 = Event{IP6: src, SrcPort: icmp.ID(), Ack: uint32(icmp.Seq())}, &src
	} else {
		ip := d.ip()
		icmp := hdr.ICMP(ip.Payload())
		if !w.snap.isLocal(ip.Dst()) {
			return drop(DropICMPType)
		}
		if !isProbePort(icmp.ID()) {
			return drop(DropToLocal) // the kernel's ping, maybe
		}
		ev = Event{IP: ip.Src(), SrcPort: icmp.ID(), Ack: uint32(icmp.Seq())}
	}
	if !w.cameFrom(d, ev.IP, from6) {
		return drop(DropProbeSpoofed)
	}
	ev.Kind, ev.Proto, ev.Result = EvProbe, hdr.ProtoICMP, ProbeData
	w.event(ev)
	return consume(ProbeAnswers)
}

// cameFrom reports whether d came in on the port that leads to addr (or
// to addr6 when it is not nil): only that side can answer for a server.
func (w *Worker) cameFrom(d *desc, addr uint32, addr6 *hdr.Addr6) bool {
	var port int
	var ok bool
	if addr6 != nil {
		port, _, ok = w.snap.Route6(addr6)
	} else {
		port, _, ok = w.snap.Route(addr)
	}
	return ok && port == d.in
}
