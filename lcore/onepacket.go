package lcore

import "github.com/dplb/dplb/lcore/conn"

// One-packet scheduling (IPVS's --ops, keepalived's ops): a UDP service
// whose every datagram is scheduled on its own, for protocols whose
// "connection" is one request (DNS, syslog, RADIUS) and whose clients
// reuse one source port for all of them: without it a busy resolver's
// queries would all follow the first one's server for the UDP timeout.
// The datagram makes its connection as any other (scheduler, templates,
// counters), is sent to the server, and the connection ends at once, as
// IPVS frees a one-packet connection after its packet. The servers are
// DR or TUN (the configuration refuses others): their answers bypass
// the balancer, which keeps nothing to translate a NAT answer with. A
// datagram in fragments keeps its connection for the fragments' timeout
// (its later fragments carry no ports and follow it), so the socket's
// next datagrams within it go to the same server.

// onePacket sends the first and only datagram of connection id (entry
// c, just made) to its server and ends the connection.
func (w *Worker) onePacket(d *desc, id uint32, c *conn.Conn) exit {
	ds := &w.cnt.dest[c.Dest]
	ds[DestInPkts]++
	ds[DestInBytes] += uint64(d.m.PktLen())
	var e exit
	switch {
	case d.class == classFlow6:
		e = w.toRealServer6(d, c, id)
	default:
		if x, expired := w.ttlExpired(d); expired {
			e = x
		} else {
			e = w.toRealServer(d, c, true)
		}
	}
	if d.frag == fragFirst {
		// The datagram's later fragments follow its connection
		// (frag.go): it lives as long as they may come, then expires.
		w.table.SetExpires(id, w.now+w.frags.timeout)
		return e
	}
	w.expireEntry(id, c)
	w.table.Delete(id)
	return e
}
