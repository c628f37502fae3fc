package lcore

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// The SYN proxy (a service's synproxy: true, as DPVS's). lbd answers a
// client's SYN itself with a SYN-ACK whose sequence number is a SYN
// cookie, and keeps nothing: a flood of spoofed SYNs costs one reply
// each and no entry. Only the client's ACK, whose acknowledgement
// proves the cookie, creates the connection; the ACK becomes the SYN to
// the real server, whose SYN-ACK becomes the ACK that completes that
// handshake. The server numbers its bytes from its own ISN, the client
// from the cookie: the difference is the connection's SeqOut (seqdelta.go),
// applied to every later segment.
//
// What the handshake negotiates: the client's MSS travels in the cookie
// (one of four values, as Linux's table) and so does SACK-permitted;
// window scaling and timestamps, when the client sent timestamps, in the
// cookie SYN-ACK's TSval (synopts.go, which also splices them).

// The cookie: bits 0-1 the MSS index, bit 2 SACK-permitted, bits 3-4 the
// time slot's low bits, bits 5-31 a keyed hash of the flow, the client's
// ISN, the time slot and bits 0-4. A cookie is good in its slot and the
// next (slots of 2^36 ns, about 69 s).
const (
	cookieSlotShift = 36
	cookieSACK      = 1 << 2
)

// cookieMSS is the MSS a cookie can carry (Linux's msstab).
var cookieMSS = [4]uint16{536, 1300, 1440, 1460}

// cookieKey keys the cookies' MAC (SipHash-2-4, as Linux's): drawn at
// start, never sent, so a cookie cannot be forged without seeing one of
// its own flow's.
var cookieKey = func() (k [2]uint64) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("lcore: no randomness for SYN cookies: " + err.Error())
	}
	return [2]uint64{binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:])}
}()

// cookieHash is the 27-bit MAC of a cookie: the flow, the client's ISN,
// the time slot and the cookie's low bits, in three words.
func cookieHash(k *flowKey, isn uint32, slot uint64, low uint32) uint32 {
	return uint32(sipHash3(cookieKey[0], cookieKey[1],
		uint64(k.src)|uint64(k.dst)<<32,
		uint64(k.sport)|uint64(k.dport)<<16|uint64(isn)<<32,
		slot<<5|uint64(low)) >> 37)
}

// makeCookie is the ISN of the SYN-ACK answering k's SYN (seq isn).
// makeCookie6 is its IPv6 twin, kept apart so that this one, on every
// SYN of an IPv4 flood, makes one call.
func makeCookie(k *flowKey, isn uint32, now int64, mss uint16, sack bool) uint32 {
	slot, low := cookieLow(now, mss, sack)
	return cookieHash(k, isn, slot, low)<<5 | low
}

// cookieLow is a new cookie's time slot and its low 5 bits: the MSS
// index, SACK-permitted, the slot's low bits.
func cookieLow(now int64, mss uint16, sack bool) (uint64, uint32) {
	idx := mssIndex(mss)
	if sack {
		idx |= cookieSACK
	}
	slot := uint64(now) >> cookieSlotShift
	return slot, idx | uint32(slot&3)<<3
}

// checkCookie validates the cookie an ACK acknowledges (ack - 1) for its
// flow k (client -> VIP) and the client's ISN (seq - 1), and returns the
// MSS and SACK-permitted it carries.
func checkCookie(k *flowKey, isn, cookie uint32, now int64) (mss uint16, sack, ok bool) {
	low := cookie & 31
	slot := uint64(now) >> cookieSlotShift
	for age := uint64(0); age < 2 && age <= slot; age++ {
		s := slot - age
		if uint32(s&3) != low>>3 {
			continue
		}
		if cookieHash(k, isn, s, low)<<5|low == cookie {
			return cookieMSS[low&3], low&cookieSACK != 0, true
		}
	}
	return 0, false, false
}

// rewriteTCP makes the packet a TCP segment with options o and no data
// from src to dst (a new IPv4 header, DF, TTL 64), in place: the
// handshake packets the proxy sends are built over packets it received.
// It reports false when the mbuf has no room. The headers are written
// word by word and their checksums summed from the same words (a cookie
// SYN-ACK answers every SYN of a flood); TestRewriteTCPMatchesEncoders
// holds it to the header encoders' result.
func (d *desc) rewriteTCP(src, dst uint32, f *hdr.TCPFields, o *handshakeOpts) bool {
	tcpLen := hdr.TCPMinLen + o.size()
	total := hdr.IPv4MinLen + tcpLen
	if d.m.SetLen(l3+total) != nil {
		return false
	}
	data := d.m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv4) // a NAT64 SYN is built over an IPv6 packet
	b := data[l3:][:total]
	be := binary.BigEndian
	const (
		verIHL   = 0x45 << 8                                // version 4, 20 bytes; TOS 0
		dfFlags  = uint32(hdr.IPv4FlagDontFragment) << 13   // ID 0, DF, offset 0
		ttlProto = uint32(hdr.DefaultTTL)<<8 | hdr.ProtoTCP // TTL, protocol
	)
	srcSum := src>>16 + src&0xffff
	dstSum := dst>>16 + dst&0xffff
	be.PutUint32(b[0:], verIHL<<16|uint32(total))
	be.PutUint32(b[4:], dfFlags)
	be.PutUint32(b[12:], src)
	be.PutUint32(b[16:], dst)
	be.PutUint32(b[8:], ttlProto<<16|uint32(^hdr.Fold(verIHL+uint32(total)+dfFlags+ttlProto+srcSum+dstSum)))
	tcp := b[hdr.IPv4MinLen:]
	offFlags := uint32(tcpLen/4)<<12 | uint32(f.Flags)
	be.PutUint16(tcp[0:], f.SrcPort)
	be.PutUint16(tcp[2:], f.DstPort)
	be.PutUint32(tcp[4:], f.Seq)
	be.PutUint32(tcp[8:], f.Ack)
	be.PutUint32(tcp[12:], offFlags<<16|uint32(f.Window))
	be.PutUint32(tcp[16:], 0) // checksum (below) and urgent pointer
	// The options are written and summed by put.
	sum := srcSum + dstSum + hdr.ProtoTCP + uint32(tcpLen) + // the pseudo-header
		uint32(f.SrcPort) + uint32(f.DstPort) + f.Seq>>16 + f.Seq&0xffff + f.Ack>>16 + f.Ack&0xffff +
		offFlags + uint32(f.Window) + o.put(tcp[hdr.TCPMinLen:])
	be.PutUint16(tcp[16:], ^hdr.Fold(sum))
	d.l4 = l3 + hdr.IPv4MinLen
	d.m.SetOlFlags(0)
	return true
}

// Bits of conn.Ext.Flags (with extProxy).
const (
	extSynPending uint16 = 1 << 1 // proxied: the real server's SYN-ACK has not come yet
	extSynSACK    uint16 = 1 << 2 // proxied: the client offered SACK (for a SYN sent again)
	extSynMSS            = 3      // proxied: bits 3-4 hold the client's MSS index (cookieMSS)
)

// flagSeqAdj marks a NAT connection whose sequence numbers move (a
// proxied handshake): it has an extension (conn.Ext) like FullNAT's.
const flagSeqAdj uint8 = 1 << 6

// synProxyNew handles a TCP packet of no connection to a service with
// the SYN proxy: a SYN is answered with a cookie, an ACK that proves one
// opens the connection (its packet becomes the SYN to the real server),
// anything else is dropped.
func (w *Worker) synProxyNew(d *desc, si int32) exit {
	ip := d.ip()
	tcp := hdr.TCP(ip.Payload())
	k := d.flow
	switch d.flags & (hdr.TCPFlagSYN | hdr.TCPFlagACK | hdr.TCPFlagRST | hdr.TCPFlagFIN) {
	case hdr.TCPFlagSYN:
		return w.answerSYN(d, &k, tcp, si)
	case hdr.TCPFlagACK:
	default:
		return drop(DropNotSYN)
	}
	a := cookieACK{isn: tcp.Seq() - 1, cookie: tcp.Ack() - 1}
	var ok bool
	a.mss, a.sack, ok = checkCookie(&k, a.isn, a.cookie, w.now)
	if !w.provenACK(&a, tcp, ok) {
		return drop(DropSynCookieInvalid)
	}
	id, why := w.newConnChecked(d, si, false)
	if why != 0 {
		return drop(why)
	}
	w.learnClient(d)
	return w.openProxied(d, id, tcp, &a)
}

// cookieACK is what a client's ACK proving a cookie brings: its ISN, the
// cookie, and the options the cookie (and its TSval) kept of its SYN.
type cookieACK struct {
	isn, cookie  uint32
	mss          uint16
	sack, hasTS  bool
	tsval, tsecr uint32
	cliWS        bool
	wsCli        uint8
}

// provenACK completes a, whose cookie the ACK tcp acknowledges and ok
// says is good, with the timestamp the ACK echoes, which must be good
// too; it counts a valid cookie and reports whether both are.
func (w *Worker) provenACK(a *cookieACK, tcp hdr.TCP, ok bool) bool {
	a.tsval, a.tsecr, a.hasTS = tcp.Timestamps()
	if ok && a.hasTS {
		a.wsCli, a.cliWS, ok = decodeCookieTS(a.tsecr, w.now)
	}
	if ok {
		w.cnt.own[SynCookiesValid]++
	}
	return ok
}

// openProxied starts proxied connection id, just made for the ACK d
// (segment tcp) that proved its cookie: the extension keeps the
// handshake, and d becomes the SYN to the real server (or waits, with
// its data, for the server's answer).
func (w *Worker) openProxied(d *desc, id uint32, tcp hdr.TCP, a *cookieACK) exit {
	window := tcp.Window()
	c := w.table.Get(id)
	x := w.table.Ext(id)
	x.ClientISN, x.ServerISN = a.isn, a.cookie
	c.Flags |= flagServerISN // the cookie: the server's ISN as the client numbers it (toa.go)
	x.Flags |= extSynPending | uint16(mssIndex(a.mss))<<extSynMSS
	if a.sack {
		x.Flags |= extSynSACK
	}
	x.SeqOut = 0
	if a.hasTS {
		x.Flags |= extSynTS
		x.TSOff, x.TSPeer = a.tsecr, a.tsval // our cookie TSval, the client's
	}
	if a.cliWS {
		x.Flags |= extWSCliLeg | uint16(a.wsCli)<<extWSCliShift
	}
	// The client is past its handshake with us; the server not yet.
	w.setState(c, conn.StateSynRecv)
	w.table.Touch(c, conn.Original, w.now, &w.snap.Timeouts)
	if len(tcp.Payload()) > 0 { // its first bytes wait for the server (synhold.go)
		if w.sendSYNHoldingData(d, c, id, x, window) {
			return exit{kind: exitKept}
		}
		w.cnt.own[SynProxyDeferred]++
	}
	return w.sendSYN(d, c, id, x, window)
}

// answersWithCookie reports whether the bare SYN d, whose service
// findService found, is answered with a cookie before any lookup, as
// DPVS answers in its pre-routing hook: a flood's SYN then costs no
// index miss. Its service must have the SYN proxy, and neither an FTP
// data connection nor a health-check probe may claim the packet (forward
// gives those precedence). A SYN of a live connection (a duplicate) is
// answered with a cookie too, and the client's ACK to it reaches that
// connection as the duplicate it is; one whose connection is finished
// reopens it through cookieReopens.
func (w *Worker) answersWithCookie(d *desc) bool {
	return w.snap.Services[d.svc-1].SynProxy && !w.snap.hasFTP &&
		!(isProbePort(d.flow.dport) && w.snap.isLocal(d.flow.dst))
}

// cookieReopens reports whether the ACK d, which found a finished
// connection, answers a cookie of a SYN-proxied service: the client
// reusing its ports for a new connection, whose SYN answersWithCookie
// answered (DPVS's synproxy_reuse_conn).
func (w *Worker) cookieReopens(d *desc) bool {
	k := &d.flow
	si, ok := w.snap.service(k.dst, k.dport, k.proto)
	if !ok || !w.snap.Services[si].SynProxy {
		return false
	}
	tcp := hdr.TCP(d.ip().Payload())
	_, _, ok = checkCookie(k, tcp.Seq()-1, tcp.Ack()-1, w.now)
	return ok
}

// mssIndex is the index of the largest cookieMSS not above mss.
func mssIndex(mss uint16) uint32 {
	for i := len(cookieMSS) - 1; i > 0; i-- {
		if mss >= cookieMSS[i] {
			return uint32(i)
		}
	}
	return 0
}

// answerSYN turns a SYN to service si into its cookie SYN-ACK, back to
// where it came from; a client the service's lists keep out gets none.
func (w *Worker) answerSYN(d *desc, k *flowKey, tcp hdr.TCP, si int32) exit {
	if acl := w.snap.Services[si].Clients; acl != nil {
		if why := acl.admits(k.src); why != 0 {
			return drop(why)
		}
	}
	var syn hdr.SynOptions
	tcp.SynOptions(&syn)
	mss := syn.MSS
	if mss == 0 {
		mss = 536
	}
	isn := tcp.Seq()
	cookie := makeCookie(k, isn, w.now, mss, syn.SACKPerm)
	o := handshakeOpts{sack: syn.SACKPerm, ws: -1}
	if syn.HasTS {
		ecn := d.flags&(hdr.TCPFlagECE|hdr.TCPFlagCWR) == hdr.TCPFlagECE|hdr.TCPFlagCWR
		o.ts, o.tsval, o.tsecr = true, cookieTSval(w.now, syn.WScale, syn.HasWScale, syn.SACKPerm, ecn), syn.TSval
		if syn.HasWScale {
			o.ws = ourWScale
		}
	}
	// What the client may send us: the receiving port's MTU, less what
	// a PROXY header adds.
	ours := uint16(1460)
	if mtu := w.snap.Ports[d.in].MTU; mtu > 576 {
		ours = mtu - hdr.IPv4MinLen - hdr.TCPMinLen
	}
	if w.snap.Services[si].ProxyProtocol {
		ours -= proxyV2Len
	}
	o.mss = ours
	if !d.rewriteTCP(k.dst, k.src, &hdr.TCPFields{SrcPort: k.dport, DstPort: k.sport, Seq: cookie, Ack: isn + 1,
		Flags: hdr.TCPFlagSYN | hdr.TCPFlagACK, Window: 65535}, &o) {
		return drop(DropNoHeadroom)
	}
	w.cnt.own[SynCookiesSent]++
	return transmit(d.in, d.eth().Src())
}

// sendSYN turns the client's packet into the SYN that opens the
// connection to the real server: the client's MSS, SACK-permitted, window
// scale and TSval as the cookie kept them, and its window (window, scaled
// by the client) unscaled as a SYN's is.
func (w *Worker) sendSYN(d *desc, c *conn.Conn, id uint32, x *conn.Ext, window uint16) exit {
	o := handshakeOpts{mss: cookieMSS[x.Flags>>extSynMSS&3], sack: x.Flags&extSynSACK != 0, ws: -1}
	if x.Flags&extSynTS != 0 {
		o.ts, o.tsval = true, x.TSPeer
	}
	if x.Flags&extWSCliLeg != 0 {
		o.ws = int8(x.Flags >> extWSCliShift & 0xf)
		window = rescaleWindow(window, uint(o.ws), 0)
	}
	f := hdr.TCPFields{SrcPort: x.LPort, DstPort: c.RPort, Seq: x.ClientISN, Flags: hdr.TCPFlagSYN, Window: window}
	return w.toServer(d, c, id, x, &f, &o)
}

// toServer sends a handshake segment f (options o) of proxied connection
// id to its real server: from the client (NAT) or the local address
// (FullNAT, NAT64, FNAT66), over IPv6 for NAT66 and FNAT66 connections.
func (w *Worker) toServer(d *desc, c *conn.Conn, id uint32, x *conn.Ext, f *hdr.TCPFields, o *handshakeOpts) exit {
	if a := w.table.Addrs6(id); a != nil && (c.Fwd == fwd.NAT || isFNAT66(a)) {
		src := &a.LIP // FNAT66's: from its local endpoint (f.SrcPort)
		if c.Fwd == fwd.NAT {
			src, f.SrcPort = &a.Client, c.ClientPort
		}
		e := w.route6(&a.RIP)
		if e.kind == exitTransmit && !d.rewriteTCP6(src, &a.RIP, f, o) {
			return drop(DropNoHeadroom)
		}
		return e
	}
	e := w.route(c.RIP)
	if e.kind != exitTransmit {
		return e
	}
	if !d.rewriteTCP(x.LIP, c.RIP, f, o) { // NAT64's too: its client's IPv6 packet becomes IPv4
		return drop(DropNoHeadroom)
	}
	return e
}

// synProxyPending handles a packet of a proxied connection whose server
// has not answered: the server's SYN-ACK completes the handshake (it
// becomes our ACK to the server and fixes SeqOut), its RST goes to the
// client in the client's numbering, and a client's packet (its data,
// retransmitted) sends the SYN again, as the lost SYN's retransmission;
// the first segment with data is held (one per connection, heldSlots per
// worker) and sent on once the server answers.
func (w *Worker) synProxyPending(d *desc, c *conn.Conn, id uint32, x *conn.Ext, dir conn.Dir) (exit, bool) {
	tcp := d.segment()
	if dir == conn.Original {
		if d.flags&hdr.TCPFlagRST != 0 {
			return exit{}, false // the client gives up: forwarded as it is
		}
		if len(tcp.Payload()) > 0 {
			if w.holdFirstData(id, d) {
				return exit{kind: exitKept}, true // sent on when the server answers
			}
			w.cnt.own[SynProxyDeferred]++
		}
		return w.sendSYN(d, c, id, x, tcp.Window()), true
	}
	switch {
	case d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK && tcp.Ack() == x.ClientISN+1:
		x.SeqOut = x.ServerISN - tcp.Seq()
		x.Flags &^= extSynPending
		srvTS, _, srvHasTS := tcp.Timestamps()
		switch {
		case x.Flags&extSynTS == 0:
		case srvHasTS:
			x.TSOff -= srvTS // our cookie TSval minus the server's first
		default: // the server declined: the client's pass unchanged, it sends none
			x.Flags &^= extSynTS
			x.TSOff = 0
		}
		if ws, ok := tcp.WScale(); ok && x.Flags&extWSCliLeg != 0 {
			x.Flags |= extWSSrvLeg | uint16(min(ws, maxWScale))<<extWSSrvShift
		}
		w.setState(c, conn.StateEstablished)
		w.cnt.dest[c.Dest][DestEstablished]++
		w.table.Touch(c, conn.Reply, w.now, &w.snap.Timeouts)
		// Our ACK leaves first, then the held data.
		w.leave(d.m, d.in, w.ackServer(d, c, id, x, tcp.Seq()+1, srvTS))
		w.sendHeld(id)
		return exit{kind: exitKept}, true
	case d.flags&hdr.TCPFlagRST != 0:
		// Refused: the client, past its handshake, takes a RST whose
		// seq is the next it expects from us.
		setSeq(tcp, x.ServerISN+1, true)
		return exit{}, false
	}
	return drop(DropSynProxyPending), true
}

// ackServer turns the server's SYN-ACK into the ACK of our handshake with
// it (echoing its TSval srvTS when timestamps are on); the window says 64
// KiB until the client's own segments say more.
func (w *Worker) ackServer(d *desc, c *conn.Conn, id uint32, x *conn.Ext, ack, srvTS uint32) exit {
	o := handshakeOpts{ws: -1}
	if x.Flags&extSynTS != 0 {
		o.ts, o.tsval, o.tsecr = true, x.TSPeer, srvTS
	}
	window := uint16(65535)
	if x.Flags&extWSSrvLeg != 0 {
		window = rescaleWindow(window, 0, uint(x.Flags>>extWSCliShift&0xf))
	}
	if c.Flags&flagTOA != 0 { // it completes the server's handshake (toa.go)
		o.toa, o.toaPort, o.toaAddr = true, c.ClientPort, c.ClientIP
		if a := w.table.Addrs6(id); a != nil { // NAT64, FNAT66: its client is IPv6
			o.toa6, o.toaAddr6 = true, a.Client
		}
	}
	f := hdr.TCPFields{SrcPort: x.LPort, DstPort: c.RPort, Seq: x.ClientISN + 1, Ack: ack, Flags: hdr.TCPFlagACK, Window: window}
	e := w.toServer(d, c, id, x, &f, &o)
	if o.toa && e.kind == exitTransmit {
		w.cnt.own[TOAOptions]++
	}
	return e
}

// setState moves a connection to state s, keeping the per-server gauges.
func (w *Worker) setState(c *conn.Conn, s conn.State) {
	if c.State != s {
		w.countState(c.Dest, c.State, false)
		w.countState(c.Dest, s, true)
		c.State = s
	}
}

// heldSlots bounds the client segments a worker holds for proxied
// connections whose server has not answered yet; when all are taken a
// segment is dropped (the client sends it again).
const heldSlots = 64

// heldSeg is one held segment: its connection and the port it came in on.
type heldSeg struct {
	m  *mbuf.Mbuf
	id uint32
	in int
}

// hold keeps d's packet for connection id, unless one is held for it
// already or every slot is taken.
func (w *Worker) hold(id uint32, d *desc) bool {
	free := -1
	for i := range w.held {
		switch h := &w.held[i]; {
		case h.m == nil:
			if free < 0 {
				free = i
			}
		case h.id == id:
			return false
		}
	}
	if free < 0 {
		return false
	}
	w.held[free] = heldSeg{m: d.m, id: id, in: d.in}
	return true
}

// takeHeld returns and forgets the segment held for connection id.
func (w *Worker) takeHeld(id uint32) (*mbuf.Mbuf, int) {
	for i := range w.held {
		if h := &w.held[i]; h.m != nil && h.id == id {
			m, in := h.m, h.in
			*h = heldSeg{}
			return m, in
		}
	}
	return nil, 0
}

// sendHeld forwards the segment held for connection id, now that its
// server has answered.
func (w *Worker) sendHeld(id uint32) {
	m, in := w.takeHeld(id)
	if m == nil {
		return
	}
	d := &w.heldDesc
	parse(d, m, in)
	switch d.class {
	case classFlow:
		w.leave(m, in, w.forward(d))
	case classFlow6:
		w.leave(m, in, w.forward6(d))
	default:
		w.leave(m, in, drop(d.verdict))
	}
}

// dropHeld frees the segment held for a connection that ends.
func (w *Worker) dropHeld(id uint32) {
	if m, _ := w.takeHeld(id); m != nil {
		w.discard(m, DropSynProxyPending)
	}
}

// freeHeld frees every held segment (the worker stops).
func (w *Worker) freeHeld() {
	for i := range w.held {
		if h := &w.held[i]; h.m != nil {
			h.m.Free()
			*h = heldSeg{}
		}
	}
}
