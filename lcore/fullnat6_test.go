package lcore

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// lip6 is the FNAT66 services' local address, on the lan port's IPv6
// subnet; router6 a router beyond it.
var (
	lip6    = hdr.Addr6From(netip.MustParseAddr("fd00:1::200"))
	router6 = hdr.Addr6From(netip.MustParseAddr("fd00:1::fe"))
)

// rigFNAT66 is rigSvc6 with FNAT66 services from lip6: TCP vip6:9000 to
// rs61:8080, the same with proxy_protocol on vip6:9001 and with toa on
// vip6:9002, UDP vip6:9053 to rs61:53, the same with uoa (opp) on
// vip6:9054.
func rigFNAT66(t testing.TB) *rig {
	r := rigSvc6(t)
	withFNAT66Services(r)
	return r
}

// withFNAT66Services adds rigFNAT66's services to a rig with IPv6
// (withIPv6Services).
func withFNAT66Services(r *rig) {
	w := r.w
	svc := func(key ServiceKey, d sched.Dest) Service {
		s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		return Service{Key: key, Scheduler: "rr", Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, PersistMask: ^uint32(0),
			LocalAddrs6: []hdr.Addr6{lip6}}
	}
	proxied := svc(ServiceKey{VIP6: vip6, Port: 9001, Proto: hdr.ProtoTCP}, sched.Dest{ID: 21, Addr6: rs61, Port: 8080, Weight: 1, Fwd: fwd.FullNAT})
	proxied.ProxyProtocol = true
	toa := svc(ServiceKey{VIP6: vip6, Port: 9002, Proto: hdr.ProtoTCP}, sched.Dest{ID: 23, Addr6: rs61, Port: 8080, Weight: 1, Fwd: fwd.FullNAT})
	toa.TOA = true
	uoa := svc(ServiceKey{VIP6: vip6, Port: 9054, Proto: hdr.ProtoUDP}, sched.Dest{ID: 25, Addr6: rs61, Port: 53, Weight: 1, Fwd: fwd.FullNAT})
	uoa.UOA = UOAOptionProtocol
	services := append(append([]Service(nil), w.snap.Services...),
		svc(ServiceKey{VIP6: vip6, Port: 9000, Proto: hdr.ProtoTCP}, sched.Dest{ID: 20, Addr6: rs61, Port: 8080, Weight: 1, Fwd: fwd.FullNAT}),
		proxied, toa, uoa,
		svc(ServiceKey{VIP6: vip6, Port: 9053, Proto: hdr.ProtoUDP}, sched.Dest{ID: 22, Addr6: rs61, Port: 53, Weight: 1, Fwd: fwd.FullNAT}),
	)
	snap := NewSnapshot(w.snap.Gen+1, w.snap.Ports, services, w.snap.Neigh, conn.DefaultTimeouts())
	snap.Neigh6 = w.snap.Neigh6
	w.snap = snap
	w.learnVIPs(snap)
}

// fnat66SYN opens an FNAT66 connection from clientAddr6:cport to
// vip6:vport and returns the SYN as it left for the server.
func fnat66SYN(t *testing.T, r *rig, cport, vport uint16, isn uint32) (hdr.IPv6, hdr.TCP) {
	t.Helper()
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, cport, vip6, vport, hdr.TCPFlagSYN, isn, 0, ""))
	r.w.poll()
	_, ip, l4 := check6(t, one(t, r, 1))
	return ip, hdr.TCP(l4)
}

// TestFullNAT66: a client's SYN leaves from the local address and a port
// of this worker's to the IPv6 server, the server's answer to it goes
// back to the client from the VIP, checksums right both ways; UDP too.
func TestFullNAT66(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	ip, tcp := fnat66SYN(t, r, 40000, 9000, 5000)
	lport := tcp.SrcPort()
	if ip.Src() != lip6 || ip.Dst() != rs61 || tcp.DstPort() != 8080 || ip.HopLimit() != 63 || tcp.Seq() != 5000 {
		t.Fatalf("SYN left as %s:%d -> %s:%d hop %d", ip.Src(), lport, ip.Dst(), tcp.DstPort(), ip.HopLimit())
	}
	if lport < lportMin || !w.lpools6[lip6].owns(lport) || !bit(&w.lpools6[lip6].used, lport) {
		t.Fatalf("local port %d is not one the worker handed out", lport)
	}
	r.inject(1, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 9000, 5001, ""))
	w.poll()
	eth, ip, l4 := check6(t, one(t, r, 0))
	if eth.Dst() != clientMAC || ip.Src() != vip6 || ip.Dst() != clientAddr6 || port6(l4, 0) != 9000 || port6(l4, 2) != 40000 {
		t.Fatalf("SYN-ACK went as %s:%d -> %s:%d", ip.Src(), port6(l4, 0), ip.Dst(), port6(l4, 2))
	}
	// The server's packet to the client's own address is none of the
	// connection's: FNAT66 keys the reply by the local address.
	r.inject(1, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, clientAddr6, 40000, hdr.TCPFlagACK, 9001, 5001, ""))
	w.poll()
	if len(r.sent(0)) != 0 {
		t.Fatal("a server packet to the client's address was forwarded")
	}

	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5353, vip6, 9053, 0, "query"))
	w.poll()
	_, ip, l4 = check6(t, one(t, r, 1))
	uport := port6(l4, 0)
	if ip.Src() != lip6 || ip.Dst() != rs61 || port6(l4, 2) != 53 || string(l4[8:]) != "query" {
		t.Fatalf("datagram left as %s:%d -> %s:%d", ip.Src(), uport, ip.Dst(), port6(l4, 2))
	}
	r.inject(1, l4Frame6(rs1MAC, lanMAC, hdr.ProtoUDP, rs61, 53, lip6, uport, 0, "answer"))
	w.poll()
	_, ip, l4 = check6(t, one(t, r, 0))
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || port6(l4, 0) != 9053 || port6(l4, 2) != 5353 || string(l4[8:]) != "answer" {
		t.Fatalf("answer went as %s:%d -> %s:%d", ip.Src(), port6(l4, 0), ip.Dst(), port6(l4, 2))
	}
	if got := w.cnt.own[NewConns]; got != 2 {
		t.Fatalf("new_conns %d (drops %v)", got, dropsOf(w))
	}
	// The connections listed and synced name the local address.
	var found int
	w.table.Scan(0, w.table.Cap(), func(id uint32, c *conn.Conn) {
		ci := w.connInfo6(id)
		if ci.LIP6 != lip6 || ci.LIP != 0 || ci.RIP6 != rs61 {
			t.Errorf("listed as %+v", ci)
		}
		var r SyncConn
		r.Fwd, r.HasExt, r.Ext = c.Fwd, true, *w.table.Ext(id)
		syncConn6(&r, w.table.Addrs6(id))
		if r.Six.LIP != lip6 || r.Six.RIP != rs61 || r.RIP != 0 || r.Ext.LIP != 0 || r.Ext.LPort == 0 {
			t.Errorf("synced as %+v", r)
		}
		found++
	})
	if found != 2 {
		t.Fatalf("%d entries", found)
	}
}

// TestFullNAT66LocalPortsGoBack: an expired FNAT66 connection's local
// port goes back to its address's pool.
func TestFullNAT66LocalPortsGoBack(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	p := w.lpools6[lip6]
	free := p.free
	fnat66SYN(t, r, 40000, 9000, 5000)
	if p.free != free-1 {
		t.Fatalf("free ports %d, want %d", p.free, free-1)
	}
	w.table.Expire(int64(1)<<62, w.table.Cap(), w.expire)
	if p.free != free || w.table.Len() != 0 {
		t.Fatalf("after expiry: free ports %d (want %d), %d entries", p.free, free, w.table.Len())
	}
}

// TestFullNAT66ND: lbd answers solicitations for the IPv6 local address on
// the port whose link holds it, and announces it.
func TestFullNAT66ND(t *testing.T) {
	r := rigFNAT66(t)
	sn := lip6.SolicitedNode()
	r.inject(1, icmp6Frame(rs1MAC, sn.MulticastMAC(), rs61, sn, 255, nsMsg(lip6, true)))
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(lip6, true)))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	na := hdr.ND(hdr.IPv6(hdr.Ethernet(out[0]).Payload()).Payload())
	if mac, _ := na.LinkAddr(hdr.NDOptTargetLL); na.Target() != lip6 || mac != lanMAC {
		t.Fatalf("NA for the local address: %x", out[0])
	}
	if len(r.sent(0)) != 0 || r.w.cnt.own[DropNDNotOurs] != 1 {
		t.Fatalf("answered for the local address off its link (nd_not_ours %d)", r.w.cnt.own[DropNDNotOurs])
	}
	r.w.announce6Port(1)
	r.w.flush()
	announced := false
	for _, f := range r.sent(1) {
		if na := hdr.ND(hdr.IPv6(hdr.Ethernet(f).Payload()).Payload()); hdr.ICMP(na).Type() == hdr.ICMPv6NeighAdvert && na.Target() == lip6 {
			announced = true
		}
	}
	if !announced {
		t.Fatal("the local address was not announced")
	}
}

// TestFullNAT66ProxyV2: the client's first bytes reach the server after a
// PROXY v2 header naming its IPv6 endpoints, later segments and the
// server's acknowledgements move by its 52 bytes, and the server's MSS
// leaves room for it.
func TestFullNAT66ProxyV2(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	const isn = 7000
	_, tcp := fnat66SYN(t, r, 40000, 9001, isn)
	lport := tcp.SrcPort()
	mss := []byte{hdr.TCPOptMSS, 4, 0x05, 0xa0} // 1440
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 90000, isn+1, mss, ""))
	w.poll()
	_, _, l4 := check6(t, one(t, r, 0))
	if tcp = hdr.TCP(l4); tcp.Ack() != isn+1 || tcp.MSS() != 1500-40-20-proxyV2Len6 {
		t.Fatalf("SYN-ACK ack %d MSS %d, want %d and %d", tcp.Ack(), tcp.MSS(), isn+1, 1500-40-20-proxyV2Len6)
	}
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 9001, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, 90001, "hello"))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 9001, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+6, 90001, "world"))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("sent %d, want 2 (drops %v)", len(out), dropsOf(w))
	}
	want := make([]byte, proxyV2Len6)
	putProxyV2Header(want, &conn.Conn{ClientPort: 40000, VPort: 9001}, &conn.Addrs6{Client: clientAddr6, VIP: vip6})
	_, ip, l4 := check6(t, out[0])
	if tcp = hdr.TCP(l4); tcp.Seq() != isn+1 || !bytes.Equal(tcp.Payload(), append(want, "hello"...)) || ip.Src() != lip6 ||
		int(ip.PayloadLength()) != 20+proxyV2Len6+5 {
		t.Fatalf("first data seq %d payload %x", tcp.Seq(), tcp.Payload())
	}
	if _, _, l4 = check6(t, out[1]); hdr.TCP(l4).Seq() != isn+6+proxyV2Len6 || string(hdr.TCP(l4).Payload()) != "world" {
		t.Fatalf("second data seq %d", hdr.TCP(l4).Seq())
	}
	r.inject(1, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagACK, 90001, isn+11+proxyV2Len6, ""))
	w.poll()
	if _, _, l4 = check6(t, one(t, r, 0)); hdr.TCP(l4).Ack() != isn+11 {
		t.Fatalf("the server's ack reached the client as %d, want %d", hdr.TCP(l4).Ack(), isn+11)
	}
	if w.cnt.own[ProxyHeaders] != 1 {
		t.Fatalf("proxy_headers %d", w.cnt.own[ProxyHeaders])
	}
}

// TestFullNAT66ICMPErrors: a router's error about a packet lbd sent the
// server reaches the client from the VIP quoting what the client sent;
// the client's error about a reply reaches the server from the local
// address quoting what the server sent; checksums right.
func TestFullNAT66ICMPErrors(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	client := tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 9000, hdr.TCPFlagSYN, 5000, 0, "")
	r.inject(0, client)
	w.poll()
	sent := one(t, r, 1)
	lport := binary.BigEndian.Uint16(sent[54:])
	ptb := icmp6Error(router6, lip6, hdr.ICMPv6PacketTooBig, 0, 1400, sent, 0)
	r.inject(1, ptb)
	w.poll()
	_, ip, icmp := checkICMPv6(t, one(t, r, 0))
	q := hdr.IPv6(icmp[8:])
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || binary.BigEndian.Uint32(icmp[4:]) != 1400 ||
		q.Src() != clientAddr6 || q.Dst() != vip6 || port6(q[hdr.IPv6Len:], 0) != 40000 || port6(q[hdr.IPv6Len:], 2) != 9000 {
		t.Fatalf("to the client: %s -> %s quoting %s -> %s", ip.Src(), ip.Dst(), q.Src(), q.Dst())
	}
	reply := tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 9000, 5001, "")
	r.inject(1, reply)
	w.poll()
	toClient := one(t, r, 0)
	r.inject(0, icmp6Frame(clientMAC, wanMAC, clientAddr6, vip6, 64, errorMsg(hdr.ICMPv6DestUnreachable, 4, 0, toClient[14:], 0)))
	w.poll()
	_, ip, icmp = checkICMPv6(t, one(t, r, 1))
	q = hdr.IPv6(icmp[8:])
	if ip.Src() != lip6 || ip.Dst() != rs61 || q.Src() != rs61 || q.Dst() != lip6 ||
		port6(q[hdr.IPv6Len:], 0) != 8080 || port6(q[hdr.IPv6Len:], 2) != lport {
		t.Fatalf("to the server: %s -> %s quoting %s -> %s", ip.Src(), ip.Dst(), q.Src(), q.Dst())
	}
	if w.cnt.own[ICMPErrors] != 2 {
		t.Fatalf("icmp_errors %d", w.cnt.own[ICMPErrors])
	}
}

// TestFullNAT66PathDoesNotAllocate guards the FNAT66 path: new
// connections, local ports, rewrites both ways.
func TestFullNAT66PathDoesNotAllocate(t *testing.T) {
	r := rigFNAT66(t)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, uint16(20000+i), vip6, 9000, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the FNAT66 path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections (drops %v)", r.w.cnt.own[NewConns], dropsOf(r.w))
	}
}

// TestSyncedFullNAT66ConnectionForwards: an FNAT66 record reserves its
// local port here, the server's replies to it reach the client and the
// client's packets leave from it; a record without the local address, or
// to a server this director reaches otherwise, is refused.
func TestSyncedFullNAT66ConnectionForwards(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	pool := w.lpools6[lip6]
	lport := pool.ports[pool.head] // the port a new connection would take next
	rec := SyncConn{ClientPort: 40002, VPort: 9000, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
		Fwd: fwd.FullNAT, HasExt: true, Ext: conn.Ext{LPort: lport},
		IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs61, LIP: lip6}}
	if b := install6(t, r, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(1, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagACK, 100, 200, "reply"))
	w.poll()
	_, ip, l4 := check6(t, one(t, r, 0))
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || port6(l4, 0) != 9000 || port6(l4, 2) != 40002 {
		t.Fatalf("reply %s:%d -> %s:%d", ip.Src(), port6(l4, 0), ip.Dst(), port6(l4, 2))
	}
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40002, vip6, 9000, hdr.TCPFlagACK, 200, 105, "more"))
	w.poll()
	if _, ip, l4 = check6(t, one(t, r, 1)); ip.Src() != lip6 || port6(l4, 0) != lport || ip.Dst() != rs61 {
		t.Fatalf("the client's packet left as %s:%d -> %s", ip.Src(), port6(l4, 0), ip.Dst())
	}
	// A new connection does not get the reserved port.
	if _, tcp := fnat66SYN(t, r, 40003, 9000, 1); tcp.SrcPort() == lport {
		t.Fatal("a new connection took the synced connection's local port")
	}
	noLocal := rec
	noLocal.ClientPort, noLocal.Six.LIP = 40004, hdr.Addr6{}
	if b := install6(t, r, noLocal); b.FullNAT != 1 || b.Installed != 0 {
		t.Fatalf("a record without its local address: %+v", b)
	}
}

// withMultiFNAT66 gives the multi-rig's ports their IPv6 addresses and
// both workers rigFNAT66's TCP service (vip6:9000 -> rs61:8080 from lip6).
func withMultiFNAT66(t *testing.T, r *multiRig) {
	t.Helper()
	d := sched.Dest{ID: 20, Addr6: rs61, Port: 8080, Weight: 1, Fwd: fwd.FullNAT}
	var scheds []sched.Scheduler
	for range r.w {
		s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		scheds = append(scheds, s)
	}
	svc := Service{Key: ServiceKey{VIP6: vip6, Port: 9000, Proto: hdr.ProtoTCP}, Scheduler: "rr", PersistMask: ^uint32(0),
		Dests: []sched.Dest{d}, Scheds: scheds, LocalAddrs6: []hdr.Addr6{lip6}}
	old := r.w[0].snap
	ports := append([]PortInfo(nil), old.Ports...)
	m64 := Mask6(64)
	ports[0].Addr6, ports[0].Mask6, ports[0].Net6 = wanAddr6, m64, masked6(&wanAddr6, &m64)
	ports[1].Addr6, ports[1].Mask6, ports[1].Net6 = lanAddr6, m64, masked6(&lanAddr6, &m64)
	snap := NewSnapshot(old.Gen+1, ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	snap.Neigh6 = map[hdr.Addr6]hdr.MAC{rs61: rs1MAC, clientAddr6: clientMAC}
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
		w.runCommands(0)
		if w.AckedGen() != snap.Gen {
			t.Fatal("a worker did not take the FNAT66 snapshot")
		}
	}
}

// TestSteeringEntry6: a synced FNAT66 connection whose local port the
// other worker owns goes on: its worker installs it without the port,
// the port's owner holds an IPv6 steering entry that hands it the
// server's packets, and gives the port back when it ends.
func TestSteeringEntry6(t *testing.T) {
	r := newMultiRig(t, false)
	withMultiFNAT66(t, r)
	const a, b = 0, 1
	rec := SyncConn{RPort: 8080, VPort: 9000, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT,
		HasExt: true, IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs61, LIP: lip6}}
	for p := uint16(40100); rec.ClientPort == 0; p++ {
		if Owner6(&clientAddr6, p, 2) == a {
			rec.ClientPort = p
		}
	}
	for p := uint16(lportMin); rec.Ext.LPort == 0; p++ {
		if Owner6(&lip6, p, 2) == b {
			rec.Ext.LPort = p
		}
	}
	if got := install(t, r.w[a], rec); got.Installed != 1 || got.LocalPort != 0 {
		t.Fatalf("the connection's worker: batch %+v", got)
	}
	steer := rec
	steer.Steer, steer.SteerTo = true, a
	if got := install(t, r.w[b], steer); got.LocalPort+got.Conflict+got.Invalid != 0 {
		t.Fatalf("the port's owner: batch %+v", got)
	}
	pool := r.w[b].lpools6[lip6]
	if r.w[b].steers != 1 || !bit(&pool.used, rec.Ext.LPort) {
		t.Fatalf("port owner: %d steering entries, port held %v", r.w[b].steers, bit(&pool.used, rec.Ext.LPort))
	}
	r.inject(1, b, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, rec.Ext.LPort, hdr.TCPFlagACK|hdr.TCPFlagPSH, 1001, 7001, "OK"))
	r.pollBoth()
	out := r.take(0, a)
	if len(out) != 1 || len(r.take(0, b)) != 0 {
		t.Fatalf("%d frames from the connection's worker, want 1", len(out))
	}
	if _, ip, l4 := check6(t, out[0]); ip.Src() != vip6 || ip.Dst() != clientAddr6 || port6(l4, 2) != rec.ClientPort {
		t.Fatalf("reply %s -> %s:%d", ip.Src(), ip.Dst(), port6(l4, 2))
	}
	if r.w[b].cnt.own[Steered] != 1 {
		t.Fatalf("steered %d, want 1", r.w[b].cnt.own[Steered])
	}
	r.inject(0, a, tcpSeg6(clientMAC, wanMAC, clientAddr6, rec.ClientPort, vip6, 9000, hdr.TCPFlagACK, 7001, 1003, ""))
	r.pollBoth()
	if out = r.take(1, a); len(out) != 1 {
		t.Fatalf("%d client segments sent, want 1", len(out))
	}
	if _, ip, l4 := check6(t, out[0]); ip.Src() != lip6 || port6(l4, 0) != rec.Ext.LPort || ip.Dst() != rs61 {
		t.Fatalf("client segment %s:%d -> %s", ip.Src(), port6(l4, 0), ip.Dst())
	}
	for _, w := range r.w {
		w.table.Expire(w.now+int64(time.Hour), w.table.Cap(), w.expire)
	}
	if r.w[b].steers != 0 || r.w[b].table.Len() != 0 || bit(&pool.used, rec.Ext.LPort) {
		t.Fatalf("after expiry: %d steering entries, %d entries, port held %v", r.w[b].steers, r.w[b].table.Len(), bit(&pool.used, rec.Ext.LPort))
	}
}

// TestFullNAT66TOA: with toa, the client's segment that acknowledges the
// server's SYN-ACK reaches the server with DPVS's 20-byte TCP option
// address naming the IPv6 client's port and address, the data offset,
// payload length and checksum grown for it; the others go without.
func TestFullNAT66TOA(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	_, tcp := fnat66SYN(t, r, 40000, 9002, 5000)
	if len(tcp.Options()) != 0 {
		t.Fatalf("the SYN carries options %x", tcp.Options())
	}
	lport := tcp.SrcPort()
	r.inject(1, tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 9000, 5001, ""))
	w.poll()
	one(t, r, 0)
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 9002, hdr.TCPFlagACK, 5001, 9001, ""))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 9002, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 9002, "late"))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("sent %d, want 2 (drops %v)", len(out), dropsOf(w))
	}
	_, ip, l4 := check6(t, out[0])
	tcp = hdr.TCP(l4)
	want := make([]byte, toaLen6)
	putClientOption(want, toaKind, &conn.Conn{ClientPort: 40000}, &conn.Addrs6{Client: clientAddr6})
	if !bytes.Equal(tcp.Options(), want) || tcp.DataOffset() != hdr.TCPMinLen+toaLen6 || int(ip.PayloadLength()) != hdr.TCPMinLen+toaLen6 ||
		ip.Src() != lip6 || tcp.SrcPort() != lport {
		t.Fatalf("the handshake's ACK: options %x, data offset %d, payload %d", tcp.Options(), tcp.DataOffset(), ip.PayloadLength())
	}
	if _, _, l4 = check6(t, out[1]); len(hdr.TCP(l4).Options()) != 0 || string(hdr.TCP(l4).Payload()) != "late" {
		t.Fatalf("a later segment: options %x", hdr.TCP(l4).Options())
	}
	if w.cnt.own[TOAOptions] != 1 {
		t.Fatalf("toa_options %d", w.cnt.own[TOAOptions])
	}
}

// TestSynProxyFullNAT66: behind the SYN proxy, a client proving its cookie
// gets an FNAT66 connection whose server the proxy opens from the local
// endpoint over IPv6; the server's SYN-ACK is answered with lbd's ACK,
// which carries the TCP option address (toa), and data moves between
// the two numberings both ways.
func TestSynProxyFullNAT66(t *testing.T) {
	r := rigSvc6(t)
	d := sched.Dest{ID: 24, Addr6: rs61, Port: 8443, Weight: 1, Fwd: fwd.FullNAT}
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svc := Service{Key: ServiceKey{VIP6: vip6, Port: 8443, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: []sched.Dest{d},
		Scheds: []sched.Scheduler{s}, SynProxy: true, TOA: true, PersistMask: ^uint32(0), LocalAddrs6: []hdr.Addr6{lip6}}
	old := r.w.snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	snap.Neigh6 = old.Neigh6
	r.w.snap = snap
	r.w.learnVIPs(snap)
	w := r.w
	const isn, rsISN = 1000, 777000
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40010, vip6, 8443, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	w.poll()
	_, _, tcp := checkTCP6(t, one(t, r, 0))
	cookie := tcp.Seq()
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40010, vip6, 8443, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
	w.poll()
	_, ip, tcp := checkTCP6(t, one(t, r, 1))
	lport := tcp.SrcPort()
	if tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != isn || ip.Src() != lip6 || ip.Dst() != rs61 || tcp.DstPort() != 8443 || !w.lpools6[lip6].owns(lport) {
		t.Fatalf("SYN to the server: flags %#x seq %d %s:%d -> %s:%d", tcp.Flags(), tcp.Seq(), ip.Src(), lport, ip.Dst(), tcp.DstPort())
	}
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, lip6, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
	w.poll()
	_, ip, tcp = checkTCP6(t, one(t, r, 1))
	want := make([]byte, toaLen6)
	putClientOption(want, toaKind, &conn.Conn{ClientPort: 40010}, &conn.Addrs6{Client: clientAddr6})
	if tcp.Flags() != hdr.TCPFlagACK || tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || ip.Src() != lip6 || tcp.SrcPort() != lport ||
		!bytes.Contains(tcp.Options(), want) {
		t.Fatalf("ACK to the server: flags %#x seq %d ack %d from %s:%d options %x", tcp.Flags(), tcp.Seq(), tcp.Ack(), ip.Src(), tcp.SrcPort(), tcp.Options())
	}
	if len(r.sent(0)) != 0 {
		t.Fatal("the server's SYN-ACK reached the client")
	}
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40010, vip6, 8443, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET"))
	w.poll()
	if _, ip, tcp = checkTCP6(t, one(t, r, 1)); tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || string(tcp.Payload()) != "GET" || ip.Src() != lip6 {
		t.Fatalf("client data: seq %d ack %d %q from %s", tcp.Seq(), tcp.Ack(), tcp.Payload(), ip.Src())
	}
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, lip6, lport, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+4, nil, "OK"))
	w.poll()
	_, ip, tcp = checkTCP6(t, one(t, r, 0))
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || tcp.SrcPort() != 8443 || tcp.Seq() != cookie+1 || tcp.Ack() != isn+4 || string(tcp.Payload()) != "OK" {
		t.Fatalf("server data: %s:%d -> %s seq %d (cookie %d) ack %d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.Seq(), cookie, tcp.Ack())
	}
}

// TestFullNAT66UOA: with uoa, the first three datagrams of a connection
// reach the server with DPVS's option protocol header (version 2, UDP,
// 24 bytes) carrying the IPv6 client's port and address right after the
// IPv6 header, its next header 248 and payload length grown, the UDP
// checksum still right for UDP; the fourth goes plain. A datagram that
// fills the MTU goes as it is, the option ahead of it in an empty
// datagram of its own.
func TestFullNAT66UOA(t *testing.T) {
	r := rigFNAT66(t)
	w := r.w
	want := make([]byte, uoaLen6)
	putClientOption(want, uoaCode, &conn.Conn{ClientPort: 5353}, &conn.Addrs6{Client: clientAddr6})
	// checkOPP parses a datagram that carries the header, and returns
	// its UDP part.
	checkOPP := func(f []byte) []byte {
		t.Helper()
		ip := hdr.IPv6(hdr.Ethernet(f).Payload())
		opp := ip[hdr.IPv6Len:]
		if ip.NextHeader() != ipProtoOPP || opp[0] != 2<<4 || opp[1] != hdr.ProtoUDP || binary.BigEndian.Uint16(opp[2:]) != uoaOPPLen+uoaLen6 ||
			!bytes.Equal(opp[uoaOPPLen:uoaOPPLen+uoaLen6], want) || ip.Src() != lip6 || ip.Dst() != rs61 {
			t.Fatalf("no option protocol header: next header %d, %x", ip.NextHeader(), opp[:min(len(opp), 24)])
		}
		udp := ip.Payload()[uoaOPPLen+uoaLen6:]
		if got := binary.BigEndian.Uint16(udp[6:]); got != hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoUDP, udp) {
			t.Fatalf("UDP checksum %#04x, recomputed %#04x", got, hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoUDP, udp))
		}
		return udp
	}
	for i := range 4 {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5353, vip6, 9054, 0, "query"))
		w.poll()
		f := one(t, r, 1)
		if i == 3 {
			if _, ip, l4 := check6(t, f); ip.NextHeader() != hdr.ProtoUDP || string(l4[8:]) != "query" {
				t.Fatalf("the fourth datagram: next header %d", ip.NextHeader())
			}
			continue
		}
		if udp := checkOPP(f); string(udp[8:]) != "query" || binary.BigEndian.Uint16(udp[2:]) != 53 {
			t.Fatalf("datagram %d: %x", i, udp)
		}
	}
	// A new connection whose first datagram fills the MTU.
	big := strings.Repeat("x", int(w.snap.Ports[1].MTU)-hdr.IPv6Len-hdr.UDPLen)
	putClientOption(want, uoaCode, &conn.Conn{ClientPort: 5354}, &conn.Addrs6{Client: clientAddr6})
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5354, vip6, 9054, 0, big))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("sent %d, want the option alone and the datagram (drops %v)", len(out), dropsOf(w))
	}
	if udp := checkOPP(out[0]); len(udp) != hdr.UDPLen {
		t.Fatalf("the option's datagram carries %d bytes", len(udp)-hdr.UDPLen)
	}
	if _, ip, l4 := check6(t, out[1]); ip.NextHeader() != hdr.ProtoUDP || len(l4) != hdr.UDPLen+len(big) {
		t.Fatalf("the full datagram: next header %d, %d bytes", ip.NextHeader(), len(l4))
	}
	if w.cnt.own[UOAOptions] != 3 || w.cnt.own[UOAAlone] != 1 {
		t.Fatalf("uoa_options %d, uoa_alone %d", w.cnt.own[UOAOptions], w.cnt.own[UOAAlone])
	}
}
