package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// ipFrame builds Ethernet/IPv4 around an L4 payload with valid checksums;
// l4 gets its checksum from fill (nil: leave as is).
func ipFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, proto uint8, df bool, l4 []byte) []byte {
	b := make([]byte, 14+20+len(l4))
	eth := hdr.Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(hdr.EtherTypeIPv4)
	ip := hdr.IPv4(b[14:])
	ip.SetVersionIHL(20)
	ip.SetTotalLength(uint16(20 + len(l4)))
	ip.SetTTL(64)
	ip.SetProtocol(proto)
	if df {
		ip.SetFlagsFragmentOffset(hdr.IPv4FlagDontFragment, 0)
	}
	ip.SetSrc(src)
	ip.SetDst(dst)
	ip.SetChecksum(ip.CalculateChecksum())
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
	if eth.Src() != lanMAC || eth.Dst() != rs1MAC || !bytes.Equal(out[0][14:], syn[14:]) {
		t.Fatalf("DR must change only the MACs: %x", out[0])
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
	if !bytes.Equal(outer.Payload(), syn[14:]) {
		t.Fatal("the inner packet was changed")
	}
	if w.cnt.own[Encapsulated] != 1 {
		t.Fatal("encapsulation not counted")
	}
}

// TestTunnelFragNeeded: a DF packet too big for the tunnel is answered with
// ICMP "fragmentation needed" carrying the MTU minus the outer header.
func TestTunnelFragNeeded(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	big := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1500-40)))
	ip := hdr.IPv4(big[14:])
	ip.SetFlagsFragmentOffset(hdr.IPv4FlagDontFragment, 0)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	r.inject(0, big)
	w.poll()
	if n := len(r.sent(1)); n != 0 {
		t.Fatalf("a too-big packet was tunnelled (%d)", n)
	}
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("no ICMP back to the client (stats %v)", w.cnt.own)
	}
	eth := hdr.Ethernet(out[0])
	rip := hdr.IPv4(eth.Payload())
	if eth.Dst() != clientMAC || eth.Src() != wanMAC || !rip.IsChecksumValid() || rip.Protocol() != hdr.ProtoICMP ||
		rip.Src() != wanAddr || rip.Dst() != clientIP {
		t.Fatalf("bad ICMP packet %x", out[0])
	}
	icmp := hdr.ICMP(rip.Payload())
	if icmp.Type() != hdr.ICMPDestUnreachable || icmp.Code() != hdr.ICMPCodeFragNeeded || icmp.MTU() != 1480 ||
		icmp.Checksum() != recomputeICMP(icmp) {
		t.Fatalf("bad ICMP %x", icmp)
	}
	if !bytes.Equal(icmp.Payload(), big[14:14+28]) {
		t.Fatalf("quoted %x, want the original header and 8 bytes", icmp.Payload())
	}
}

func recomputeICMP(icmp hdr.ICMP) uint16 {
	c := append(hdr.ICMP(nil), icmp...)
	c.SetChecksum(0)
	return hdr.ICMPChecksum(c)
}

func echoFrame(dst uint32) []byte {
	l4 := make([]byte, 8+4)
	icmp := hdr.ICMP(l4)
	icmp.SetType(hdr.ICMPEchoRequest)
	icmp.SetID(7)
	icmp.SetSeq(1)
	copy(l4[8:], "ping")
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(clientMAC, wanMAC, clientIP, dst, hdr.ProtoICMP, false, l4)
}

func TestEchoToVIP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	for _, dst := range []uint32{vip, wanAddr} {
		r.inject(0, echoFrame(dst))
		w.poll()
		out := r.sent(0)
		if len(out) != 1 {
			t.Fatalf("no echo reply from %x", dst)
		}
		ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
		icmp := hdr.ICMP(ip.Payload())
		if !ip.IsChecksumValid() || ip.Src() != dst || ip.Dst() != clientIP || icmp.Type() != hdr.ICMPEchoReply ||
			icmp.ID() != 7 || string(icmp.Payload()) != "ping" || icmp.Checksum() != recomputeICMP(icmp) {
			t.Fatalf("bad echo reply %x", out[0])
		}
		if hdr.Ethernet(out[0]).Dst() != clientMAC {
			t.Fatal("echo reply not sent back to the sender")
		}
	}
	r.inject(0, echoFrame(ip4(203, 0, 113, 77)))
	w.poll()
	if len(r.sent(0)) != 0 || w.cnt.own[DropNoConn] != 1 {
		t.Fatal("answered an echo for someone else")
	}
}

// icmpErrorFrame quotes a packet (its IP header and first 8 bytes).
func icmpErrorFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, typ, code uint8, quotedFrame []byte) []byte {
	q := quotedFrame[14 : 14+28]
	l4 := make([]byte, 8+len(q))
	icmp := hdr.ICMP(l4)
	icmp.SetType(typ)
	icmp.SetCode(code)
	copy(l4[8:], q)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(srcMAC, dstMAC, src, dst, hdr.ProtoICMP, false, l4)
}

func TestICMPErrorsNAT(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	toRS := r.sent(1)[0]

	// rs1 says "port unreachable" about the datagram we sent it: the
	// client must hear it from the VIP, quoting client -> VIP:53.
	r.inject(1, icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, toRS))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("error from the server not delivered (stats %v)", w.cnt.own)
	}
	ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	icmp := hdr.ICMP(ip.Payload())
	q := hdr.IPv4(icmp.Payload())
	if !ip.IsChecksumValid() || ip.Src() != vip || ip.Dst() != clientIP || icmp.Checksum() != recomputeICMP(icmp) {
		t.Fatalf("outer %x", out[0])
	}
	if q.Src() != clientIP || q.Dst() != vip || binary.BigEndian.Uint16(q[22:]) != 53 || !q.IsChecksumValid() {
		t.Fatalf("quoted packet not translated: %x", q)
	}
	if got, want := binary.BigEndian.Uint16(q[26:]), udpChecksumOf(t, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true)); got != want {
		t.Fatalf("quoted UDP checksum %#x, want the original's %#x", got, want)
	}

	// The client says "unreachable" about the reply it got from the VIP:
	// rs1 must hear it quoting rs1:5353 -> client.
	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 40000, "a", true))
	w.poll()
	toClient := r.sent(0)[0]
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, clientIP, vip, hdr.ICMPDestUnreachable, 3, toClient))
	w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatal("error from the client not delivered")
	}
	ip = hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	icmp = hdr.ICMP(ip.Payload())
	q = hdr.IPv4(icmp.Payload())
	if ip.Dst() != rs1 || !ip.IsChecksumValid() || icmp.Checksum() != recomputeICMP(icmp) ||
		q.Src() != rs1 || binary.BigEndian.Uint16(q[20:]) != 5353 || !q.IsChecksumValid() {
		t.Fatalf("client's error not translated: %x", out[0])
	}
	if w.cnt.own[ICMPErrors] != 2 {
		t.Fatalf("icmp_errors = %d", w.cnt.own[ICMPErrors])
	}
	// An error about no connection is dropped.
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, clientIP, vip, hdr.ICMPDestUnreachable, 3,
		udpFrame(wanMAC, clientMAC, vip, 53, clientIP, 49999, "x", true)))
	w.poll()
	if len(r.sent(0))+len(r.sent(1)) != 0 {
		t.Fatal("an unrelated ICMP error was forwarded")
	}
}

func udpChecksumOf(t *testing.T, f []byte) uint16 {
	t.Helper()
	return hdr.UDP(hdr.IPv4(f[14:]).Payload()).Checksum()
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

// TestChecksumOffload: towards a port that offloads, the IP checksum is
// zeroed, the TCP/UDP checksum holds the pseudo-header sum, and the mbuf
// asks the NIC for the rest.
func TestChecksumOffload(t *testing.T) {
	r := newRigWith(t, defaultNeigh(), true)
	w := r.w
	for _, frame := range [][]byte{
		tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "abc"),
		udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "abc", true),
	} {
		r.inject(0, frame)
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
	dests := []sched.Dest{{ID: 9, Addr: rs1, Port: 80, Weight: 1, Fwd: FwdNAT}, {ID: 10, Addr: rs2, Port: 80, Weight: 1, Fwd: FwdDR}}
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
	if eth := hdr.Ethernet(out[1]); eth.Dst() != rs2MAC || !bytes.Equal(out[1][14:], drSyn[14:]) {
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
	if !ok || ev.Kind != EvProbe || ev.Probe != ProbeOpen || ev.IP != rs1 || ev.DstPort != 8080 || ev.SrcPort != ProbePortFirst+7 {
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
	if ev, ok := w.Events().Pop(); !ok || ev.Probe != ProbeRefused || ev.DstPort != 8081 {
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
	if got.Probe != ProbeNoRoute {
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
