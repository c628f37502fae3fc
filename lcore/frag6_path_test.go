package lcore

import (
	"encoding/binary"
	"sort"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// reassemble6 checks every IPv6 fragment (hop limit 63, one fragment
// header, one identification) and joins the datagram; it fails unless
// the fragments cover it exactly.
func reassemble6(t *testing.T, frames [][]byte) (src, dst hdr.Addr6, payload []byte) {
	t.Helper()
	type piece struct {
		off  int
		data []byte
		last bool
	}
	var ps []piece
	var id uint32
	for i, f := range frames {
		ip := hdr.IPv6(hdr.Ethernet(f).Payload())
		x, v := ip.WalkExt()
		if !ip.IsValid(len(ip)) || v != hdr.ExtOK || !x.Fragment || x.FragHdrOff != 40 {
			t.Fatalf("fragment %d: not an IPv6 fragment: %x", i, f[:62])
		}
		if i > 0 && x.FragID != id {
			t.Fatalf("fragment %d: identification %#x, want %#x", i, x.FragID, id)
		}
		id, src, dst = x.FragID, ip.Src(), ip.Dst()
		if ip.HopLimit() != 63 {
			t.Fatalf("fragment hop limit %d, want 63", ip.HopLimit())
		}
		ps = append(ps, piece{int(x.FragOffset), ip[48 : 40+int(ip.PayloadLength())], !x.MoreFrags})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].off < ps[j].off })
	for i, p := range ps {
		if p.off != len(payload) || p.last != (i == len(ps)-1) {
			t.Fatalf("fragments do not make a datagram: piece at %d after %d bytes", p.off, len(payload))
		}
		payload = append(payload, p.data...)
	}
	return src, dst, payload
}

// checkReassembledUDP6 checks the joined datagram's endpoints, length
// and UDP checksum by full recomputation.
func checkReassembledUDP6(t *testing.T, frames [][]byte, src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, n int) {
	t.Helper()
	s, d, l4 := reassemble6(t, frames)
	u := hdr.UDP(l4)
	if s != src || d != dst || u.SrcPort() != sport || u.DstPort() != dport || len(l4) != 8+n {
		t.Fatalf("datagram %v:%d -> %v:%d (%d bytes), want %v:%d -> %v:%d (%d)", s, u.SrcPort(), d, u.DstPort(), len(l4), src, sport, dst, dport, 8+n)
	}
	if want := hdr.TransportChecksum6(s, d, hdr.ProtoUDP, l4); u.Checksum() != want {
		t.Fatalf("UDP checksum %#04x, full recomputation gives %#04x", u.Checksum(), want)
	}
}

// TestFragments6NATBothWays: a 4000-byte datagram fragmented for a 1500
// MTU reaches the real server through NAT66 whatever the fragments'
// order, each keeping its fragment header, and the server's fragmented
// answer comes back from the VIP; both reassemble with a right checksum.
func TestFragments6NATBothWays(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 4000), 1500, 0xabcdef01)
	if len(frags) != 3 {
		t.Fatalf("%d fragments", len(frags))
	}
	r.inject(0, frags[2])
	r.inject(0, frags[1])
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[FragmentsHeld] != 2 {
		t.Fatalf("sent %d before the first fragment; held %d", n, w.cnt.own[FragmentsHeld])
	}
	r.inject(0, frags[0])
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("lan sent %d fragments, want 3 (drops %v)", len(out), dropsOf(w))
	}
	checkReassembledUDP6(t, out, clientAddr6, 41000, rs61, 5353, 4000)
	for i, f := range out {
		if len(f) != len(frags[[]int{0, 2, 1}[i]]) {
			t.Fatalf("fragment %d changed size", i)
		}
	}
	reply := fragment6Frames(udp6Frame(rs1MAC, lanMAC, rs61, 5353, clientAddr6, 41000, 4000), 1500, 77)
	for _, f := range reply {
		r.inject(1, f)
	}
	w.poll()
	out = r.sent(0)
	if len(out) != 3 {
		t.Fatalf("wan sent %d fragments, want 3 (drops %v)", len(out), dropsOf(w))
	}
	checkReassembledUDP6(t, out, vip6, 53, clientAddr6, 41000, 4000)
	if st := w.cnt.own; st[Fragments] != 6 || st[NewConns] != 1 {
		t.Fatalf("fragments %d new conns %d", st[Fragments], st[NewConns])
	}
	for _, e := range w.frags.entries {
		if e.used {
			t.Fatalf("entry %+v left after a whole datagram", e.key)
		}
	}
}

// udpService6 adds a UDP service on vip:53 to the rig's snapshot.
func (r *rig) addService6(vip hdr.Addr6, d sched.Dest) {
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	old := r.w.snap
	svcs := append(append([]Service(nil), old.Services...), Service{
		Key: ServiceKey{VIP6: vip, Port: 53, Proto: hdr.ProtoUDP}, Scheduler: "rr",
		Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, PersistMask: ^uint32(0),
	})
	snap := NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, conn.DefaultTimeouts())
	snap.Neigh6 = old.Neigh6
	r.w.snap = snap
	r.w.learnVIPs(snap)
}

// TestFragments6DRAndTUN: DR6 passes every fragment on with only the MACs
// and hop limit changed; TUN6 puts each in its own outer header.
func TestFragments6DRAndTUN(t *testing.T) {
	r := rigSvc6(t)
	r.addService6(vip6DR, sched.Dest{ID: 20, Addr6: rs61, Port: 53, Weight: 1, Fwd: fwd.DR})
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41001, vip6DR, 53, 4000), 1500, 9)
	for _, f := range frags {
		r.inject(0, f)
	}
	r.w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("DR: lan sent %d fragments, want 3 (drops %v)", len(out), dropsOf(r.w))
	}
	for _, f := range out {
		if hdr.Ethernet(f).Dst() != rs1MAC {
			t.Fatal("a fragment did not go to rs61's MAC")
		}
	}
	checkReassembledUDP6(t, out, clientAddr6, 41001, vip6DR, 53, 4000)

	r.addService6(vip6TUN, sched.Dest{ID: 21, Addr6: rs62, Port: 53, Weight: 1, Fwd: fwd.TUN})
	frags = fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41002, vip6TUN, 53, 2400), 1400, 10)
	for _, f := range frags {
		r.inject(0, f)
	}
	r.w.poll()
	out = r.sent(1)
	if len(out) != 2 {
		t.Fatalf("TUN: lan sent %d, want 2 (drops %v)", len(out), dropsOf(r.w))
	}
	var inner [][]byte
	for _, f := range out {
		outer := hdr.IPv6(hdr.Ethernet(f).Payload())
		if outer.NextHeader() != hdr.ProtoIPv6 || outer.Dst() != rs62 {
			t.Fatalf("not tunnelled to rs62: %x", f[:54])
		}
		inner = append(inner, append(append([]byte(nil), f[:14]...), outer.Payload()...))
	}
	checkReassembledUDP6(t, inner, clientAddr6, 41002, vip6TUN, 53, 2400)
}

// TestFragment6Drops: malformed IPv6 fragments are counted under IPv4's
// reasons and freed.
func TestFragment6Drops(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41003, vip6, 53, 4000), 1500, 11)
	misaligned := append([]byte(nil), frags[1]...)
	binary.BigEndian.PutUint16(misaligned[14+4:], uint16(8+1001))
	misaligned = misaligned[:54+8+1001]
	oversize := append([]byte(nil), frags[2]...)
	binary.BigEndian.PutUint16(oversize[54+2:], 65000)
	noService := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41003, vip6, 54, 4000), 1500, 12)[0]
	for _, tc := range []struct {
		name  string
		frame []byte
		why   Stat
	}{
		{"misaligned", misaligned, DropBadFragment},
		{"oversize", oversize, DropFragOversize},
		{"first fragment to no service", noService, DropNoService},
	} {
		before := w.cnt.own[tc.why]
		r.inject(0, tc.frame)
		w.poll()
		if got := w.cnt.own[tc.why] - before; got != 1 {
			t.Errorf("%s: %s counted %d times", tc.name, tc.why.Name(), got)
		}
		if n := len(r.sent(0)) + len(r.sent(1)); n != 0 {
			t.Errorf("%s: sent %d", tc.name, n)
		}
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs held after the drops", n)
	}
}

// TestFragments6ReachTheOwner: on two workers, with each fragment of a
// datagram on a different queue, every datagram reaches the owner of its
// client's IPv6 endpoint whole, both ways.
func TestFragments6ReachTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	ports := append([]PortInfo(nil), r.w[0].snap.Ports...)
	m64 := Mask6(64)
	ports[0].Addr6, ports[0].Mask6, ports[0].Net6 = wanAddr6, m64, masked6(&wanAddr6, &m64)
	ports[1].Addr6, ports[1].Mask6, ports[1].Net6 = lanAddr6, m64, masked6(&lanAddr6, &m64)
	svc := service2(ServiceKey{VIP6: vip6, Port: 53, Proto: hdr.ProtoUDP},
		sched.Dest{ID: 0, Addr6: rs61, Port: 5353, Weight: 1}, sched.Dest{ID: 1, Addr6: rs62, Port: 5353, Weight: 1})
	svc.PersistMask = ^uint32(0)
	old := r.w[0].snap
	next := NewSnapshot(old.Gen+1, ports, []Service{svc}, old.Neigh, old.Timeouts)
	next.Neigh6 = map[hdr.Addr6]hdr.MAC{rs61: rs1MAC, rs62: rs2MAC, clientAddr6: clientMAC}
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
		w.runCommands(0)
	}
	// Twelve client ports owned by each worker.
	var ports6 []uint16
	owners := [2]int{}
	for p := uint16(42000); len(ports6) < 24 && p < 50000; p++ {
		if o := Owner6(&clientAddr6, p, 2); owners[o] < 12 {
			owners[o]++
			ports6 = append(ports6, p)
		}
	}
	for i, port := range ports6 {
		for j, f := range fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, port, vip6, 53, 4000), 1500, uint32(300+i)) {
			r.inject(0, (i+j)%2, f)
		}
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 3 {
			t.Fatalf("datagram %d: lan sent %d fragments, want 3", i, len(out))
		}
		_, rs, _ := reassemble6(t, out)
		checkReassembledUDP6(t, out, clientAddr6, port, rs, 5353, 4000)
		for j, f := range fragment6Frames(udp6Frame(rs1MAC, lanMAC, rs, 5353, clientAddr6, port, 4000), 1500, uint32(900+i)) {
			r.inject(1, (i+j+1)%2, f)
		}
		r.pollBoth()
		back := r.sentAll(0)
		if len(back) != 3 {
			t.Fatalf("datagram %d: wan sent %d reply fragments, want 3", i, len(back))
		}
		checkReassembledUDP6(t, back, vip6, 53, clientAddr6, port, 4000)
	}
	if owners[0] == 0 || owners[1] == 0 {
		t.Fatalf("every client port hashed to one worker: %v", owners)
	}
	checkFragmentsForwarded(t, r, 24, 24*6)
}

// TestFragment6PathDoesNotAllocate: held, released and forwarded IPv6
// fragments allocate nothing, through NAT66 (port 53) or NAT64 (5300).
func TestFragment6PathDoesNotAllocate(t *testing.T) {
	for _, port := range []uint16{53, 5300} {
		r := rigSvc6(t)
		allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
			frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 43000, vip6, port, 2000), 1500, uint32(i/2))
			return frags[1-i%2] // the later fragment first: it waits for the first
		})
		if allocs != 0 {
			t.Fatalf("port %d: the IPv6 fragment path allocates %.1f times per burst", port, allocs)
		}
		if r.w.cnt.own[Fragments] < 100 || r.w.cnt.own[FragmentsHeld] < 50 {
			t.Fatalf("port %d: fragments %d held %d (drops %v)", port, r.w.cnt.own[Fragments], r.w.cnt.own[FragmentsHeld], dropsOf(r.w))
		}
	}
}

// TestNAT64Fragments: NAT64 translates fragments one by one (RFC 7915).
// An IPv6 client's datagram in fragments, the last one first, reaches the
// IPv4 server as IPv4 fragments (the identification's low 16 bits, offset
// and MF copied, DF clear) from the local address, reassembling with a
// right checksum; the server's answer in IPv4 fragments cut to fit once
// translated returns as IPv6 fragments (the ID zero-extended) from the
// VIP. Fragments cut for 1500 bytes do not fit the client's port once
// grown by 28 bytes: the first one brings the server a "fragmentation
// needed" for 1472, the others are dropped (too_big) or fit. A UDP answer
// in fragments without a checksum is dropped whole. An ICMPv6 error about
// a NAT64 reply reaches the server as ICMPv4.
func TestNAT64Fragments(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 5001, vip6, 5300, 4000), 1500, 0xabcd1234)
	out := r.passAll(t, 0, 1, [][]byte{frags[2], frags[0], frags[1]})
	first := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	lport := hdr.UDP(first.Payload()).SrcPort()
	for i, f := range out {
		ip := hdr.IPv4(hdr.Ethernet(f).Payload())
		if hdr.Ethernet(f).EtherType() != hdr.EtherTypeIPv4 || ip.ID() != 0x1234 || ip.DF() || ip.Protocol() != hdr.ProtoUDP {
			t.Fatalf("fragment %d: ethertype %#x ID %#x DF %v proto %d", i, hdr.Ethernet(f).EtherType(), ip.ID(), ip.DF(), ip.Protocol())
		}
	}
	checkFragmentAddrs(t, out, lip64, rs1)
	checkReassembledUDP(t, out, lip64, lport, rs1, 53, 4000)
	if first.FragmentOffset() != 0 {
		t.Fatal("the first fragment did not leave first")
	}

	// A fragment IPv6 takes (its payload within 65535 bytes) that would
	// put the IPv4 datagram past 65535 bytes.
	frags = fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 5001, vip6, 5300, 3000), 1500, 0xabcd1235)
	last := frags[len(frags)-1][:14+40+8+16]
	hdr.IPv6(last[14:]).SetPayloadLength(8 + 16)
	binary.BigEndian.PutUint16(last[14+40+2:], 65512)
	r.passAll(t, 0, 1, frags[:1])
	r.inject(0, last)
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[DropFragOversize] != 1 {
		t.Fatalf("sent %d past 65535 bytes of IPv4; fragment_oversize %d", n, w.cnt.own[DropFragOversize])
	}

	answer := bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 4000, 0x77)
	out = r.passAll(t, 1, 0, fragmentFrame(answer, 1472))
	checkReassembledUDP6(t, out, vip6, 5300, clientAddr6, 5001, 4000)
	if _, x := walk6(t, out[0]); x.FragID != 0x77 {
		t.Fatalf("IPv6 identification %#x, want 0x77", x.FragID)
	}

	// Cut for 1500: 1480 bytes of data become 1528 bytes of IPv6.
	for _, f := range fragmentFrame(bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 4000, 0x78), 1500) {
		r.inject(1, f)
	}
	w.poll()
	icmp := one(t, r, 1)
	ip := hdr.IPv4(hdr.Ethernet(icmp).Payload())
	msg := hdr.ICMP(ip.Payload())
	if ip.Dst() != rs1 || msg.Type() != hdr.ICMPDestUnreachable || msg.Code() != hdr.ICMPCodeFragNeeded || msg.MTU() != 1472 {
		t.Fatalf("to %x: ICMP %d/%d MTU %d, want fragmentation needed for 1472", ip.Dst(), msg.Type(), msg.Code(), msg.MTU())
	}
	if n := len(r.sent(0)); n != 1 || w.cnt.own[DropTooBig] != 1 || w.cnt.own[ICMPFragNeeded] != 1 {
		t.Fatalf("sent %d of the too big answer, too_big %d, frag needed %d", n, w.cnt.own[DropTooBig], w.cnt.own[ICMPFragNeeded])
	}

	// Unfragmented and too big: the MTU that fits, less a fragment
	// header unless DF says the server will not fragment.
	for _, df := range []bool{false, true} {
		big := bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 1472, 0x7a)
		if df {
			big = withDF(big)
		}
		r.inject(1, big)
		w.poll()
		want := map[bool]uint16{false: 1472, true: 1480}[df]
		if msg := hdr.ICMP(hdr.IPv4(hdr.Ethernet(one(t, r, 1)).Payload()).Payload()); msg.Code() != hdr.ICMPCodeFragNeeded || msg.MTU() != want {
			t.Fatalf("DF %v: ICMP code %d MTU %d, want fragmentation needed for %d", df, msg.Code(), msg.MTU(), want)
		}
	}

	// UDP without a checksum: IPv6 needs one, over the whole datagram.
	noSum := bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 4000, 0x79)
	noSum[14+20+6], noSum[14+20+7] = 0, 0
	noSumFrags := fragmentFrame(noSum, 1472)
	for _, f := range [][]byte{noSumFrags[1], noSumFrags[0], noSumFrags[2]} {
		r.inject(1, f)
	}
	w.poll()
	if n := len(r.sent(0)); n != 0 || w.cnt.own[DropFragNoChecksum] != 3 {
		t.Fatalf("sent %d fragments of a datagram without a checksum; fragment_no_checksum %d", n, w.cnt.own[DropFragNoChecksum])
	}

	r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0,
		udp6Frame(wanMAC, clientMAC, vip6, 5300, clientAddr6, 5001, 10), 0)))
	w.poll()
	// The connection's ICMPv6 error reaches its server as ICMPv4
	// (nat64icmp.go).
	if out := r.sent(1); len(out) != 1 || w.cnt.own[ICMPErrors] != 1 {
		t.Fatalf("the ICMPv6 error: sent %d, delivered %d (drops %v)", len(out), w.cnt.own[ICMPErrors], dropsOf(w))
	} else if _, ip, msg := checkICMPv4(t, out[0]); ip.Dst() != rs1 || msg.Type() != hdr.ICMPDestUnreachable || msg.Code() != hdr.ICMPCodePortUnreachable {
		t.Fatalf("the ICMPv6 error became %v type %d code %d", ip.Dst(), msg.Type(), msg.Code())
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs held", n)
	}
}

// TestInvalidFragmentsDropped: a fragment found invalid after its
// fragment header was read (a first IPv6 fragment whose UDP checksum is
// 0, a fragment to another station's MAC) is dropped under its reason
// and never enters the fragment table.
func TestInvalidFragmentsDropped(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	noSum := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41004, vip6, 53, 3000), 1500, 31)[0]
	noSum[62+6], noSum[62+7] = 0, 0
	otherMAC := fragment6Frames(udp6Frame(clientMAC, rs2MAC, clientAddr6, 41005, vip6, 53, 3000), 1500, 32)[1]
	other4 := fragmentFrame(bigUDP(clientMAC, rs2MAC, clientIP, 41006, vip, 53, 3000, 33), 1500)[1]
	for _, tc := range []struct {
		name  string
		frame []byte
		why   Stat
	}{
		{"IPv6 first fragment without a UDP checksum", noSum, DropBadL4},
		{"IPv6 fragment to another MAC", otherMAC, DropNotOurMAC},
		{"IPv4 fragment to another MAC", other4, DropNotOurMAC},
	} {
		before := w.cnt.own[tc.why]
		r.inject(0, tc.frame)
		w.poll()
		if got := w.cnt.own[tc.why] - before; got != 1 || w.cnt.own[FragmentsHeld] != 0 {
			t.Errorf("%s: %s counted %d times, held %d", tc.name, tc.why.Name(), got, w.cnt.own[FragmentsHeld])
		}
	}
	for _, e := range w.frags.entries {
		if e.used {
			t.Fatalf("an invalid fragment made entry %+v", e.key)
		}
	}
	if n := len(r.sent(0)) + len(r.sent(1)); n != 0 || r.pool.InUse() != 0 {
		t.Fatalf("sent %d, %d mbufs in use", n, r.pool.InUse())
	}
}
