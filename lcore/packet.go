package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// Forwarding methods, as conn.Conn.Fwd and sched.Dest.Fwd carry them.
const (
	FwdNAT uint8 = iota // VS/NAT: rewrite addresses and ports both ways
	FwdDR               // VS/DR: rewrite the MAC only, replies bypass us
	FwdTUN              // VS/TUN: IPIP to the real server, replies bypass us
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
		w.handleIPv4(m, eth, in)
	case hdr.EtherTypeARP:
		w.handleARP(m, in, eth)
	default:
		w.drop(m, DropNotIPv4)
	}
}

func (w *Worker) handleIPv4(m *mbuf.Mbuf, eth hdr.Ethernet, in int) {
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
	var sport, dport uint16
	var flags uint8
	switch proto := ip.Protocol(); proto {
	case hdr.ProtoTCP:
		tcp := hdr.TCP(ip.Payload())
		if !tcp.IsValid() {
			w.drop(m, DropBadL4)
			return
		}
		sport, dport, flags = tcp.SrcPort(), tcp.DstPort(), tcp.Flags()
	case hdr.ProtoUDP:
		udp := hdr.UDP(ip.Payload())
		if !udp.IsValid() {
			w.drop(m, DropBadL4)
			return
		}
		sport, dport = udp.SrcPort(), udp.DstPort()
	case hdr.ProtoICMP:
		w.handleICMP(m, eth, ip, in)
		return
	default:
		w.drop(m, DropUnsupportedProto)
		return
	}
	w.forward(m, eth, ip, in, sport, dport, flags)
}

// forward finds (or makes) the packet's connection and sends the packet on
// by the connection's method.
func (w *Worker) forward(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, in int, sport, dport uint16, flags uint8) {
	proto, src, dst := ip.Protocol(), ip.Src(), ip.Dst()
	id, dir, ok := w.table.Lookup(proto, src, sport, dst, dport)
	if ok && proto == hdr.ProtoTCP && dir == conn.Original &&
		flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) == hdr.TCPFlagSYN {
		// A client reusing the port of a finished connection opens a new
		// one, scheduled afresh (IPVS's conn_reuse_mode): its old server
		// may be gone.
		if c := w.table.Get(id); c.State == conn.StateTimeWait || c.State == conn.StateClose {
			w.expireEntry(id, c)
			w.table.Delete(id)
			ok = false
		}
	}
	if !ok && proto == hdr.ProtoTCP && isProbePort(dport) && w.snap.isLocal(dst) {
		w.probeReply(m, eth, ip, in, flags)
		return
	}
	if !ok {
		var why Stat
		if id, why = w.newConn(proto, src, sport, dst, dport, flags); why != 0 {
			w.drop(m, why)
			return
		}
		dir = conn.Original
		if p := &w.snap.Ports[in]; src&p.Mask == p.Net {
			w.neigh.learn(src, eth.Src(), w.now)
		}
	}
	c := w.table.Get(id)
	if w.snap.DestExpired(c.Dest) {
		w.expireEntry(id, c)
		w.table.Delete(id)
		w.drop(m, DropDestDown)
		return
	}
	if proto == hdr.ProtoTCP {
		if next := conn.NextTCPState(c.State, dir, flags, c.Fwd != FwdNAT); next != c.State {
			w.countState(c.Dest, c.State, false)
			w.countState(c.Dest, next, true)
			if next == conn.StateEstablished {
				w.cnt.dest[c.Dest][DestEstablished]++
			}
			c.State = next
		}
	}
	w.table.Touch(c, dir, w.now, &w.snap.Timeouts) // sets c.Expires

	ds := &w.cnt.dest[c.Dest]
	if dir == conn.Original {
		ds[DestInPkts]++
		ds[DestInBytes] += uint64(m.PktLen())
	} else {
		ds[DestOutPkts]++
		ds[DestOutBytes] += uint64(m.PktLen())
	}
	switch c.Fwd {
	case FwdNAT:
		w.forwardNAT(m, eth, ip, c, dir)
	case FwdDR:
		w.output(m, eth, c.RIP)
	case FwdTUN:
		w.forwardTUN(m, eth, ip, in, c.RIP)
	}
}

// forwardNAT rewrites client -> VIP:vport into client -> RIP:rport (DNAT)
// and RIP:rport -> client into VIP:vport -> client (SNAT). Checksums are
// left to the NIC where the output port offloads them, else updated
// incrementally (RFC 1624), never recomputed over the payload.
func (w *Worker) forwardNAT(m *mbuf.Mbuf, eth hdr.Ethernet, ip hdr.IPv4, c *conn.Conn, dir conn.Dir) {
	towards := c.RIP
	if dir == conn.Reply {
		towards = c.ClientIP
	}
	port, mac, ok := w.nextHopOrDrop(m, towards)
	if !ok {
		return
	}
	offload := w.snap.Ports[port].CsumOffload
	l4 := ip.Payload()
	if dir == conn.Original {
		rewriteDst(ip, l4, c.RIP, c.RPort, offload)
	} else {
		rewriteSrc(ip, l4, c.VIP, c.VPort, offload)
	}
	if offload {
		requestChecksums(m, ip, l4)
	}
	w.transmit(m, eth, port, mac)
}

// newConn schedules a new connection and enters it in the table; a
// non-zero Stat says why it could not.
func (w *Worker) newConn(proto uint8, src uint32, sport uint16, dst uint32, dport uint16, flags uint8) (uint32, Stat) {
	snap := w.snap
	si, ok := snap.service(dst, dport, proto)
	if !ok {
		switch {
		case snap.IsVIP(dst):
			return 0, DropNoService
		case snap.isLocal(dst):
			return 0, DropToLocal
		}
		return 0, DropNoConn
	}
	svc := &snap.Services[si]
	// As IPVS: only a SYN opens a TCP connection, unless the service
	// picks up flows in the middle (sloppy_tcp).
	if proto == hdr.ProtoTCP && !svc.SloppyTCP &&
		flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) != hdr.TCPFlagSYN {
		return 0, DropNotSYN
	}
	w.flow.SrcIP, w.flow.SrcPort, w.flow.DstIP, w.flow.DstPort = src, sport, dst, dport
	w.flow.Proto, w.flow.Now = proto, w.now
	idx, tmpl := -1, uint32(0)
	if svc.Persistence > 0 {
		idx, tmpl = w.persistent(svc, si, proto, src, dst, dport)
	} else {
		idx = svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
	}
	if idx < 0 {
		return 0, DropNoDest
	}
	d := &svc.Dests[idx]
	c := conn.Conn{
		ClientIP: src, ClientPort: sport, VIP: dst, VPort: dport,
		RIP: d.Addr, RPort: d.Port, Proto: proto, State: conn.StateNone,
		Fwd: d.Fwd, Dest: d.ID, Service: uint32(si),
	}
	if proto == hdr.ProtoUDP {
		c.State = conn.StateUDP
	}
	if d.Fwd != FwdNAT {
		c.Flags = conn.FlagOneWay // replies bypass us: index the client side only
	}
	w.table.Relieve(w.now, w.expire) // under a flood, evict an embryonic or idle entry first
	id, err := w.table.Insert(&c)
	switch err {
	case nil:
	case conn.ErrFull:
		return 0, DropTableFull
	default:
		return 0, DropConnExists
	}
	if tmpl != 0 {
		w.table.Get(id).Template = tmpl
		w.table.Get(tmpl-1).Controls++
	}
	w.cnt.own[NewConns]++
	w.cnt.dest[d.ID][DestConns]++
	w.countState(d.ID, c.State, true)
	return id, 0
}

// nextHop routes a destination: the output port and the next hop's MAC.
// A missing MAC is reported to the control plane, which resolves it.
func (w *Worker) nextHop(dst uint32) (port int, mac hdr.MAC, ok bool) {
	snap := w.snap
	port, hop, ok := snap.Route(dst)
	if !ok {
		return -1, mac, false
	}
	if mac, ok = snap.Neigh[hop]; !ok {
		if mac, ok = w.neigh.lookup(hop, w.now); ok {
			return port, mac, true
		}
		w.event(Event{Kind: EvNeighbourMiss, Port: port, IP: hop})
	}
	return port, mac, ok
}

// nextHopOrDrop is nextHop for a packet in hand: without a route or a
// MAC the packet is dropped under the right reason.
func (w *Worker) nextHopOrDrop(m *mbuf.Mbuf, dst uint32) (port int, mac hdr.MAC, ok bool) {
	if port, mac, ok = w.nextHop(dst); !ok {
		if port < 0 {
			w.drop(m, DropNoRoute)
		} else {
			w.drop(m, DropNoNeighbour)
		}
	}
	return port, mac, ok
}

// output sends a packet whose IP header is final towards dst.
func (w *Worker) output(m *mbuf.Mbuf, eth hdr.Ethernet, dst uint32) {
	if port, mac, ok := w.nextHopOrDrop(m, dst); ok {
		w.transmit(m, eth, port, mac)
	}
}

// transmit writes the Ethernet addresses and queues the packet.
func (w *Worker) transmit(m *mbuf.Mbuf, eth hdr.Ethernet, port int, mac hdr.MAC) {
	eth.SetSrc(w.snap.Ports[port].MAC)
	eth.SetDst(mac)
	w.send(m, port)
}

// Offsets of the fields NAT rewrites in a TCP or UDP header.
const (
	l4SrcPort   = 0
	l4DstPort   = 2
	udpChecksum = 6
	tcpChecksum = 16
)

// rewriteDst changes the destination address and port of a TCP or UDP
// packet; without offload the checksums are updated incrementally.
func rewriteDst(ip hdr.IPv4, l4 []byte, addr uint32, port uint16, offload bool) {
	old, oldPort := ip.Dst(), binary.BigEndian.Uint16(l4[l4DstPort:])
	if offload {
		ip.SetDst(addr)
	} else {
		ip.SetDstWithChecksumUpdate(addr)
		updateL4Checksum(ip.Protocol(), l4, old, addr, oldPort, port)
	}
	binary.BigEndian.PutUint16(l4[l4DstPort:], port)
}

// rewriteSrc is rewriteDst for the source.
func rewriteSrc(ip hdr.IPv4, l4 []byte, addr uint32, port uint16, offload bool) {
	old, oldPort := ip.Src(), binary.BigEndian.Uint16(l4[l4SrcPort:])
	if offload {
		ip.SetSrc(addr)
	} else {
		ip.SetSrcWithChecksumUpdate(addr)
		updateL4Checksum(ip.Protocol(), l4, old, addr, oldPort, port)
	}
	binary.BigEndian.PutUint16(l4[l4SrcPort:], port)
}

// updateL4Checksum folds an address and a port change into the TCP or UDP
// checksum (RFC 1624). A UDP checksum of 0 means "none" and stays 0.
func updateL4Checksum(proto uint8, l4 []byte, oldAddr, newAddr uint32, oldPort, newPort uint16) {
	if proto == hdr.ProtoTCP {
		cs := binary.BigEndian.Uint16(l4[tcpChecksum:])
		cs = hdr.Update16(hdr.Update32(cs, oldAddr, newAddr), oldPort, newPort)
		binary.BigEndian.PutUint16(l4[tcpChecksum:], cs)
		return
	}
	cs := binary.BigEndian.Uint16(l4[udpChecksum:])
	cs = hdr.UpdateUDP16(hdr.UpdateUDP32(cs, oldAddr, newAddr), oldPort, newPort)
	binary.BigEndian.PutUint16(l4[udpChecksum:], cs)
}

// requestChecksums hands the IPv4 and TCP/UDP checksums to the NIC: the
// flags and header lengths in the mbuf, the IP checksum zeroed and the L4
// checksum set to the pseudo-header sum, as DPDK's TX offload API asks.
func requestChecksums(m *mbuf.Mbuf, ip hdr.IPv4, l4 []byte) {
	proto := ip.Protocol()
	ip.SetChecksum(0)
	phdr := hdr.Fold(hdr.PseudoHeaderSum(ip.Src(), ip.Dst(), proto, uint16(len(l4))))
	fl := mbuf.TxIPv4 | mbuf.TxIPCksum
	switch {
	case proto == hdr.ProtoTCP:
		binary.BigEndian.PutUint16(l4[tcpChecksum:], phdr)
		fl |= mbuf.TxTCPCksum
	case binary.BigEndian.Uint16(l4[udpChecksum:]) != 0:
		binary.BigEndian.PutUint16(l4[udpChecksum:], phdr)
		fl |= mbuf.TxUDPCksum
	} // a UDP datagram sent without a checksum keeps none
	m.SetOlFlags(fl)
	m.SetHeaderLens(hdr.EthernetLen, ip.HeaderLen(), 0)
}
