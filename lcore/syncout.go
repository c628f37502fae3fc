package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// The master's side of connection sync: after each packet of a
// connection, the snapshot's SyncParams decide whether the worker copies
// the connection to its sync ring. The per-connection count of client
// packets and the time of the last sync live in the entry itself
// (conn.Conn.SyncPackets, SyncedAt), so nothing here allocates.

// syncClock is the worker's clock in the units of conn.Conn.SyncedAt:
// 2^syncShift ns (about a millisecond; 32 bits last 52 days). Never 0,
// which means "never synced".
const syncShift = 20

func (w *Worker) syncClock() uint32 {
	if t := uint32(w.now >> syncShift); t != 0 {
		return t
	}
	return 1
}

// syncable reports whether a TCP connection in state s is past its
// handshake: only those are synced (as IPVS; an embryonic entry is cheap
// to lose and a flood of them must not reach the peers).
func syncable(s conn.State) bool {
	switch s {
	case conn.StateEstablished, conn.StateFinWait, conn.StateTimeWait, conn.StateClose,
		conn.StateCloseWait, conn.StateLastAck:
		return true
	}
	return false
}

// syncAfterPacket applies the sync rules to connection c after a packet
// travelling in dir; changed: the packet moved c to another state. The
// client's packets are counted (IPVS's in_pkts): the count is the same
// whether replies pass here (NAT) or not (DR, TUN).
func (w *Worker) syncAfterPacket(c *conn.Conn, id uint32, dir conn.Dir, changed bool) {
	p := &w.snap.Sync
	if dir == conn.Original {
		c.SyncPackets++
	}
	tcp := c.Proto == hdr.ProtoTCP
	if tcp && !syncable(c.State) || c.Proto == hdr.ProtoICMP { // a SNAT'd ping is not synced (snat.go)
		return
	}
	due := tcp && changed
	if !due && dir == conn.Original {
		n, th := c.SyncPackets, max(p.Threshold, 1)
		due = n == th || p.Period > 0 && n > th && (n-th)%p.Period == 0
	}
	now := w.syncClock()
	if !due && p.RefreshPeriod > 0 && c.SyncedAt != 0 {
		due = int64(now-c.SyncedAt)<<syncShift >= int64(p.RefreshPeriod)
	}
	if !due {
		return
	}
	c.SyncedAt = now
	w.syncConn(c, id)
}

// syncConn copies connection c (and its template) to the sync ring.
func (w *Worker) syncConn(c *conn.Conn, id uint32) {
	r := SyncConn{
		ClientIP: c.ClientIP, VIP: c.VIP, RIP: c.RIP,
		ClientPort: c.ClientPort, VPort: c.VPort, RPort: c.RPort,
		Proto: c.Proto, State: c.State, Fwd: c.Fwd,
	}
	if c.Fwd == fwd.FullNAT || c.Flags&flagSeqAdj != 0 {
		if x := w.table.Ext(id); x != nil {
			r.HasExt, r.Ext = true, *x
		}
	}
	if a := w.table.Addrs6(id); a != nil {
		// The folds stay here; the peer's template is rebuilt from the
		// connection (a template's key is a fold, not an address).
		syncConn6(&r, a)
		w.syncFTPFields(&r, c, id) // an IPv6 control connection's adjustments are never shifted
		w.pushSync(r)
		return
	}
	w.syncFTPFields(&r, c, id)
	w.pushSync(r)
	if c.Template != 0 { // the peer's copy of its template lives on with it
		w.syncTemplate(int(c.Template - 1))
	}
}

// syncFTPFields gives r, made from entry c (id), the FTP helper's part:
// a control connection's state, a data connection's service.
func (w *Worker) syncFTPFields(r *SyncConn, c *conn.Conn, id uint32) {
	switch {
	case r.HasExt:
	case c.Flags&flagFTP != 0:
		if st := w.ftp.get(id); st != nil {
			r.FTP, r.FTPIn, r.FTPOut = true, st.in.shift(), st.out.shift()
		}
	case c.Flags&flagFTPData != 0:
		if p := w.ftpServicePort(c); p != 0 {
			r.FTPData, r.ServicePort = true, p
		}
	}
}

// syncShifted sends an FTP control connection again when a rewritten
// reply moved its sequence adjustment: a peer holding the old one would
// number the connection's later bytes wrong after a takeover. A
// connection not yet synced (still in its handshake) is left to the
// rules, which send the adjustment with it.
func (w *Worker) syncShifted(c *conn.Conn, id uint32) {
	if !w.snap.Sync.On || !syncable(c.State) {
		return
	}
	c.SyncedAt = w.syncClock()
	w.syncConn(c, id)
}

// syncConn6 makes r, filled from an IPv6 entry, an IPv6 record: the
// addresses instead of their folds, a NAT64 connection's IPv4 server, an
// FNAT66 one's IPv6 server and local address (its extension's LIP, a
// fold, left 0).
func syncConn6(r *SyncConn, a *conn.Addrs6) {
	r.IPv6, r.Six = true, *a
	r.ClientIP, r.VIP = 0, 0
	switch {
	case r.Fwd == fwd.FullNAT && !a.LIP.IsUnspecified():
		r.RIP, r.Ext.LIP = 0, 0
	case r.Fwd == fwd.FullNAT:
		r.Six.RIP = hdr.Addr6{}
	default:
		r.RIP = 0
	}
}

// syncTemplate copies the persistence template in slot i to the sync
// ring, if it is live and its service and server are known here.
func (w *Worker) syncTemplate(i int) {
	s := &w.tmpl.slots[i]
	key, v := s.key.Load(), s.val.Load()
	if !templateLive(v) || key == templateTomb {
		return
	}
	vip, vport, proto := uint32(key), uint16(v>>48), uint8(v>>40)
	si, ok := w.snap.service(vip, vport, proto)
	if !ok {
		return
	}
	svc := &w.snap.Services[si]
	idx := svc.destIndex(uint32(v&templateDest) - 1)
	if idx < 0 {
		return
	}
	d := &svc.Dests[idx]
	w.pushSync(SyncConn{
		ClientIP: uint32(key >> 32), VIP: vip, RIP: d.Addr,
		VPort: vport, RPort: d.Port, Proto: proto, Fwd: d.Fwd, Template: true,
	})
}

// pushSync puts a record on the sync ring; a full ring loses it (counted:
// the next threshold or refresh sends the connection again).
func (w *Worker) pushSync(r SyncConn) {
	if !w.syncOut.Push(r) {
		w.cnt.own[SyncRingFull]++
		return
	}
	w.cnt.own[SyncRecords]++
}
