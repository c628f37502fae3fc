package lcore

import (
	"time"

	"github.com/dplb/dplb/lcore/conn"
)

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
// datagram in fragments keeps its connection until its last fragment
// has passed or its fragment entry expires (its later fragments carry no
// ports and follow it): the socket's datagrams sent meanwhile go to the
// same server.

// onePacket sends the first and only datagram of connection id (entry
// c, just made) to its server and ends the connection.
func (w *Worker) onePacket(d *desc, id uint32, c *conn.Conn) exit {
	ds := &w.cnt.dest[c.Dest]
	ds[DestInPkts]++
	ds[DestInBytes] += uint64(d.m.PktLen())
	var e exit
	switch {
	case d.class == classFlow6 && d.ip6().HopLimit() <= 1:
		e = w.timeExceeded6(d)
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
		// (frag.go), which ends with the datagram (endOnePacket); it
		// outlives the datagram's fragment entry meanwhile.
		w.table.SetExpires(id, w.now+w.frags.timeout+int64(time.Second))
		w.onePacketFrag = id + 1
		return e
	}
	w.expireEntry(id, c)
	w.table.Delete(id)
	return e
}

// endOnePacket ends one-packet connection id, whose datagram's fragments
// (first fragment flow) have all passed or expired, unless the entry is
// no longer that connection (evicted and reused meanwhile).
func (w *Worker) endOnePacket(id uint32, flow *flowKey) {
	c := w.table.Get(id)
	if c == nil || c.Proto != flow.proto || c.ClientPort != flow.sport || c.VPort != flow.dport {
		return
	}
	w.expireEntry(id, c)
	w.table.Delete(id)
}
