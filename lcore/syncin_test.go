package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// install hands a batch to the worker as the control plane does.
func install(t *testing.T, w *Worker, recs ...SyncConn) *SyncBatch {
	t.Helper()
	b := &SyncBatch{Records: recs}
	if !w.Commands().Push(Command{Kind: CmdSyncInstall, Sync: b}) {
		t.Fatal("command ring full")
	}
	w.runCommands(0)
	if !b.Done() {
		t.Fatal("batch not marked done")
	}
	return b
}

// TestSyncedNATConnectionForwards: a NAT connection received from the
// master forwards both ways as if scheduled here, to the server the
// master chose (not the one rr would pick), counted in its gauges.
func TestSyncedNATConnectionForwards(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	rec := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs2, ClientPort: 40000, VPort: 80, RPort: 8000,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	// A batch done is counted in the published table size, before any
	// publish job ran.
	if n := w.Stats()[Conns]; n != 1 {
		t.Fatalf("published conns %d after the install, want 1", n)
	}
	// The server's data to the client: SNAT to VIP:80 (the reply key is indexed).
	r.inject(1, tcpFrame(rs2MAC, lanMAC, rs2, 8000, clientIP, 40000, hdr.TCPFlagACK, "data"))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("reply not forwarded (stats %v)", w.cnt.own)
	}
	_, ip, tcp := checkTCP(t, out[0])
	if ip.Src() != vip || tcp.SrcPort() != 80 || ip.Dst() != clientIP || tcp.DstPort() != 40000 {
		t.Fatalf("SNAT gave %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
	// The client's ACK (not a SYN: no new connection) goes to rs2:8000.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""))
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatal("client packet not forwarded")
	}
	if _, ip, tcp = checkTCP(t, out[0]); ip.Dst() != rs2 || tcp.DstPort() != 8000 {
		t.Fatalf("DNAT to %x:%d", ip.Dst(), tcp.DstPort())
	}
	// Its Ethernet source taught the worker the client's MAC: with no
	// neighbour entry, the server's next reply still reaches the client.
	w.snap = w.snap.WithNeighbours(w.snap.Gen+1, map[uint32]hdr.MAC{rs1: rs1MAC, rs2: rs2MAC})
	r.inject(1, tcpFrame(rs2MAC, lanMAC, rs2, 8000, clientIP, 40000, hdr.TCPFlagACK, "more"))
	w.poll()
	if out = r.sent(0); len(out) != 1 || hdr.Ethernet(out[0]).Dst() != clientMAC {
		t.Fatalf("reply without a neighbour entry: %d frames (stats %v)", len(out), w.cnt.own)
	}
	w.runPublish(0)
	if d := w.DestStats(1); d[DestActive] != 1 || d[DestInactive] != 0 {
		t.Fatalf("rs2 gauges %v", d)
	}
	// An update (the master saw the client's FIN) moves the gauges.
	rec.State = conn.StateFinWait
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("update %+v", b)
	}
	if w.table.Len() != 1 || w.cnt.dest[1][DestActive] != 0 || w.cnt.dest[1][DestInactive] != 1 {
		t.Fatalf("after update: %d entries, gauges %v", w.table.Len(), w.cnt.dest[1])
	}
	// Unused, it ages out with this worker's FIN_WAIT timeout.
	w.table.Expire(w.now+int64(61*time.Second), w.table.Cap(), w.expire)
	if w.table.Len() != 0 || w.cnt.dest[1][DestInactive] != 0 {
		t.Fatalf("not aged out: %d entries, gauges %v", w.table.Len(), w.cnt.dest[1])
	}
}

// TestSyncedDRConnectionForwards: a DR connection is one-way: the client's
// packet goes unchanged to the real server's MAC.
func TestSyncedDRConnectionForwards(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	rec := SyncConn{ClientIP: clientIP, VIP: vipDR, RIP: rs1, ClientPort: 40000, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.DR}
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagACK, "more"))
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("DR packet not forwarded (stats %v)", w.cnt.own)
	}
	eth, ip, tcp := checkTCP(t, out[0])
	if eth.Dst() != rs1MAC || ip.Dst() != vipDR || tcp.DstPort() != 80 {
		t.Fatalf("DR sent %v %x:%d", eth.Dst(), ip.Dst(), tcp.DstPort())
	}
	if _, _, ok := w.table.Lookup(hdr.ProtoTCP, rs1, 80, clientIP, 40000); ok {
		t.Fatal("a one-way connection indexed its reply key")
	}
}

// TestSyncInstallRefusals: records this director cannot honour are
// counted by reason, and a live entry is never pushed out for a synced one.
func TestSyncInstallRefusals(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	ok := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs1, VPort: 80, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished}
	noService, noDest, invalid := ok, ok, ok
	noService.VPort = 81
	noDest.RIP = ip4(198, 51, 100, 99)
	invalid.State = conn.StateUDP
	b := install(t, w, noService, noDest, invalid)
	if b.NoService != 1 || b.NoDest != 1 || b.Invalid != 1 || b.Installed != 0 || w.table.Len() != 0 {
		t.Fatalf("batch %+v, %d entries", b, w.table.Len())
	}
	// A live local connection to rs1 keeps its keys against a record naming rs2.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.drain(1)
	other := SyncConn{ClientIP: clientIP, ClientPort: 40000, VIP: vip, RIP: rs2, VPort: 80, RPort: 8000, Proto: hdr.ProtoTCP, State: conn.StateEstablished}
	if b := install(t, w, other); b.Conflict != 1 {
		t.Fatalf("conflict %+v", b)
	}
	if id, _, found := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 80); !found || w.table.Get(id).RIP != rs1 {
		t.Fatal("the live entry was replaced")
	}
	// A full table refuses, evicting nothing.
	var recs []SyncConn
	for i := 0; i < w.table.Cap(); i++ {
		rec := ok
		rec.ClientIP, rec.ClientPort = ip4(10, 0, byte(i>>8), byte(i)), 1000
		recs = append(recs, rec)
	}
	b = install(t, w, recs...)
	if b.Installed != uint32(w.table.Cap()-1) || b.TableFull != 1 {
		t.Fatalf("full table: installed %d table_full %d", b.Installed, b.TableFull)
	}
	if _, _, found := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 80); !found {
		t.Fatal("a live entry was evicted for a synced one")
	}
}

// TestSyncedTemplate: a synced persistence template sends the client
// network's new connections to its server.
func TestSyncedTemplate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	// rr alone would pick rs1 first.
	tmpl := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs2, VPort: 443, RPort: 443, Proto: hdr.ProtoTCP, Template: true}
	if b := install(t, w, tmpl); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	for port := uint16(40000); port < 40003; port++ {
		if got := connectTo(t, r, clientIP, port); got != rs2 {
			t.Fatalf("connection from port %d went to %x, not the template's rs2", port, got)
		}
	}
	// A later record re-points it (the master's template moved).
	tmpl.RIP = rs1
	if b := install(t, w, tmpl); b.Installed != 1 {
		t.Fatalf("re-point %+v", b)
	}
	if got := connectTo(t, r, clientIP, 40010); got != rs1 {
		t.Fatalf("after the update: %x", got)
	}
	// A synced connection of another network whose template came first
	// holds it, as the master's connection does; its end lets it go.
	other := ip4(203, 0, 113, 9)
	tmpl.ClientIP = other
	c := SyncConn{ClientIP: other, ClientPort: 5000, VIP: vip, RIP: rs1, VPort: 443, RPort: 443, Proto: hdr.ProtoTCP, State: conn.StateEstablished}
	if b := install(t, w, tmpl, c); b.Installed != 2 {
		t.Fatalf("template and connection %+v", b)
	}
	slot := templateOf(t, w, other, 443)
	if slot == nil || slot.controls.Load() != 1 {
		t.Fatalf("the synced connection does not hold its template: %+v", slot)
	}
	w.table.Expire(w.now+int64(901*time.Second), w.table.Cap(), w.expire)
	if slot.controls.Load() != 0 {
		t.Fatalf("template still held by %d after the connection expired", slot.controls.Load())
	}
}

// TestSyncedEntriesAtTheirOwner: records installed on the worker Owner
// names (as the control plane routes them) carry the connection's packets
// whichever queue they arrive on: steering hands them to that worker.
func TestSyncedEntriesAtTheirOwner(t *testing.T) {
	r := newMultiRig(t, false)
	var seen [2]bool
	for port := uint16(41000); port < 41020; port++ {
		owner := Owner(clientIP, port, 2)
		seen[owner] = true
		rec := SyncConn{ClientIP: clientIP, ClientPort: port, VIP: vip, VPort: 80, RIP: rs2, RPort: 80,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished}
		if b := install(t, r.w[owner], rec); b.Installed != 1 {
			t.Fatalf("port %d: %+v", port, b)
		}
		// The server's reply arrives on the other worker's queue.
		r.inject(1, 1-owner, tcpFrame(rs2MAC, lanMAC, rs2, 80, clientIP, port, hdr.TCPFlagACK, "data"))
		r.pollBoth()
		out := r.take(0, owner)
		if len(out) != 1 || len(r.take(0, 1-owner)) != 0 {
			t.Fatalf("port %d: the reply was not sent by the owner %d", port, owner)
		}
		if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != vip || tcp.SrcPort() != 80 {
			t.Fatalf("port %d: SNAT gave %x:%d", port, ip.Src(), tcp.SrcPort())
		}
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("the ports tried all belong to one worker: %v", seen)
	}
}

// TestSyncInstallIsPaced: however many batches wait, one commands job
// installs about syncInstallBudget records; the rest wait for the next.
func TestSyncInstallIsPaced(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	var batches []*SyncBatch
	for i := 0; i < 3; i++ {
		b := &SyncBatch{}
		for j := 0; j < 300; j++ {
			b.Records = append(b.Records, SyncConn{ClientIP: ip4(10, 1, byte(i), byte(j)), ClientPort: uint16(1000 + j),
				VIP: vip, VPort: 80, RIP: rs1, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished})
		}
		batches = append(batches, b)
		w.Commands().Push(Command{Kind: CmdSyncInstall, Sync: b})
	}
	w.runCommands(0)
	if !batches[0].Done() || !batches[1].Done() || batches[2].Done() {
		t.Fatalf("one run installed batches %v %v %v", batches[0].Done(), batches[1].Done(), batches[2].Done())
	}
	w.runCommands(0)
	if !batches[2].Done() || w.table.Len() != 900 {
		t.Fatalf("second run: done %v, %d entries", batches[2].Done(), w.table.Len())
	}
}

// TestSyncedConnectionToDrainingServer: a record naming a server the
// service has no more (or never had here: the control plane adopted it
// into Draining) is installed with the record's forwarding method and
// forwards both ways, counted on the draining id; a template naming it
// is refused, and no new connection is scheduled to it.
func TestSyncedConnectionToDrainingServer(t *testing.T) {
	rs3, rs3MAC := ip4(198, 51, 100, 13), hdr.MAC{0x02, 0, 0, 0, 0, 0x13}
	r := newRig(t, map[uint32]hdr.MAC{clientIP: clientMAC, rs1: rs1MAC, rs2: rs2MAC, rs3: rs3MAC})
	w := r.w
	w.snap.Services[0].Draining = []sched.Dest{{ID: 9, Addr: rs3, Port: 80}}
	nat := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs3, ClientPort: 40000, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	dr := nat
	dr.ClientPort, dr.Fwd = 40001, fwd.DR
	tmpl := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs3, VPort: 80, RPort: 80, Proto: hdr.ProtoTCP, Template: true}
	unknown := nat
	unknown.ClientPort, unknown.RIP = 40002, ip4(198, 51, 100, 99)
	otherPort := nat
	otherPort.ClientPort, otherPort.RPort = 40003, 81
	if b := install(t, w, nat, dr, tmpl, unknown, otherPort); b.Installed != 2 || b.NoDest != 3 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(1, tcpFrame(rs3MAC, lanMAC, rs3, 80, clientIP, 40000, hdr.TCPFlagACK, "data"))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("the draining server's reply not forwarded (stats %v)", w.cnt.own)
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != vip || tcp.SrcPort() != 80 || ip.Dst() != clientIP {
		t.Fatalf("SNAT gave %x:%d -> %x", ip.Src(), tcp.SrcPort(), ip.Dst())
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""))
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatal("client packet not forwarded")
	}
	if eth, ip, _ := checkTCP(t, out[0]); ip.Dst() != rs3 || eth.Dst() != rs3MAC {
		t.Fatalf("DNAT to %x (%v)", ip.Dst(), eth.Dst())
	}
	// The DR record's connection keeps its own method: the MAC changes,
	// the VIP stays.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagACK, "x"))
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatal("DR packet not forwarded")
	}
	if eth, ip, _ := checkTCP(t, out[0]); ip.Dst() != vip || eth.Dst() != rs3MAC {
		t.Fatalf("DR sent %v %x", eth.Dst(), ip.Dst())
	}
	if got := w.cnt.dest[9][DestActive]; got != 2 {
		t.Fatalf("the draining id counts %d active connections, want 2", got)
	}
	for port := uint16(41000); port < 41004; port++ {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, port, vip, 80, hdr.TCPFlagSYN, ""))
		w.poll()
		for _, f := range r.sent(1) {
			if _, ip, _ := checkTCP(t, f); ip.Dst() == rs3 {
				t.Fatalf("a new connection went to the draining server")
			}
		}
	}
}

// TestSyncedConnectionToRemovedService: a Removed service (one no longer
// configured, kept while its servers drain) takes no new connection (a
// SYN to it is no_service), yet its VIP is answered in ARP and a record
// of a connection to its draining server is installed and forwarded both
// ways; a record naming another port of the VIP finds no service.
func TestSyncedConnectionToRemovedService(t *testing.T) {
	rs3, rs3MAC := ip4(198, 51, 100, 13), hdr.MAC{0x02, 0, 0, 0, 0, 0x13}
	r := newRig(t, map[uint32]hdr.MAC{clientIP: clientMAC, rs1: rs1MAC, rs2: rs2MAC, rs3: rs3MAC})
	w := r.w
	gone := ip4(203, 0, 113, 150) // no service of the rig's
	old := w.snap
	svcs := append(append([]Service(nil), old.Services...),
		Service{Key: ServiceKey{VIP: gone, Port: 80, Proto: hdr.ProtoTCP}, Removed: true, Draining: []sched.Dest{{ID: 9, Addr: rs3, Port: 80}}})
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)})
	w.runCommands(0)

	if out := askARP(r, 0, clientIP, gone); len(out) != 1 {
		t.Fatalf("ARP for the removed service's VIP: %d answers, want 1", len(out))
	}
	rec := SyncConn{ClientIP: clientIP, VIP: gone, RIP: rs3, ClientPort: 40000, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	otherPort := rec
	otherPort.ClientPort, otherPort.VPort = 40001, 81
	if b := install(t, w, rec, otherPort); b.Installed != 1 || b.NoService != 1 {
		t.Fatalf("batch %+v, want 1 installed, 1 no_service", b)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, gone, 80, hdr.TCPFlagACK, "q"))
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("the client's packet was not forwarded (stats %v)", w.cnt.own)
	}
	if eth, ip, _ := checkTCP(t, out[0]); ip.Dst() != rs3 || eth.Dst() != rs3MAC {
		t.Fatalf("DNAT to %x (%v)", ip.Dst(), eth.Dst())
	}
	r.inject(1, tcpFrame(rs3MAC, lanMAC, rs3, 80, clientIP, 40000, hdr.TCPFlagACK, "a"))
	w.poll()
	if out = r.sent(0); len(out) != 1 {
		t.Fatal("the server's reply was not forwarded")
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != gone || tcp.SrcPort() != 80 || ip.Dst() != clientIP {
		t.Fatalf("SNAT gave %x:%d -> %x", ip.Src(), tcp.SrcPort(), ip.Dst())
	}

	before := w.cnt.own[DropNoService]
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 41000, gone, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[DropNoService] != before+1 {
		t.Fatalf("a SYN to the removed service: %d sent, no_service %d -> %d; want dropped as no_service", n, before, w.cnt.own[DropNoService])
	}
}
