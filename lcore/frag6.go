package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// IPv6 fragments (RFC 8200 section 4.5) take IPv4's path (frag.go): each
// is forwarded as it came, fragment header and all, the first one taking
// the connection's decision and the later ones following it, steered to
// one home worker and held there the same way. They share IPv4's table:
// an IPv6 datagram's key holds keyed 32-bit folds of its addresses where
// IPv4's holds the addresses (v6 set; the connection table's keyed folds,
// so a sender cannot pick addresses that share a bucket), and the 16-byte addresses sit in a
// side array beside the entries, compared only when an IPv6 key matches.
// So an IPv4 key, its hash and its entry keep their size, and IPv4 pays
// one more byte compare.

// fragAddrs6 is an IPv6 datagram's source and destination.
type fragAddrs6 [2]hdr.Addr6

// checkFragment6 classifies an IPv6 packet that carries a fragment header
// (x is its walk): fragNone for an atomic fragment (offset 0, no more to
// come), which RFC 6946 has processed as a whole packet; fragFirst or
// fragLater; or a drop reason. The fragmentable part must begin with the
// TCP or UDP header (no extension header after the fragment header: the
// later fragments' key names the protocol, as IPv4's does); the rest
// matches IPv4: data a multiple of 8 bytes while more follow, a first
// fragment with the whole transport header (RFC 7112), no TCP fragment at
// offset 8 (RFC 1858), nothing past 65535 bytes of payload.
func checkFragment6(ip hdr.IPv6, x hdr.Ext6) (frag uint8, why Stat) {
	if x.FragOffset == 0 && !x.MoreFrags {
		return fragNone, 0
	}
	proto := ip[x.FragHdrOff]
	if proto != hdr.ProtoTCP && proto != hdr.ProtoUDP {
		return fragNone, DropFragment
	}
	data := x.FragHdrOff + 8
	end := hdr.IPv6Len + int(ip.PayloadLength())
	n, off := end-data, int(x.FragOffset)
	switch {
	case x.FragHdrOff-hdr.IPv6Len+off+n > 0xffff: // the reassembled payload length
		return fragNone, DropFragOversize
	case x.MoreFrags && n%8 != 0, off == 8 && proto == hdr.ProtoTCP:
		return fragNone, DropBadFragment
	case off > 0:
		return fragLater, 0
	case proto == hdr.ProtoTCP && !hdr.TCP(ip[data:end]).IsValid(), proto == hdr.ProtoUDP && n < hdr.UDPLen:
		return fragNone, DropBadFragment
	}
	return fragFirst, 0
}

// fragGeometry6 is what the table needs of an IPv6 fragment: its data's
// offset and length in the datagram, and whether more follow.
func fragGeometry6(ip hdr.IPv6, x hdr.Ext6) (off, n uint32, more bool) {
	return uint32(x.FragOffset), uint32(hdr.IPv6Len + int(ip.PayloadLength()) - x.FragHdrOff - 8), x.MoreFrags
}

// fragKey6 is an IPv6 fragment's key; its addresses go to a, for the
// side array. IPv6 reassembles by source, destination and identification
// (the protocol, equal in every fragment that checkFragment6 passes,
// keeps IPv4's shape).
func fragKey6(ip hdr.IPv6, x hdr.Ext6, a *fragAddrs6) fragKey {
	a[0], a[1] = ip.Src(), ip.Dst()
	return fragKey{src: conn.Fold6(&a[0]), dst: conn.Fold6(&a[1]), id: x.FragID, proto: ip[x.FragHdrOff], v6: true}
}

// parseFragment6 classifies an IPv6 packet with a fragment header into
// d.frag (checkFragment6); false, d invalid, for what is dropped. A later
// fragment's flow has the protocol only.
func parseFragment6(d *desc, ip hdr.IPv6, x hdr.Ext6) bool {
	frag, why := checkFragment6(ip, x)
	if why != 0 {
		d.invalid(why)
		return false
	}
	d.frag = frag
	if frag == fragLater {
		d.flow = flowKey{proto: ip[x.FragHdrOff]}
	}
	return true
}

// fragInfo6 is an IPv6 fragment's datagram key (its addresses in t.cur),
// its data's offset and length and whether more follow. Its fragment
// header sits right before its data (checkFragment6 lets nothing come
// between), at d.l4 - 8 for a first fragment and a later one alike.
func (t *fragTable) fragInfo6(d *desc) (k fragKey, off, n uint32, more bool) {
	ip := d.ip6()
	fh := int(d.l4) - l3 - 8
	fo := binary.BigEndian.Uint16(ip[fh+2:])
	x := hdr.Ext6{FragHdrOff: fh, FragID: binary.BigEndian.Uint32(ip[fh+4:]), FragOffset: fo &^ 7, MoreFrags: fo&1 != 0}
	off, n, more = fragGeometry6(ip, x)
	return fragKey6(ip, x, &t.cur), off, n, more
}

// forwardLater6 is forwardLater for an IPv6 fragment: the fragment header
// and what follows are left as they are; NAT66 rewrites the address, and
// the hop limit is decremented (no header checksum to update).
func (w *Worker) forwardLater6(d *desc, k flowKey) exit {
	ip := d.ip6()
	src, dst := ip.Src(), ip.Dst()
	id, dir, ok := w.table.Lookup6(k.proto, &src, k.sport, &dst, k.dport)
	if !ok {
		return drop(DropNoConn)
	}
	c := w.table.Get(id)
	if c.Flags&flagSteer != 0 {
		return w.steer(d, c) // an FNAT66 server's fragment, for the worker holding its connection
	}
	if w.snap.DestExpired(c.Dest) {
		return drop(DropDestDown) // the first fragment ended the connection
	}
	if ip.HopLimit() <= 1 {
		return drop(DropTTLExpired) // the first fragment had its answer
	}
	ds := &w.cnt.dest[c.Dest]
	if dir == conn.Original {
		ds[DestInPkts]++
		ds[DestInBytes] += uint64(d.m.PktLen())
	} else {
		ds[DestOutPkts]++
		ds[DestOutBytes] += uint64(d.m.PktLen())
	}
	a := w.table.Addrs6(id)
	switch c.Fwd {
	case fwd.FullNAT: // FNAT66 (fullnat6.go) or NAT64 (nat64.go)
		if isFNAT66(a) {
			return w.forwardFullNAT66(d, c, id, dir)
		}
		if dir != conn.Original {
			return drop(DropNoConn)
		}
		return w.nat64Out(d, c, id)
	case fwd.TUN:
		return w.encapsulate6(d, &a.RIP)
	case fwd.NAT:
	default:
		ip.SetHopLimit(ip.HopLimit() - 1)
		d.m.SetOlFlags(0)
		return w.route6(&a.RIP)
	}
	x := w.routeTowards6(a, dir)
	if x.kind != exitTransmit {
		return x
	}
	ip.SetHopLimit(ip.HopLimit() - 1)
	if dir == conn.Original {
		ip.SetDst(a.RIP)
	} else {
		ip.SetSrc(a.VIP)
	}
	d.m.SetOlFlags(0)
	return x
}
