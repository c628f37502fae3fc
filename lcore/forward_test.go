package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// hopped is a frame as a forwarding hop sends it on: TTL one less.
func hopped(f []byte) []byte {
	f = append([]byte(nil), f...)
	hdr.IPv4(f[14:]).DecTTLWithChecksumUpdate()
	return f
}

// ipFrame builds Ethernet/IPv4 around an L4 payload (its checksum as the
// caller made it) with a valid IPv4 checksum.
func ipFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, proto uint8, df bool, l4 []byte) []byte {
	b := make([]byte, 14+20+len(l4))
	eth := hdr.Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(hdr.EtherTypeIPv4)
	var flags uint8
	if df {
		flags = hdr.IPv4FlagDontFragment
	}
	hdr.IPv4(b[14:]).Encode(&hdr.IPv4Fields{TotalLength: uint16(20 + len(l4)), Flags: flags, TTL: 64,
		Protocol: proto, Src: src, Dst: dst})
	copy(b[34:], l4)
	return b
}

func udpFrame(srcMAC, dstMAC hdr.MAC, src uint32, sport uint16, dst uint32, dport uint16, payload string, withChecksum bool) []byte {
	l4 := make([]byte, 8+len(payload))
	u := hdr.UDP(l4)
	u.SetSrcPort(sport)
	u.SetDstPort(dport)
	u.SetLength(uint16(len(l4)))
	copy(l4[8:], payload)
	if withChecksum {
		u.SetChecksum(hdr.TransportChecksum(src, dst, hdr.ProtoUDP, l4))
	}
	return ipFrame(srcMAC, dstMAC, src, dst, hdr.ProtoUDP, false, l4)
}

func checkUDP(t *testing.T, f []byte) (hdr.IPv4, hdr.UDP) {
	t.Helper()
	ip := hdr.IPv4(hdr.Ethernet(f).Payload())
	if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
		t.Fatalf("bad IPv4 header in %x", f)
	}
	u := hdr.UDP(ip.Payload())
	if u.Checksum() != 0 {
		if got, want := u.Checksum(), hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoUDP, u); got != want {
			t.Fatalf("UDP checksum %#04x, full recomputation gives %#04x", got, want)
		}
	}
	return ip, u
}

func TestUDPNAT(t *testing.T) {
	for _, withChecksum := range []bool{true, false} {
		r := newRig(t, defaultNeigh())
		w := r.w
		r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "query", withChecksum))
		w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("checksum %v: lan sent %d frames", withChecksum, len(out))
		}
		ip, u := checkUDP(t, out[0])
		if ip.Dst() != rs1 || u.DstPort() != 5353 || ip.Src() != clientIP || u.SrcPort() != 40000 || string(u.Payload()) != "query" {
			t.Fatalf("DNAT gave %x:%d -> %x:%d", ip.Src(), u.SrcPort(), ip.Dst(), u.DstPort())
		}
		if !withChecksum && u.Checksum() != 0 {
			t.Fatal("a UDP datagram without checksum got one")
		}
		r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 40000, "answer", withChecksum))
		w.poll()
		out = r.sent(0)
		if len(out) != 1 {
			t.Fatal("reply not forwarded")
		}
		ip, u = checkUDP(t, out[0])
		if ip.Src() != vip || u.SrcPort() != 53 || ip.Dst() != clientIP || u.DstPort() != 40000 {
			t.Fatalf("SNAT gave %x:%d -> %x:%d", ip.Src(), u.SrcPort(), ip.Dst(), u.DstPort())
		}
		id, _, ok := w.table.Lookup(hdr.ProtoUDP, clientIP, 40000, vip, 53)
		if !ok || w.table.Get(id).State != conn.StateUDP || w.table.Get(id).Expires != w.now+int64(conn.DefaultTimeouts().ByState[conn.StateUDP]) {
			t.Fatal("UDP connection not in state UDP with its timeout")
		}
	}
}

func TestDirectRouting(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	syn := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagSYN, "")
	r.inject(0, syn)
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("DR did not forward")
	}
	eth := hdr.Ethernet(out[0])
	if eth.Src() != lanMAC || eth.Dst() != rs1MAC || !bytes.Equal(out[0][14:], hopped(syn)[14:]) {
		t.Fatalf("DR must change only the MACs and the TTL: %x", out[0])
	}
	// The server's replies bypass us, so only the client side is tracked
	// and the state machine follows IPVS's input-only rows.
	id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vipDR, 80)
	if !ok || w.table.Get(id).Flags&conn.FlagOneWay == 0 {
		t.Fatal("DR connection not one-way")
	}
	if _, _, ok := w.table.Lookup(hdr.ProtoTCP, rs1, 80, clientIP, 40000); ok {
		t.Fatal("DR connection indexed for replies")
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagACK, ""))
	w.poll()
	r.sent(1)
	if st := w.table.Get(id).State; st != conn.StateEstablished {
		t.Fatalf("one-way state after SYN, ACK = %v, want ESTABLISHED", st)
	}
}

func TestTunnel(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	syn := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, "hello")
	r.inject(0, syn)
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("TUN did not forward (stats %v)", w.cnt.own)
	}
	f := out[0]
	eth := hdr.Ethernet(f)
	outer := hdr.IPv4(eth.Payload())
	if eth.Src() != lanMAC || eth.Dst() != rs2MAC || eth.EtherType() != hdr.EtherTypeIPv4 {
		t.Fatalf("L2 %v -> %v", eth.Src(), eth.Dst())
	}
	if !outer.IsValid(len(outer)) || !outer.IsChecksumValid() || outer.Protocol() != 4 ||
		outer.Src() != lanAddr || outer.Dst() != rs2 || int(outer.TotalLength()) != len(syn)-14+20 {
		t.Fatalf("bad outer header %x", f[:34])
	}
	if !bytes.Equal(outer.Payload(), hopped(syn)[14:]) {
		t.Fatal("the inner packet was changed beyond its TTL")
	}
	if w.cnt.own[Encapsulated] != 1 {
		t.Fatal("encapsulation not counted")
	}
}

func TestSloppyTCP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	// Mid-flow ACK: port 80 (strict) drops it, port 8080 (sloppy) picks it up.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, "x"))
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 8080, hdr.TCPFlagACK, "x"))
	w.poll()
	out := r.sent(1)
	if len(out) != 1 || w.cnt.own[DropNotSYN] != 1 {
		t.Fatalf("sent %d, not_syn %d", len(out), w.cnt.own[DropNotSYN])
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs1 || tcp.DstPort() != 8080 {
		t.Fatal("sloppy pickup went wrong")
	}
}

// TestChecksumOffload: towards a port that offloads, a segment whose
// checksum the receiving NIC found good gets the IP checksum zeroed, the
// TCP/UDP checksum set to the pseudo-header sum, and the mbuf asks the NIC
// for the rest (TestBadChecksumStaysBad has the other segments).
func TestChecksumOffload(t *testing.T) {
	r := newRigWith(t, defaultNeigh(), true)
	w := r.w
	for _, frame := range [][]byte{
		tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "abc"),
		udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "abc", true),
	} {
		r.injectFlags(0, frame, mbuf.RxIPCksumGood|mbuf.RxL4CksumGood)
		w.poll()
		n := r.tx[1].SCDequeueBurst(r.objs)
		if n != 1 {
			t.Fatal("not forwarded")
		}
		m := mbuf.FromPointer(r.objs[0])
		ip := hdr.IPv4(hdr.Ethernet(m.Data()).Payload())
		l4 := ip.Payload()
		proto := ip.Protocol()
		wantFlags := mbuf.TxIPv4 | mbuf.TxIPCksum | mbuf.TxTCPCksum
		csOff := 16
		if proto == hdr.ProtoUDP {
			wantFlags, csOff = mbuf.TxIPv4|mbuf.TxIPCksum|mbuf.TxUDPCksum, 6
		}
		phdr := hdr.Fold(hdr.PseudoHeaderSum(ip.Src(), ip.Dst(), proto, uint16(len(l4))))
		if m.OlFlags() != wantFlags || m.L2Len() != 14 || m.L3Len() != 20 || ip.Checksum() != 0 ||
			binary.BigEndian.Uint16(l4[csOff:]) != phdr || ip.Dst() != rs1 {
			t.Errorf("proto %d: flags %#x lens %d/%d ip csum %#x l4 csum %#x (want %#x)", proto, m.OlFlags(),
				m.L2Len(), m.L3Len(), ip.Checksum(), binary.BigEndian.Uint16(l4[csOff:]), phdr)
		}
		m.Free()
	}
}

// TestReplyBeforeTheSnapshotKnowsTheClient: the reply to a client's first
// packet goes out even before the control plane's neighbour entry for the
// client arrives, from the MAC its packet came with.
func TestReplyBeforeTheSnapshotKnowsTheClient(t *testing.T) {
	r := newRig(t, map[uint32]hdr.MAC{rs1: rs1MAC})
	w := r.w
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	if len(r.sent(1)) != 1 {
		t.Fatal("query not forwarded")
	}
	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 40000, "a", true))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 || hdr.Ethernet(out[0]).Dst() != clientMAC {
		t.Fatalf("reply not sent to the client's MAC (stats %v)", w.cnt.own)
	}
	// An off-link source is never learnt (its MAC is a router's).
	w.neigh = neighCache{}
	r.inject(0, udpFrame(clientMAC, wanMAC, ip4(192, 0, 2, 50), 40000, vip, 53, "q", true))
	w.poll()
	if _, ok := w.neigh.lookup(ip4(192, 0, 2, 50), w.now); ok {
		t.Fatal("learnt the MAC of an off-link client")
	}
}

// TestRouteCachesLearntClients: a client's MAC the worker learnt (not in
// the snapshot) is cached for its replies' route like the snapshot's, is
// replaced when the client comes from another MAC, and is not used once
// the learnt entry has aged out.
func TestRouteCachesLearntClients(t *testing.T) {
	r := newRig(t, map[uint32]hdr.MAC{rs1: rs1MAC, rs2: rs2MAC})
	w := r.w
	w.now = 1e9
	var server uint32 // the last query's real server
	var serverPort uint16
	exchange := func(mac hdr.MAC, sport uint16) []byte {
		t.Helper()
		r.inject(0, udpFrame(mac, wanMAC, clientIP, sport, vip, 53, "q", true))
		w.poll()
		fwd := r.sent(1)
		if len(fwd) != 1 {
			t.Fatalf("query from port %d not forwarded (stats %v)", sport, w.cnt.own)
		}
		ip, l4 := checkUDP(t, fwd[0])
		server, serverPort = ip.Dst(), l4.DstPort()
		r.inject(1, udpFrame(rs1MAC, lanMAC, server, serverPort, clientIP, sport, "a", true))
		w.poll()
		if out := r.sent(0); len(out) == 1 {
			return out[0]
		}
		return nil
	}
	for range 2 { // the second reply's route from the cache
		if out := exchange(clientMAC, 40000); out == nil || hdr.Ethernet(out).Dst() != clientMAC {
			t.Fatal("reply not sent to the learnt MAC")
		}
	}
	if e := w.hops.ent[clientIP%hopCacheSize]; e.hop != clientIP || e.until == 0 {
		t.Fatalf("learnt MAC not cached with its end: %+v", e)
	}
	moved := hdr.MAC{0x02, 0, 0, 0, 0x77, 0x02}
	if out := exchange(moved, 40001); out == nil || hdr.Ethernet(out).Dst() != moved {
		t.Fatal("reply sent to the client's old MAC after it moved")
	}
	w.now += neighCacheLife
	r.inject(1, udpFrame(rs1MAC, lanMAC, server, serverPort, clientIP, 40001, "late", true))
	misses := w.cnt.own[DropNoNeighbour]
	w.poll()
	if out := r.sent(0); len(out) != 0 || w.cnt.own[DropNoNeighbour] != misses+1 {
		t.Fatal("a learnt MAC was used after its entry aged out")
	}
}

// TestLearnClientRefresh: a new connection from a client learnt less than
// neighCacheRefresh ago leaves its entry as it is; a later one, or one
// from a new MAC, learns it again.
func TestLearnClientRefresh(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	syn := func(port uint16, mac hdr.MAC) {
		t.Helper()
		r.inject(0, tcpFrame(mac, wanMAC, clientIP, port, vip, 80, hdr.TCPFlagSYN, ""))
		w.poll()
		if len(r.sent(1)) != 1 {
			t.Fatalf("SYN from port %d not forwarded (stats %v)", port, w.cnt.own)
		}
	}
	until := func() int64 { return w.neigh[neighSlot(clientIP)].until }
	w.now = 1e9
	syn(40000, clientMAC)
	first := until()
	if mac, ok := w.neigh.lookup(clientIP, w.now); !ok || mac != clientMAC || first <= w.now {
		t.Fatalf("client not learnt: %v %v", mac, ok)
	}
	w.now += neighCacheRefresh / 2
	syn(40001, clientMAC)
	if until() != first {
		t.Fatal("entry rewritten half neighCacheRefresh after it was learnt")
	}
	other := hdr.MAC{2, 0, 0, 0, 0, 0x77}
	syn(40002, other)
	if mac, _ := w.neigh.lookup(clientIP, w.now); mac != other || until() == first {
		t.Fatalf("a new MAC was not learnt: %v", mac)
	}
	second := until()
	w.now += neighCacheRefresh
	syn(40003, other)
	if until() <= second {
		t.Fatal("entry not refreshed after neighCacheRefresh")
	}
}

// TestExpireDest: connections to a failed server whose check says
// on_failure: expire end at their next packet (IPVS's expire_nodest_conn).
func TestExpireDest(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	old := w.snap
	next := NewSnapshot(2, old.Ports, old.Services, old.Neigh, old.Timeouts)
	next.ExpireDest(0) // rs1:80
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	w.runCommands(0)
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""))
	w.poll()
	if len(r.sent(1)) != 0 || w.cnt.own[DropDestDown] != 1 || w.table.Len() != 0 {
		t.Fatalf("connection to an expired server not ended (dest_down %d, conns %d)", w.cnt.own[DropDestDown], w.table.Len())
	}
	if w.cnt.dest[0][DestInactive]+w.cnt.dest[0][DestActive] != 0 {
		t.Fatal("gauges not released")
	}
}

// TestMixedMethods: one service whose real servers use different methods
// (ipvsadm -a ... -m on one, -g on another): each connection follows its
// server's method.
func TestMixedMethods(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	old := w.snap
	dests := []sched.Dest{{ID: 9, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.NAT}, {ID: 10, Addr: rs2, Port: 80, Weight: 1, Fwd: fwd.DR}}
	rr, _ := sched.New("rr", dests, sched.Options{})
	svcs := append([]Service(nil), old.Services...)
	svcs[0] = Service{Key: svcs[0].Key, Scheduler: "rr", Dests: dests, Scheds: []sched.Scheduler{rr}}
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(2, old.Ports, svcs, old.Neigh, old.Timeouts)})
	w.runCommands(0)

	natSyn := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	drSyn := tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, "")
	r.inject(0, natSyn)
	r.inject(0, drSyn)
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("sent %d", len(out))
	}
	if _, ip, _ := checkTCP(t, out[0]); ip.Dst() != rs1 {
		t.Fatalf("the NAT server's connection was not DNATed: %x", ip.Dst())
	}
	if eth := hdr.Ethernet(out[1]); eth.Dst() != rs2MAC || !bytes.Equal(out[1][14:], hopped(drSyn)[14:]) {
		t.Fatal("the DR server's connection was not forwarded unchanged to its MAC")
	}
}

// TestProbeThroughLBD: a health probe leaves as a SYN from the port's
// address; the server's SYN-ACK is reported and answered with RST, an RST
// is reported as refused.
func TestProbeThroughLBD(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.Commands().Push(Command{Kind: CmdProbe, IP: rs1, DstPort: 8080, SrcPort: ProbePortFirst + 7})
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("no probe sent")
	}
	eth, ip, tcp := checkTCP(t, out[0])
	if eth.Dst() != rs1MAC || ip.Src() != lanAddr || ip.Dst() != rs1 || tcp.SrcPort() != ProbePortFirst+7 ||
		tcp.DstPort() != 8080 || tcp.Flags() != hdr.TCPFlagSYN {
		t.Fatalf("bad probe %x", out[0])
	}
	synack := tcpFrame(rs1MAC, lanMAC, rs1, 8080, lanAddr, ProbePortFirst+7, hdr.TCPFlagSYN|hdr.TCPFlagACK, "")
	binary.BigEndian.PutUint32(hdr.TCP(synack[34:])[8:], 4242) // ack
	tc := hdr.TCP(synack[34:])
	tc.SetChecksum(0)
	tc.SetChecksum(hdr.TransportChecksum(rs1, lanAddr, hdr.ProtoTCP, tc))
	r.inject(1, synack)
	w.poll()
	ev, ok := w.Events().Pop()
	if !ok || ev.Kind != EvProbe || ev.Result != ProbeOpen || ev.IP != rs1 || ev.DstPort != 8080 || ev.SrcPort != ProbePortFirst+7 {
		t.Fatalf("probe event %+v %v", ev, ok)
	}
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatal("no RST for the SYN-ACK")
	}
	_, ip, tcp = checkTCP(t, out[0])
	if ip.Dst() != rs1 || tcp.Flags() != hdr.TCPFlagRST || tcp.Seq() != 4242 || tcp.DstPort() != 8080 {
		t.Fatalf("bad RST %x", out[0])
	}
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 8081, lanAddr, ProbePortFirst+8, hdr.TCPFlagRST|hdr.TCPFlagACK, ""))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeRefused || ev.DstPort != 8081 {
		t.Fatalf("refused probe event %+v", ev)
	}
	if len(r.sent(1)) != 0 || w.table.Len() != 0 {
		t.Fatal("a probe answer made a connection or a packet")
	}
	// No MAC for the server: the probe fails at once.
	w.Commands().Push(Command{Kind: CmdProbe, IP: ip4(198, 51, 100, 99), DstPort: 80, SrcPort: ProbePortFirst})
	w.runCommands(0)
	var got Event
	for ev, ok := w.Events().Pop(); ok; ev, ok = w.Events().Pop() {
		if ev.Kind == EvProbe {
			got = ev
		}
	}
	if got.Result != ProbeNotSent {
		t.Fatalf("probe to an unresolved server: %+v", got)
	}
}

// TestPortReuseReschedules: a SYN on the tuple of a connection in
// TIME_WAIT is a new connection, scheduled afresh.
func TestPortReuseReschedules(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	syn := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	r.inject(0, syn)
	w.poll()
	if _, ip, _ := checkTCP(t, r.sent(1)[0]); ip.Dst() != rs1 {
		t.Fatal("first connection not to rs1")
	}
	id, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 80)
	w.countState(0, w.table.Get(id).State, false)
	w.table.Get(id).State = conn.StateTimeWait
	w.countState(0, conn.StateTimeWait, true)
	r.inject(0, syn)
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("the reused port's SYN was not forwarded")
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs2 || tcp.DstPort() != 8000 {
		t.Fatalf("reused port went to %x:%d, want rs2:8000 (rescheduled)", ip.Dst(), tcp.DstPort())
	}
	if w.cnt.own[NewConns] != 2 || w.table.Len() != 1 || w.cnt.dest[0][DestInactive] != 0 {
		t.Fatalf("new %d, table %d, rs1 inactive %d", w.cnt.own[NewConns], w.table.Len(), w.cnt.dest[0][DestInactive])
	}
}

// TestPortReuseOneWayFinWait: a DR connection ends in FIN_WAIT (the LB
// never sees the server's FIN), so a SYN on its tuple is a new connection,
// counted and scheduled afresh; a NAT connection in FIN_WAIT keeps its
// entry (the server may still be sending).
func TestPortReuseOneWayFinWait(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	for _, tc := range []struct {
		vip   uint32
		fresh bool
	}{{vipDR, true}, {vip, false}} {
		newBefore := w.cnt.own[NewConns]
		syn := tcpFrame(clientMAC, wanMAC, clientIP, 40100, tc.vip, 80, hdr.TCPFlagSYN, "")
		r.inject(0, syn)
		w.poll()
		r.sent(1)
		id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, 40100, tc.vip, 80)
		if !ok {
			t.Fatalf("%x: no entry after the SYN", tc.vip)
		}
		c := w.table.Get(id)
		w.countState(c.Dest, c.State, false)
		c.State = conn.StateFinWait
		w.countState(c.Dest, conn.StateFinWait, true)
		r.inject(0, syn)
		w.poll()
		if out := r.sent(1); len(out) != 1 {
			t.Fatalf("%x: the reused port's SYN was not forwarded", tc.vip)
		}
		want := newBefore + 1
		if tc.fresh {
			want++
		}
		if got := w.cnt.own[NewConns]; got != want {
			t.Errorf("%x: %d new connections, want %d", tc.vip, got-newBefore, want-newBefore)
		}
		if id2, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40100, tc.vip, 80); tc.fresh && w.table.Get(id2).State == conn.StateFinWait {
			t.Errorf("%x: the rescheduled connection is still in FIN_WAIT", tc.vip)
		}
	}
}

// TestReusedPortOnSharedServer: VIP:80 and VIP:81 both reach rs1:80 by
// NAT. A client's port whose VIP:80 connection to rs1 is finished opens
// a VIP:81 connection to rs1: for rs1 the same tuple, reopened. The
// finished connection gives the Reply key up; a live one keeps it and
// the new connection is dropped as conn_exists.
func TestReusedPortOnSharedServer(t *testing.T) {
	for _, tc := range []struct {
		state conn.State
		freed bool
	}{{conn.StateTimeWait, true}, {conn.StateClose, true}, {conn.StateEstablished, false}} {
		r := newRig(t, defaultNeigh())
		w := r.w
		s := w.snap
		d := sched.Dest{ID: 12, Addr: rs1, Port: 80, Weight: 1}
		rr, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		svcs := append(append([]Service(nil), s.Services...), Service{Key: ServiceKey{VIP: vip, Port: 81, Proto: hdr.ProtoTCP},
			Scheduler: "rr", Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{rr}})
		w.snap = NewSnapshot(s.Gen+1, s.Ports, svcs, defaultNeigh(), conn.DefaultTimeouts())

		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40300, vip, 80, hdr.TCPFlagSYN, "")) // rr's first: rs1
		w.poll()
		if out := r.sent(1); len(out) != 1 {
			t.Fatalf("%v: the VIP:80 SYN was not forwarded", tc.state)
		} else if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs1 || tcp.DstPort() != 80 {
			t.Fatalf("%v: the VIP:80 SYN went to %x:%d, want rs1:80", tc.state, ip.Dst(), tcp.DstPort())
		}
		old, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40300, vip, 80)
		c := w.table.Get(old)
		w.countState(c.Dest, c.State, false)
		c.State = tc.state
		w.countState(c.Dest, c.State, true)

		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40300, vip, 81, hdr.TCPFlagSYN, ""))
		w.poll()
		out := r.sent(1)
		_, _, oldKept := w.table.Lookup(hdr.ProtoTCP, clientIP, 40300, vip, 80)
		id, dir, ok := w.table.Lookup(hdr.ProtoTCP, rs1, 80, clientIP, 40300)
		if !ok || dir != conn.Reply {
			t.Fatalf("%v: rs1's replies find no connection", tc.state)
		}
		holder := w.table.Get(id).VPort
		if tc.freed {
			if len(out) != 1 || oldKept || holder != 81 || w.cnt.own[NewConns] != 2 || w.cnt.dest[0][DestInactive] != 0 {
				t.Fatalf("%v holder: %d sent, old entry kept %v, rs1's replies to VIP port %d, %d new, rs1 inactive %d",
					tc.state, len(out), oldKept, holder, w.cnt.own[NewConns], w.cnt.dest[0][DestInactive])
			}
			if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs1 || tcp.DstPort() != 80 {
				t.Fatalf("the VIP:81 SYN went to %x:%d, want rs1:80", ip.Dst(), tcp.DstPort())
			}
		} else if len(out) != 0 || !oldKept || holder != 80 || w.cnt.own[DropConnExists] != 1 {
			t.Fatalf("%v holder: %d sent, old entry kept %v, rs1's replies to VIP port %d, conn_exists drops %d",
				tc.state, len(out), oldKept, holder, w.cnt.own[DropConnExists])
		}
	}
}

// TestRouteFollowsNewNeighbours: a next hop's MAC, cached per snapshot,
// is the new one as soon as a snapshot with another neighbour table is
// in place, and a hop the new table lacks is missed (and asked for).
func TestRouteFollowsNewNeighbours(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	send := func(sport uint16) []byte {
		r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, sport, vip, 53, "query", true))
		w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			return nil
		}
		return out[0]
	}
	for range 2 { // the second from the cache
		if out := send(40000); out == nil || hdr.Ethernet(out).Dst() != rs1MAC {
			t.Fatal("not sent to the real server's MAC")
		}
	}
	moved := hdr.MAC{0x02, 0, 0, 0, 0x77, 0x01}
	w.snap = w.snap.WithNeighbours(w.snap.Gen+1, map[uint32]hdr.MAC{clientIP: clientMAC, rs1: moved, rs2: rs2MAC})
	if out := send(40000); out == nil || hdr.Ethernet(out).Dst() != moved {
		t.Fatal("the cached MAC outlived its snapshot")
	}
	w.snap = w.snap.WithNeighbours(w.snap.Gen+1, map[uint32]hdr.MAC{clientIP: clientMAC, rs2: rs2MAC})
	w.neigh = neighCache{} // nothing learnt either
	if out := send(40000); out != nil || w.cnt.own[DropNoNeighbour] == 0 {
		t.Fatal("sent to a hop the neighbour table no longer has")
	}
}
