package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// ftpRS is the FTP server of these tests, whose address is shorter
// than the VIP's: ftp227, its 227, reaches the client longer.
var ftpRS = ip4(198, 51, 100, 5)

// ftp227 is a 227 naming ftpRS, and what the client gets for it.
const (
	ftp227     = "227 Entering Passive Mode (198,51,100,5,195,80).\r\n"
	ftp227VIP  = "227 Entering Passive Mode (203,0,113,100,195,80).\r\n"
	ftp227Diff = uint32(len(ftp227VIP) - len(ftp227))
)

// masterAfter227 is ftpRig as a sync master whose control connection's
// 227 was rewritten: the record the rewrite sent, and the server's next
// sequence number (its numbering).
func masterAfter227(t *testing.T) (*rig, SyncConn, uint32) {
	t.Helper()
	r := ftpRigWith(t, vip, ftpRS)
	w := r.w
	withSync(r, SyncParams{On: true, Threshold: 3, Period: 50})
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, ftp227))
	w.poll()
	if _, tcp := oneTCP(t, r, 0); string(tcp.Payload()) != ftp227VIP {
		t.Fatalf("227 reached the client as %q", tcp.Payload())
	}
	recs := syncedRecords(w)
	if len(recs) != 1 {
		t.Fatalf("the rewrite sent %d records, want 1: %+v", len(recs), recs)
	}
	rec := recs[0]
	want := SeqShift{Init: 5001, Delta: int32(ftp227Diff)}
	if !rec.FTP || rec.FTPOut != want || rec.FTPIn != (SeqShift{}) || rec.HasExt || rec.Fwd != fwd.NAT ||
		rec.ClientPort != 40100 || rec.State != conn.StateEstablished {
		t.Fatalf("record %+v, want the FTP state with out %+v", rec, want)
	}
	// A retransmitted 227 changes nothing: nothing to send again.
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, ftp227))
	w.poll()
	r.sent(0)
	if recs := syncedRecords(w); len(recs) != 0 {
		t.Fatalf("a retransmitted 227 sent %+v", recs)
	}
	return r, rec, 5001 + uint32(len(ftp227))
}

// ftpHandshake opens a connection from the client's port cport to
// VIP:port, answered by ftpRS from port, with initial sequence numbers
// cisn and sisn; every segment must be forwarded.
func ftpHandshake(t *testing.T, r *rig, cport, port uint16, cisn, sisn uint32) {
	t.Helper()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, cport, vip, port, hdr.TCPFlagSYN, cisn, 0, nil, ""))
	r.w.poll()
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, port, clientIP, cport, hdr.TCPFlagSYN|hdr.TCPFlagACK, sisn, cisn+1, nil, ""))
	r.w.poll()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, cport, vip, port, hdr.TCPFlagACK, cisn+1, sisn+1, nil, ""))
	r.w.poll()
	if n := len(r.sent(0)) + len(r.sent(1)); n != 3 {
		t.Fatalf("handshake from port %d: %d frames forwarded, want 3", cport, n)
	}
}

// TestSyncFTPSendsTheShift: an FTP control connection travels with its
// helper state when it becomes established (no shift yet) and again when
// a rewritten 227 moves its server's numbering; the dump (bulk sync, the
// handover) carries the state too.
func TestSyncFTPSendsTheShift(t *testing.T) {
	r := ftpServiceRig(t, vip, ftpRS)
	w := r.w
	withSync(r, SyncParams{On: true, Threshold: 3, Period: 50})
	ftpHandshake(t, r, 40100, 21, 100, 5000)
	recs := syncedRecords(w)
	if len(recs) != 1 || !recs[0].FTP || recs[0].FTPIn != (SeqShift{}) || recs[0].FTPOut != (SeqShift{}) {
		t.Fatalf("established: %+v, want the control connection unshifted", recs)
	}

	_, rec, _ := masterAfter227(t)
	r2, _, _ := masterAfter227(t)
	req := &DumpRequest{Out: make([]ConnInfo, 0, 8)}
	r2.w.Commands().Push(Command{Kind: CmdDump, Dump: req})
	for i := 0; i < 10 && !req.Done(); i++ {
		r2.w.runCommands(0)
	}
	var dumped []SyncConn
	for i := range req.Out {
		if req.Out[i].VPort == 21 {
			dumped = append(dumped, req.Out[i].SyncConn())
		}
	}
	if len(dumped) != 1 || dumped[0] != rec {
		t.Fatalf("dumped %+v, want %+v", dumped, rec)
	}
}

// checkTranslates drives an FTP control connection from client port
// cport on r's worker, whose server's next byte is next (its numbering)
// and whose client-side numbering is shifted by shift: the server's
// segment and the client's ack move by it, a further 227 is rewritten
// and shifts the numbering once more, and its data connection reaches
// the server.
func checkTranslates(t *testing.T, r *rig, cport uint16, next, shift uint32) {
	t.Helper()
	w := r.w
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 21, clientIP, cport, hdr.TCPFlagACK|hdr.TCPFlagPSH, next, 101, nil, "150 Here it comes.\r\n"))
	w.poll()
	if _, tcp := oneTCP(t, r, 0); tcp.Seq() != next+shift {
		t.Fatalf("server's segment seq %d, want %d", tcp.Seq(), next+shift)
	}
	next += 20
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, cport, vip, 21, hdr.TCPFlagACK, 101, next+shift, nil, ""))
	w.poll()
	if _, tcp := oneTCP(t, r, 1); tcp.Ack() != next {
		t.Fatalf("client's ack reached the server as %d, want %d", tcp.Ack(), next)
	}
	// The helper still reads the connection: the next 227 is rewritten.
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 21, clientIP, cport, hdr.TCPFlagACK|hdr.TCPFlagPSH, next, 101, nil, ftp227))
	w.poll()
	if _, tcp := oneTCP(t, r, 0); string(tcp.Payload()) != ftp227VIP || tcp.Seq() != next+shift {
		t.Fatalf("second 227 reached the client as %q seq %d, want seq %d", tcp.Payload(), tcp.Seq(), next+shift)
	}
	next += uint32(len(ftp227))
	r.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 21, clientIP, cport, hdr.TCPFlagACK|hdr.TCPFlagPSH, next, 101, nil, "226 ok\r\n"))
	w.poll()
	if _, tcp := oneTCP(t, r, 0); tcp.Seq() != next+shift+ftp227Diff {
		t.Fatalf("after the second 227: seq %d, want %d", tcp.Seq(), next+shift+ftp227Diff)
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40200, vip, 50000, hdr.TCPFlagSYN, 7000, 0, nil, ""))
	w.poll()
	if ip, tcp := oneTCP(t, r, 1); ip.Dst() != ftpRS || tcp.DstPort() != 50000 {
		t.Fatalf("data connection went to %x:%d, want the server's port 50000", ip.Dst(), tcp.DstPort())
	}
}

// TestSyncedFTPKeepsTranslating: a backup (or the next lbd) that installs
// the record of a control connection whose 227 was rewritten numbers
// the rest of it as the master did, and its helper goes on rewriting:
// a new entry, and an entry the backup already had (the record made at
// establishment, then the rewrite's).
func TestSyncedFTPKeepsTranslating(t *testing.T) {
	_, rec, next := masterAfter227(t)

	fresh := ftpServiceRig(t, vip, ftpRS)
	if b := install(t, fresh.w, rec); b.Installed != 1 || fresh.w.ftp.n != 1 {
		t.Fatalf("install: %+v, %d FTP slots", b, fresh.w.ftp.n)
	}
	checkTranslates(t, fresh, 40100, next, ftp227Diff)

	had := ftpServiceRig(t, vip, ftpRS)
	early := rec
	early.FTPOut = SeqShift{}
	if b := install(t, had.w, early); b.Installed != 1 {
		t.Fatalf("install at establishment: %+v", b)
	}
	if b := install(t, had.w, rec); b.Installed != 1 || had.w.ftp.n != 1 || had.w.table.Len() != 1 {
		t.Fatalf("update: %+v, %d FTP slots, %d entries", b, had.w.ftp.n, had.w.table.Len())
	}
	checkTranslates(t, had, 40100, next, ftp227Diff)

	// Unused, it ages out and gives its slot back.
	w := fresh.w
	w.table.Expire(w.now+int64(3*time.Hour), w.table.Cap(), w.expire)
	if w.ftp.n != 0 {
		t.Fatalf("%d FTP slots after expiry", w.ftp.n)
	}
}

// TestSyncedFTPRefusals: an FTP state on what cannot have one is
// invalid; a full FTP table refuses the connection (as a new one is);
// a service without the helper here takes the connection untranslated.
func TestSyncedFTPRefusals(t *testing.T) {
	_, rec, _ := masterAfter227(t)
	r := ftpServiceRig(t, vip, ftpRS)
	w := r.w
	for name, f := range map[string]func(*SyncConn){
		"DR":             func(r *SyncConn) { r.Fwd = fwd.DR },
		"template":       func(r *SyncConn) { r.Template = true },
		"extension":      func(r *SyncConn) { r.HasExt, r.Ext = true, conn.Ext{LIP: r.ClientIP, LPort: r.ClientPort} },
		"impossible out": func(r *SyncConn) { r.FTPOut = SeqShift{Init: 3} },
	} {
		bad := rec
		f(&bad)
		if b := install(t, w, bad); b.Invalid != 1 || b.Installed != 0 {
			t.Errorf("%s: %+v", name, b)
		}
	}
	for i := uint32(0); i < ftpSlots; i++ {
		w.ftp.add(1000 + i)
	}
	if b := install(t, w, rec); b.TableFull != 1 || w.table.Len() != 0 {
		t.Fatalf("full FTP table: %+v, %d entries", b, w.table.Len())
	}

	plain := newRig(t, defaultNeigh())
	other := rec
	other.VPort, other.RPort, other.RIP = 80, 8000, rs2
	if b := install(t, plain.w, other); b.Installed != 1 || plain.w.ftp != nil {
		t.Fatalf("no helper here: %+v", b)
	}
	id, _, ok := plain.w.table.Lookup(hdr.ProtoTCP, clientIP, 40100, vip, 80)
	if !ok || plain.w.table.Get(id).Flags&flagFTP != 0 {
		t.Fatalf("no helper here: entry %t flagged", ok)
	}
}

// TestSyncedFTPDataConnectionForwards: a data connection the helper
// expected travels with its FTP service's port (its own is not a
// service's), and a backup, or the next lbd, forwards the rest of the
// transfer both ways to the same server port.
func TestSyncedFTPDataConnectionForwards(t *testing.T) {
	r, _, _ := masterAfter227(t) // expects client -> VIP:50000
	w := r.w
	ftpHandshake(t, r, 40200, 50000, 7000, 9000)
	recs := syncedRecords(w)
	if len(recs) != 1 || !recs[0].FTPData || recs[0].FTP || recs[0].ServicePort != 21 || recs[0].VPort != 50000 ||
		recs[0].RPort != 50000 || recs[0].RIP != ftpRS {
		t.Fatalf("data connection's records %+v", recs)
	}
	rec := recs[0]
	req := &DumpRequest{Out: make([]ConnInfo, 0, 8)}
	w.Commands().Push(Command{Kind: CmdDump, Dump: req})
	for i := 0; i < 10 && !req.Done(); i++ {
		w.runCommands(0)
	}
	for i := range req.Out {
		if req.Out[i].VPort == 50000 && req.Out[i].SyncConn() != rec {
			t.Fatalf("dumped %+v, want %+v", req.Out[i].SyncConn(), rec)
		}
	}

	b := ftpServiceRig(t, vip, ftpRS)
	if got := install(t, b.w, rec); got.Installed != 1 {
		t.Fatalf("install: %+v", got)
	}
	b.inject(1, tcpSeg(rs2MAC, lanMAC, ftpRS, 50000, clientIP, 40200, hdr.TCPFlagACK|hdr.TCPFlagPSH, 9001, 7001, nil, "file bytes"))
	b.w.poll()
	if ip, tcp := oneTCP(t, b, 0); ip.Src() != vip || tcp.SrcPort() != 50000 || string(tcp.Payload()) != "file bytes" {
		t.Fatalf("data reached the client from %x:%d: %q", ip.Src(), tcp.SrcPort(), tcp.Payload())
	}
	b.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40200, vip, 50000, hdr.TCPFlagACK, 7001, 9011, nil, ""))
	b.w.poll()
	if ip, tcp := oneTCP(t, b, 1); ip.Dst() != ftpRS || tcp.DstPort() != 50000 {
		t.Fatalf("the client's ack went to %x:%d", ip.Dst(), tcp.DstPort())
	}
	// Without the helper on the service here, or with no FTP service on
	// its port, it is refused as before.
	plain := newRig(t, defaultNeigh())
	if got := install(t, plain.w, rec); got.Installed != 0 || got.NoService+got.NoDest != 1 {
		t.Fatalf("no FTP service here: %+v", got)
	}
	bad := rec
	bad.ServicePort = 0
	if got := install(t, b.w, bad); got.Invalid != 1 {
		t.Fatalf("a data connection without its service: %+v", got)
	}
}
