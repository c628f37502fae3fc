package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/hdr"
)

// The SYN proxy of an IPv6 service, synproxy.go's over IPv6: the
// cookie's MAC covers the flow's full addresses (cookieHash6), and the
// handshake segments lbd sends the client have IPv6 headers. A proxied
// NAT66 connection keeps its sequence deltas in an extension beside its
// IPv6 addresses (conn.Table.Insert6Seq), moved by adjustSeq after the
// NAT66 rewrite; a NAT64 one in its own extension, the proxy's handshake
// with its server in IPv4 (toServer) and its deltas moved once a segment
// is translated (nat64.go); an FNAT66 one in its own extension too, its
// handshake with its server in IPv6 from its local endpoint (toServer).
// A bare SYN is answered before any lookup, as for IPv4.

// answersWithCookie6 reports whether the bare SYN d (src -> dst) is
// answered with a cookie before any lookup (answersWithCookie), and for
// which service.
func (w *Worker) answersWithCookie6(d *desc, dst *hdr.Addr6) (int32, bool) {
	k := &d.flow
	if !w.snap.hasSynProxy || w.snap.hasFTP || k.proto != hdr.ProtoTCP ||
		d.flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK|hdr.TCPFlagRST|hdr.TCPFlagFIN) != hdr.TCPFlagSYN ||
		isProbePort(k.dport) && w.snap.isLocal6(*dst) {
		return 0, false
	}
	si, ok := w.snap.service6(dst, k.dport, k.proto)
	return si, ok && w.snap.Services[si].SynProxy
}

// synProxyNew6 is synProxyNew for an IPv6 packet of no connection.
func (w *Worker) synProxyNew6(d *desc, si int32, src, dst *hdr.Addr6) exit {
	tcp := hdr.TCP(d.l4Bytes6())
	switch d.flags & (hdr.TCPFlagSYN | hdr.TCPFlagACK | hdr.TCPFlagRST | hdr.TCPFlagFIN) {
	case hdr.TCPFlagSYN:
		return w.answerSYN6(d, src, dst, tcp, si)
	case hdr.TCPFlagACK:
	default:
		return drop(DropNotSYN)
	}
	a := cookieACK{isn: tcp.Seq() - 1, cookie: tcp.Ack() - 1}
	var ok bool
	a.mss, a.sack, ok = checkCookie6(src, dst, d.flow.sport, d.flow.dport, a.isn, a.cookie, w.now)
	if !w.provenACK(&a, tcp, ok) {
		return drop(DropSynCookieInvalid)
	}
	id, why := w.newConn6Checked(d, si, src, dst, false)
	if why != 0 {
		return drop(why)
	}
	w.learnClient6(d, src)
	return w.openProxied(d, id, tcp, &a)
}

// cookieReopens6 is cookieReopens for an IPv6 ACK (src -> dst).
func (w *Worker) cookieReopens6(d *desc, src, dst *hdr.Addr6) bool {
	k := &d.flow
	si, ok := w.snap.service6(dst, k.dport, k.proto)
	if !ok || !w.snap.Services[si].SynProxy {
		return false
	}
	tcp := hdr.TCP(d.l4Bytes6())
	_, _, ok = checkCookie6(src, dst, k.sport, k.dport, tcp.Seq()-1, tcp.Ack()-1, w.now)
	return ok
}

// cookieHash6 is cookieHash for an IPv6 flow: its full addresses, never
// their folds, the ports and the ISN, the slot and the low bits, in six
// words.
func cookieHash6(src, dst *hdr.Addr6, sport, dport uint16, isn uint32, slot uint64, low uint32) uint32 {
	le := binary.LittleEndian
	return uint32(sipHash6(cookieKey[0], cookieKey[1],
		le.Uint64(src[:8]), le.Uint64(src[8:]), le.Uint64(dst[:8]), le.Uint64(dst[8:]),
		uint64(sport)|uint64(dport)<<16|uint64(isn)<<32,
		slot<<5|uint64(low)) >> 37)
}

// makeCookie6 is makeCookie for an IPv6 flow src:sport -> dst:dport.
func makeCookie6(src, dst *hdr.Addr6, sport, dport uint16, isn uint32, now int64, mss uint16, sack bool) uint32 {
	slot, low := cookieLow(now, mss, sack)
	return cookieHash6(src, dst, sport, dport, isn, slot, low)<<5 | low
}

// checkCookie6 is checkCookie for an IPv6 flow.
func checkCookie6(src, dst *hdr.Addr6, sport, dport uint16, isn, cookie uint32, now int64) (mss uint16, sack, ok bool) {
	low := cookie & 31
	slot := uint64(now) >> cookieSlotShift
	for age := uint64(0); age < 2 && age <= slot; age++ {
		s := slot - age
		if uint32(s&3) != low>>3 {
			continue
		}
		if cookieHash6(src, dst, sport, dport, isn, s, low)<<5|low == cookie {
			return cookieMSS[low&3], low&cookieSACK != 0, true
		}
	}
	return 0, false, false
}

// answerSYN6 turns an IPv6 SYN (src -> dst) to service si into its
// cookie SYN-ACK, back to where it came from.
func (w *Worker) answerSYN6(d *desc, src, dst *hdr.Addr6, tcp hdr.TCP, si int32) exit {
	if acl := w.snap.Services[si].Clients; acl != nil {
		if why := acl.admits6(src); why != 0 {
			return drop(why) // before any cookie, as answerSYN
		}
	}
	var syn hdr.SynOptions
	tcp.SynOptions(&syn)
	mss := syn.MSS
	if mss == 0 {
		mss = minMTU6 - hdr.IPv6Len - hdr.TCPMinLen // RFC 8200's minimum link MTU
	}
	k := &d.flow
	isn := tcp.Seq()
	cookie := makeCookie6(src, dst, k.sport, k.dport, isn, w.now, mss, syn.SACKPerm)
	o := handshakeOpts{sack: syn.SACKPerm, ws: -1}
	if syn.HasTS {
		ecn := d.flags&(hdr.TCPFlagECE|hdr.TCPFlagCWR) == hdr.TCPFlagECE|hdr.TCPFlagCWR
		o.ts, o.tsval, o.tsecr = true, cookieTSval(w.now, syn.WScale, syn.HasWScale, syn.SACKPerm, ecn), syn.TSval
		if syn.HasWScale {
			o.ws = ourWScale
		}
	}
	// What the client may send us: the receiving port's MTU, less what
	// a PROXY header adds (NAT64).
	o.mss = minMTU6 - hdr.IPv6Len - hdr.TCPMinLen
	if mtu := w.snap.Ports[d.in].MTU; mtu > minMTU6 {
		o.mss = mtu - hdr.IPv6Len - hdr.TCPMinLen
	}
	if w.snap.Services[si].ProxyProtocol {
		o.mss -= proxyV2Len6
	}
	sport, dport := k.sport, k.dport
	if !d.rewriteTCP6(dst, src, &hdr.TCPFields{SrcPort: dport, DstPort: sport, Seq: cookie, Ack: isn + 1,
		Flags: hdr.TCPFlagSYN | hdr.TCPFlagACK, Window: 65535}, &o) {
		return drop(DropNoHeadroom)
	}
	w.cnt.own[SynCookiesSent]++
	return transmit(d.in, d.eth().Src())
}

// rewriteTCP6 is rewriteTCP for IPv6: the packet becomes a TCP segment
// with options o and no data from src to dst (a new IPv6 header, hop
// limit 64, no extension headers), in place.
func (d *desc) rewriteTCP6(src, dst *hdr.Addr6, f *hdr.TCPFields, o *handshakeOpts) bool {
	tcpLen := hdr.TCPMinLen + o.size()
	total := hdr.IPv6Len + tcpLen
	if d.m.SetLen(l3+total) != nil {
		return false
	}
	data := d.m.Data()
	hdr.Ethernet(data).SetEtherType(hdr.EtherTypeIPv6)
	b := data[l3:][:total]
	hdr.IPv6(b).Encode(uint16(tcpLen), hdr.ProtoTCP, hdr.DefaultTTL, *src, *dst)
	tcp := b[hdr.IPv6Len:]
	be := binary.BigEndian
	be.PutUint16(tcp[0:], f.SrcPort)
	be.PutUint16(tcp[2:], f.DstPort)
	be.PutUint32(tcp[4:], f.Seq)
	be.PutUint32(tcp[8:], f.Ack)
	offFlags := uint32(tcpLen/4)<<12 | uint32(f.Flags)
	be.PutUint32(tcp[12:], offFlags<<16|uint32(f.Window))
	be.PutUint32(tcp[16:], 0) // checksum (below) and urgent pointer
	// Summed from the words written, as rewriteTCP does: the options by
	// put, the rest here.
	sum := hdr.PseudoHeaderSum6(*src, *dst, hdr.ProtoTCP, uint32(tcpLen)) +
		uint32(f.SrcPort) + uint32(f.DstPort) + f.Seq>>16 + f.Seq&0xffff + f.Ack>>16 + f.Ack&0xffff +
		offFlags + uint32(f.Window) + o.put(tcp[hdr.TCPMinLen:])
	be.PutUint16(tcp[16:], ^hdr.Fold(sum))
	d.l4 = l3 + hdr.IPv6Len
	d.m.SetOlFlags(0)
	return true
}
