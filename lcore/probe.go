package lcore

import (
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

// ProbePortFirst and ProbePorts are the source ports probes use; traffic
// to a port address on them is never a connection.
const (
	ProbePortFirst = 61000
	ProbePorts     = 1000
	probeFrameLen  = hdr.EthernetLen + hdr.IPv4MinLen + hdr.TCPMinLen
)

func isProbePort(p uint16) bool { return p >= ProbePortFirst && p < ProbePortFirst+ProbePorts }

// sendProbe builds and sends a SYN with the initial sequence number seq
// (control work: it allocates an mbuf).
func (w *Worker) sendProbe(ip uint32, dport, sport uint16, seq uint32) {
	notSent := Event{Kind: EvProbe, IP: ip, DstPort: dport, SrcPort: sport, Result: ProbeNotSent}
	e := w.route(ip)
	if e.kind != exitTransmit {
		w.event(notSent)
		return
	}
	m, b := w.newFrame(probeFrameLen)
	if m == nil {
		w.event(notSent)
		return
	}
	hdr.Ethernet(b).SetEtherType(hdr.EtherTypeIPv4)
	writeTCP(b[hdr.EthernetLen:], w.snap.Ports[e.to].Addr, ip,
		&hdr.TCPFields{SrcPort: sport, DstPort: dport, Seq: seq, Flags: hdr.TCPFlagSYN, Window: 1024})
	w.cnt.own[ProbesSent]++
	w.leave(m, -1, e)
}

// writeTCP writes an IPv4 header and an option-less TCP segment without
// data into b (probeFrameLen minus the Ethernet header).
func writeTCP(b []byte, src, dst uint32, f *hdr.TCPFields) {
	hdr.IPv4(b).Encode(&hdr.IPv4Fields{
		TotalLength: hdr.IPv4MinLen + hdr.TCPMinLen, Flags: hdr.IPv4FlagDontFragment,
		TTL: hdr.DefaultTTL, Protocol: hdr.ProtoTCP, Src: src, Dst: dst,
	})
	hdr.TCP(b[hdr.IPv4MinLen:][:hdr.TCPMinLen]).Encode(f, src, dst)
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
	ev := Event{Kind: EvProbe, IP: ip.Src(), DstPort: tcp.SrcPort(), SrcPort: tcp.DstPort(), Ack: tcp.Ack()}
	switch {
	case d.flags&hdr.TCPFlagRST != 0:
		ev.Result = ProbeRefused
	case d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK:
		ev.Result = ProbeOpen
	default:
		return consume(ProbeAnswers)
	}
	w.event(ev)
	if ev.Result != ProbeOpen || ip.HeaderLen() != hdr.IPv4MinLen {
		return consume(ProbeAnswers)
	}
	// RST: from us to the server, seq = the SYN-ACK's ack.
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
