package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// handle processes one received packet: it ends up queued for TX or
// dropped under a named reason, never leaked.
func (w *Worker) handle(m *mbuf.Mbuf, in int) {
	w.cnt.own[RxPackets]++
	w.cnt.own[RxBytes] += uint64(m.PktLen())
	if m.NbSegs() != 1 {
		w.drop(m, DropMultiSegment)
		return
	}
	eth := hdr.Ethernet(m.Data())
	if len(eth) < hdr.EthernetLen {
		w.drop(m, DropBadEthernet)
		return
	}
	switch eth.EtherType() {
	case hdr.EtherTypeIPv4:
		w.handleIPv4(m, eth)
	case hdr.EtherTypeARP:
		w.handleARP(m, in, eth)
	default:
		w.drop(m, DropNotIPv4)
	}
}

func (w *Worker) handleIPv4(m *mbuf.Mbuf, eth hdr.Ethernet) {
	ip := hdr.IPv4(eth.Payload())
	if !ip.IsValid(len(ip)) {
		w.drop(m, DropBadIPv4)
		return
	}
	// Trust the NIC's verdict when it gives one; check in software otherwise.
	switch fl := m.OlFlags(); {
	case fl&mbuf.RxIPCksumBad == mbuf.RxIPCksumBad && fl&mbuf.RxIPCksumGood != mbuf.RxIPCksumGood:
		w.drop(m, DropBadIPChecksum)
		return
	case fl&mbuf.RxIPCksumGood != 0 && fl&mbuf.RxIPCksumBad == 0:
	default:
		if !ip.IsChecksumValid() {
			w.drop(m, DropBadIPChecksum)
			return
		}
	}
	if ip.IsFragment() {
		w.drop(m, DropFragment)
		return
	}
	if ip.Protocol() != hdr.ProtoTCP {
		w.drop(m, DropUnsupportedProto)
		return
	}
	w.handleTCP(m, eth, ip)
}

// handleTCP forwards by VS/NAT: client -> VIP:vport becomes client ->
// RIP:rport (DNAT), and the reply RIP:rport -> client becomes VIP:vport ->
// client (SNAT). Checksums are updated incrementally (RFC 1624).
func (w *Worker) handleTCP(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4) {
	tcp := hdr.TCP(ip.Payload())
	if !tcp.IsValid() {
		w.drop(m, DropBadL4)
		return
	}
	src, dst := ip.Src(), ip.Dst()
	sport, dport := tcp.SrcPort(), tcp.DstPort()
	flags := tcp.Flags()
	snap := w.snap

	id, dir, ok := w.table.Lookup(hdr.ProtoTCP, src, sport, dst, dport)
	if !ok {
		var why Stat
		if id, why = w.newConn(src, sport, dst, dport, flags); why != 0 {
			w.drop(m, why)
			return
		}
		dir = conn.Original
	}
	c := w.table.Get(id)
	if next := conn.NextTCPState(c.State, dir, flags, false); next != c.State {
		w.countState(c.Dest, c.State, false)
		w.countState(c.Dest, next, true)
		c.State = next
	}
	c.Expires = w.now + snap.Timeouts.For(c.State)

	var nextHopOf uint32
	ds := &w.cnt.dest[c.Dest]
	if dir == conn.Original {
		ip.SetDstWithChecksumUpdate(c.RIP)
		tcp.UpdateChecksumForAddr(dst, c.RIP)
		if c.RPort != dport {
			tcp.SetDstPortWithChecksumUpdate(c.RPort)
		}
		nextHopOf = c.RIP
		ds[DestInPkts]++
		ds[DestInBytes] += uint64(m.PktLen())
	} else {
		ip.SetSrcWithChecksumUpdate(c.VIP)
		tcp.UpdateChecksumForAddr(src, c.VIP)
		if c.VPort != sport {
			tcp.SetSrcPortWithChecksumUpdate(c.VPort)
		}
		nextHopOf = c.ClientIP
		ds[DestOutPkts]++
		ds[DestOutBytes] += uint64(m.PktLen())
	}
	w.output(m, eth, nextHopOf)
}

// newConn schedules a new connection and enters it in the table; a
// non-zero Stat says why it could not.
func (w *Worker) newConn(src uint32, sport uint16, dst uint32, dport uint16, flags uint8) (uint32, Stat) {
	snap := w.snap
	si, ok := snap.service(dst, dport, hdr.ProtoTCP)
	if !ok {
		switch {
		case snap.IsVIP(dst):
			return 0, DropNoService
		case snap.isLocal(dst):
			return 0, DropToLocal
		}
		return 0, DropNoConn
	}
	// As IPVS: only a SYN opens a connection.
	if flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) != hdr.TCPFlagSYN {
		return 0, DropNotSYN
	}
	svc := &snap.Services[si]
	w.flow = schedFlow(src, sport, dst, dport)
	w.flow.Now = w.now
	idx := svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
	if idx < 0 {
		return 0, DropNoDest
	}
	d := &svc.Dests[idx]
	c := conn.Conn{
		ClientIP: src, ClientPort: sport, VIP: dst, VPort: dport,
		RIP: d.Addr, RPort: d.Port, Proto: hdr.ProtoTCP, State: conn.StateNone,
		Fwd: d.Fwd, Dest: d.ID, Service: uint32(si),
	}
	id, err := w.table.Insert(&c)
	switch err {
	case nil:
	case conn.ErrFull:
		return 0, DropTableFull
	default:
		return 0, DropConnExists
	}
	w.cnt.own[NewConns]++
	w.cnt.dest[d.ID][DestConns]++
	w.countState(d.ID, conn.StateNone, true)
	return id, 0
}

// output routes a rewritten packet: port and next hop from the snapshot,
// MAC from the neighbour table, then queued for TX.
func (w *Worker) output(m *mbuf.Mbuf, eth hdr.Ethernet, dst uint32) {
	snap := w.snap
	port, nextHop, ok := snap.Route(dst)
	if !ok {
		w.drop(m, DropNoRoute)
		return
	}
	mac, ok := snap.Neigh[nextHop]
	if !ok {
		w.event(Event{Kind: EvNeighbourMiss, Port: port, IP: nextHop})
		w.drop(m, DropNoNeighbour)
		return
	}
	eth.SetSrc(snap.Ports[port].MAC)
	eth.SetDst(mac)
	w.send(m, port)
}
