package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/hdr"
)

// Tests of what lbd must not believe from the wire.

// injectFlags puts a frame on a port's RX ring with the RX offload flags
// a NIC would set.
func (r *rig) injectFlags(port int, frame []byte, fl uint64) {
	r.t.Helper()
	m, err := mbuf.Alloc(r.pool)
	if err != nil {
		r.t.Fatal(err)
	}
	b, _ := m.Append(len(frame))
	copy(b, frame)
	m.SetOlFlags(fl)
	r.objs[0] = m.Pointer()
	if r.rx[port].SPEnqueueBurst(r.objs[:1]) != 1 {
		r.t.Fatal("RX ring full")
	}
}

// withTTL sets a frame's IPv4 TTL (header checksum recomputed).
func withTTL(f []byte, ttl uint8) []byte {
	ip := hdr.IPv4(f[14:])
	ip.SetTTL(ttl)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	return f
}

// TestForeignUnicastIsDropped: with promiscuous: true the port hears
// frames for other stations; they are dropped and counted, never forwarded.
func TestForeignUnicastIsDropped(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	other := hdr.MAC{0x02, 0, 0, 0, 0, 0x99}
	r.inject(0, tcpFrame(clientMAC, other, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	r.inject(0, echoFrame(wanAddr)) // to our MAC: answered
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[DropNotOurMAC] != 1 || w.table.Len() != 0 {
		t.Fatalf("foreign unicast: sent %d, not_our_mac %d, conns %d", n, w.cnt.own[DropNotOurMAC], w.table.Len())
	}
	if len(r.sent(0)) != 1 {
		t.Fatal("a frame to our MAC was not handled")
	}
	// Multicast and broadcast destinations are for everyone.
	for _, dst := range []hdr.MAC{hdr.BroadcastMAC, {0x01, 0, 0x5e, 0, 0, 1}} {
		r.inject(0, tcpFrame(clientMAC, dst, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, ""))
	}
	w.poll()
	if n := len(r.sent(1)); n != 2 || w.cnt.own[DropNotOurMAC] != 1 {
		t.Fatalf("group destinations: sent %d, not_our_mac %d", n, w.cnt.own[DropNotOurMAC])
	}
}

func arpFrame(op uint16, smac hdr.MAC, sip uint32, tip uint32) []byte {
	b := make([]byte, arpFrameLen)
	eth := hdr.Ethernet(b)
	eth.SetEtherType(hdr.EtherTypeARP)
	eth.SetSrc(smac)
	eth.SetDst(hdr.BroadcastMAC)
	a := hdr.ARP(eth.Payload())
	a.SetRequest(smac, sip, tip)
	if op == hdr.ARPReply {
		a.SetReply(smac, sip, hdr.MAC{}, tip)
	}
	return b
}

// TestARPNeverLearnsOurAddresses: a host that claims a VIP or a port's
// address in ARP (a gratuitous ARP, a reply) is not learnt: it is dropped,
// counted, and reported for the log.
func TestARPNeverLearnsOurAddresses(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	evil := hdr.MAC{0x02, 0, 0, 0, 0, 0x66}
	r.inject(0, arpFrame(hdr.ARPRequest, evil, vip, vip))           // gratuitous ARP for the VIP
	r.inject(0, arpFrame(hdr.ARPReply, evil, wanAddr, clientIP))    // a reply claiming our address
	r.inject(1, arpFrame(hdr.ARPRequest, evil, vipDR, lanAddr))     // a request from a VIP
	r.inject(0, arpFrame(hdr.ARPRequest, clientMAC, clientIP, vip)) // a genuine request
	w.poll()
	var learnt, conflicts []Event
	for ev, ok := w.Events().Pop(); ok; ev, ok = w.Events().Pop() {
		switch ev.Kind {
		case EvNeighbour:
			learnt = append(learnt, ev)
		case EvAddressConflict:
			conflicts = append(conflicts, ev)
		}
	}
	if len(learnt) != 1 || learnt[0].IP != clientIP {
		t.Fatalf("learnt %+v, want the client only", learnt)
	}
	if len(conflicts) != 3 || conflicts[0].IP != vip || conflicts[0].MAC != evil || conflicts[1].IP != wanAddr || conflicts[2].Port != 1 {
		t.Fatalf("conflicts %+v", conflicts)
	}
	if w.cnt.own[DropARPConflict] != 3 || w.cnt.own[ARPReplies] != 1 {
		t.Fatalf("arp_conflict %d, replies %d", w.cnt.own[DropARPConflict], w.cnt.own[ARPReplies])
	}
	if out := r.sent(0); len(out) != 1 || hdr.Ethernet(out[0]).Dst() != clientMAC {
		t.Fatalf("answered %d ARP packets, want the client's only", len(out))
	}
}

// TestTTLDecremented: every forwarded packet leaves with its TTL one
// less (for VS/TUN the inner header's, as IPVS), checksums valid.
func TestTTLDecremented(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 80, hdr.TCPFlagSYN, ""))
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("sent %d", len(out))
	}
	for i, f := range out[:2] {
		if _, ip, _ := checkTCP(t, f); ip.TTL() != 63 {
			t.Errorf("packet %d left with TTL %d", i, ip.TTL())
		}
	}
	outer := hdr.IPv4(out[2][14:])
	inner := hdr.IPv4(outer.Payload())
	if !inner.IsChecksumValid() || inner.TTL() != 63 || !outer.IsChecksumValid() {
		t.Errorf("tunnelled inner TTL %d (checksums %v %v)", inner.TTL(), inner.IsChecksumValid(), outer.IsChecksumValid())
	}
	// The reply of the NAT connection too.
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	if out := r.sent(0); len(out) != 1 {
		t.Fatal("reply not forwarded")
	} else if _, ip, _ := checkTCP(t, out[0]); ip.TTL() != 63 {
		t.Errorf("reply left with TTL %d", ip.TTL())
	}
}

// TestTTLExpiry: a packet that arrives with TTL 1 is answered with ICMP
// time exceeded from the receiving port's address, quoting it, as many as
// the per-worker limit allows; the others are dropped and counted.
func TestTTLExpiry(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	syn := withTTL(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""), 1)
	r.inject(0, syn)
	w.poll()
	if n := len(r.sent(1)); n != 0 {
		t.Fatal("a packet with TTL 1 was forwarded")
	}
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("no time exceeded (stats %v)", w.cnt.own)
	}
	eth := hdr.Ethernet(out[0])
	ip := hdr.IPv4(eth.Payload())
	icmp := hdr.ICMP(ip.Payload())
	if eth.Dst() != clientMAC || !ip.IsChecksumValid() || ip.Src() != wanAddr || ip.Dst() != clientIP || ip.Protocol() != hdr.ProtoICMP ||
		icmp.Type() != hdr.ICMPTimeExceeded || icmp.Code() != 0 || icmp.Checksum() != recomputeICMP(icmp) ||
		!bytes.Equal(icmp.Payload(), syn[14:14+28]) {
		t.Fatalf("bad time exceeded %x", out[0])
	}
	if w.cnt.own[ICMPTimeExceeded] != 1 {
		t.Fatalf("icmp_time_exceeded %d", w.cnt.own[ICMPTimeExceeded])
	}
	// A flood: the clock stands still, so only the bucket's burst is answered.
	answered := 1
	for i := 0; i < 8; i++ {
		for j := 0; j < 32; j++ {
			r.inject(0, withTTL(tcpFrame(clientMAC, wanMAC, clientIP, uint16(41000+32*i+j), vip, 80, hdr.TCPFlagSYN, ""), 1))
		}
		w.poll()
		answered += len(r.sent(0))
	}
	if answered != timeExceededBurst || w.cnt.own[DropTTLExpired] != uint64(1+8*32-answered) {
		t.Fatalf("answered %d (burst %d), ttl_expired %d", answered, timeExceededBurst, w.cnt.own[DropTTLExpired])
	}
	w.now += int64(time.Second)
	r.inject(0, syn)
	w.poll()
	if len(r.sent(0)) != 1 {
		t.Fatal("no time exceeded once the bucket refilled")
	}
	// An ICMP error is never answered with one.
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	toRS := r.sent(1)[0]
	r.inject(1, withTTL(icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, toRS), 1))
	before := w.cnt.own[DropTTLExpired]
	w.poll()
	if len(r.sent(0))+len(r.sent(1)) != 0 || w.cnt.own[DropTTLExpired] != before+1 {
		t.Fatal("an ICMP error with TTL 1 was forwarded or answered")
	}
}

// TestBadChecksumStaysBad: towards a port that offloads checksums, a
// segment whose TCP checksum was wrong on arrival must not leave with a
// fresh valid one: offload is asked only when the RX flags vouch for it.
func TestBadChecksumStaysBad(t *testing.T) {
	r := newRigWith(t, defaultNeigh(), true)
	w := r.w
	bad := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "abc")
	binary.BigEndian.PutUint16(bad[14+20+16:], binary.BigEndian.Uint16(bad[14+20+16:])^0x1234)
	good := tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, "abc")
	for _, c := range []struct {
		name    string
		frame   []byte
		flags   uint64
		offload bool
	}{
		{"bad, flags unknown", bad, 0, false},
		{"bad, flagged bad", bad, mbuf.RxIPCksumGood | mbuf.RxL4CksumBad, false},
		{"good, flagged good", good, mbuf.RxIPCksumGood | mbuf.RxL4CksumGood, true},
		{"good, flags unknown", good, 0, false},
	} {
		r.injectFlags(0, c.frame, c.flags)
		w.poll()
		if n := r.tx[1].SCDequeueBurst(r.objs); n != 1 {
			t.Fatalf("%s: not forwarded", c.name)
		}
		m := mbuf.FromPointer(r.objs[0])
		f := append([]byte(nil), m.Data()...)
		fl := m.OlFlags()
		m.Free()
		if got := fl&mbuf.TxTCPCksum != 0; got != c.offload {
			t.Errorf("%s: TCP checksum offload %v, want %v", c.name, got, c.offload)
			continue
		}
		if c.offload {
			continue
		}
		ip := hdr.IPv4(f[14:])
		tcp := hdr.TCP(ip.Payload())
		valid := tcp.Checksum() == hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp)
		if wantValid := bytes.Equal(c.frame, good); valid != wantValid || !ip.IsChecksumValid() {
			t.Errorf("%s: TCP checksum valid %v, want %v", c.name, valid, wantValid)
		}
	}
	if n := w.cnt.own[CsumOffloaded]; n != 1 {
		t.Errorf("tx_checksum_offloaded %d, want 1", n)
	}
}

// TestICMPErrorBadChecksumStaysBad: an ICMP error lbd translates keeps a
// checksum that was wrong on arrival wrong.
func TestICMPErrorBadChecksumStaysBad(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	e := icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, r.sent(1)[0])
	icmp := hdr.ICMP(hdr.IPv4(e[14:]).Payload())
	icmp.SetChecksum(icmp.Checksum() ^ 0x0f0f)
	r.inject(1, e)
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("error not delivered (stats %v)", w.cnt.own)
	}
	got := hdr.ICMP(hdr.IPv4(out[0][14:]).Payload())
	if got.Checksum() == recomputeICMP(got) {
		t.Fatal("a corrupt ICMP error left with a valid checksum")
	}
}

// TestProbeAnswersAreChecked: a probe carries the control plane's
// initial sequence number, the answer's ack is reported for the control
// plane to check, and an answer on a port that does not lead to the
// server (a client spoofing the server) is dropped: no event, no RST.
func TestProbeAnswersAreChecked(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	const isn = 0x8badf00d
	w.Commands().Push(Command{Kind: CmdProbe, IP: rs1, DstPort: 8080, SrcPort: ProbePortFirst + 3, Seq: isn})
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("no probe sent")
	}
	if _, _, tcp := checkTCP(t, out[0]); tcp.Seq() != isn {
		t.Fatalf("probe seq %#x, want %#x", tcp.Seq(), isn)
	}
	answer := func(flags uint8, ack uint32, srcMAC, dstMAC hdr.MAC) []byte {
		f := tcpFrame(srcMAC, dstMAC, rs1, 8080, lanAddr, ProbePortFirst+3, flags, "")
		tc := hdr.TCP(f[34:])
		tc.SetAck(ack)
		tc.SetChecksum(0)
		tc.SetChecksum(hdr.TransportChecksum(rs1, lanAddr, hdr.ProtoTCP, tc))
		return f
	}
	// From the client side: spoofed.
	r.inject(0, answer(hdr.TCPFlagSYN|hdr.TCPFlagACK, isn+1, clientMAC, wanMAC))
	r.inject(0, answer(hdr.TCPFlagRST|hdr.TCPFlagACK, isn+1, clientMAC, wanMAC))
	w.poll()
	if ev, ok := w.Events().Pop(); ok {
		t.Fatalf("a spoofed answer was reported: %+v", ev)
	}
	if len(r.sent(0))+len(r.sent(1)) != 0 || w.cnt.own[DropProbeSpoofed] != 2 {
		t.Fatalf("spoofed answers: probe_spoofed %d", w.cnt.own[DropProbeSpoofed])
	}
	// From the server's side: reported with its ack.
	r.inject(1, answer(hdr.TCPFlagSYN|hdr.TCPFlagACK, isn+1, rs1MAC, lanMAC))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeOpen || ev.Ack != isn+1 {
		t.Fatalf("answer event %+v", ev)
	}
	r.sent(1) // the RST
}

// TestWireChecksDoNotAllocate: time exceeded answers and their rate
// limit, and foreign unicast drops, allocate nothing.
func TestWireChecksDoNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	expired := withTTL(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""), 1)
	foreign := tcpFrame(clientMAC, hdr.MAC{2, 0, 0, 0, 0, 0x99}, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	var frames []*mbuf.Mbuf
	for i := 0; i < 240; i++ {
		f := expired
		if i%2 == 1 {
			f = foreign
		}
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Append(len(f))
		copy(b, f)
		frames = append(frames, m)
	}
	objs, out := ring.NewObjs(2), ring.NewObjs(8)
	defer ring.FreeObjs(objs)
	defer ring.FreeObjs(out)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		objs[0], objs[1] = frames[i].Pointer(), frames[i+1].Pointer()
		i += 2
		r.rx[0].SPEnqueueBurst(objs)
		w.now += int64(time.Millisecond) // some answered, some over the limit
		w.poll()
		n := r.tx[0].SCDequeueBurst(out)
		for _, p := range out[:n] {
			mbuf.FromPointer(p).Free()
		}
	})
	if allocs != 0 {
		t.Fatalf("the wire checks allocate %.1f times per burst", allocs)
	}
	if w.cnt.own[ICMPTimeExceeded] == 0 || w.cnt.own[DropNotOurMAC] < 100 {
		t.Fatalf("time exceeded %d, not_our_mac %d", w.cnt.own[ICMPTimeExceeded], w.cnt.own[DropNotOurMAC])
	}
	for _, m := range frames[i:] {
		m.Free()
	}
}
