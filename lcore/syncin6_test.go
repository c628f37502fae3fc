package lcore

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// TestSyncOut6: a master syncs IPv6 connections with their addresses,
// never their folds (ClientIP and VIP stay 0), a NAT64 one with its IPv4
// server and local endpoint; an IPv6 persistence template is not sent
// (its key holds folds), the peer rebuilds it from the connection.
func TestSyncOut6(t *testing.T) {
	r := rigSvc6(t)
	withSync(r, SyncParams{On: true, Threshold: 1})
	w := r.w
	handshake := func(vport, rport uint16) hdr.Addr6 {
		t.Helper()
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000+vport, vip6, vport, hdr.TCPFlagSYN, ""))
		w.poll()
		eth, ip, _ := check6(t, one(t, r, 1))
		rs := ip.Dst()
		r.inject(1, l4Frame6(eth.Dst(), lanMAC, hdr.ProtoTCP, rs, rport, clientAddr6, 40000+vport, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
		w.poll()
		one(t, r, 0)
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000+vport, vip6, vport, hdr.TCPFlagACK, ""))
		w.poll()
		one(t, r, 1)
		return rs
	}
	rs80, rs443 := handshake(80, 8080), handshake(443, 443)
	got := syncedRecords(w)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2: %+v", len(got), got)
	}
	for i, want := range []SyncConn{
		{ClientPort: 40080, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs80}},
		{ClientPort: 40443, VPort: 443, RPort: 443, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs443}},
	} {
		if got[i] != want {
			t.Errorf("record %d\n%+v\nwant\n%+v", i, got[i], want)
		}
	}

	// NAT64: the reply is IPv4, the record carries the IPv4 server.
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6, 8080, hdr.TCPFlagSYN, ""))
	w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	one(t, r, 0)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6, 8080, hdr.TCPFlagACK, ""))
	w.poll()
	one(t, r, 1)
	got = syncedRecords(w)
	want := SyncConn{RIP: rs1, ClientPort: 40001, VPort: 8080, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
		Fwd: fwd.FullNAT, HasExt: true, Ext: conn.Ext{LIP: lip64, LPort: lport, ClientISN: 1000}, // l4Frame6's seq
		IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6}}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("NAT64 records %+v\nwant %+v", got, want)
	}
}

// install6 is install on a rig with IPv6 VIPs, whose unsolicited NAs
// (the first commands job's) are not what these tests look at.
func install6(t *testing.T, r *rig, recs ...SyncConn) *SyncBatch {
	t.Helper()
	r.w.announced6 = true
	return install(t, r.w, recs...)
}

// record6 is an established NAT66 connection as a peer syncs it, with
// folds in ClientIP and VIP as a careless sender under another fold key
// would leave them: the receiver must fold the addresses itself.
func record6(cport, vport, rport uint16, rs hdr.Addr6, m fwd.Method, vip hdr.Addr6) SyncConn {
	return SyncConn{ClientIP: 0xdeadbeef, VIP: 0xfeedface, ClientPort: cport, VPort: vport, RPort: rport,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: m,
		IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip, RIP: rs}}
}

// TestSyncedNAT66ConnectionForwards: an IPv6 connection from the master
// is entered under this process's folds of its addresses and forwards
// both ways to the server the master chose (rr would pick rs61 first).
func TestSyncedNAT66ConnectionForwards(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	rec := record6(40000, 80, 8080, rs62, fwd.NAT, vip6)
	if b := install6(t, r, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	id, dir, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40000, &vip6, 80)
	if !ok || dir != conn.Original {
		t.Fatal("not found by its addresses")
	}
	if c := w.table.Get(id); c.ClientIP != conn.Fold6(&clientAddr6) || c.VIP != conn.Fold6(&vip6) || c.RIP != conn.Fold6(&rs62) {
		t.Fatalf("entry folds %#x %#x %#x: not this process's", c.ClientIP, c.VIP, c.RIP)
	}
	r.inject(1, l4Frame6(rs2MAC, lanMAC, hdr.ProtoTCP, rs62, 8080, clientAddr6, 40000, hdr.TCPFlagACK, "data"))
	w.poll()
	_, ip, l4 := check6(t, one(t, r, 0))
	if ip.Src() != vip6 || port6(l4, 0) != 80 || ip.Dst() != clientAddr6 {
		t.Fatalf("reply from %s:%d", ip.Src(), port6(l4, 0))
	}
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagACK, ""))
	w.poll()
	if _, ip, l4 = check6(t, one(t, r, 1)); ip.Dst() != rs62 || port6(l4, 2) != 8080 {
		t.Fatalf("client packet to %s:%d", ip.Dst(), port6(l4, 2))
	}
	if c := w.table.Get(id); c.Flags&flagSynced != 0 {
		t.Fatal("the client's first packet did not clear the synced mark")
	}
	// An update moves its state; a second copy makes no second entry.
	rec.State = conn.StateFinWait
	if b := install6(t, r, rec); b.Installed != 1 || w.table.Len() != 1 || w.table.Get(id).State != conn.StateFinWait {
		t.Fatalf("update %+v: %d entries", b, w.table.Len())
	}

	// DR: one-way, the client's packet goes to the server's MAC unchanged.
	if b := install6(t, r, record6(40001, 80, 80, rs61, fwd.DR, vip6DR)); b.Installed != 1 {
		t.Fatalf("DR batch %+v", b)
	}
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6DR, 80, hdr.TCPFlagACK, "x"))
	w.poll()
	if eth, ip, _ := check6(t, one(t, r, 1)); eth.Dst() != rs1MAC || ip.Dst() != vip6DR {
		t.Fatalf("DR sent to %v %s", eth.Dst(), ip.Dst())
	}
}

// TestSyncedNAT64ConnectionForwards: a NAT64 record reserves its local
// port here and the server's IPv4 replies reach the IPv6 client.
func TestSyncedNAT64ConnectionForwards(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	pool := w.lpools[lip64]
	lport := pool.ports[pool.head] // the port a new connection would take next
	rec := SyncConn{RIP: rs1, ClientPort: 40002, VPort: 8080, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
		Fwd: fwd.FullNAT, HasExt: true, Ext: conn.Ext{LIP: lip64, LPort: lport},
		IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6}}
	if b := install6(t, r, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagACK, "reply"))
	w.poll()
	_, ip, l4 := check6(t, one(t, r, 0))
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || port6(l4, 0) != 8080 || port6(l4, 2) != 40002 {
		t.Fatalf("reply %s:%d -> %s:%d", ip.Src(), port6(l4, 0), ip.Dst(), port6(l4, 2))
	}
	// A new connection does not get the reserved port.
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40003, vip6, 8080, hdr.TCPFlagSYN, ""))
	w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); tcp.SrcPort() == lport {
		t.Fatal("a new connection took the synced connection's local port")
	}
	// NAT64 here and not there (and the reverse) is refused.
	plain := rec
	plain.HasExt, plain.Ext, plain.ClientPort = false, conn.Ext{}, 40004
	nat66 := record6(40005, 8080, 80, rs61, fwd.NAT, vip6)
	if b := install6(t, r, plain, nat66); b.FullNAT != 1 || b.NoDest != 1 || b.Installed != 0 {
		t.Fatalf("mismatches %+v", b)
	}
}

// TestSyncedIPv6Persistence: a synced connection of a persistent IPv6
// service rebuilds its client network's template here, so a new
// connection from that /64 reaches the same server after a takeover.
func TestSyncedIPv6Persistence(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	if b := install6(t, r, record6(41000, 443, 443, rs62, fwd.NAT, vip6)); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	id, _, _ := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 41000, &vip6, 443)
	if w.table.Get(id).Template == 0 {
		t.Fatal("the connection holds no template")
	}
	other := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::8"))
	w.neigh6.learn(&other, clientMAC, w.now+1)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, other, 41001, vip6, 443, hdr.TCPFlagSYN, ""))
	w.poll()
	if _, ip, _ := check6(t, one(t, r, 1)); ip.Dst() != rs62 {
		t.Fatalf("a new connection from the same /64 went to %s, not the synced one's rs62", ip.Dst())
	}
}

// TestSyncInstall6Refusals: IPv6 records this director cannot honour are
// counted by reason; an IPv6 template record is invalid.
func TestSyncInstall6Refusals(t *testing.T) {
	r := rigSvc6(t)
	noService := record6(40000, 81, 8080, rs61, fwd.NAT, vip6)
	noDest := record6(40000, 80, 8081, rs61, fwd.NAT, vip6)
	tmpl := record6(0, 80, 8080, rs61, fwd.NAT, vip6)
	tmpl.Template = true
	b := install6(t, r, noService, noDest, tmpl)
	if b.NoService != 1 || b.NoDest != 1 || b.Invalid != 1 || b.Installed != 0 || r.w.table.Len() != 0 {
		t.Fatalf("batch %+v, %d entries", b, r.w.table.Len())
	}
	// A director without IPv6 services has none to install into.
	plain := newRig(t, defaultNeigh())
	if b := install6(t, plain, record6(40000, 80, 8080, rs61, fwd.NAT, vip6)); b.NoService != 1 {
		t.Fatalf("no IPv6 service: %+v", b)
	}
}

// TestSyncedIPv6ConnectionToDrainingServer: IPv6 records naming a
// draining server (Service.Draining), a NAT66 one by its IPv6 address and
// a NAT64 one by its IPv4 address, are installed with the record's method.
func TestSyncedIPv6ConnectionToDrainingServer(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	rs63 := rs62
	rs63[15]++
	var nat66svc, nat64svc *Service
	for i := range w.snap.Services {
		switch s := &w.snap.Services[i]; s.Key {
		case ServiceKey{VIP6: vip6, Port: 80, Proto: hdr.ProtoTCP}:
			nat66svc = s
		case ServiceKey{VIP6: vip6, Port: 8080, Proto: hdr.ProtoTCP}:
			nat64svc = s
		}
	}
	nat66svc.Draining = []sched.Dest{{ID: 30, Addr6: rs63, Port: 8080}}
	nat64svc.Draining = []sched.Dest{{ID: 31, Addr: rs2, Port: 80}}
	pool := w.lpools[lip64]
	lport := pool.ports[pool.head]
	nat64 := SyncConn{RIP: rs2, ClientPort: 40002, VPort: 8080, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
		Fwd: fwd.FullNAT, HasExt: true, Ext: conn.Ext{LIP: lip64, LPort: lport},
		IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6}}
	wrongPort := record6(40003, 80, 8081, rs63, fwd.NAT, vip6)
	if b := install6(t, r, record6(40001, 80, 8080, rs63, fwd.NAT, vip6), nat64, wrongPort); b.Installed != 2 || b.NoDest != 1 {
		t.Fatalf("batch %+v", b)
	}
	id, _, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40001, &vip6, 80)
	if !ok || w.table.Addrs6(id).RIP != rs63 || w.table.Get(id).Dest != 30 || w.table.Get(id).Fwd != fwd.NAT {
		t.Fatal("the NAT66 connection to the draining server is not entered with its id and address")
	}
	r.inject(1, tcpFrame(rs2MAC, lanMAC, rs2, 80, lip64, lport, hdr.TCPFlagACK, "reply"))
	w.poll()
	if _, ip, _ := check6(t, one(t, r, 0)); ip.Src() != vip6 || ip.Dst() != clientAddr6 {
		t.Fatalf("the draining NAT64 server's reply went %s -> %s", ip.Src(), ip.Dst())
	}
}

// TestSyncedIPv6ConnectionToRemovedService: a record of a NAT66
// connection to a Removed service's draining server is installed and
// its server's reply forwarded; a SYN to the service is no_service.
func TestSyncedIPv6ConnectionToRemovedService(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	gone := vip6
	gone[15] = 0x99 // no service of the rig's
	old := w.snap
	svcs := append(append([]Service(nil), old.Services...),
		Service{Key: ServiceKey{VIP6: gone, Port: 80, Proto: hdr.ProtoTCP}, Removed: true, Draining: []sched.Dest{{ID: 30, Addr6: rs62, Port: 8080}}})
	next := NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)
	next.Neigh6 = old.Neigh6
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	w.runCommands(0)
	if !w.snap.IsVIP6(gone) {
		t.Fatal("the removed service's VIP is no VIP")
	}
	if b := install6(t, r, record6(40001, 80, 8080, rs62, fwd.NAT, gone)); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	w.poll()
	r.sent(0) // the new VIP's unsolicited neighbour advertisements
	r.inject(1, l4Frame6(rs2MAC, lanMAC, hdr.ProtoTCP, rs62, 8080, clientAddr6, 40001, hdr.TCPFlagACK, "reply"))
	w.poll()
	if _, ip, _ := check6(t, one(t, r, 0)); ip.Src() != gone || ip.Dst() != clientAddr6 {
		t.Fatalf("the reply went %s -> %s", ip.Src(), ip.Dst())
	}
	before := w.cnt.own[DropNoService]
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 41000, gone, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	if out := tcp6Frames(r.sent(1)); len(out) != 0 || w.cnt.own[DropNoService] != before+1 {
		t.Fatalf("a SYN to the removed service: %d sent, no_service %d -> %d", len(out), before, w.cnt.own[DropNoService])
	}
}
