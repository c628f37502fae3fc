package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// IPv6 services: NAT66, DR and TUN (IPv6 in IPv6) for TCP and UDP, with
// IPv4's table, state machine, timeouts, schedulers and persistence (a
// prefix length instead of a netmask). The entries' address fields hold
// folds of the IPv6 addresses (conn/six.go), which the schedulers and the
// persistence templates see in place of IPv4 addresses. FullNAT servers
// of an IPv6 service are IPv6 ones (FNAT66, fullnat6.go) or IPv4 ones
// (NAT64, nat64.go); the FTP helper
// reads EPRT and 229 (ftp6.go); the SYN proxy answers for NAT66 and
// NAT64 servers (synproxy6.go).

// forward6 is forward for an IPv6 TCP or UDP packet.
func (w *Worker) forward6(d *desc) exit {
	ip := d.ip6()
	src, dst := ip.Src(), ip.Dst()
	k := &d.flow
	if si, ok := w.answersWithCookie6(d, &dst); ok {
		return w.answerSYN6(d, &src, &dst, hdr.TCP(d.l4Bytes6()), si)
	}
	id, dir, ok := w.table.Lookup6(k.proto, &src, k.sport, &dst, k.dport)
	if ok && w.steers > 0 {
		if c := w.table.Get(id); c.Flags&flagSteer != 0 {
			return w.steer(d, c) // an FNAT66 server's packet, for the worker holding its connection
		}
	}
	if ok && k.proto == hdr.ProtoTCP && dir == conn.Original {
		// A reused port of a finished connection opens a new one
		// (forward), through the SYN proxy by the ACK of its cookie.
		c := w.table.Get(id)
		switch d.flags & (hdr.TCPFlagSYN | hdr.TCPFlagACK | hdr.TCPFlagRST | hdr.TCPFlagFIN) {
		case hdr.TCPFlagSYN:
			ok = !finished(c)
		case hdr.TCPFlagACK:
			ok = !finished(c) || !w.cookieReopens6(d, &src, &dst)
		}
		if !ok {
			w.expireEntry(id, c)
			w.table.Delete(id)
		}
	}
	if !ok && isProbePort(k.dport) && w.snap.isLocal6(dst) {
		if k.proto == hdr.ProtoUDP {
			return w.probeReply(d, 0, &src, hdr.UDP(d.l4Bytes6()))
		}
		return w.probeAnswer6(d)
	}
	if !ok && w.snap.hasFTP && k.proto == hdr.ProtoTCP &&
		d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) == hdr.TCPFlagSYN {
		var why Stat
		if id, dir, why, ok = w.ftpData6(d, &src, &dst); why != 0 {
			return drop(why)
		}
		if ok && dir == conn.Original {
			w.learnClient6(d, &src)
		}
	}
	if !ok && k.proto == hdr.ProtoTCP && w.snap.hasSynProxy {
		if si, found := w.snap.service6(&dst, k.dport, k.proto); found && w.snap.Services[si].SynProxy {
			return w.synProxyNew6(d, si, &src, &dst)
		}
	}
	if !ok {
		var why Stat
		if id, why = w.newConn6(d, &src, &dst); why != 0 {
			return drop(why)
		}
		dir = conn.Original
		w.learnClient6(d, &src)
		if c := w.table.Get(id); w.snap.Services[c.Service].OnePacket {
			return w.onePacket(d, id, c)
		}
	}
	c := w.table.Get(id)
	if c.Flags&flagSynced != 0 && dir == conn.Original {
		c.Flags &^= flagSynced // installed by sync: learn the client as a new connection does
		w.learnClient6(d, &src)
	}
	if w.snap.DestExpired(c.Dest) {
		w.expireEntry(id, c)
		w.table.Delete(id)
		return drop(DropDestDown)
	}
	if c.Flags&flagSeqAdj != 0 || c.Fwd == fwd.FullNAT {
		if x := w.table.Ext(id); x != nil && x.Flags&extSynPending != 0 {
			if e, done := w.synProxyPending(d, c, id, x, dir); done {
				return e
			}
		}
	}
	// A new connection whose first packet expired stays embryonic, as
	// for IPv4.
	if ip.HopLimit() <= 1 {
		return w.timeExceeded6(d)
	}
	changed := false
	if k.proto == hdr.ProtoTCP {
		if next := conn.NextTCPState(c.State, dir, d.flags, c.Fwd.OneWay()); next != c.State {
			w.countState(c.Dest, c.State, false)
			w.countState(c.Dest, next, true)
			if next == conn.StateEstablished {
				w.cnt.dest[c.Dest][DestEstablished]++
			}
			c.State = next
			changed = true
		}
	}
	w.table.Touch(c, dir, w.now, &w.snap.Timeouts)
	if w.snap.Sync.On {
		w.syncAfterPacket(c, id, dir, changed)
	}
	ds := &w.cnt.dest[c.Dest]
	if dir == conn.Original {
		ds[DestInPkts]++
		ds[DestInBytes] += uint64(d.m.PktLen())
	} else {
		ds[DestOutPkts]++
		ds[DestOutBytes] += uint64(d.m.PktLen())
	}
	if c.Flags&flagFTP != 0 {
		if x, ok := w.ftpControl6(d, c, id, dir); !ok {
			return x
		}
	}
	switch c.Fwd {
	case fwd.NAT:
		e := w.forwardNAT6(d, c, w.table.Addrs6(id), dir)
		if c.Flags&flagSeqAdj != 0 && e.kind == exitTransmit {
			adjustSeq(hdr.TCP(d.l4Bytes6()), w.table.Ext(id), dir, true) // a proxied handshake's deltas
		}
		return e
	case fwd.FullNAT:
		if isFNAT66(w.table.Addrs6(id)) {
			return w.forwardFullNAT66(d, c, id, dir)
		}
		if dir != conn.Original {
			return drop(DropNoConn) // a NAT64 connection's replies are IPv4
		}
		return w.nat64Out(d, c, id)
	}
	return w.toRealServer6(d, c, id) // DR, TUN
}

// learnClient6 remembers the Ethernet source of an on-link IPv6 client.
func (w *Worker) learnClient6(d *desc, src *hdr.Addr6) {
	if w.snap.Ports[d.in].OnLink6(src) {
		w.neigh6.learn(src, d.eth().Src(), w.now)
	}
}

// toRealServer6 sends an IPv6 packet of DR or TUN connection id (entry c)
// to its server; the caller checked its hop limit.
func (w *Worker) toRealServer6(d *desc, c *conn.Conn, id uint32) exit {
	ip := d.ip6()
	a := w.table.Addrs6(id)
	if c.Fwd == fwd.TUN {
		return w.encapsulate6(d, &a.RIP)
	}
	ip.SetHopLimit(ip.HopLimit() - 1)
	d.m.SetOlFlags(0)
	return w.route6(&a.RIP)
}

// newConn6 is newConn for an IPv6 packet.
func (w *Worker) newConn6(d *desc, src, dst *hdr.Addr6) (uint32, Stat) {
	snap, k := w.snap, &d.flow
	si, ok := snap.service6(dst, k.dport, k.proto)
	if !ok {
		switch {
		case snap.IsVIP6(*dst):
			return 0, DropNoService
		case snap.isLocal6(*dst):
			return 0, DropToLocal
		}
		return 0, DropNoConn
	}
	return w.newConn6Checked(d, si, src, dst, true)
}

// newConn6Checked is newConn6 for service si; needSYN false takes any
// packet (the SYN proxy's proven ACK).
func (w *Worker) newConn6Checked(d *desc, si int32, src, dst *hdr.Addr6, needSYN bool) (uint32, Stat) {
	snap, k := w.snap, &d.flow
	svc := &snap.Services[si]
	if needSYN && k.proto == hdr.ProtoTCP && !svc.SloppyTCP &&
		d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) != hdr.TCPFlagSYN {
		return 0, DropNotSYN
	}
	if svc.Clients != nil {
		if why := svc.Clients.admits6(src); why != 0 {
			return 0, why
		}
	}
	if svc.Helper == HelperFTP && (w.ftp == nil || w.ftp.full()) {
		return 0, DropFTPTableFull
	}
	vip := conn.Fold6(dst)
	w.flow.SrcIP, w.flow.SrcPort, w.flow.DstIP, w.flow.DstPort = conn.Fold6(src), k.sport, vip, k.dport
	w.flow.Proto, w.flow.Now = k.proto, w.now
	idx, tmpl := -1, uint32(0)
	if svc.QUIC && d.frag != fragLater {
		idx = quicDest(svc, d, true)
	}
	switch {
	case idx >= 0: // the server the QUIC connection ID names
	case svc.Persistence > 0:
		// The template's key is the fold of the client's prefix: two
		// prefixes that fold alike share a server, which persistence
		// allows (the server is still one of the service's).
		network := masked6(src, &svc.PersistMask6)
		idx, tmpl = w.persistent(svc, k.proto, conn.Fold6(&network), vip, templatePort(svc, k.dport))
	default:
		idx = svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
	}
	if idx < 0 {
		return 0, DropNoDest
	}
	rs := &svc.Dests[idx]
	c := conn.Conn{
		ClientPort: k.sport, VPort: k.dport, RPort: serverPort(rs, k.dport), Proto: k.proto, State: conn.StateNone,
		Fwd: rs.Fwd, Dest: rs.ID, Service: uint32(si), Template: tmpl,
	}
	if k.proto == hdr.ProtoUDP {
		c.State = conn.StateUDP
	}
	if rs.Fwd.OneWay() {
		c.Flags = conn.FlagOneWay
	}
	w.table.Relieve(w.now, w.expire)
	a := conn.Addrs6{Client: *src, VIP: *dst, RIP: rs.Addr6}
	var id uint32
	var why Stat
	switch {
	case rs.Fwd == fwd.FullNAT && !rs.Addr6.IsUnspecified(): // FNAT66 (fullnat6.go)
		id, why = w.newFNAT66(d, &c, svc, &a)
	case rs.Fwd == fwd.FullNAT: // an IPv4 server: NAT64 (nat64.go)
		c.RIP = rs.Addr
		id, why = w.newNAT64(d, &c, svc, &a)
	default:
		// A proxied NAT66 connection's sequence numbers move: it has an
		// extension, with NAT66's keys (synproxy6.go).
		var err error
		if svc.SynProxy && rs.Fwd == fwd.NAT && k.proto == hdr.ProtoTCP {
			c.Flags |= flagSeqAdj
		}
		id, err = w.insert6(&c, &a)
		if err == conn.ErrExists && c.Flags&conn.FlagOneWay == 0 &&
			w.endFinished(w.table.Lookup6(c.Proto, &a.RIP, c.RPort, &a.Client, c.ClientPort)) {
			id, err = w.insert6(&c, &a) // a finished connection held the Reply key (freeReplyKey)
		}
		why = insertDrop(err)
	}
	if why != 0 {
		w.releaseTemplate(tmpl)
		return 0, why
	}
	if svc.Helper == HelperFTP && rs.Fwd == fwd.NAT && w.ftp.add(id) { // room checked above
		w.table.Get(id).Flags |= flagFTP
	}
	w.cnt.own[NewConns]++
	w.cnt.dest[rs.ID][DestConns]++
	w.countState(rs.ID, c.State, true)
	return id, 0
}

// insert6 enters IPv6 connection c: with an extension for the sequence
// deltas of a proxied handshake (flagSeqAdj, synproxy6.go).
func (w *Worker) insert6(c *conn.Conn, a *conn.Addrs6) (uint32, error) {
	if c.Flags&flagSeqAdj != 0 {
		var x conn.Ext
		return w.table.Insert6Seq(c, a, &x)
	}
	return w.table.Insert6(c, a)
}

// forwardNAT6 rewrites client -> VIP:vport into client -> RIP:rport and
// RIP:rport -> client into VIP:vport -> client (NAT66), the transport
// checksum updated incrementally for the address and port.
func (w *Worker) forwardNAT6(d *desc, c *conn.Conn, a *conn.Addrs6, dir conn.Dir) exit {
	e := w.routeTowards6(a, dir)
	if e.kind != exitTransmit {
		return e
	}
	ip := d.ip6()
	l4 := d.l4Bytes6()
	ip.SetHopLimit(ip.HopLimit() - 1)
	if dir == conn.Original {
		hdr.RewriteDst6(ip, l4, c.Proto, a.RIP, c.RPort)
	} else {
		hdr.RewriteSrc6(ip, l4, c.Proto, a.VIP, c.VPort)
	}
	d.m.SetOlFlags(0)
	return e
}

// routeTowards6 routes a packet of IPv6 connection a in direction dir:
// to its real server, or back to its client.
func (w *Worker) routeTowards6(a *conn.Addrs6, dir conn.Dir) exit {
	if dir == conn.Reply {
		return w.route6(&a.Client)
	}
	return w.route6(&a.RIP)
}

// route6 is route for an IPv6 destination: the neighbour table, then the
// clients this worker learnt, else the miss is reported (the control
// plane solicits it) and the packet dropped.
func (w *Worker) route6(dst *hdr.Addr6) exit {
	snap := w.snap
	port, hop, ok := snap.Route6(dst)
	if !ok {
		return drop(DropNoRoute)
	}
	if mac, ok := snap.Neigh6[hop]; ok {
		return transmit(port, mac)
	}
	if mac, ok := w.neigh6.lookup(&hop, w.now); ok {
		return transmit(port, mac)
	}
	w.event(Event{Kind: EvNeighbourMiss6, Port: port, IP6: hop})
	return drop(DropNoNeighbour)
}

// tun6HeaderLen is the outer IPv6 header VS/TUN adds for an IPv6 service.
const tun6HeaderLen = hdr.IPv6Len

// encapsulate6 sends the packet, its hop limit decremented, inside an
// outer IPv6 header (next header 41) from the output port's IPv6 address
// to the real server. A packet that would not fit the port's MTU (or the
// path MTU a router reported, tunerr6.go) is answered with a Packet Too
// Big (tooBig6).
func (w *Worker) encapsulate6(d *desc, rip *hdr.Addr6) exit {
	e := w.route6(rip)
	if e.kind != exitTransmit {
		return e
	}
	out := &w.snap.Ports[e.to]
	ip := d.ip6()
	inner := hdr.IPv6Len + int(ip.PayloadLength())
	if out.Addr6.IsUnspecified() {
		return drop(DropTooBig)
	}
	if mtu := w.pmtu6.get(rip, out.MTU, w.now); inner+tun6HeaderLen > int(mtu) {
		return w.tooBig6(d, mtu)
	}
	ip.SetHopLimit(ip.HopLimit() - 1)
	tc := ip.TrafficClass()
	m := d.m
	if err := m.SetLen(hdr.EthernetLen + inner); err != nil {
		return drop(DropBadIPv6)
	}
	front, err := m.Prepend(tun6HeaderLen)
	if err != nil {
		return drop(DropNoHeadroom)
	}
	data := m.Data()
	copy(data[:hdr.EthernetLen], data[len(front):len(front)+hdr.EthernetLen])
	outer := hdr.IPv6(data[hdr.EthernetLen:])
	outer.Encode(uint16(inner), hdr.ProtoIPv6, hdr.DefaultTTL, out.Addr6, *rip)
	outer[0], outer[1] = 6<<4|tc>>4, tc<<4 // the inner traffic class, flow label 0
	m.SetOlFlags(0)
	w.cnt.own[Encapsulated]++
	return e
}
