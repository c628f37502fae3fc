package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// echoReply answers an echo request to a VIP or one of our addresses (a
// port's, a local or SNAT address): the request becomes its reply in
// place and goes back where it came from.
// Another goes on as a SNAT rule's, if one takes it.
func (w *Worker) echoReply(d *desc) exit {
	ip := d.ip()
	src, dst := ip.Src(), ip.Dst()
	if !w.snap.IsVIP(dst) && !w.snap.isLocal(dst) && !w.snap.lips[dst] {
		return w.echoOut(d) // a server's ping beyond lbd, maybe (snat.go)
	}
	ip.SetSrc(dst) // swapping the addresses leaves the header checksum as it is
	ip.SetDst(src)
	ip.SetTTLWithChecksumUpdate(hdr.DefaultTTL)
	hdr.ICMP(ip.Payload()).SetTypeCodeWithChecksumUpdate(hdr.ICMPEchoReply, 0)
	d.m.SetOlFlags(0)
	w.cnt.own[ICMPEchoReplies]++
	return transmit(d.in, d.eth().Src())
}

// icmpError delivers an ICMP error about a tracked connection. The quoted
// packet is one that left the balancer (or a real server, for DR/TUN), so
// its reverse is the connection's key. For VS/NAT the outer and quoted
// addresses and ports are translated like the connection's packets; for
// DR/TUN the error goes to the real server unchanged.
func (w *Worker) icmpError(d *desc) exit {
	if q := &d.flow; q.proto == hdr.ProtoUDP && isProbePort(q.sport) && w.snap.isLocal(q.src) &&
		hdr.ICMP(d.ip().Payload()).Type() == hdr.ICMPDestUnreachable {
		return w.probeUnreachable(d, q.dst, nil, q.dport, q.sport) // about a UDP probe of ours
	}
	k := d.flow.reverse()
	id, dir, ok := w.table.Lookup(k.proto, k.src, k.sport, k.dst, k.dport)
	if !ok {
		if w.snap.isLocal(d.ip().Dst()) {
			return drop(DropToLocal) // about the kernel's traffic, maybe
		}
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	if c.Flags&flagSteer != 0 {
		return w.steer(d, c) // about a packet lbd sent a server for a connection another worker holds
	}
	if e, expired := w.ttlExpired(d); expired {
		return e
	}
	if c.IsIPv6() {
		// NAT64: about a packet lbd sent its IPv4 server (the entry's
		// reply key is the only one an IPv4 lookup finds).
		return w.icmpError64(d, c, id)
	}
	w.cnt.own[ICMPErrors]++
	if c.Fwd == fwd.FullNAT {
		return w.icmpErrorFullNAT(d, c, id, dir)
	}
	if c.Fwd != fwd.NAT {
		d.m.SetOlFlags(0)
		return w.toRealServer(d, c, false)
	}
	ip := d.ip()
	icmp := hdr.ICMP(ip.Payload())
	quoted := d.quotedIP()
	// Only the 8 quoted bytes every error carries are rewritten: they hold
	// the ports and UDP's checksum; a quoted TCP checksum lies beyond and
	// is left as it is, as IPVS does.
	ql4 := quoted[quoted.HeaderLen():][:8]
	// The ICMP checksum is updated for what changes, not recomputed: one
	// that was wrong on arrival stays wrong.
	qsum := hdr.Checksum(quoted[:quoted.HeaderLen()+8], 0)
	towards := c.RIP
	decTTL(ip)
	if dir == conn.Original {
		// From the client's side, about a reply we sent as VIP:vport: the
		// real server must hear of it as RIP:rport.
		ip.SetDstWithChecksumUpdate(c.RIP)
		hdr.RewriteSrc(quoted, ql4, c.RIP, c.RPort, false)
		if c.Flags&flagSeqAdj != 0 && c.Proto == hdr.ProtoTCP {
			// A proxied handshake: the server numbers its bytes from its own ISN.
			if x := w.table.Ext(id); x != nil {
				q := hdr.TCP(ql4)
				q.SetSeq(q.Seq() - x.SeqOut)
			}
		}
	} else {
		// From the real server's side, about a packet we sent it: the client
		// must hear of it from VIP:vport.
		ip.SetSrcWithChecksumUpdate(c.VIP)
		hdr.RewriteDst(quoted, ql4, c.VIP, c.VPort, false)
		towards = c.ClientIP
	}
	icmp.SetChecksum(hdr.UpdateBlock(icmp.Checksum(), qsum, hdr.Checksum(quoted[:quoted.HeaderLen()+8], 0)))
	d.m.SetOlFlags(0)
	return w.route(towards)
}
