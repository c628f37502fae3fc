package lcore

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// run processes a parsed burst: each packet's stage decides its exit.
// steer is false for packets a peer handed over: their owner is here.
func (w *Worker) run(ds []desc, steer bool) {
	for i := range ds {
		d := &ds[i]
		w.leave(d.m, d.in, w.process(d, steer))
	}
}

// process takes a parsed packet through steering and its stage.
func (w *Worker) process(d *desc, steer bool) exit {
	// A fragment found invalid after its fragment header was read (not
	// our MAC, a bad transport header) is dropped like any other packet.
	if d.frag != fragNone && d.class != classInvalid {
		return w.fragment(d, steer && w.nworkers > 1)
	}
	if steer && w.nworkers > 1 {
		if d.owner = w.ownerOf(d); d.owner >= 0 && d.owner != w.cfg.ID {
			return handOff(d.owner)
		}
	}
	w.cnt.own[RxPackets]++
	w.cnt.own[RxBytes] += uint64(d.m.PktLen())
	switch d.class {
	case classFlow:
		return w.forward(d)
	case classICMPError:
		return w.icmpError(d)
	case classTunnelError:
		return w.tunnelError(d)
	case classEcho:
		return w.echoReply(d)
	case classARP:
		return w.handleARP(d)
	case classND6:
		return w.handleND6(d)
	case classEcho6:
		return w.echo6(d)
	case classEchoReply:
		if e, ok := w.snatEchoReply(d); ok {
			return e
		}
		return w.probeEchoReply(d)
	case classEchoReply6:
		return w.probeEchoReply(d)
	case classFlow6:
		return w.forward6(d)
	case classICMPError6:
		return w.icmpError6(d)
	case classTunError6:
		return w.tunnelError6(d)
	}
	return drop(d.verdict)
}

// forward finds (or makes) the packet's connection and sends the packet on
// by the connection's method.
func (w *Worker) forward(d *desc) exit {
	if d.cookie { // a SYN the SYN proxy answers before any lookup (synproxy.go)
		k := d.flow
		return w.answerSYN(d, &k, hdr.TCP(d.ip().Payload()), d.svc-1)
	}
	k := &d.flow
	id, dir, ok := w.lookup(d)
	if ok && w.steers > 0 {
		if c := w.table.Get(id); c.Flags&flagSteer != 0 {
			return w.steer(d, c)
		}
	}
	if ok && k.proto == hdr.ProtoTCP && dir == conn.Original {
		// A client reusing the port of a finished connection opens a new
		// one, scheduled afresh (IPVS's conn_reuse_mode): its old server
		// may be gone. Through the SYN proxy, the client's SYN got its
		// cookie without a lookup, and its ACK is what opens the new one.
		c := w.table.Get(id)
		switch d.flags & (hdr.TCPFlagSYN | hdr.TCPFlagACK | hdr.TCPFlagRST | hdr.TCPFlagFIN) {
		case hdr.TCPFlagSYN:
			ok = !finished(c)
		case hdr.TCPFlagACK:
			ok = !finished(c) || !w.cookieReopens(d)
		}
		if !ok {
			w.expireEntry(id, c)
			w.table.Delete(id)
		}
	}
	if !ok && isProbePort(k.dport) && w.snap.isLocal(k.dst) {
		if k.proto == hdr.ProtoUDP {
			return w.probeReply(d, k.src, nil, hdr.UDP(d.l4Bytes()))
		}
		return w.probeAnswer(d)
	}
	if !ok && w.snap.hasFTP && k.proto == hdr.ProtoTCP &&
		d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) == hdr.TCPFlagSYN {
		var why Stat
		if id, dir, why, ok = w.ftpData(d); why != 0 {
			return drop(why)
		}
		if ok && dir == conn.Original {
			w.learnClient(d)
		}
	}
	if !ok && k.proto == hdr.ProtoTCP {
		si, found := d.svc-1, d.svc > 0 // a SYN's, found by the lookup stage
		if !found {
			si, found = w.snap.service(k.dst, k.dport, k.proto)
		}
		if found && w.snap.Services[si].SynProxy {
			return w.synProxyNew(d, si)
		}
		if found {
			d.svc = si + 1 // newConn need not look again
		}
	}
	if !ok {
		var why Stat
		if id, why = w.newConn(d); why != 0 {
			return drop(why)
		}
		dir = conn.Original
		w.learnClient(d)
		if c := w.table.Get(id); w.snap.Services[c.Service].OnePacket {
			return w.onePacket(d, id, c)
		}
	}
	c := w.table.Get(id)
	if c.Flags&flagSynced != 0 && dir == conn.Original {
		c.Flags &^= flagSynced
		w.learnClient(d)
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
	if e, expired := w.ttlExpired(d); expired {
		return e // a new connection stays embryonic and expires, as in IPVS
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
	w.table.Touch(c, dir, w.now, &w.snap.Timeouts) // sets c.Expires
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
		if x, ok := w.ftpControl(d, c, id, dir); !ok {
			return x
		}
	}
	switch c.Fwd {
	case fwd.NAT:
		if c.Flags&flagSeqAdj != 0 {
			return w.forwardNATAdjusted(d, c, id, dir)
		}
		return w.forwardNAT(d, c, dir)
	case fwd.FullNAT:
		if c.IsIPv6() { // the server's reply of a NAT64 connection
			return w.nat64In(d, c, id)
		}
		return w.forwardFullNAT(d, c, id, dir)
	}
	return w.toRealServer(d, c, true)
}

// freeReplyKey ends the finished connection (finished) that holds the
// Reply key (real server -> client) a new VS/NAT connection c needs, and
// reports whether it did: the insert may then be tried again. That key is
// taken when two services (say VIP:80 and VIP:81) reach the same real
// server ip:port and a client reuses a source port: for the server both
// are one TCP tuple, reopened, as for a reused port of one service
// (forward). A live holder keeps the key; the new connection is dropped
// (conn_exists), since the server's replies could not tell the two apart.
// Only a failed insert gets here, never the common path.
func (w *Worker) freeReplyKey(c *conn.Conn) bool {
	if c.Flags&conn.FlagOneWay != 0 {
		return false
	}
	return w.endFinished(w.table.Lookup(c.Proto, c.RIP, c.RPort, c.ClientIP, c.ClientPort))
}

// endFinished ends connection id if it was found by its Reply key and is
// finished, and reports whether it did.
func (w *Worker) endFinished(id uint32, dir conn.Dir, found bool) bool {
	if !found || dir != conn.Reply {
		return false
	}
	c := w.table.Get(id)
	if !finished(c) {
		return false
	}
	w.expireEntry(id, c)
	w.table.Delete(id)
	return true
}

// finished reports whether c is done with, so that its client's next
// SYN opens a new connection on the same ports. One-way (DR, TUN)
// connections never get past FIN_WAIT, the last state the LB sees, so a
// SYN there is a new connection too (conn_reuse_mode bit 2, which keeps
// a busy client's reused ports from piling onto one server).
func finished(c *conn.Conn) bool {
	return c.State == conn.StateTimeWait || c.State == conn.StateClose ||
		c.State == conn.StateFinWait && c.Fwd.OneWay()
}

// lookup is the table's Lookup of d's flow, with the hash the lookup
// stage computed when it did.
func (w *Worker) lookup(d *desc) (uint32, conn.Dir, bool) {
	k := &d.flow
	if d.hashed {
		return w.table.LookupHashed(d.hash, k.proto, k.src, k.sport, k.dst, k.dport)
	}
	return w.table.Lookup(k.proto, k.src, k.sport, k.dst, k.dport)
}

// learnClient remembers the Ethernet source of an on-link client's packet
// (neighcache.go). A client learnt less than neighCacheRefresh ago with
// the same MAC is left as it is: a new connection from a known client
// then costs no map lookups.
func (w *Worker) learnClient(d *desc) {
	k := &d.flow
	if p := &w.snap.Ports[d.in]; k.src&p.Mask != p.Net {
		return
	}
	mac := d.eth().Src()
	if !w.neigh.fresh(k.src, mac, w.now) && !w.snap.IsVIP(k.src) && !w.snap.isLocal(k.src) {
		w.neigh.learn(k.src, mac, w.now)
		w.hops.forget(k.src) // it may have moved
	}
}

// toRealServer sends a packet, as it is, to a DR or TUN connection's real
// server. answerTooBig: a packet too big for the tunnel is answered with
// "fragmentation needed" (not when the packet is itself an ICMP error).
func (w *Worker) toRealServer(d *desc, c *conn.Conn, answerTooBig bool) exit {
	if c.Fwd == fwd.TUN {
		return w.encapsulate(d, c.RIP, answerTooBig)
	}
	decTTL(d.ip())
	return w.route(c.RIP)
}

// forwardNAT rewrites client -> VIP:vport into client -> RIP:rport (DNAT)
// and RIP:rport -> client into VIP:vport -> client (SNAT). Checksums are
// left to the NIC where the output port offloads them, else updated
// incrementally (RFC 1624), never recomputed over the payload.
func (w *Worker) forwardNAT(d *desc, c *conn.Conn, dir conn.Dir) exit {
	towards := c.RIP
	if dir == conn.Reply {
		towards = c.ClientIP
	}
	e := w.route(towards)
	if e.kind != exitTransmit {
		return e
	}
	// Offload only a checksum the NIC found good on arrival; an incremental
	// update keeps a bad one bad.
	// Not for a fragment (the NIC sees part of the datagram) nor an FTP
	// control segment (the helper may have rewritten its data).
	offload := w.snap.Ports[e.to].CsumOffload && l4ChecksumGood(d.m) && d.frag == fragNone && c.Flags&flagFTP == 0
	ip := d.ip()
	l4 := ip.Payload()
	decTTL(ip)
	if dir == conn.Original {
		hdr.RewriteDst(ip, l4, c.RIP, c.RPort, offload)
	} else {
		hdr.RewriteSrc(ip, l4, c.VIP, c.VPort, offload)
	}
	if offload {
		requestChecksums(d.m, ip, l4)
		w.cnt.own[CsumOffloaded]++
	} else {
		d.m.SetOlFlags(0)
	}
	return e
}

// requestChecksums hands the IPv4 and TCP/UDP checksums to the NIC: the
// header prepared as DPDK asks, the flags and header lengths in the mbuf.
func requestChecksums(m *mbuf.Mbuf, ip hdr.IPv4, l4 []byte) {
	fl := mbuf.TxIPv4 | mbuf.TxIPCksum
	if hdr.PrepareTxOffload(ip, l4) {
		if ip.Protocol() == hdr.ProtoTCP {
			fl |= mbuf.TxTCPCksum
		} else {
			fl |= mbuf.TxUDPCksum
		}
	} // a UDP datagram sent without a checksum keeps none
	m.SetOlFlags(fl)
	m.SetHeaderLens(hdr.EthernetLen, ip.HeaderLen(), 0)
}

// serverPort is the port a new connection to vport reaches on real
// server d: d's, or vport itself when d's is 0 (a port-zero service's
// servers, as IPVS keeps the client's port for them).
func serverPort(d *sched.Dest, vport uint16) uint16 {
	if d.Port == 0 {
		return vport
	}
	return d.Port
}

// newConn schedules a new connection and enters it in the table; a
// non-zero Stat says why it could not.
func (w *Worker) newConn(d *desc) (uint32, Stat) {
	snap, k := w.snap, &d.flow
	si, ok := d.svc-1, d.svc > 0 // the lookup stage's (prefetch.go)
	if !ok {
		si, ok = snap.service(k.dst, k.dport, k.proto)
	}
	if !ok {
		switch {
		case snap.IsVIP(k.dst):
			return 0, DropNoService
		case snap.isLocal(k.dst):
			return 0, DropToLocal
		}
		if si, ok = snap.snatFor(k.src, k.dst, k.proto); !ok {
			return 0, DropNoConn
		}
	}
	return w.newConnChecked(d, si, true)
}

// newConnChecked is newConn for service si; needSYN false takes any
// packet (the SYN proxy's proven ACK).
func (w *Worker) newConnChecked(d *desc, si int32, needSYN bool) (uint32, Stat) {
	snap, k := w.snap, &d.flow
	svc := &snap.Services[si]
	// As IPVS: only a SYN opens a TCP connection, unless the service
	// picks up flows in the middle (sloppy_tcp).
	if needSYN && k.proto == hdr.ProtoTCP && !svc.SloppyTCP &&
		d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) != hdr.TCPFlagSYN {
		return 0, DropNotSYN
	}
	if svc.Clients != nil {
		if why := svc.Clients.admits(k.src); why != 0 {
			return 0, why
		}
	}
	if svc.Helper == HelperFTP && (w.ftp == nil || w.ftp.full()) {
		return 0, DropFTPTableFull
	}
	w.flow.SrcIP, w.flow.SrcPort, w.flow.DstIP, w.flow.DstPort = k.src, k.sport, k.dst, k.dport
	w.flow.Proto, w.flow.Now = k.proto, w.now
	idx, tmpl := -1, uint32(0)
	if svc.QUIC && d.frag != fragLater {
		idx = quicDest(svc, d, false)
	}
	switch {
	case idx >= 0:
	case svc.SNAT != nil:
		idx = 0 // its one Dest: the packet's destination
	case svc.Persistence > 0:
		idx, tmpl = w.persistent(svc, k.proto, k.src, k.dst, templatePort(svc, k.dport))
	default:
		idx = svc.Scheds[w.cfg.ID].Schedule(&w.flow, w.cnt)
	}
	if idx < 0 {
		return 0, DropNoDest
	}
	dst := &svc.Dests[idx]
	c := conn.Conn{
		ClientIP: k.src, ClientPort: k.sport, VIP: k.dst, VPort: k.dport,
		RIP: dst.Addr, RPort: serverPort(dst, k.dport), Proto: k.proto, State: conn.StateNone,
		Fwd: dst.Fwd, Dest: dst.ID, Service: uint32(si),
	}
	if svc.SNAT != nil {
		c.RIP = k.dst // FullNAT to the destination itself: only the source changes
	}
	if k.proto != hdr.ProtoTCP { // UDP, or a SNAT'd ping's ICMP
		c.State = conn.StateUDP
	}
	if dst.Fwd.OneWay() {
		c.Flags = conn.FlagOneWay // replies bypass us: index the client side only
	}
	w.table.Relieve(w.now, w.expire) // under a flood, evict an embryonic or idle entry first
	var id uint32
	var why Stat
	switch {
	case dst.Fwd == fwd.FullNAT:
		id, why = w.newFullNAT(&c, svc, d)
	case svc.SynProxy && dst.Fwd == fwd.NAT:
		// Its sequence numbers move: an extension whose reply key is
		// NAT's own (to the client).
		c.Flags |= flagSeqAdj
		x := conn.Ext{LIP: c.ClientIP, LPort: c.ClientPort}
		var err error
		id, err = w.table.InsertExt(&c, &x)
		if err == conn.ErrExists && w.freeReplyKey(&c) {
			id, err = w.table.InsertExt(&c, &x)
		}
		why = insertDrop(err)
	case d.hashed: // the key is d's flow: its hash is known
		var err error
		id, err = w.table.InsertHashed(&c, d.hash)
		if err == conn.ErrExists && w.freeReplyKey(&c) {
			id, err = w.table.InsertHashed(&c, d.hash)
		}
		why = insertDrop(err)
	default:
		var err error
		id, err = w.table.Insert(&c)
		if err == conn.ErrExists && w.freeReplyKey(&c) {
			id, err = w.table.Insert(&c)
		}
		why = insertDrop(err)
	}
	if why != 0 {
		w.releaseTemplate(tmpl)
		return 0, why
	}
	if tmpl != 0 {
		w.table.Get(id).Template = tmpl // persistent pinned it for this connection
	}
	if svc.Helper == HelperFTP && dst.Fwd == fwd.NAT && w.ftp.add(id) { // room checked above
		w.table.Get(id).Flags |= flagFTP
	}
	w.cnt.own[NewConns]++
	w.cnt.dest[dst.ID][DestConns]++
	w.countState(dst.ID, c.State, true)
	return id, 0
}

// insertDrop is the drop a failed insertion into the connection table
// counts: none for success, a full table, or a key that is already there
// (a connection the other direction or another worker opened first).
func insertDrop(err error) Stat {
	switch err {
	case nil:
		return 0
	case conn.ErrFull:
		return DropTableFull
	}
	return DropConnExists
}
