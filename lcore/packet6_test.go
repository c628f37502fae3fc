package lcore

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// The IPv6 services of rigSvc6: clients on 2001:db8:1::/64 (port 0, wan),
// real servers on fd00:1::/64 (port 1, lan).
var (
	vip6     = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::100"))
	vip6DR   = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::101"))
	vip6TUN  = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::102"))
	lanAddr6 = hdr.Addr6From(netip.MustParseAddr("fd00:1::1"))
	rs61     = hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))
	rs62     = hdr.Addr6From(netip.MustParseAddr("fd00:1::12"))
)

// rigSvc6 is rig6 with an IPv6 address on the lan port too and IPv6
// services: NAT66 on vip6:80 (rr over rs61:8080, rs62:8080), UDP NAT66 on
// vip6:53, DR on vip6DR:80, TUN on vip6TUN:80, a persistent NAT66
// service on vip6:443 by /64, and NAT64 on vip6:8080 (TCP) and vip6:5300
// (UDP) to rs1:80 and rs1:53 from lip64.
func rigSvc6(t testing.TB) *rig {
	r := newRig(t, defaultNeigh())
	withIPv6Services(r)
	return r
}

// withIPv6Services gives the rig's ports their IPv6 addresses and adds
// rigSvc6's IPv6 services to those it has.
func withIPv6Services(r *rig) {
	ports := append([]PortInfo(nil), r.w.snap.Ports...)
	m64 := Mask6(64)
	ports[0].Addr6, ports[0].Mask6 = wanAddr6, m64
	ports[0].Net6 = masked6(&wanAddr6, &m64)
	ports[1].Addr6, ports[1].Mask6 = lanAddr6, m64
	ports[1].Net6 = masked6(&lanAddr6, &m64)
	svc := func(key ServiceKey, ds ...sched.Dest) Service {
		s, _ := sched.New("rr", ds, sched.Options{})
		return Service{Key: key, Scheduler: "rr", Dests: ds, Scheds: []sched.Scheduler{s}, PersistMask: ^uint32(0)}
	}
	tcp := func(a hdr.Addr6, port uint16) ServiceKey { return ServiceKey{VIP6: a, Port: port, Proto: hdr.ProtoTCP} }
	persist := svc(tcp(vip6, 443), sched.Dest{ID: 14, Addr6: rs61, Port: 443, Weight: 1}, sched.Dest{ID: 15, Addr6: rs62, Port: 443, Weight: 1})
	persist.Persistence, persist.PersistMask6 = int64(300*time.Second), Mask6(64)
	services := append(append([]Service(nil), r.w.snap.Services...),
		svc(tcp(vip6, 80), sched.Dest{ID: 10, Addr6: rs61, Port: 8080, Weight: 1}, sched.Dest{ID: 11, Addr6: rs62, Port: 8080, Weight: 1}),
		svc(ServiceKey{VIP6: vip6, Port: 53, Proto: hdr.ProtoUDP}, sched.Dest{ID: 12, Addr6: rs61, Port: 5353, Weight: 1}),
		svc(tcp(vip6DR, 80), sched.Dest{ID: 13, Addr6: rs61, Port: 80, Weight: 1, Fwd: fwd.DR}),
		svc(tcp(vip6TUN, 80), sched.Dest{ID: 16, Addr6: rs62, Port: 80, Weight: 1, Fwd: fwd.TUN}),
		persist,
		nat64svc(svc(tcp(vip6, 8080), sched.Dest{ID: 17, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.FullNAT})),
		nat64svc(svc(ServiceKey{VIP6: vip6, Port: 5300, Proto: hdr.ProtoUDP}, sched.Dest{ID: 18, Addr: rs1, Port: 53, Weight: 1, Fwd: fwd.FullNAT})),
	)
	snap := NewSnapshot(r.w.snap.Gen+1, ports, services, r.w.snap.Neigh, conn.DefaultTimeouts())
	snap.Neigh6 = map[hdr.Addr6]hdr.MAC{rs61: rs1MAC, rs62: rs2MAC, clientAddr6: clientMAC}
	r.w.snap = snap
	r.w.learnVIPs(snap)
}

// lip64 is the NAT64 services' local address, on the lan port's subnet.
var lip64 = ip4(198, 51, 100, 200)

func nat64svc(s Service) Service {
	s.LocalAddrs = []uint32{lip64}
	return s
}

// l4Frame6 builds Ethernet/IPv6/TCP (flags) or UDP with a valid checksum.
func l4Frame6(srcMAC, dstMAC hdr.MAC, proto uint8, src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, flags uint8, payload string) []byte {
	l4len := 20 + len(payload)
	if proto == hdr.ProtoUDP {
		l4len = hdr.UDPLen + len(payload)
	}
	b := make([]byte, 14+40+l4len)
	eth := hdr.Ethernet(b)
	eth.SetSrc(srcMAC)
	eth.SetDst(dstMAC)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(b[14:]).Encode(uint16(l4len), proto, 64, src, dst)
	l4 := b[54:]
	binary.BigEndian.PutUint16(l4[0:], sport)
	binary.BigEndian.PutUint16(l4[2:], dport)
	if proto == hdr.ProtoTCP {
		binary.BigEndian.PutUint32(l4[4:], 1000)
		l4[12], l4[13] = 5<<4, flags
		binary.BigEndian.PutUint16(l4[14:], 65535)
		copy(l4[20:], payload)
		binary.BigEndian.PutUint16(l4[16:], hdr.TransportChecksum6(src, dst, proto, l4))
	} else {
		binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		copy(l4[8:], payload)
		binary.BigEndian.PutUint16(l4[6:], hdr.TransportChecksum6(src, dst, proto, l4))
	}
	return b
}

// check6 parses a sent frame as IPv6 TCP or UDP and checks its checksum
// by full recomputation.
func check6(t *testing.T, f []byte) (hdr.Ethernet, hdr.IPv6, []byte) {
	t.Helper()
	eth := hdr.Ethernet(f)
	ip := hdr.IPv6(eth.Payload())
	if eth.EtherType() != hdr.EtherTypeIPv6 || !ip.IsValid(len(ip)) {
		t.Fatalf("not IPv6: %x", f)
	}
	l4 := ip.Payload()
	off := 16
	if ip.NextHeader() == hdr.ProtoUDP {
		off = 6
	}
	if got, want := binary.BigEndian.Uint16(l4[off:]), hdr.TransportChecksum6(ip.Src(), ip.Dst(), ip.NextHeader(), l4); got != want {
		t.Fatalf("checksum %#04x, recomputed %#04x", got, want)
	}
	return eth, ip, l4
}

func port6(l4 []byte, off int) uint16 { return binary.BigEndian.Uint16(l4[off:]) }

// TestNAT66BothDirections: a client's SYN to an IPv6 VIP reaches a real
// server with the destination rewritten, hop limit decremented and a
// correct checksum; the server's reply goes back from the VIP; new
// connections go round robin.
func TestNAT66BothDirections(t *testing.T) {
	r := rigSvc6(t)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("sent %d, want 1 (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, l4 := check6(t, out[0])
	if eth.Dst() != rs1MAC || eth.Src() != lanMAC || ip.Dst() != rs61 || ip.Src() != clientAddr6 || port6(l4, 2) != 8080 || ip.HopLimit() != 63 {
		t.Fatalf("to the server: %s -> %s port %d hop %d mac %v", ip.Src(), ip.Dst(), port6(l4, 2), ip.HopLimit(), eth.Dst())
	}
	r.inject(1, l4Frame6(rs1MAC, lanMAC, hdr.ProtoTCP, rs61, 8080, clientAddr6, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("reply: sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, l4 = check6(t, out[0])
	if eth.Dst() != clientMAC || ip.Src() != vip6 || port6(l4, 0) != 80 || ip.Dst() != clientAddr6 {
		t.Fatalf("to the client: %s:%d -> %s", ip.Src(), port6(l4, 0), ip.Dst())
	}
	// The next connection goes to the other server.
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatalf("second SYN: sent %d", len(out))
	}
	if _, ip, _ = check6(t, out[0]); ip.Dst() != rs62 {
		t.Fatalf("second connection to %s, want %s", ip.Dst(), rs62)
	}
	if got := r.w.cnt.own[NewConns]; got != 2 {
		t.Fatalf("new_conns %d", got)
	}
	// A segment that is not a SYN opens nothing.
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40002, vip6, 80, hdr.TCPFlagACK, ""))
	r.w.poll()
	if len(r.sent(1)) != 0 || r.w.cnt.own[DropNotSYN] != 1 {
		t.Fatalf("a bare ACK was forwarded (drops %v)", dropsOf(r.w))
	}
}

// TestNAT66UDP: UDP over IPv6 is translated both ways with a correct
// (mandatory) checksum; a datagram without one is dropped.
func TestNAT66UDP(t *testing.T) {
	r := rigSvc6(t)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 53, 0, "query"))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	if _, ip, l4 := check6(t, out[0]); ip.Dst() != rs61 || port6(l4, 2) != 5353 {
		t.Fatalf("to %s port %d", ip.Dst(), port6(l4, 2))
	}
	r.inject(1, l4Frame6(rs1MAC, lanMAC, hdr.ProtoUDP, rs61, 5353, clientAddr6, 5000, 0, "answer"))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("reply sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	if _, ip, l4 := check6(t, out[0]); ip.Src() != vip6 || port6(l4, 0) != 53 {
		t.Fatalf("reply from %s port %d", ip.Src(), port6(l4, 0))
	}
	f := l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5001, vip6, 53, 0, "query")
	f[54+6], f[54+7] = 0, 0
	r.inject(0, f)
	r.w.poll()
	if len(r.sent(1)) != 0 || r.w.cnt.own[DropBadL4] != 1 {
		t.Fatalf("a UDP datagram without checksum was forwarded (drops %v)", dropsOf(r.w))
	}
}

// TestDR6AndTUN6: DR changes only the MACs (and the hop limit); TUN puts
// the packet in an IPv6 header (next header 41) from the lan port's
// address to the server.
func TestDR6AndTUN6(t *testing.T) {
	r := rigSvc6(t)
	in := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6DR, 80, hdr.TCPFlagSYN, "")
	r.inject(0, in)
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("DR sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, l4 := check6(t, out[0])
	if eth.Dst() != rs1MAC || ip.Dst() != vip6DR || port6(l4, 2) != 80 || ip.HopLimit() != 63 {
		t.Fatalf("DR: to %s mac %v hop %d", ip.Dst(), eth.Dst(), ip.HopLimit())
	}
	in = l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, "x")
	r.inject(0, in)
	r.w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatalf("TUN sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	eth = hdr.Ethernet(out[0])
	outer := hdr.IPv6(eth.Payload())
	if eth.Dst() != rs2MAC || outer.NextHeader() != hdr.ProtoIPv6 || outer.Src() != lanAddr6 || outer.Dst() != rs62 ||
		int(outer.PayloadLength()) != len(in)-14 || !outer.IsValid(len(outer)) {
		t.Fatalf("TUN outer header: %x", out[0])
	}
	inner := outer.Payload()
	if hdr.IPv6(inner).Dst() != vip6TUN || hdr.IPv6(inner).HopLimit() != 63 {
		t.Fatalf("TUN inner packet: %x", inner)
	}
	if r.w.cnt.own[Encapsulated] != 1 {
		t.Fatalf("encapsulated %d", r.w.cnt.own[Encapsulated])
	}
}

// TestPersistence6: the clients of one /64 keep their server; another
// /64 may get the other one.
func TestPersistence6(t *testing.T) {
	r := rigSvc6(t)
	other := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::8"))
	r.w.neigh6.learn(&other, clientMAC, r.w.now+1)
	var first hdr.Addr6
	for i, src := range []hdr.Addr6{clientAddr6, other, clientAddr6} {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, src, uint16(41000+i), vip6, 443, hdr.TCPFlagSYN, ""))
		r.w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("SYN %d: sent %d (drops %v)", i, len(out), dropsOf(r.w))
		}
		_, ip, _ := check6(t, out[0])
		if i == 0 {
			first = ip.Dst()
		} else if ip.Dst() != first {
			t.Fatalf("SYN %d from the same /64 went to %s, the first to %s", i, ip.Dst(), first)
		}
	}
}

// TestNDForVIP6: an NS for an IPv6 VIP on the client-facing port is
// answered with the port's MAC, and its sender reported as a neighbour;
// an NA teaches the control plane the target's MAC.
func TestNDForVIP6(t *testing.T) {
	r := rigSvc6(t)
	sn := vip6.SolicitedNode()
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(vip6, true)))
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	ip := hdr.IPv6(hdr.Ethernet(out[0]).Payload())
	na := hdr.ND(ip.Payload())
	if mac, _ := na.LinkAddr(hdr.NDOptTargetLL); na.Target() != vip6 || ip.Src() != vip6 || mac != wanMAC {
		t.Fatalf("NA for the VIP: %x", out[0])
	}
	ev, ok := r.w.events.Pop()
	if !ok || ev.Kind != EvNeighbour6 || ev.IP6 != clientAddr6 || ev.MAC != clientMAC {
		t.Fatalf("event %+v %v, want the client learnt", ev, ok)
	}
	na6 := make([]byte, hdr.NDLen+hdr.NDOptLen)
	hdr.ND(na6).EncodeND(hdr.ICMPv6NeighAdvert, hdr.NAFlagSolicited, rs61, hdr.NDOptTargetLL, rs1MAC)
	r.inject(1, icmp6Frame(rs1MAC, lanMAC, rs61, lanAddr6, 255, na6))
	r.w.poll()
	if ev, ok = r.w.events.Pop(); !ok || ev.Kind != EvNeighbour6 || ev.IP6 != rs61 || ev.MAC != rs1MAC || ev.Port != 1 {
		t.Fatalf("event %+v %v, want rs61 learnt", ev, ok)
	}
	// A solicitation for a server goes to its solicited-node group.
	r.w.sendSolicit(1, rs62)
	r.w.poll() // sends what is queued
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatalf("solicit sent %d", len(out))
	}
	eth := hdr.Ethernet(out[0])
	ip = hdr.IPv6(eth.Payload())
	ns := hdr.ND(ip.Payload())
	if eth.Dst() != rs62.SolicitedNode().MulticastMAC() || ip.Dst() != rs62.SolicitedNode() || ns.Target() != rs62 ||
		hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, ns) != hdr.ICMP(ns).Checksum() {
		t.Fatalf("NS: %x", out[0])
	}
}

// TestNAT66NeighbourMiss: a server without a MAC makes an event and a
// counted drop.
func TestNAT66NeighbourMiss(t *testing.T) {
	r := rigSvc6(t)
	delete(r.w.snap.Neigh6, rs61)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	if r.w.cnt.own[DropNoNeighbour] != 1 {
		t.Fatalf("drops %v", dropsOf(r.w))
	}
	if ev, ok := r.w.events.Pop(); !ok || ev.Kind != EvNeighbourMiss6 || ev.IP6 != rs61 || ev.Port != 1 {
		t.Fatalf("event %+v %v", ev, ok)
	}
}

// TestNAT66PathDoesNotAllocate guards the IPv6 forwarding path: new NAT66
// connections, lookups, rewrites, TX.
func TestNAT66PathDoesNotAllocate(t *testing.T) {
	r := rigSvc6(t)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, uint16(20000+i), vip6, 80, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the IPv6 path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections (drops %v)", r.w.cnt.own[NewConns], dropsOf(r.w))
	}
}

// TestOwner6: the IPv6 owner is the Toeplitz hash of the client's address
// and port, as a NIC computes it for IPv6 (the RSS spec's IPv6 example
// under its key).
func TestOwner6(t *testing.T) {
	old := toeplitz6
	defer func() { toeplitz6 = old }()
	toeplitz6 = toeplitzTable6(msKey)
	// Microsoft's RSS verification suite, IPv6 with source address and
	// port only is not listed; check against a direct bit-by-bit hash.
	src := hdr.Addr6From(netip.MustParseAddr("3ffe:2501:200:1fff::7"))
	in := append(src[:], 0x0b, 0x30) // port 2864
	var want uint32
	for i := 0; i < len(in)*8; i++ {
		if in[i/8]>>(7-i%8)&1 == 0 {
			continue
		}
		var w uint32
		for j := 0; j < 32; j++ {
			b := i + j
			if msKey[b/8]>>(7-b%8)&1 != 0 {
				w |= 1 << (31 - j)
			}
		}
		want ^= w
	}
	for n := 2; n <= 5; n++ {
		if got := Owner6(&src, 2864, n); got != int(want%uint32(n)) {
			t.Fatalf("Owner6 with %d workers = %d, want %d", n, got, want%uint32(n))
		}
	}
}

// TestNAT66OffLinkClient: a reply to a client beyond the wan port's IPv6
// gateway goes to the gateway's MAC.
func TestNAT66OffLinkClient(t *testing.T) {
	r := rigSvc6(t)
	gw := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::fe"))
	gwMAC := hdr.MAC{0x02, 0, 0, 0, 0, 0xfe}
	ports := append([]PortInfo(nil), r.w.snap.Ports...)
	ports[0].Gateway6 = gw
	snap := NewSnapshot(3, ports, r.w.snap.Services, r.w.snap.Neigh, conn.DefaultTimeouts())
	snap.Neigh6 = map[hdr.Addr6]hdr.MAC{rs61: rs1MAC, rs62: rs2MAC, gw: gwMAC}
	r.w.snap = snap
	far := hdr.Addr6From(netip.MustParseAddr("2001:db8:9::5"))
	r.inject(0, l4Frame6(gwMAC, wanMAC, hdr.ProtoTCP, far, 40000, vip6, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	_, ip, _ := check6(t, out[0])
	r.inject(1, l4Frame6(rs1MAC, lanMAC, hdr.ProtoTCP, ip.Dst(), 8080, far, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("reply sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	if eth, ip, _ := check6(t, out[0]); eth.Dst() != gwMAC || ip.Src() != vip6 || ip.Dst() != far {
		t.Fatalf("reply to %v: %s -> %s", eth.Dst(), ip.Src(), ip.Dst())
	}
}

// TestTUN6PathDoesNotAllocate guards VS/TUN over IPv6 (the outer header
// prepended in place).
func TestTUN6PathDoesNotAllocate(t *testing.T) {
	r := rigSvc6(t)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, uint16(20000+i), vip6TUN, 80, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the IPv6 TUN path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[Encapsulated] < 100 {
		t.Fatalf("only %d packets encapsulated (drops %v)", r.w.cnt.own[Encapsulated], dropsOf(r.w))
	}
}

// TestAnnounce6VIPs: worker 0's unsolicited NAs cover the IPv6 VIPs on
// the client-facing port, not on the server-facing one, and none on a
// backup.
func TestAnnounce6VIPs(t *testing.T) {
	r := rigSvc6(t)
	targets := func(port int) map[hdr.Addr6]bool {
		got := map[hdr.Addr6]bool{}
		for _, f := range r.sent(port) {
			ip := hdr.IPv6(hdr.Ethernet(f).Payload())
			if na := hdr.ND(ip.Payload()); hdr.ICMP(na).Type() == hdr.ICMPv6NeighAdvert && ip.Src() == na.Target() {
				got[na.Target()] = true
			}
		}
		return got
	}
	r.w.announce6()
	r.w.poll()
	wan, lan := targets(0), targets(1)
	if !wan[wanAddr6] || !wan[vip6] || !wan[vip6DR] || !wan[vip6TUN] || len(wan) != 4 {
		t.Fatalf("wan port announced %v", wan)
	}
	if !lan[lanAddr6] || len(lan) != 1 {
		t.Fatalf("lan port announced %v", lan)
	}
	r.w.snap.Backup = true
	r.w.announce6()
	r.w.poll()
	if wan = targets(0); len(wan) != 1 || !wan[wanAddr6] {
		t.Fatalf("a backup announced %v", wan)
	}
}

// TestNAT64: an IPv6 client's segment to a NAT64 service leaves as IPv4
// from the local address to the IPv4 server, the server's answer comes
// back as IPv6 from the VIP, both with checksums a full recomputation
// agrees with; a UDP answer sent without a checksum gets one.
func TestNAT64(t *testing.T) {
	r := rigSvc6(t)
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagSYN, "hello"))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, tcp := checkTCP(t, out[0])
	if eth.Dst() != rs1MAC || ip.Src() != lip64 || ip.Dst() != rs1 || tcp.DstPort() != 80 || ip.TTL() != 63 ||
		string(tcp.Payload()) != "hello" || len(out[0]) != 14+20+20+5 {
		t.Fatalf("to the server: %x", out[0])
	}
	lport := tcp.SrcPort()
	if Owner(lip64, lport, 1) != 0 {
		t.Fatalf("local port %d is not this worker's", lport)
	}
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, "world!"))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("reply sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	eth6, ip6, l4 := check6(t, out[0])
	if eth6.Dst() != clientMAC || ip6.Src() != vip6 || ip6.Dst() != clientAddr6 || port6(l4, 0) != 8080 || port6(l4, 2) != 40000 ||
		string(hdr.TCP(l4).Payload()) != "world!" || ip6.HopLimit() != 63 {
		t.Fatalf("to the client: %x", out[0])
	}

	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 5300, 0, "q"))
	r.w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatalf("UDP sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	ip4, udp := checkUDP(t, out[0])
	if ip4.Src() != lip64 || ip4.Dst() != rs1 || udp.DstPort() != 53 {
		t.Fatalf("UDP to the server: %x", out[0])
	}
	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 53, lip64, udp.SrcPort(), "a", false))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("UDP reply sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	if _, ip6, l4 = check6(t, out[0]); ip6.Src() != vip6 || port6(l4, 0) != 5300 || port6(l4, 6) == 0 {
		t.Fatalf("UDP to the client: %x", out[0])
	}
}

// TestNAT64PathDoesNotAllocate guards NAT64's translation.
func TestNAT64PathDoesNotAllocate(t *testing.T) {
	r := rigSvc6(t)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, uint16(20000+i), vip6, 8080, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the NAT64 path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections (drops %v)", r.w.cnt.own[NewConns], dropsOf(r.w))
	}
}

// TestTrace6: lbctl trace of an IPv6 flow: before the SYN the scheduler's
// pick and its route, after it the entry in both directions, as the
// packets found them; nothing changes.
func TestTrace6(t *testing.T) {
	r := rigSvc6(t)
	trace := func(f TraceFlow) TraceResult {
		t.Helper()
		req := &TraceRequest{TraceFlow: f}
		r.w.trace(req)
		return req.Result
	}
	f := TraceFlow{Proto: hdr.ProtoTCP, IPv6: true, Client6: clientAddr6, ClientPort: 40000, VIP6: vip6, VPort: 80}
	res := trace(f)
	if res.HasConn || !res.HasService || res.Pick != 0 || res.PickBy != "scheduler" || res.Drop != 0 ||
		res.NextHop6 != rs61 || !res.NextHopKnown || res.OutPort != 1 {
		t.Fatalf("before the SYN: %+v", res)
	}
	if r.w.cnt.own[NewConns] != 0 || r.w.table.Len() != 0 {
		t.Fatal("the trace made a connection")
	}
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	r.drain(1)
	res = trace(f)
	if !res.HasConn || res.ConnDir != conn.Original || !res.Conn.IPv6 || res.Conn.RIP6 != rs61 || res.Conn.Client6 != clientAddr6 ||
		res.NextHop6 != rs61 || res.Drop != 0 {
		t.Fatalf("after the SYN: %+v", res)
	}
	f.Reply, f.RIP6, f.RPort = true, rs61, 8080
	if res = trace(f); !res.HasConn || res.ConnDir != conn.Reply || res.NextHop6 != clientAddr6 || res.OutPort != 0 {
		t.Fatalf("the reply: %+v", res)
	}
	if got := (&f).Owner(4); got != Owner6(&clientAddr6, 40000, 4) {
		t.Fatalf("TraceFlow.Owner = %d", got)
	}
}

// TestEcho6ToVIP: an ICMPv6 echo request to an IPv6 VIP is answered from
// the VIP.
func TestEcho6ToVIP(t *testing.T) {
	r := rigSvc6(t)
	r.inject(0, icmp6Frame(clientMAC, wanMAC, clientAddr6, vip6, 64, []byte{hdr.ICMPv6EchoRequest, 0, 0, 0, 0, 1, 0, 1, 'x'}))
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d (drops %v)", len(out), dropsOf(r.w))
	}
	ip := hdr.IPv6(hdr.Ethernet(out[0]).Payload())
	msg := ip.Payload()
	if ip.Src() != vip6 || ip.Dst() != clientAddr6 || hdr.ICMP(msg).Type() != hdr.ICMPv6EchoReply ||
		hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, msg) != hdr.ICMP(msg).Checksum() {
		t.Fatalf("echo reply: %x", out[0])
	}
}

// TestReusedPortOnSharedServer6 is TestReusedPortOnSharedServer for
// NAT66: [vip6]:80 and [vip6]:81 both reach [rs61]:8080.
func TestReusedPortOnSharedServer6(t *testing.T) {
	for _, tc := range []struct {
		state conn.State
		freed bool
	}{{conn.StateTimeWait, true}, {conn.StateEstablished, false}} {
		r := rigSvc6(t)
		w := r.w
		s := w.snap
		d := sched.Dest{ID: 19, Addr6: rs61, Port: 8080, Weight: 1}
		rr, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		svcs := append(append([]Service(nil), s.Services...), Service{Key: ServiceKey{VIP6: vip6, Port: 81, Proto: hdr.ProtoTCP},
			Scheduler: "rr", Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{rr}, PersistMask: ^uint32(0)})
		w.snap = NewSnapshot(s.Gen+1, s.Ports, svcs, s.Neigh, conn.DefaultTimeouts())
		w.snap.Neigh6 = s.Neigh6

		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40300, vip6, 80, hdr.TCPFlagSYN, "")) // rr's first: rs61
		w.poll()
		if out := r.sent(1); len(out) != 1 {
			t.Fatalf("%v: the [vip6]:80 SYN was not forwarded (drops %v)", tc.state, dropsOf(w))
		}
		old, _, _ := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40300, &vip6, 80)
		c := w.table.Get(old)
		w.countState(c.Dest, c.State, false)
		c.State = tc.state
		w.countState(c.Dest, c.State, true)

		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40300, vip6, 81, hdr.TCPFlagSYN, ""))
		w.poll()
		out := r.sent(1)
		_, _, oldKept := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40300, &vip6, 80)
		id, dir, ok := w.table.Lookup6(hdr.ProtoTCP, &rs61, 8080, &clientAddr6, 40300)
		if !ok || dir != conn.Reply {
			t.Fatalf("%v: rs61's replies find no connection", tc.state)
		}
		holder := w.table.Get(id).VPort
		if tc.freed {
			if len(out) != 1 || oldKept || holder != 81 || w.cnt.own[NewConns] != 2 {
				t.Fatalf("%v holder: %d sent, old entry kept %v, rs61's replies to VIP port %d, %d new (drops %v)",
					tc.state, len(out), oldKept, holder, w.cnt.own[NewConns], dropsOf(w))
			}
			if _, ip, l4 := check6(t, out[0]); ip.Dst() != rs61 || port6(l4, 2) != 8080 {
				t.Fatalf("the [vip6]:81 SYN went to %s:%d, want [rs61]:8080", ip.Dst(), port6(l4, 2))
			}
		} else if len(out) != 0 || !oldKept || holder != 80 || w.cnt.own[DropConnExists] != 1 {
			t.Fatalf("%v holder: %d sent, old entry kept %v, rs61's replies to VIP port %d, conn_exists drops %d",
				tc.state, len(out), oldKept, holder, w.cnt.own[DropConnExists])
		}
	}
}

// TestProbeThroughLBD6 is TestProbeThroughLBD for an IPv6 server: the
// SYN leaves from the lan port's IPv6 address; the server's SYN-ACK is
// reported with the server's IPv6 address and answered with an RST, its
// RST reported as refused; an answer on a port that does not lead to the
// server is not believed; a server without a MAC is reported not sent.
func TestProbeThroughLBD6(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	r.sent(0) // the ports' neighbour advertisements
	r.sent(1)
	w.Commands().Push(Command{Kind: CmdProbe, IP6: rs61, DstPort: 8080, SrcPort: ProbePortFirst + 7, Seq: 4241})
	w.runCommands(0)
	w.flush()
	out := tcp6Frames(r.sent(1))
	if len(out) != 1 {
		t.Fatal("no probe sent")
	}
	eth, ip, l4 := check6(t, out[0])
	tcp := hdr.TCP(l4)
	if eth.Dst() != rs1MAC || ip.Src() != lanAddr6 || ip.Dst() != rs61 || tcp.SrcPort() != ProbePortFirst+7 ||
		tcp.DstPort() != 8080 || tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != 4241 {
		t.Fatalf("bad probe %x", out[0])
	}
	answer := func(port int, mac hdr.MAC, flags uint8, sport uint16) {
		f := l4Frame6(mac, []hdr.MAC{wanMAC, lanMAC}[port], hdr.ProtoTCP, rs61, sport, lanAddr6, ProbePortFirst+7, flags, "")
		l4 := f[54:]
		binary.BigEndian.PutUint32(l4[8:], 4242) // ack
		binary.BigEndian.PutUint16(l4[16:], 0)
		binary.BigEndian.PutUint16(l4[16:], hdr.TransportChecksum6(rs61, lanAddr6, hdr.ProtoTCP, l4))
		r.inject(port, f)
		w.poll()
	}
	answer(1, rs1MAC, hdr.TCPFlagSYN|hdr.TCPFlagACK, 8080)
	ev, ok := w.Events().Pop()
	if !ok || ev.Kind != EvProbe || ev.Result != ProbeOpen || ev.IP6 != rs61 || ev.IP != 0 || ev.DstPort != 8080 ||
		ev.SrcPort != ProbePortFirst+7 || ev.Ack != 4242 {
		t.Fatalf("probe event %+v %v", ev, ok)
	}
	out = tcp6Frames(r.sent(1))
	if len(out) != 1 {
		t.Fatal("no RST for the SYN-ACK")
	}
	eth, ip, l4 = check6(t, out[0])
	if tcp = hdr.TCP(l4); eth.Dst() != rs1MAC || ip.Src() != lanAddr6 || ip.Dst() != rs61 || tcp.Flags() != hdr.TCPFlagRST ||
		tcp.Seq() != 4242 || tcp.DstPort() != 8080 || tcp.SrcPort() != ProbePortFirst+7 {
		t.Fatalf("bad RST %x", out[0])
	}
	answer(1, rs1MAC, hdr.TCPFlagRST|hdr.TCPFlagACK, 8081)
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeRefused || ev.IP6 != rs61 || ev.DstPort != 8081 {
		t.Fatalf("refused probe event %+v", ev)
	}
	// From the client side: a client cannot speak for the server.
	answer(0, clientMAC, hdr.TCPFlagSYN|hdr.TCPFlagACK, 8080)
	if ev, ok := w.Events().Pop(); ok && ev.Kind == EvProbe {
		t.Fatalf("an answer from the wrong port was believed: %+v", ev)
	}
	if w.cnt.own[DropProbeSpoofed] != 1 || len(tcp6Frames(r.sent(0))) != 0 || len(tcp6Frames(r.sent(1))) != 0 || w.table.Len() != 0 {
		t.Fatalf("spoofed answer: probe_spoofed %d, or it made a packet or a connection", w.cnt.own[DropProbeSpoofed])
	}
	// No MAC for the server: the probe fails at once.
	unknown := hdr.Addr6From(netip.MustParseAddr("fd00:1::99"))
	w.Commands().Push(Command{Kind: CmdProbe, IP6: unknown, DstPort: 80, SrcPort: ProbePortFirst})
	w.runCommands(0)
	var got Event
	for ev, ok := w.Events().Pop(); ok; ev, ok = w.Events().Pop() {
		if ev.Kind == EvProbe {
			got = ev
		}
	}
	if got.Result != ProbeNotSent || got.IP6 != unknown {
		t.Fatalf("probe to an unresolved server: %+v", got)
	}
}

// tcp6Frames keeps the IPv6 TCP frames of sent (not the neighbour
// discovery around them).
func tcp6Frames(sent [][]byte) [][]byte {
	var out [][]byte
	for _, f := range sent {
		eth := hdr.Ethernet(f)
		if eth.EtherType() == hdr.EtherTypeIPv6 && hdr.IPv6(eth.Payload()).NextHeader() == hdr.ProtoTCP {
			out = append(out, f)
		}
	}
	return out
}

// tcpSeg6 is l4Frame6's TCP segment with its seq and ack.
func tcpSeg6(srcMAC, dstMAC hdr.MAC, src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, flags uint8, seq, ack uint32, payload string) []byte {
	return tcpOpts6(srcMAC, dstMAC, src, sport, dst, dport, flags, seq, ack, nil, payload)
}

// TestNAT64WithProxyV2: with proxy_protocol, an IPv6 client's first bytes
// reach its IPv4 server after a PROXY v2 header naming the client's and
// the VIP's IPv6 endpoints; the later segments move along by its 52
// bytes, the server's acknowledgements come back into the client's
// numbering, and the server's MSS leaves room for the header.
func TestNAT64WithProxyV2(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	for i := range w.snap.Services {
		if s := &w.snap.Services[i]; s.Key.VIP6 == vip6 && s.Key.Port == 8080 {
			s.ProxyProtocol = true
		}
	}
	const isn = 7000
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagSYN, isn, 0, ""))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	if ip.Src() != lip64 || ip.Dst() != rs1 || tcp.Seq() != isn || len(tcp.Payload()) != 0 {
		t.Fatalf("SYN left as %x:%d -> %x seq %d", ip.Src(), lport, ip.Dst(), tcp.Seq())
	}
	mss := []byte{hdr.TCPOptMSS, 4, 0x05, 0xb4} // 1460
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 90000, isn+1, mss, ""))
	w.poll()
	_, _, l4 := check6(t, one(t, r, 0))
	if tcp = hdr.TCP(l4); tcp.Ack() != isn+1 || tcp.MSS() != 1500-40-proxyV2Len6 {
		t.Fatalf("SYN-ACK ack %d MSS %d, want %d and %d", tcp.Ack(), tcp.MSS(), isn+1, 1500-40-proxyV2Len6)
	}

	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK, isn+1, 90001, ""))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, 90001, "hello"))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+6, 90001, "world"))
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("sent %d, want 3 (drops %v)", len(out), dropsOf(w))
	}
	if _, _, tcp = checkTCP(t, out[0]); tcp.Seq() != isn+1 || len(tcp.Payload()) != 0 {
		t.Fatalf("handshake ACK seq %d, %d bytes", tcp.Seq(), len(tcp.Payload()))
	}
	want := make([]byte, proxyV2Len6)
	copy(want, proxyV2Sig[:])
	want[12], want[13], want[15] = 0x21, 0x21, 36
	copy(want[16:], clientAddr6[:])
	copy(want[32:], vip6[:])
	binary.BigEndian.PutUint16(want[48:], 40000)
	binary.BigEndian.PutUint16(want[50:], 8080)
	_, ip, tcp = checkTCP(t, out[1])
	if tcp.Seq() != isn+1 || !bytes.Equal(tcp.Payload(), append(want, "hello"...)) || ip.Src() != lip64 ||
		int(ip.TotalLength()) != 20+20+proxyV2Len6+5 {
		t.Fatalf("first data seq %d payload %x", tcp.Seq(), tcp.Payload())
	}
	if _, _, tcp = checkTCP(t, out[2]); tcp.Seq() != isn+6+proxyV2Len6 || string(tcp.Payload()) != "world" {
		t.Fatalf("second data seq %d payload %q", tcp.Seq(), tcp.Payload())
	}
	// An ICMP error about that segment quotes it to the client in the
	// client's numbering.
	r.inject(1, icmp4Error(router4, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0, out[2], 28))
	w.poll()
	_, _, icmp := checkICMPv6(t, one(t, r, 0))
	if q := icmp[8:]; binary.BigEndian.Uint32(q[hdr.IPv6Len+4:]) != isn+6 {
		t.Fatalf("the error quotes seq %d, want %d", binary.BigEndian.Uint32(q[hdr.IPv6Len+4:]), isn+6)
	}
	if w.cnt.own[ProxyHeaders] != 1 {
		t.Fatalf("proxy_headers %d", w.cnt.own[ProxyHeaders])
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagACK, 90001, isn+1+proxyV2Len6+10, nil, ""))
	w.poll()
	if _, _, l4 = check6(t, one(t, r, 0)); hdr.TCP(l4).Ack() != isn+11 {
		t.Fatalf("the server's ack reached the client as %d, want %d", hdr.TCP(l4).Ack(), isn+11)
	}
}
