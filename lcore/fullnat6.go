package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// FullNAT to IPv6 servers (FNAT66, as DPVS's): IPv4's FullNAT
// (fullnat.go) over IPv6. A connection client -> VIP:vport leaves as
// LIP:lport -> RIP:rport, LIP one of the service's IPv6 local addresses
// (LocalAddrs6), and the server's reply RIP:rport -> LIP:lport goes back
// as VIP:vport -> client. The entry is an IPv6 one with FullNAT's
// extension and all four addresses beside it (conn.Insert6Full): its
// reply key is the IPv6 RIP:RPort -> LIP:LPort. Each worker hands out the
// local ports whose (LIP, lport) steers to itself by the IPv6 rule
// (owner6.go), so the replies come back to the connection's owner as for
// IPv4. The transport checksum is updated for both addresses and ports,
// never recomputed; a later fragment has its addresses rewritten only
// (its first fragment's checksum covers the datagram). With
// proxy_protocol the client's first bytes get a PROXY v2 header naming
// its IPv6 endpoints; with toa the handshake's last segment gets DPVS's
// 20-byte TCP option address naming them (toa.go); with uoa (opp) the
// first datagrams get DPVS's option protocol header (uoa.go).

// learnLIPs6 makes the pools of a snapshot's new IPv6 local addresses
// (control work; never removed, as IPv4's).
func (w *Worker) learnLIPs6(s *Snapshot) {
	for lip := range s.six.lips {
		if w.lpools6 == nil {
			w.lpools6 = map[hdr.Addr6]*lportPool{}
		}
		if _, ok := w.lpools6[lip]; !ok {
			w.lpools6[lip] = newLportPool6(lip, w.cfg.ID, w.nworkers)
		}
	}
	if len(s.six.lips) > 0 {
		w.table.EnableExt()
	}
}

// newFNAT66 enters a scheduled FNAT66 connection with one of the
// service's IPv6 local addresses and a port of it this worker owns;
// DropNoLocalPort when every one's ports are taken.
func (w *Worker) newFNAT66(d *desc, c *conn.Conn, svc *Service, a *conn.Addrs6) (uint32, Stat) {
	x := conn.Ext{}
	var found bool
	if a.LIP, x.LPort, found = pickLocalPort(w.lpools6, svc.LocalAddrs6, &w.lipNext); !found {
		return 0, DropNoLocalPort
	}
	startFullNAT(&x, c, svc, d.l4Bytes6(), proxyV2Len6)
	id, err := w.table.Insert6Full(c, a, &x)
	if err != nil {
		w.lpools6[a.LIP].put(x.LPort)
	}
	return id, insertDrop(err)
}

// isFNAT66 reports whether an IPv6 entry's addresses a are an FNAT66
// connection's: a local address among them (NAT64's is IPv4, in the
// extension; a plain IPv6 entry has none).
func isFNAT66(a *conn.Addrs6) bool { return a != nil && !a.LIP.IsUnspecified() }

// forwardFullNAT66 rewrites both ends of an FNAT66 packet: client ->
// VIP:vport into LIP:lport -> RIP:rport, RIP:rport -> LIP:lport into
// VIP:vport -> client; TCP sequence numbers move by the connection's
// deltas, and the client's first bytes get the PROXY v2 header where the
// service asks. The caller checked the hop limit.
func (w *Worker) forwardFullNAT66(d *desc, c *conn.Conn, id uint32, dir conn.Dir) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	e := w.routeTowards6(a, dir)
	if e.kind != exitTransmit {
		return e
	}
	ip := d.ip6()
	ip.SetHopLimit(ip.HopLimit() - 1)
	d.m.SetOlFlags(0)
	src, sport, dst, dport := &a.LIP, x.LPort, &a.RIP, c.RPort
	if dir == conn.Reply {
		src, sport, dst, dport = &a.VIP, c.VPort, &a.Client, c.ClientPort
	}
	if d.frag == fragLater { // no transport header: the addresses only
		ip.SetSrc(*src)
		ip.SetDst(*dst)
		return e
	}
	if dir == conn.Original && x.Flags&extProxy != 0 && c.Proto == hdr.ProtoTCP {
		if why := w.insertProxyHeader6(d, c, x, a); why != 0 {
			return drop(why)
		}
	}
	if c.Flags&flagTOA != 0 {
		w.toa(d, c, x, dir, e.to, a, true)
	}
	ip = d.ip6() // the headers may have moved into the headroom
	l4 := d.l4Bytes6()
	hdr.RewriteSrc6(ip, l4, c.Proto, *src, sport)
	hdr.RewriteDst6(ip, l4, c.Proto, *dst, dport)
	if wantsUOA(d, c, x, dir) {
		w.uoa6(d, c, x, e, a)
	}
	if c.Proto == hdr.ProtoTCP {
		tcp := hdr.TCP(l4)
		adjustSeq(tcp, x, dir, true)
		if dir == conn.Reply && tcp.Flags()&hdr.TCPFlagSYN != 0 && x.Flags&extProxy != 0 {
			// The server's MSS leaves room for the header in the
			// client's first segment.
			if mtu := w.snap.Ports[d.in].MTU; mtu > hdr.IPv6Len+hdr.TCPMinLen+proxyV2Len6 {
				tcp.ClampMSS(mtu-hdr.IPv6Len-hdr.TCPMinLen-proxyV2Len6, true)
			}
		}
	}
	return e
}

// insertProxyHeader6 is insertProxyHeader for an IPv6 segment: the PROXY
// v2 header before the client's first byte, the IPv6 payload length and
// the TCP checksum grown by it.
func (w *Worker) insertProxyHeader6(d *desc, c *conn.Conn, x *conn.Ext, a *conn.Addrs6) Stat {
	tcp := hdr.TCP(d.l4Bytes6())
	if len(tcp.Payload()) == 0 || tcp.Seq() != x.ClientISN+1 || tcp.Flags()&hdr.TCPFlagSYN != 0 {
		return 0
	}
	if d.frag != fragNone {
		return DropFragShifted // the later fragments' offsets cannot move by 52 (frag.go)
	}
	l4Old := uint16(len(tcp))
	h := d.openAfterTCPHeader(proxyV2Len6)
	if h == nil {
		return DropNoHeadroom
	}
	putProxyV2Header(h, c, a)
	grownTCP6(d, h, l4Old)
	w.cnt.own[ProxyHeaders]++
	return 0
}

// grownTCP6 is grownTCP for an IPv6 segment of l4Old bytes before: the
// payload length and the TCP checksum (there is no header checksum). The
// pseudo-header's length stays below 65536: its high half stays 0.
func grownTCP6(d *desc, added []byte, l4Old uint16) {
	n := uint16(len(added))
	ip := d.ip6()
	ip.SetPayloadLength(ip.PayloadLength() + n)
	tcp := hdr.TCP(d.l4Bytes6())
	cs := hdr.UpdateBlock(tcp.Checksum(), 0, hdr.Checksum(added, 0))
	tcp.SetChecksum(hdr.Update16(cs, l4Old, l4Old+n))
}

// icmpErrorFNAT66 translates an ICMPv6 error about an FNAT66 connection's
// packet, as icmpErrorFullNAT does IPv4's: from the server's side (about
// LIP:lport -> RIP:rport) it goes to the client from the VIP, quoting
// client -> VIP:vport; from the client's side (about VIP:vport ->
// client) to the server from the LIP, quoting RIP:rport -> LIP:lport.
// Each address change is natICMPv6Error's incremental update; a quoted
// sequence number goes back into the numbering its receiver knows. The
// caller checked the hop limit.
func (w *Worker) icmpErrorFNAT66(d *desc, c *conn.Conn, id uint32, dir conn.Dir, q quote6) exit {
	x, a := w.table.Ext(id), w.table.Addrs6(id)
	ip := d.ip6()
	icmp := hdr.ICMP(d.l4Bytes6())
	towards := &a.Client
	if dir == conn.Reply {
		natICMPv6Error(ip, icmp, q, true, a.Client, c.ClientPort)
		natICMPv6Error(ip, icmp, q, false, a.VIP, c.VPort)
		if q.proto == hdr.ProtoTCP && x.SeqIn != 0 && len(q.l4) >= 8 {
			seq := hdr.TCP(q.l4).Seq()
			unshiftQuotedSeq6(icmp, q, seq-hdr.UnshiftSeq(seq, x.SeqIn, x.ClientISN+1))
		}
	} else {
		natICMPv6Error(ip, icmp, q, true, a.RIP, c.RPort)
		natICMPv6Error(ip, icmp, q, false, a.LIP, x.LPort)
		if q.proto == hdr.ProtoTCP && x.SeqOut != 0 {
			unshiftQuotedSeq6(icmp, q, x.SeqOut)
		}
		towards = &a.RIP
	}
	w.cnt.own[ICMPErrors]++
	ip.SetHopLimit(ip.HopLimit() - 1)
	d.m.SetOlFlags(0)
	return w.route6(towards)
}
