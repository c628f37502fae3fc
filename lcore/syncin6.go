package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// IPv6 connections from sync or a handover. A record carries the full
// addresses, never the sender's folds (conn.Fold6 is keyed per process):
// the entry is made with this process's folds of them (Insert6,
// Insert6Ext, Insert6Full), as a connection scheduled here would be. A
// NAT64 record (an IPv4 server, from a local address and port) and an
// FNAT66 one (from an IPv6 local address and port) reserve their local
// port as a FullNAT one does; a NAT66 record with an extension is a SYN
// proxy's connection, entered with its sequence deltas (Insert6Seq). Persistence templates of IPv6 services
// are keyed by folds too, so none travels: each synced connection of a
// persistent service makes or re-points its client network's template
// here and holds it, as the connection's template on the sender.

// installConn6 makes or updates one synced IPv6 connection.
func (w *Worker) installConn6(b *SyncBatch, r *SyncConn) {
	vport := r.VPort
	if r.FTPData { // of its FTP service, whose server has its address on another port
		vport = r.ServicePort
	}
	si, ok := w.snap.recordService(ServiceKey{VIP6: r.Six.VIP, Port: vport, Proto: r.Proto})
	if !ok {
		b.NoService++
		return
	}
	svc := &w.snap.Services[si]
	anyPort := r.FTPData && svc.Helper == HelperFTP
	var d *sched.Dest
	for i := range svc.Dests {
		if c := &svc.Dests[i]; (serverPort(c, r.VPort) == r.RPort || anyPort) && sameServer6(c, r) {
			d = c
			break
		}
	}
	if d == nil {
		draining, ok := drainingDest(svc, r, func(c *sched.Dest) bool { return sameServer6(c, r) })
		if !ok {
			b.NoDest++
			return
		}
		d = &draining
	}
	full := d.Fwd == fwd.FullNAT
	fnat66 := full && !d.Addr6.IsUnspecified()
	nat64 := full && !fnat66
	if full != (r.Fwd == fwd.FullNAT) || full && !r.HasExt || fnat66 == r.Six.LIP.IsUnspecified() && full {
		b.FullNAT++ // a FullNAT (NAT64, FNAT66) server here and not there, or the reverse
		return
	}
	// A NAT66 record's extension is a SYN proxy's sequence deltas.
	seqAdj := !full && r.HasExt
	if seqAdj && (d.Fwd != fwd.NAT || r.Proto != hdr.ProtoTCP) {
		b.Invalid++
		return
	}
	a := conn.Addrs6{Client: r.Six.Client, VIP: r.Six.VIP, RIP: d.Addr6}
	if fnat66 {
		a.LIP = r.Six.LIP
	}
	// An FTP control connection's helper comes along when the service
	// here has it too (its adjustments are never shifted over IPv6).
	ftp := r.FTP && svc.Helper == HelperFTP && d.Fwd == fwd.NAT && w.ftp != nil
	if id, dir, found := w.table.Lookup6(r.Proto, &a.Client, r.ClientPort, &a.VIP, r.VPort); found {
		c := w.table.Get(id)
		have := w.table.Addrs6(id)
		same := dir == conn.Original && c.RPort == r.RPort &&
			(nat64 && c.Fwd == fwd.FullNAT && !isFNAT66(have) && c.RIP == r.RIP ||
				fnat66 && c.Fwd == fwd.FullNAT && have.RIP == a.RIP && have.LIP == a.LIP ||
				!full && c.Fwd != fwd.FullNAT && have.RIP == a.RIP)
		if !w.syncedExisting(b, r, id, dir, c, same, ftp) {
			return
		}
	}
	if ftp && w.ftp.full() {
		b.TableFull++ // as a new control connection is refused (ftp_table_full)
		return
	}
	c := syncedEntry(r, d, si)
	var id uint32
	var err error
	switch {
	case fnat66:
		x := r.Ext
		id, err = w.insertReserved6(b, &a.LIP, x.LPort, func() (uint32, error) { return w.table.Insert6Full(&c, &a, &x) })
	case nat64:
		c.RIP = d.Addr
		id, err = w.insertReserved(b, r, func() (uint32, error) { return w.table.Insert6Ext(&c, &a, &r.Ext) })
	default:
		if seqAdj {
			c.Flags |= flagSeqAdj
		}
		id, err = w.insert6(&c, &a)
		if seqAdj && err == nil {
			*w.table.Ext(id) = r.Ext
		}
	}
	if !syncedInserted(b, err) {
		return
	}
	if ftp {
		w.syncedFTP(id, w.table.Get(id), r) // room checked above
	}
	e := w.syncedInstalled(b, id, d.ID)
	if svc.Persistence > 0 && !r.FTPData { // the helper's data connections hold no template
		network := masked6(&a.Client, &svc.PersistMask6)
		if slot := w.armTemplate(svc, conn.Fold6(&network)&svc.PersistMask, conn.Fold6(&a.VIP), templatePort(svc, r.VPort), r.Proto, d.ID); slot >= 0 {
			e.Template = uint32(slot) + 1
		}
	}
}

// sameServer6 reports whether real server d is the one IPv6 record r
// names: a NAT64 one by its IPv4 address, any other by its IPv6 one.
func sameServer6(d *sched.Dest, r *SyncConn) bool {
	if d.Fwd == fwd.FullNAT && d.Addr6.IsUnspecified() {
		return d.Addr == r.RIP
	}
	return d.Addr6 == r.Six.RIP
}

// insertReserved6 is insertReserved for an FNAT66 record's IPv6 local
// address and port. Its connection's worker is the client's owner; a
// port another worker owns here (the peer's worker count or steering
// key differ) is inserted without a reservation, as one of a peer
// director's local addresses is.
func (w *Worker) insertReserved6(b *SyncBatch, lip *hdr.Addr6, lport uint16, insert func() (uint32, error)) (uint32, error) {
	p := w.lpools6[*lip]
	if p == nil || !p.owns(lport) {
		return insert()
	}
	if !p.reserve(lport) {
		b.LocalPort++
		return 0, errCounted
	}
	id, err := insert()
	if err != nil {
		p.put(lport)
	}
	return id, err
}
