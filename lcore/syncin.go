package lcore

import (
	"errors"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// The receiving side of connection sync: a batch of records from a peer
// director, all owned by this worker (the control plane routed them by
// Owner), installed from the commands job. A synced connection is entered
// as if this worker had scheduled it: the real server is this snapshot's
// RIP:RPort in the service, the forwarding method is the server's here
// (NAT indexes both keys, DR and TUN the client's), the server's
// ActiveConn/InActConn gauges count it, and its timeout is this
// snapshot's for its state, so an entry no packet uses ages out. Nothing
// is evicted to make room: a live entry is never pushed out for a synced
// one.

// flagSynced (a caller bit of conn.Conn.Flags) marks an entry installed by
// sync that has not yet seen a client packet here: the first one teaches
// the worker the client's MAC, as a new connection's first packet does
// (after a takeover, the replies need it before ARP could tell).
const flagSynced uint8 = 1 << 7

// installSynced installs a batch and marks it done.
func (w *Worker) installSynced(b *SyncBatch) {
	for i := range b.Records {
		r := &b.Records[i]
		switch {
		case !validSyncState(r):
			b.Invalid++
		case r.Steer && r.IPv6 && !r.Six.LIP.IsUnspecified(): // FNAT66's (NAT64's reply key is IPv4's)
			w.installSteer6(b, r)
		case r.Steer:
			w.installSteer(b, r)
		case (r.FTP || r.FTPData) && (r.Template || r.HasExt || r.Fwd != fwd.NAT || r.Proto != hdr.ProtoTCP) ||
			r.FTP && (r.FTPData || !r.FTPIn.Possible() || !r.FTPOut.Possible()) || r.FTPData != (r.ServicePort != 0) ||
			r.FTP && r.IPv6 && (r.FTPIn != SeqShift{} || r.FTPOut != SeqShift{}):
			b.Invalid++ // only VS/NAT TCP connections have an FTP helper's state, never shifted over IPv6
		case r.Template && r.IPv6:
			b.Invalid++ // an IPv6 template is rebuilt from its connections
		case r.Template:
			w.installTemplate(b, r)
		case r.IPv6:
			w.installConn6(b, r)
		default:
			w.installConn(b, r)
		}
	}
	// Whoever waits for the batch reads the table's size with it (lbctl
	// -L as lbd starts on a pulled table), not the last publish job's.
	w.cnt.own[Conns] = uint64(w.table.Len() - w.steers)
	w.cnt.pub[Conns].Store(w.cnt.own[Conns])
	b.MarkDone()
}

// validSyncState reports whether a record's state is one of its
// protocol's (a template's state is not read).
func validSyncState(r *SyncConn) bool {
	switch {
	case r.Template:
		return true
	case r.Proto == hdr.ProtoTCP:
		return r.State < conn.StateUDP
	case r.Proto == hdr.ProtoUDP:
		return r.State == conn.StateUDP
	}
	return true // no service has another protocol: counted as no_service
}

// syncedDest finds a record's service and real server in this snapshot,
// or counts why not. An FTP data connection's service is its FTP
// service (on ServicePort), whose real server has the data connection's
// address, on another port. A connection (not a template) may also name
// a draining server of the service (Service.Draining): it goes on with
// the record's forwarding method, as IPVS's synced connections without a
// destination do.
func (w *Worker) syncedDest(b *SyncBatch, r *SyncConn) (si int32, d sched.Dest, ok bool) {
	vport := r.VPort
	if r.FTPData {
		vport = r.ServicePort
	}
	si, ok = w.snap.recordService(ServiceKey{VIP: r.VIP, Port: vport, Proto: r.Proto})
	if !ok && r.IsSNAT() {
		// A SNAT connection (snat.go): its rule by the server's source,
		// its one Dest the destination itself.
		if si, ok = w.snap.snatFor(r.ClientIP, r.VIP, r.Proto); ok {
			d = w.snap.Services[si].Dests[0]
			d.Addr = r.RIP
			return si, d, true
		}
	}
	if !ok {
		b.NoService++
		return 0, d, false
	}
	svc := &w.snap.Services[si]
	anyPort := r.FTPData && svc.Helper == HelperFTP
	for _, d := range svc.Dests {
		if d.Addr == r.RIP && (serverPort(&d, r.VPort) == r.RPort || anyPort) {
			return si, d, true
		}
	}
	if d, ok := drainingDest(svc, r, func(d *sched.Dest) bool { return d.Addr == r.RIP }); ok {
		return si, d, true
	}
	b.NoDest++
	return 0, d, false
}

// drainingDest finds the draining server of svc that record r (a
// connection's, not its FTP data connection's) names, by its port and
// same, and gives it r's forwarding method.
func drainingDest(svc *Service, r *SyncConn, same func(*sched.Dest) bool) (sched.Dest, bool) {
	if r.Template || r.FTPData || r.Fwd > fwd.FullNAT {
		return sched.Dest{}, false
	}
	for i := range svc.Draining {
		d := svc.Draining[i]
		d.Fwd = r.Fwd
		if serverPort(&d, r.VPort) == r.RPort && same(&d) {
			return d, true
		}
	}
	return sched.Dest{}, false
}

// installConn makes or updates one synced connection.
func (w *Worker) installConn(b *SyncBatch, r *SyncConn) {
	si, dest, ok := w.syncedDest(b, r)
	if !ok {
		return
	}
	d := &dest
	fullNAT := d.Fwd == fwd.FullNAT
	if fullNAT != (r.HasExt && r.Fwd == fwd.FullNAT) {
		// An older peer's record has no local port nor deltas to rebuild
		// a FullNAT connection from; a FullNAT one here is a NAT one there.
		b.FullNAT++
		return
	}
	if r.HasExt && !fullNAT && (r.Ext.LIP != r.ClientIP || r.Ext.LPort != r.ClientPort) {
		b.Invalid++ // a NAT connection's extension keys its replies to the client
		return
	}
	// An FTP control connection's helper state comes along when the
	// service here has the helper too (else it goes on untranslated, as
	// a connection of a service without it).
	ftp := r.FTP && w.snap.Services[si].Helper == HelperFTP && d.Fwd == fwd.NAT && w.ftp != nil
	if id, dir, found := w.table.Lookup(r.Proto, r.ClientIP, r.ClientPort, r.VIP, r.VPort); found {
		c := w.table.Get(id)
		if !w.syncedExisting(b, r, id, dir, c, dir == conn.Original && c.RIP == r.RIP && c.RPort == r.RPort, ftp) {
			return
		}
	}
	if ftp && w.ftp.full() {
		b.TableFull++ // as a new control connection is refused (ftp_table_full)
		return
	}
	c := syncedEntry(r, d, si)
	c.ClientIP, c.VIP, c.RIP = r.ClientIP, r.VIP, d.Addr
	var id uint32
	var err error
	switch {
	case fullNAT:
		id, err = w.insertReserved(b, r, func() (uint32, error) { return w.table.InsertExt(&c, &r.Ext) })
	case r.HasExt:
		c.Flags |= flagSeqAdj
		id, err = w.table.InsertExt(&c, &r.Ext)
	default:
		id, err = w.table.Insert(&c)
	}
	if !syncedInserted(b, err) {
		return
	}
	if ftp {
		w.syncedFTP(id, w.table.Get(id), r) // room checked above
	}
	e := w.syncedInstalled(b, id, d.ID)
	if svc := &w.snap.Services[si]; svc.Persistence > 0 && !r.FTPData { // the helper's data connections hold no template
		e.Template = w.pinSyncedTemplate(svc, r)
	}
}

// syncedExisting deals with the entry a record's original key found:
// the same connection (same): brought up to the record's state, ext and
// timeout (and ftp: its FTP helper's state), and false (done); a
// finished one: removed, and true (install the record); a live one for
// another server: kept, false.
func (w *Worker) syncedExisting(b *SyncBatch, r *SyncConn, id uint32, dir conn.Dir, c *conn.Conn, same, ftp bool) bool {
	if same {
		if r.HasExt && !w.updateSyncedExt(id, &r.Ext) {
			b.Conflict++
			return false
		}
		if ftp && !w.syncedFTP(id, c, r) {
			b.TableFull++
			return false
		}
		if c.State != r.State {
			w.countState(c.Dest, c.State, false)
			w.countState(c.Dest, r.State, true)
			c.State = r.State
		}
		w.table.Touch(c, conn.Reply, w.now, &w.snap.Timeouts)
		c.SyncedAt = w.syncClock()
		b.Installed++
		return false
	}
	// A finished connection gives its keys to the new one, as a SYN
	// does (forward); a live one keeps them.
	if dir != conn.Original || !(c.State == conn.StateTimeWait || c.State == conn.StateClose ||
		c.State == conn.StateFinWait && c.Fwd.OneWay()) {
		b.Conflict++
		return false
	}
	w.expireEntry(id, c)
	w.table.Delete(id)
	return true
}

// syncedEntry is the entry a record makes with real server d of service
// si here, but for its addresses.
func syncedEntry(r *SyncConn, d *sched.Dest, si int32) conn.Conn {
	c := conn.Conn{
		ClientPort: r.ClientPort, VPort: r.VPort, RPort: serverPort(d, r.VPort), Proto: r.Proto, State: r.State,
		Fwd: d.Fwd, Dest: d.ID, Service: uint32(si), Flags: flagSynced,
	}
	if r.FTPData { // its server's port is the data connection's
		c.RPort = r.RPort
		c.Flags |= flagFTPData
	}
	if d.Fwd.OneWay() {
		c.Flags |= conn.FlagOneWay
	}
	return c
}

// insertReserved reserves a FullNAT (or NAT64) record's local port in
// this worker's pool, then inserts; the port goes back if the insert
// fails. A port another worker owns here (the peer's worker count or
// steering key differ) is that worker's to hold: the control plane sends
// it the record's steering entry (steerentry.go). A local address that is
// none of this director's is a peer's in a scale-out (each director has
// its own): the server's packets go to that director, which holds the
// connection too, and this one sends the client's packets on from it
// when the router moves the flow here; there is no port to hold.
func (w *Worker) insertReserved(b *SyncBatch, r *SyncConn, insert func() (uint32, error)) (uint32, error) {
	p := w.lpools[r.Ext.LIP]
	if p == nil || !p.owns(r.Ext.LPort) {
		return insert()
	}
	if !p.reserve(r.Ext.LPort) {
		b.LocalPort++
		return 0, errCounted
	}
	id, err := insert()
	if err != nil {
		p.put(r.Ext.LPort)
	}
	return id, err
}

// errCounted: the record was refused and counted already.
var errCounted = errors.New("counted")

// syncedInserted counts why an insert failed; true when it did not.
func syncedInserted(b *SyncBatch, err error) bool {
	switch err {
	case nil:
		return true
	case errCounted:
	case conn.ErrFull:
		b.TableFull++
	case conn.ErrNoExt: // no service here has local addresses or a SYN proxy
		b.FullNAT++
	case conn.ErrNoSix: // no IPv6 service here (ever)
		b.NoService++
	default: // its reply key belongs to another connection
		b.Conflict++
	}
	return false
}

// syncedInstalled finishes a synced entry made for real server dest.
func (w *Worker) syncedInstalled(b *SyncBatch, id, dest uint32) *conn.Conn {
	e := w.table.Get(id)
	// Confirmed (the master saw the flow answered) and seen now: not
	// embryonic nor idle to the table's defense.
	w.table.Touch(e, conn.Reply, w.now, &w.snap.Timeouts)
	e.SyncedAt = w.syncClock()
	w.countState(dest, e.State, true)
	b.Installed++
	return e
}

// syncedFTP gives connection id (entry c) record r's FTP helper state,
// making its slot in the worker's table if it has none; false when the
// table has no room for it.
func (w *Worker) syncedFTP(id uint32, c *conn.Conn, r *SyncConn) bool {
	st := w.ftp.get(id)
	if st == nil {
		if !w.ftp.add(id) {
			return false
		}
		st = w.ftp.get(id)
		c.Flags |= flagFTP
	}
	st.in, st.out = r.FTPIn.stream(), r.FTPOut.stream()
	return true
}

// updateSyncedExt brings an existing connection's extension up to a
// newer record's (the deltas a SYN-ACK fixed since); false when the
// entry has none or other local endpoints.
func (w *Worker) updateSyncedExt(id uint32, rx *conn.Ext) bool {
	x := w.table.Ext(id)
	if x == nil || x.LIP != rx.LIP || x.LPort != rx.LPort {
		return false
	}
	*x = *rx
	return true
}

// pinSyncedTemplate counts a synced connection on its client network's
// template, if the master's has arrived, so the template lives while the
// connection does (as the master's); it returns the slot+1, or 0.
func (w *Worker) pinSyncedTemplate(svc *Service, r *SyncConn) uint32 {
	key, sub := templateKey(r.ClientIP&svc.PersistMask, r.VIP, templatePort(svc, r.VPort), r.Proto)
	if slot, v, _, _ := w.tmpl.find(key, sub); slot >= 0 && w.tmpl.pin(slot, key, v) {
		return uint32(slot) + 1
	}
	return 0
}

// installTemplate makes or re-arms a synced persistence template in the
// shared table, for this snapshot's persistence time, pointing at the
// record's real server. Synced connections installed after it hold it
// (pinSyncedTemplate); with none, it expires unless renewed.
func (w *Worker) installTemplate(b *SyncBatch, r *SyncConn) {
	if r.Fwd > fwd.FullNAT {
		b.Invalid++
		return
	}
	si, d, ok := w.syncedDest(b, r) // a configured server: never a draining one
	if !ok {
		return
	}
	svc := &w.snap.Services[si]
	if svc.Persistence <= 0 {
		b.NoService++ // no persistent service here
		return
	}
	slot := w.armTemplate(svc, r.ClientIP&svc.PersistMask, r.VIP, r.VPort, r.Proto, d.ID)
	if slot < 0 {
		b.TableFull++
		return
	}
	w.tmpl.unpin(slot) // no connection here uses it yet
	b.Installed++
}

// armTemplate makes or re-points the template of client network cnet
// (an address, or an IPv6 network's fold) to real server id, for this
// snapshot's persistence time, and returns its slot pinned, or -1 when
// the table has no room.
func (w *Worker) armTemplate(svc *Service, cnet, vip uint32, vport uint16, proto uint8, id uint32) int {
	t := w.tmpl
	key, sub := templateKey(cnet, vip, vport, proto)
	now := w.now + w.tmplOff
	expires := now + svc.Persistence
	for attempt := 0; attempt < 8; attempt++ { // retried only when another worker got in between
		slot, v, free, empty := t.find(key, sub)
		if slot >= 0 {
			if !t.pin(slot, key, v) {
				continue
			}
			s := &t.slots[slot]
			if old := uint32(v&templateDest) - 1; old != id {
				if !s.val.CompareAndSwap(v, v&^templateDest|uint64(id+1)) {
					t.unpin(slot)
					continue
				}
				t.persistent[old].Add(-1)
				t.persistent[id].Add(1)
			}
			s.expires.Store(expires)
			return slot
		}
		if free < 0 {
			if t.reclaim(key, now) {
				continue
			}
			break
		}
		if t.claim(free, key, empty, sub|uint64(id+1), expires) {
			return free
		}
	}
	return -1
}
