package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// Health probes through lbd, for real servers reachable only through the
// DPDK ports: the control plane asks worker 0 to send a TCP SYN from the
// output port's own address and a source port of the probe range; the
// server's SYN-ACK (the port listens) or RST (it does not) comes back to
// that address, the lcore that gets it reports it as an event and, for a
// SYN-ACK, answers RST so the server forgets the half-open connection.

// ProbePortFirst and ProbePorts are the source ports probes use; traffic
// to a port address on them is never a connection.
const (
	ProbePortFirst = 61000
	ProbePorts     = 1000
	probeFrameLen  = hdr.EthernetLen + hdr.IPv4MinLen + hdr.TCPMinLen
)

func isProbePort(p uint16) bool { return p >= ProbePortFirst && p < ProbePortFirst+ProbePorts }

// sendProbe builds and sends a SYN (control work: it allocates an mbuf).
func (w *Worker) sendProbe(ip uint32, dport, sport uint16) {
	fail := Event{Kind: EvProbe, IP: ip, DstPort: dport, SrcPort: sport, Probe: ProbeNoRoute}
	port, mac, ok := w.nextHop(ip)
	if !ok {
		w.event(fail)
		return
	}
	m, err := mbuf.Alloc(w.cfg.Pool)
	if err != nil {
		w.event(fail)
		return
	}
	b, err := m.Append(probeFrameLen)
	if err != nil {
		m.Free()
		w.event(fail)
		return
	}
	clear(b)
	p := &w.snap.Ports[port]
	eth := hdr.Ethernet(b)
	eth.SetEtherType(hdr.EtherTypeIPv4)
	iph := hdr.IPv4(eth.Payload())
	iph.SetVersionIHL(hdr.IPv4MinLen)
	iph.SetTotalLength(hdr.IPv4MinLen + hdr.TCPMinLen)
	iph.SetFlagsFragmentOffset(hdr.IPv4FlagDontFragment, 0)
	iph.SetTTL(64)
	iph.SetProtocol(hdr.ProtoTCP)
	iph.SetSrc(p.Addr)
	iph.SetDst(ip)
	iph.SetChecksum(iph.CalculateChecksum())
	tcp := hdr.TCP(iph[hdr.IPv4MinLen:])
	tcp.SetSrcPort(sport)
	tcp.SetDstPort(dport)
	tcp.SetSeq(uint32(w.now))
	tcp.SetDataOffset(hdr.TCPMinLen)
	tcp.SetFlags(hdr.TCPFlagSYN)
	tcp.SetWindow(1024)
	tcp.SetChecksum(hdr.TransportChecksum(p.Addr, ip, hdr.ProtoTCP, tcp))
	w.cnt.own[ProbesSent]++
	w.transmit(m, eth, port, mac)
}

// probeReply reports a server's answer to a probe and, for a SYN-ACK,
// turns the packet into the RST that closes the half-open connection.
func (w *Worker) probeReply(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, in int, flags uint8) {
	tcp := hdr.TCP(ip.Payload())
	ev := Event{Kind: EvProbe, IP: ip.Src(), DstPort: tcp.SrcPort(), SrcPort: tcp.DstPort()}
	switch {
	case flags&hdr.TCPFlagRST != 0:
		ev.Probe = ProbeRefused
	case flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK:
		ev.Probe = ProbeOpen
	default:
		w.drop(m, ProbeReplies)
		return
	}
	w.event(ev)
	if ev.Probe != ProbeOpen || ip.HeaderLen() != hdr.IPv4MinLen {
		w.drop(m, ProbeReplies)
		return
	}
	// RST: from us to the server, seq = the SYN-ACK's ack.
	src, dst := ip.Src(), ip.Dst()
	ack := tcp.Ack()
	if err := m.SetLen(probeFrameLen); err != nil {
		w.drop(m, ProbeReplies)
		return
	}
	ip.SetTotalLength(hdr.IPv4MinLen + hdr.TCPMinLen)
	ip.SetSrc(dst)
	ip.SetDst(src)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	rst := hdr.TCP(ip[ip.HeaderLen():][:hdr.TCPMinLen])
	sport, dport := rst.SrcPort(), rst.DstPort()
	rst.SetSrcPort(dport)
	rst.SetDstPort(sport)
	rst.SetSeq(ack)
	rst.SetAck(0)
	rst.SetDataOffset(hdr.TCPMinLen)
	rst.SetFlags(hdr.TCPFlagRST)
	rst.SetWindow(0)
	binary.BigEndian.PutUint16(rst[18:], 0) // urgent pointer
	rst.SetChecksum(0)
	rst.SetChecksum(hdr.TransportChecksum(dst, src, hdr.ProtoTCP, rst))
	m.SetOlFlags(0)
	w.cnt.own[ProbeReplies]++
	w.transmit(m, eth, in, eth.Src())
}
