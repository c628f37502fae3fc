package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// SNAT (DPVS's SNAT mode): the real servers' own connections out through
// lbd, their gateway (VS/NAT's servers route through the director). A
// Linux director masquerades them in its kernel; lbd owns the NIC, so it
// does it here, as a FullNAT connection whose server is the packet's own
// destination: the source becomes one of the rule's addresses and a port
// this worker owns (the answers steer to it, as FullNAT's do), the
// destination stays, and the answers to that address and port find the
// connection's reply key and go back to the server. The TCP state
// machine, the timeouts, sync and the listings are FullNAT's.
//
// A rule for ICMP translates the servers' pings (echo requests) the same
// way, the echo identifier standing in for the ports: the request's is
// the source port (the key RS:id -> host:0), the reply's the destination
// port (host:0 -> SNAT address:id'), and the identifier is what changes
// with the source, as Linux's masquerade does. Such a mapping lives in
// the UDP state with UDP's timeout; it is neither synced nor handed over
// (a ping loses the echoes in flight, nothing more). The errors routers
// beyond send about a SNAT connection's packets (a ping's too) reach its
// server from those routers, quoting what the server sent
// (icmpErrorFullNAT): traceroute and mtr work from the servers.

// SNATRule is a SNAT service's match: sources inside Net/Mask.
type SNATRule struct {
	Net, Mask uint32
}

// snatFor finds the SNAT rule for a packet from src to dst of proto that
// no connection and no service took: the first whose source network
// holds src; none for a destination that is one of lbd's own addresses
// (a local address, a VIP, a port's: the callers checked the last two).
func (s *Snapshot) snatFor(src, dst uint32, proto uint8) (int32, bool) {
	if len(s.snat) == 0 || s.lips[dst] {
		return 0, false
	}
	for _, i := range s.snat {
		svc := &s.Services[i]
		if svc.Key.Proto == proto && src&svc.SNAT.Mask == svc.SNAT.Net {
			return i, true
		}
	}
	return 0, false
}

// IsSNAT reports whether record r is a SNAT connection's: a FullNAT one
// whose server is its destination (no service's server is its VIP). A
// director installs it under its SNAT rule for the client (the real
// server that opened it), never as a service of that address.
func (r *SyncConn) IsSNAT() bool {
	return !r.IPv6 && !r.Template && r.Fwd == fwd.FullNAT && r.RIP == r.VIP && r.RPort == r.VPort
}

// isSNAT reports whether FullNAT connection c is a SNAT rule's: its
// server is its destination, as IsSNAT says of a record.
func isSNAT(c *conn.Conn) bool {
	return c.RIP == c.VIP && c.RPort == c.VPort && !c.IsIPv6()
}

// echoOut takes an echo request that is not for lbd (echoReply answers
// those): a server's ping beyond, translated when a SNAT rule for ICMP
// holds its source, else dropped (no_conn).
func (w *Worker) echoOut(d *desc) exit {
	k := &d.flow
	if _, ok := w.snap.snatFor(k.src, k.dst, hdr.ProtoICMP); !ok {
		return drop(DropNoConn)
	}
	return w.forward(d)
}

// snatEchoReply takes an echo reply to a SNAT address whose identifier
// one of this worker's SNAT'd pings holds; ok false for any other (a
// probe's answer, probe.go, or nobody's).
func (w *Worker) snatEchoReply(d *desc) (exit, bool) {
	if len(w.snap.snat) == 0 || !w.snap.lips[d.flow.dst] {
		return exit{}, false
	}
	if _, _, ok := w.lookup(d); !ok {
		return exit{}, false
	}
	return w.forward(d), true
}

// rewriteEcho translates a SNAT'd echo (forwardFullNAT's, its route
// found): the request leaves from the local address with the local
// port as its identifier, the reply goes back to the server with the
// server's own. The ICMP checksum covers no addresses: only the
// identifier's change is folded into it.
func rewriteEcho(d *desc, c *conn.Conn, x *conn.Ext, dir conn.Dir) {
	ip := d.ip()
	icmp := hdr.ICMP(ip.Payload())
	decTTL(ip)
	if dir == conn.Original {
		ip.SetSrcWithChecksumUpdate(x.LIP)
		icmp.SetIDWithChecksumUpdate(x.LPort)
	} else {
		ip.SetDstWithChecksumUpdate(c.ClientIP)
		icmp.SetIDWithChecksumUpdate(c.ClientPort)
	}
	d.m.SetOlFlags(0)
}
