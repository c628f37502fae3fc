package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestSyncOutFullNATCarriesExt: the master syncs a FullNAT connection
// with PROXY v2 with its extension (local endpoint, ISN, SeqIn).
func TestSyncOutFullNATCarriesExt(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	withSync(r, SyncParams{On: true, Threshold: 1})
	w := r.w
	const isn = 5000
	lport := openFullNAT(t, r, 40000, isn, 90000)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, isn+1, 90001, nil, ""))
	w.poll()
	r.drain(1)
	got := syncedRecords(w)
	if len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	rec := got[0]
	want := conn.Ext{LIP: lip1, LPort: lport, Flags: extProxy, ClientISN: isn, SeqIn: proxyV2Len}
	if !rec.HasExt || rec.Ext != want || rec.Fwd != fwd.FullNAT || rec.State != conn.StateEstablished {
		t.Fatalf("record %+v, want the extension %+v", rec, want)
	}
}

// fullNATRecord is an established FullNAT connection as a peer syncs it:
// client:40100 -> vipFN:80 via lip1:lport to rs1:8081, the server's
// numbering moved by seqOut (a SYN proxy's) and the client's by PROXY v2.
func fullNATRecord(lport uint16, seqOut uint32) SyncConn {
	return SyncConn{ClientIP: clientIP, VIP: vipFN, RIP: rs1, ClientPort: 40100, VPort: 80, RPort: 8081,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, HasExt: true,
		Ext: conn.Ext{LIP: lip1, LPort: lport, Flags: extProxy, ClientISN: 7000, ServerISN: 1000 + seqOut,
			SeqIn: proxyV2Len, SeqOut: seqOut}}
}

// TestSyncedFullNATConnectionForwards: a FullNAT connection received
// from the master forwards both ways through its local endpoint, with
// its sequence deltas; its local port is reserved (no new connection
// gets it) until it expires.
func TestSyncedFullNATConnectionForwards(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	w := r.w
	pool := w.lpools[lip1]
	lport := pool.ports[pool.head] // the port a new connection would take next
	const seqOut = 5555
	rec := fullNATRecord(lport, seqOut)
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	// The server's data: RIP -> LIP:lport becomes VIP -> client, seq moved.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagACK|hdr.TCPFlagPSH, 1001, 7001+proxyV2Len+10, nil, "OK"))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipFN || ip.Dst() != clientIP || tcp.DstPort() != 40100 || tcp.Seq() != 1001+seqOut || tcp.Ack() != 7011 {
		t.Fatalf("reply %x -> %x:%d seq %d ack %d", ip.Src(), ip.Dst(), tcp.DstPort(), tcp.Seq(), tcp.Ack())
	}
	// The client's data: to the server from LIP:lport, past the header.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vipFN, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, 7011, 1003+seqOut, nil, "more"))
	w.poll()
	_, ip, tcp = checkTCP(t, one(t, r, 1))
	if ip.Src() != lip1 || tcp.SrcPort() != lport || ip.Dst() != rs1 || tcp.Seq() != 7011+proxyV2Len || tcp.Ack() != 1003 {
		t.Fatalf("client data %x:%d -> %x seq %d ack %d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.Seq(), tcp.Ack())
	}
	// A new connection does not get the synced port.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40101, vipFN, 80, hdr.TCPFlagSYN, 1, 0, nil, ""))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); tcp.SrcPort() == lport {
		t.Fatalf("a new connection took the synced connection's port %d", lport)
	}
	// Both expire: the synced port is free again (and handed out once).
	w.table.Expire(w.now+int64(time.Hour), w.table.Cap(), w.expire)
	if w.table.Len() != 0 || bit(&pool.used, lport) {
		t.Fatalf("after expiry: %d entries, port %d used %v", w.table.Len(), lport, bit(&pool.used, lport))
	}
	seen := 0
	for free := pool.free; free > 0; free-- {
		if p, _ := pool.get(); p == lport {
			seen++
		}
	}
	if seen != 1 {
		t.Fatalf("the freed port was handed out %d times, want once", seen)
	}
}

// TestSyncedExtRefusals: what cannot be rebuilt is counted, not installed.
func TestSyncedExtRefusals(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	w := r.w
	ok := fullNATRecord(3000, 0)
	if b := install(t, w, ok); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	taken := fullNATRecord(3000, 0) // another client, the same local port
	taken.ClientPort = 40200
	plain := fullNATRecord(3002, 0) // an older peer's: no extension
	plain.ClientPort, plain.HasExt, plain.Ext = 40202, false, conn.Ext{}
	b := install(t, w, taken, plain)
	if b.Installed != 0 || b.LocalPort != 1 || b.FullNAT != 1 || w.table.Len() != 1 {
		t.Fatalf("batch %+v, %d entries", b, w.table.Len())
	}
	// A NAT record whose extension is not keyed to its client.
	withSynProxy(t, r, fwd.NAT)
	nat := SyncConn{ClientIP: clientIP, VIP: vipSP, RIP: rs1, ClientPort: 40300, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, HasExt: true,
		Ext: conn.Ext{LIP: lip1, LPort: 3005}}
	if b := install(t, w, nat); b.Invalid != 1 || b.Installed != 0 {
		t.Fatalf("NAT batch %+v", b)
	}
}

// TestSyncedPeerLocalAddress: a FullNAT connection from a local address
// that is none of this director's (a scale-out peer's) is installed
// without a port to hold; when the router moves its flow here, the
// client's packets leave from the peer's local endpoint, in the server's
// numbering, and the server's go on reaching the peer.
func TestSyncedPeerLocalAddress(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	w := r.w
	peerLIP := ip4(198, 51, 100, 99)
	rec := fullNATRecord(3001, 0)
	rec.Ext.LIP = peerLIP
	if b := install(t, w, rec); b.Installed != 1 || b.LocalPort != 0 {
		t.Fatalf("batch %+v", b)
	}
	if w.lpools[peerLIP] != nil || bit(&w.lpools[lip1].used, 3001) {
		t.Fatal("a port was held for a peer's local address")
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vipFN, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, 7011, 1003, nil, "more"))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 1))
	if ip.Src() != peerLIP || tcp.SrcPort() != 3001 || ip.Dst() != rs1 || tcp.DstPort() != 8081 || tcp.Seq() != 7011+proxyV2Len {
		t.Fatalf("client data %x:%d -> %x:%d seq %d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort(), tcp.Seq())
	}
	w.table.Expire(w.now+int64(time.Hour), w.table.Cap(), w.expire)
	if w.table.Len() != 0 {
		t.Fatalf("%d entries after expiry", w.table.Len())
	}
}

// TestSyncedSynProxyNAT: a SYN-proxied NAT connection comes back with
// its SeqOut: the server's bytes reach the client in the cookie's
// numbering.
func TestSyncedSynProxyNAT(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	w := r.w
	const cookie, rsISN = 900000, 777000
	rec := SyncConn{ClientIP: clientIP, VIP: vipSP, RIP: rs1, ClientPort: 40400, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, HasExt: true,
		Ext: conn.Ext{LIP: clientIP, LPort: 40400, ClientISN: 10, ServerISN: cookie, SeqOut: cookie - rsISN}}
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40400, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, 11, nil, "OK"))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipSP || tcp.Seq() != cookie+1 || tcp.Ack() != 11 {
		t.Fatalf("reply from %x seq %d (want %d) ack %d", ip.Src(), tcp.Seq(), cookie+1, tcp.Ack())
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40400, vipSP, 80, hdr.TCPFlagACK, 11, cookie+3, nil, ""))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); tcp.Ack() != rsISN+3 {
		t.Fatalf("client ack %d, want %d", tcp.Ack(), rsISN+3)
	}
	// The dump gives the record back, extension and all.
	req := &DumpRequest{Out: make([]ConnInfo, 0, 8)}
	w.dump = req
	for !req.Done() {
		w.runDump()
	}
	if len(req.Out) != 1 || !req.Out[0].HasExt || req.Out[0].SyncConn().Ext != rec.Ext {
		t.Fatalf("dump %+v", req.Out)
	}
}

// TestLportReserve: a reserved port is never handed out while held, one
// another worker owns is refused, and a port is never queued twice.
func TestLportReserve(t *testing.T) {
	p := newLportPool(lip1, 0, 2)
	other := uint16(0)
	for port := lportMin; port <= lportMax; port++ {
		if Owner(lip1, uint16(port), 2) == 1 {
			other = uint16(port)
			break
		}
	}
	if p.reserve(other) || p.reserve(80) {
		t.Fatal("reserved a port this worker does not own")
	}
	first := p.ports[p.head]
	if !p.reserve(first) || p.reserve(first) {
		t.Fatal("reserve of a free port: want true once")
	}
	if got, _ := p.get(); got == first {
		t.Fatal("get handed out a reserved port")
	}
	total := len(p.ports)
	p.put(first) // the synced connection ends
	n := 0
	for {
		if _, ok := p.get(); !ok {
			break
		}
		n++
	}
	if n != total-1 { // all but the one still taken by get above
		t.Fatalf("handed out %d ports, want %d", n, total-1)
	}
}

// TestDumpByLocalAddress: a dump filtered on a local address lists only
// the FullNAT connections from it, and no template.
func TestDumpByLocalAddress(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	w := r.w
	if b := install(t, w, fullNATRecord(3000, 0)); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	for lip, want := range map[uint32]int{lip1: 1, ip4(198, 51, 100, 99): 0} {
		req := &DumpRequest{ConnFilter: ConnFilter{LIP: lip}, Out: make([]ConnInfo, 0, 4)}
		w.dump = req
		for !req.Done() {
			w.runDump()
		}
		if len(req.Out) != want || want == 1 && req.Out[0].LPort != 3000 {
			t.Fatalf("LIP %x: %+v, want %d", lip, req.Out, want)
		}
	}
}
