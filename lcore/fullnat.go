package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// VS/FullNAT. A connection client -> VIP:vport leaves as LIP:lport ->
// RIP:rport, LIP one of the service's local addresses, and the server's
// reply RIP:rport -> LIP:lport goes back as VIP:vport -> client: the real
// servers need no route through the director, only a way to the LIPs.
//
// Ownership needs nothing new: a packet that does not go to a VIP is
// owned by the hash of its destination endpoint (owner.go), and a reply
// goes to LIP:lport. So each worker hands out only the local ports whose
// (LIP, lport) hashes to itself: the reply steers to the connection's
// owner by the same rule as every other packet (and a server port whose
// NIC hashes the destination fields with the steering key delivers it
// there directly). Each worker's ports are its own: no lock, no sharing.

// learnLIPs makes the pools of a snapshot's new local addresses, and the
// table's extension array the first time a snapshot has local addresses
// or a SYN proxy (control work). Pools are never
// removed: connections may still hold their ports.
func (w *Worker) learnLIPs(s *Snapshot) {
	for lip := range s.lips {
		if _, ok := w.lpools[lip]; !ok {
			w.lpools[lip] = newLportPool(lip, w.cfg.ID, w.nworkers)
		}
	}
	if len(s.lips) > 0 || s.hasSynProxy {
		w.table.EnableExt()
	}
	w.learnLIPs6(s)
}

// Bits of conn.Ext.Flags.
const (
	extProxy uint16 = 1 << 0 // a PROXY v2 header goes before the client's first byte
)

// pickLocalPort takes a free port of one of lips (a service's local
// addresses, IPv4 or IPv6) from this worker's pools, starting where the
// last connection's search left off; ok false when every one's ports are
// taken.
func pickLocalPort[A comparable](pools map[A]*lportPool, lips []A, next *int) (lip A, port uint16, ok bool) {
	n := len(lips)
	for i := 0; i < n && !ok; i++ {
		a := lips[(*next+i)%n]
		if p := pools[a]; p != nil {
			if port, ok = p.get(); ok {
				lip = a
			}
		}
	}
	*next++
	return lip, port, ok
}

// newFullNAT enters a scheduled FullNAT connection with a local address
// and port of this worker; DropNoLocalPort when every LIP's ports are
// taken.
func (w *Worker) newFullNAT(c *conn.Conn, svc *Service, d *desc) (uint32, Stat) {
	x := conn.Ext{}
	var found bool
	if x.LIP, x.LPort, found = pickLocalPort(w.lpools, svc.LocalAddrs, &w.lipNext); !found {
		return 0, DropNoLocalPort
	}
	startFullNAT(&x, c, svc, d.l4Bytes(), proxyV2Len)
	id, err := w.table.InsertExt(c, &x)
	if err != nil {
		w.lpools[x.LIP].put(x.LPort)
	}
	return id, insertDrop(err)
}

// startFullNAT sets what a new FullNAT, NAT64 or FNAT66 connection c of
// service svc starts with, from its first segment seg: for TCP, the
// client's ISN, the PROXY v2 header's proxyLen bytes (the client's
// stream moves by them) and the TCP option address; for UDP, the UDP
// option of address's first datagrams.
func startFullNAT(x *conn.Ext, c *conn.Conn, svc *Service, seg []byte, proxyLen uint32) {
	switch c.Proto {
	case hdr.ProtoTCP:
		x.ClientISN = hdr.TCP(seg).Seq()
		if svc.ProxyProtocol {
			x.Flags |= extProxy
			x.SeqIn = proxyLen
		}
		if svc.TOA {
			c.Flags |= flagTOA
		}
	case hdr.ProtoUDP:
		startUOA(x, svc.UOA)
	}
}

// releaseLocalPort gives a FullNAT connection's port back (expiry): an
// FNAT66 one's to its IPv6 local address's pool.
func (w *Worker) releaseLocalPort(id uint32) {
	x := w.table.Ext(id)
	if x == nil {
		return
	}
	p := w.lpools[x.LIP]
	if a := w.table.Addrs6(id); isFNAT66(a) {
		p = w.lpools6[a.LIP]
	}
	if p != nil {
		p.put(x.LPort)
	}
}

// forwardNATAdjusted is forwardNAT for a connection whose sequence
// numbers move (a proxied handshake).
func (w *Worker) forwardNATAdjusted(d *desc, c *conn.Conn, id uint32, dir conn.Dir) exit {
	e := w.forwardNAT(d, c, dir)
	if e.kind == exitTransmit {
		// forwardNAT updated the checksums, or left them to the NIC.
		adjustSeq(hdr.TCP(d.l4Bytes()), w.table.Ext(id), dir, d.m.OlFlags()&mbuf.TxTCPCksum == 0)
	}
	return e
}

// forwardFullNAT rewrites both ends of the packet: client -> VIP:vport
// into LIP:lport -> RIP:rport, and RIP:rport -> LIP:lport into VIP:vport
// -> client; TCP sequence numbers move by the connection's deltas, and the
// client's first bytes get the PROXY v2 header where the service asks.
func (w *Worker) forwardFullNAT(d *desc, c *conn.Conn, id uint32, dir conn.Dir) exit {
	x := w.table.Ext(id)
	towards := c.RIP
	if dir == conn.Reply {
		towards = c.ClientIP
	}
	e := w.route(towards)
	if e.kind != exitTransmit {
		return e
	}
	if c.Proto == hdr.ProtoICMP { // a SNAT'd ping (snat.go)
		rewriteEcho(d, c, x, dir)
		return e
	}
	if dir == conn.Original && x.Flags&extProxy != 0 && c.Proto == hdr.ProtoTCP {
		if why := w.insertProxyHeader(d, c, x, nil); why != 0 {
			return drop(why)
		}
	}
	if c.Flags&flagTOA != 0 {
		w.toa(d, c, x, dir, e.to, nil, false)
	}
	// Not for a fragment: the NIC would sum the piece it sees, and the
	// checksum is the whole datagram's.
	// Nor for a datagram that gets the UOA: its header moves.
	withUOA := wantsUOA(d, c, x, dir)
	offload := w.snap.Ports[e.to].CsumOffload && l4ChecksumGood(d.m) && d.frag == fragNone && !withUOA
	ip := d.ip()
	l4 := ip.Payload()
	decTTL(ip)
	if dir == conn.Original {
		hdr.RewriteSrc(ip, l4, x.LIP, x.LPort, offload)
		hdr.RewriteDst(ip, l4, c.RIP, c.RPort, offload)
	} else {
		hdr.RewriteSrc(ip, l4, c.VIP, c.VPort, offload)
		hdr.RewriteDst(ip, l4, c.ClientIP, c.ClientPort, offload)
	}
	if c.Proto == hdr.ProtoTCP {
		tcp := hdr.TCP(l4)
		adjustSeq(tcp, x, dir, !offload)
		if dir == conn.Reply && x.Flags&extProxy != 0 && tcp.Flags()&hdr.TCPFlagSYN != 0 {
			// The client's first segment grows by the header on the way
			// to the server: the server's MSS, as the client learns it,
			// leaves that room.
			if mtu := w.snap.Ports[d.in].MTU; mtu > hdr.IPv4MinLen+hdr.TCPMinLen+proxyV2Len {
				tcp.ClampMSS(mtu-hdr.IPv4MinLen-hdr.TCPMinLen-proxyV2Len, !offload)
			}
		}
	}
	if offload {
		requestChecksums(d.m, ip, l4)
		w.cnt.own[CsumOffloaded]++
	} else {
		d.m.SetOlFlags(0)
	}
	if withUOA {
		w.uoa(d, c, x, e, nil)
	}
	return e
}

// proxyV2Len is the length of a PROXY protocol v2 header for TCP over
// IPv4: the 12-byte signature, version and command, family, length, and
// the two addresses and ports; proxyV2Len6 over IPv6 (a NAT64
// connection's client and VIP).
const (
	proxyV2Len  = 28
	proxyV2Len6 = 52
)

// proxyV2Sig is the PROXY protocol v2 signature.
var proxyV2Sig = [12]byte{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A}

// insertProxyHeader puts the PROXY v2 header (client and VIP endpoints)
// in front of the client's first byte: into the segment whose data
// starts at ISN+1, each time it comes (a retransmission gets it again).
// The header moves the Ethernet, IPv4 and TCP headers into the headroom;
// checksums are updated for the added bytes and the new length. With a6
// (a NAT64 connection's addresses, its packet already IPv4) the header
// names the IPv6 client and VIP.
func (w *Worker) insertProxyHeader(d *desc, c *conn.Conn, x *conn.Ext, a6 *conn.Addrs6) Stat {
	ip := d.ip()
	tcp := hdr.TCP(ip.Payload())
	if len(tcp.Payload()) == 0 || tcp.Seq() != x.ClientISN+1 || tcp.Flags()&hdr.TCPFlagSYN != 0 {
		return 0
	}
	if d.frag != fragNone {
		// The later fragments' offsets would have to move by 28 bytes,
		// not a multiple of 8: the datagram is dropped whole (frag.go).
		return DropFragShifted
	}
	n := proxyV2Len
	if a6 != nil {
		n = proxyV2Len6
	}
	h := d.openAfterTCPHeader(n)
	if h == nil {
		return DropNoHeadroom
	}
	putProxyV2Header(h, c, a6)
	grownTCP(d.ip(), h)
	w.cnt.own[ProxyHeaders]++
	return 0
}

// putProxyV2Header writes the PROXY v2 header of connection c into h:
// the client's and the VIP's endpoints, IPv6 ones from a6 when it is not
// nil (proxyV2Len6 bytes, else proxyV2Len).
func putProxyV2Header(h []byte, c *conn.Conn, a6 *conn.Addrs6) {
	copy(h, proxyV2Sig[:])
	h[12] = 0x21 // version 2, PROXY
	if a6 == nil {
		h[13] = 0x11 // AF_INET, STREAM
		binary.BigEndian.PutUint16(h[14:], 12)
		binary.BigEndian.PutUint32(h[16:], c.ClientIP)
		binary.BigEndian.PutUint32(h[20:], c.VIP)
		binary.BigEndian.PutUint16(h[24:], c.ClientPort)
		binary.BigEndian.PutUint16(h[26:], c.VPort)
	} else {
		h[13] = 0x21 // AF_INET6, STREAM
		binary.BigEndian.PutUint16(h[14:], 36)
		copy(h[16:32], a6.Client[:])
		copy(h[32:48], a6.VIP[:])
		binary.BigEndian.PutUint16(h[48:], c.ClientPort)
		binary.BigEndian.PutUint16(h[50:], c.VPort)
	}
}

// openAfterTCPHeader makes room for n bytes right after the TCP header of
// d's segment (at d.l4, IPv4 or IPv6), the Ethernet, IP and TCP headers
// moving n bytes into the headroom, and returns them; nil without the
// headroom.
func (d *desc) openAfterTCPHeader(n int) []byte {
	hlen := int(d.l4) + hdr.TCP(d.m.Data()[d.l4:]).DataOffset()
	if _, err := d.m.Prepend(n); err != nil {
		return nil
	}
	data := d.m.Data()
	copy(data, data[n:n+hlen])
	return data[hlen : hlen+n]
}

// grownTCP updates the IPv4 length and both checksums of segment ip for
// the bytes added that openAfterTCPHeader opened: they sit at an even
// offset and shift the rest by an even count, so the TCP sum grows by
// theirs and by the pseudo-header's length.
func grownTCP(ip hdr.IPv4, added []byte) {
	n := uint16(len(added))
	oldLen := ip.TotalLength()
	ip.SetTotalLength(oldLen + n)
	ip.SetChecksum(hdr.Update16(ip.Checksum(), oldLen, oldLen+n))
	tcp := hdr.TCP(ip.Payload())
	l4Old := oldLen - uint16(ip.HeaderLen())
	cs := hdr.UpdateBlock(tcp.Checksum(), 0, hdr.Checksum(added, 0))
	tcp.SetChecksum(hdr.Update16(cs, l4Old, l4Old+n))
}

// icmpErrorFullNAT translates an ICMP error about a FullNAT connection's
// packet: from the server's side (about LIP:lport -> RIP:rport) it goes to
// the client from the VIP, quoting client -> VIP:vport; from the client's
// side (about VIP:vport -> client) it goes to the server from the LIP,
// quoting RIP:rport -> LIP:lport. The quoted sequence number goes back
// into the numbering its receiver knows. A SNAT connection's (snat.go)
// keeps its sender's address, and one about a SNAT'd ping quotes the
// server's own identifier.
func (w *Worker) icmpErrorFullNAT(d *desc, c *conn.Conn, id uint32, dir conn.Dir) exit {
	x := w.table.Ext(id)
	ip := d.ip()
	icmp := hdr.ICMP(ip.Payload())
	quoted := d.quotedIP()
	ql4 := quoted[quoted.HeaderLen():][:8]
	qsum := hdr.Checksum(quoted[:quoted.HeaderLen()+8], 0)
	decTTL(ip)
	towards := c.ClientIP
	if dir == conn.Original {
		ip.SetSrcWithChecksumUpdate(x.LIP)
		ip.SetDstWithChecksumUpdate(c.RIP)
		hdr.RewriteSrc(quoted, ql4, c.RIP, c.RPort, false)
		hdr.RewriteDst(quoted, ql4, x.LIP, x.LPort, false)
		if c.Proto == hdr.ProtoTCP && x.SeqOut != 0 {
			q := hdr.TCP(ql4) // seq only: the 8 bytes hold no more
			q.SetSeq(q.Seq() - x.SeqOut)
		}
		towards = c.RIP
	} else {
		// A SNAT connection's errors come from beyond, from the router
		// that sent them (traceroute must see each hop): only the
		// destination goes back to the server.
		if !isSNAT(c) {
			ip.SetSrcWithChecksumUpdate(c.VIP)
		}
		ip.SetDstWithChecksumUpdate(c.ClientIP)
		if c.Proto == hdr.ProtoICMP { // about a SNAT'd ping: its source and identifier
			quoted.SetSrcWithChecksumUpdate(c.ClientIP)
			hdr.ICMP(ql4).SetIDWithChecksumUpdate(c.ClientPort)
		} else {
			hdr.RewriteSrc(quoted, ql4, c.ClientIP, c.ClientPort, false)
			hdr.RewriteDst(quoted, ql4, c.VIP, c.VPort, false)
		}
		if q := hdr.TCP(ql4); c.Proto == hdr.ProtoTCP && x.SeqIn != 0 {
			q.SetSeq(hdr.UnshiftSeq(q.Seq(), x.SeqIn, x.ClientISN+1))
		}
	}
	icmp.SetChecksum(hdr.UpdateBlock(icmp.Checksum(), qsum, hdr.Checksum(quoted[:quoted.HeaderLen()+8], 0)))
	d.m.SetOlFlags(0)
	return w.route(towards)
}
