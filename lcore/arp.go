package lcore

import (
	"github.com/dplb/dplb/lcore/hdr"
)

// handleARP answers requests for the port's own address and, on a master
// (Snapshot.Backup false), for the port's floating addresses and, on ports
// facing clients, for the VIPs, and for the FullNAT local addresses in
// the port's subnet; it reports what it learns about neighbours
// to the control plane, which owns the neighbour table. A host that claims
// one of our addresses or VIPs (a gratuitous ARP for a VIP, say) is never
// learnt: the packet is dropped, counted (arp_conflict) and reported; on a
// backup, the master's claims to the VIPs and floating addresses are
// expected (dropped as arp_not_ours, not reported).
func (w *Worker) handleARP(d *desc) exit {
	arp := hdr.ARP(d.eth().Payload())
	p := &w.snap.Ports[d.in]
	sip, tip := arp.SenderIP(), arp.TargetIP()
	if w.snap.isLocal(sip) || w.snap.IsVIP(sip) {
		smac := arp.SenderMAC()
		if smac == p.MAC { // our own request, heard back
			return drop(DropARPNotOurs)
		}
		if w.snap.Backup && (w.snap.IsVIP(sip) || w.snap.isFloating(sip)) {
			return drop(DropARPNotOurs) // the master announcing what it holds
		}
		w.event(Event{Kind: EvAddressConflict, Port: d.in, IP: sip, MAC: smac})
		return drop(DropARPConflict)
	}
	ours := tip == p.Addr ||
		!w.snap.Backup && (p.isFloating(tip) || p.FacesClients && w.snap.IsVIP(tip) ||
			tip&p.Mask == p.Net && w.snap.IsLIP(tip))
	if !ours {
		return drop(DropARPNotOurs)
	}
	smac := arp.SenderMAC()
	if sip&p.Mask == p.Net && sip != p.Addr {
		w.event(Event{Kind: EvNeighbour, Port: d.in, IP: sip, MAC: smac})
	}
	if arp.Op() != hdr.ARPRequest {
		if tip == p.Addr { // a reply: learnt above; the kernel's, maybe
			return w.consumeOrKernel(d.in, ARPReceived)
		}
		return consume(ARPReceived)
	}
	arp.SetReply(p.MAC, tip, smac, sip)
	w.cnt.own[ARPReplies]++
	return transmit(d.in, smac)
}

// arpFrameLen is an ARP request padded to Ethernet's minimum frame (no FCS).
const arpFrameLen = 60

// sendARPRequest broadcasts a request for ip out of a port. It allocates an
// mbuf (a cgo call): this is control work, run from the commands job.
func (w *Worker) sendARPRequest(port int, ip uint32) {
	if port < 0 || port >= len(w.snap.Ports) {
		return
	}
	m, b := w.newFrame(arpFrameLen)
	if m == nil {
		return
	}
	p := &w.snap.Ports[port]
	eth := hdr.Ethernet(b)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(eth.Payload()).SetRequest(p.MAC, p.Addr, ip)
	w.cnt.own[ARPRequests]++
	w.leave(m, -1, transmit(port, hdr.BroadcastMAC))
}

// takeoverAnnounceMax bounds the gratuitous ARPs worker 0 sends at once
// when it stops being a backup; the control plane's rounds (commands)
// cover every address.
const takeoverAnnounceMax = 128

// announceTakeover sends the first round of gratuitous ARP the moment the
// worker adopts the snapshot that makes this director the master: the
// floating addresses, the VIPs on ports facing clients, then the local
// addresses on the ports whose subnets hold them. Sent here,
// not only by command, so the neighbours hear of the takeover as soon as
// lbd answers ARP for it, even when the command ring is busy (a bulk sync
// install): a client's TCP that missed it retries only after its doubled
// timeout. Control work, run from the commands job.
func (w *Worker) announceTakeover() {
	n := 0
	for pi := range w.snap.Ports {
		for _, f := range w.snap.Ports[pi].Floating {
			if n == takeoverAnnounceMax {
				return
			}
			w.announce(pi, f)
			n++
		}
	}
	for pi := range w.snap.Ports {
		if !w.snap.Ports[pi].FacesClients {
			continue
		}
		for vip, ok := range w.snap.vips {
			if !ok {
				continue
			}
			if n == takeoverAnnounceMax {
				return
			}
			w.announce(pi, vip)
			n++
		}
	}
	// Local addresses (draining ones included), where the servers'
	// replies to FullNAT and NAT64 connections must now come.
	for pi := range w.snap.Ports {
		p := &w.snap.Ports[pi]
		for lip, ok := range w.snap.lips {
			if !ok || lip&p.Mask != p.Net {
				continue
			}
			if n == takeoverAnnounceMax {
				return
			}
			w.announce(pi, lip)
			n++
		}
	}
}

// announce broadcasts a gratuitous ARP for ip out of a port (a request
// whose sender and target are both ip, from the port's MAC), so the
// neighbours' caches point ip at this director: a new master's takeover.
// Control work, run from the commands job.
func (w *Worker) announce(port int, ip uint32) {
	if port < 0 || port >= len(w.snap.Ports) {
		return
	}
	m, b := w.newFrame(arpFrameLen)
	if m == nil {
		return
	}
	eth := hdr.Ethernet(b)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(eth.Payload()).SetRequest(w.snap.Ports[port].MAC, ip, ip)
	w.cnt.own[GratuitousARPs]++
	w.leave(m, -1, transmit(port, hdr.BroadcastMAC))
}
