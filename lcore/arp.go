package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// handleARP answers requests for the port's own address and, on ports
// facing clients, for the VIPs; it reports what it learns about neighbours
// to the control plane, which owns the neighbour table.
func (w *Worker) handleARP(m *mbuf.Mbuf, in int, eth hdr.Ethernet) {
	arp := hdr.ARP(eth.Payload())
	if !arp.IsValid() {
		w.drop(m, DropBadARP)
		return
	}
	p := &w.snap.Ports[in]
	sip, tip := arp.SenderIP(), arp.TargetIP()
	ours := tip == p.Addr || (p.FacesClients && w.snap.IsVIP(tip))
	if !ours {
		w.drop(m, DropARPNotOurs)
		return
	}
	smac := arp.SenderMAC()
	if sip&p.Mask == p.Net && sip != p.Addr {
		w.event(Event{Kind: EvNeighbour, Port: in, IP: sip, MAC: smac})
	}
	if arp.Op() != hdr.ARPRequest {
		w.drop(m, ARPReceived) // a reply: learnt above, nothing to send
		return
	}
	arp.SetReply(p.MAC, tip, smac, sip)
	eth.SetDst(smac)
	eth.SetSrc(p.MAC)
	w.cnt.own[ARPReplies]++
	w.send(m, in)
}

// arpFrameLen is an ARP request padded to Ethernet's minimum frame (no FCS).
const arpFrameLen = 60

// sendARPRequest broadcasts a request for ip out of a port. It allocates an
// mbuf (a cgo call): this is control work, run from the commands job.
func (w *Worker) sendARPRequest(port int, ip uint32) {
	if port < 0 || port >= len(w.snap.Ports) {
		return
	}
	m, err := mbuf.Alloc(w.cfg.Pool)
	if err != nil {
		w.cnt.own[EventsLost]++
		return
	}
	b, err := m.Append(arpFrameLen)
	if err != nil { // cannot happen with any sane data room
		m.Free()
		return
	}
	clear(b)
	p := &w.snap.Ports[port]
	eth := hdr.Ethernet(b)
	eth.SetDst(hdr.BroadcastMAC)
	eth.SetSrc(p.MAC)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(eth.Payload()).SetRequest(p.MAC, p.Addr, ip)
	w.cnt.own[ARPRequests]++
	w.send(m, port)
}

func schedFlow(src uint32, sport uint16, dst uint32, dport uint16) sched.Flow {
	return sched.Flow{SrcIP: src, SrcPort: sport, DstIP: dst, DstPort: dport, Proto: hdr.ProtoTCP}
}
