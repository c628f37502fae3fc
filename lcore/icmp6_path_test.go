package lcore

import (
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// checkICMPv6 parses a sent frame as an ICMPv6 message and checks its
// checksum by full recomputation.
func checkICMPv6(t *testing.T, f []byte) (hdr.Ethernet, hdr.IPv6, hdr.ICMP) {
	t.Helper()
	eth := hdr.Ethernet(f)
	ip := hdr.IPv6(eth.Payload())
	if eth.EtherType() != hdr.EtherTypeIPv6 || !ip.IsValid(len(ip)) || ip.NextHeader() != hdr.ProtoICMPv6 {
		t.Fatalf("not ICMPv6: %x", f)
	}
	icmp := hdr.ICMP(ip.Payload())
	if c := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, icmp); c != icmp.Checksum() {
		t.Fatalf("ICMPv6 checksum %#04x, recomputed %#04x", icmp.Checksum(), c)
	}
	return eth, ip, icmp
}

// fromClient readdresses a frame as sent by the client to the wan port.
func fromClient(f []byte) []byte {
	eth := hdr.Ethernet(f)
	eth.SetSrc(clientMAC)
	eth.SetDst(wanMAC)
	return f
}

// TestICMPv6ErrorsNAT66: errors about a NAT66 connection's packets are
// translated both ways: a router's Packet Too Big from the servers' side
// reaches the client from the VIP about its packet to VIP:53, and the
// client's Destination Unreachable about a reply reaches the real server
// about its packet from RIP:5353; the quoted UDP checksums and the ICMPv6
// ones are right.
func TestICMPv6ErrorsNAT66(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	r.inject(0, udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 100))
	w.poll()
	if n := len(r.sent(1)); n != 1 {
		t.Fatalf("the query was not forwarded (drops %v)", dropsOf(w))
	}
	sent := udp6Frame(lanMAC, rs1MAC, clientAddr6, 41000, rs61, 5353, 1400) // as lbd sent it
	r.inject(1, icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1280, sent, 0))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("the server side's error was not delivered (drops %v)", dropsOf(w))
	}
	eth, ip, icmp := checkICMPv6(t, out[0])
	q := hdr.IPv6(icmp[8:])
	if eth.Dst() != clientMAC || ip.Src() != vip6 || ip.Dst() != clientAddr6 || ip.HopLimit() != 63 ||
		icmp.Type() != hdr.ICMPv6PacketTooBig || binary.BigEndian.Uint32(icmp[4:]) != 1280 ||
		q.Src() != clientAddr6 || q.Dst() != vip6 || port6(q[40:], 2) != 53 {
		t.Fatalf("to the client: %v -> %v type %d, quoting %v -> %v:%d", ip.Src(), ip.Dst(), icmp.Type(), q.Src(), q.Dst(), port6(q[40:], 2))
	}
	if got, want := port6(q[40:], 6), hdr.TransportChecksum6(q.Src(), q.Dst(), hdr.ProtoUDP, q.Payload()); got != want {
		t.Fatalf("quoted UDP checksum %#04x, recomputed %#04x", got, want)
	}

	reply := udp6Frame(wanMAC, clientMAC, vip6, 53, clientAddr6, 41000, 60) // as lbd sent it
	r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, reply, 0)))
	w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatalf("the client's error was not delivered (drops %v)", dropsOf(w))
	}
	eth, ip, icmp = checkICMPv6(t, out[0])
	q = hdr.IPv6(icmp[8:])
	if eth.Dst() != rs1MAC || ip.Src() != clientAddr6 || ip.Dst() != rs61 || icmp.Type() != hdr.ICMPv6DestUnreachable ||
		q.Src() != rs61 || port6(q[40:], 0) != 5353 || q.Dst() != clientAddr6 {
		t.Fatalf("to the server: %v -> %v, quoting %v:%d -> %v", ip.Src(), ip.Dst(), q.Src(), port6(q[40:], 0), q.Dst())
	}
	if got, want := port6(q[40:], 6), hdr.TransportChecksum6(q.Src(), q.Dst(), hdr.ProtoUDP, q.Payload()); got != want {
		t.Fatalf("quoted UDP checksum %#04x, recomputed %#04x", got, want)
	}
	if w.cnt.own[ICMPErrors] != 2 {
		t.Fatalf("icmp_errors %d", w.cnt.own[ICMPErrors])
	}
	// About no connection: dropped.
	r.inject(1, icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1280,
		udp6Frame(lanMAC, rs1MAC, clientAddr6, 41999, rs61, 5353, 1400), 0))
	w.poll()
	if n := len(r.sent(0)); n != 0 || w.cnt.own[DropNoConn] != 1 {
		t.Fatalf("an error about no connection: sent %d, no_conn %d", n, w.cnt.own[DropNoConn])
	}
}

// TestICMPv6ErrorDR: an error from the client's side about a DR server's
// reply (from the VIP) goes to that server unchanged.
func TestICMPv6ErrorDR(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6DR, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	reply := l4Frame6(rs1MAC, clientMAC, hdr.ProtoTCP, vip6DR, 80, clientAddr6, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, "")
	in := fromClient(icmp6Error(routerAddr6, vip6DR, hdr.ICMPv6PacketTooBig, 0, 1280, reply, 0))
	r.inject(0, in)
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("not passed on (drops %v)", dropsOf(w))
	}
	eth, ip, icmp := checkICMPv6(t, out[0])
	if eth.Dst() != rs1MAC || ip.Dst() != vip6DR || ip.HopLimit() != 63 || string(icmp) != string(hdr.IPv6(in[14:]).Payload()) {
		t.Fatalf("passed on changed: to %v %v hop %d", eth.Dst(), ip.Dst(), ip.HopLimit())
	}
}

// TestTooBig6AndTunnelErrors: TUN6 answers a packet too big for the
// tunnel with a Packet Too Big from the VIP; a router's Packet Too Big
// about our IPv6-in-IPv6 packet reaches the client from the VIP, less the
// outer header, and is learnt: the next packet that no longer fits is
// answered with the learnt MTU.
func TestTooBig6AndTunnelErrors(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	big := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1500-60)))
	r.inject(0, big)
	w.poll()
	out := r.sent(0)
	if len(out) != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("no Packet Too Big (drops %v)", dropsOf(w))
	}
	_, ip, icmp := checkICMPv6(t, out[0])
	if ip.Src() != vip6TUN || ip.Dst() != clientAddr6 || icmp.Type() != hdr.ICMPv6PacketTooBig || binary.BigEndian.Uint32(icmp[4:]) != 1460 {
		t.Fatalf("%v -> %v type %d MTU %d", ip.Src(), ip.Dst(), icmp.Type(), binary.BigEndian.Uint32(icmp[4:]))
	}
	// A packet that fits goes through; a router on the way refuses it.
	fits := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1400)))
	r.inject(0, fits)
	w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatalf("not tunnelled (drops %v)", dropsOf(w))
	}
	r.inject(1, icmp6Error(routerAddr6, lanAddr6, hdr.ICMPv6PacketTooBig, 0, 1400, out[0], 1232))
	w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("the router's error was not delivered (drops %v)", dropsOf(w))
	}
	_, ip, icmp = checkICMPv6(t, out[0])
	q := hdr.IPv6(icmp[8:])
	if ip.Src() != vip6TUN || ip.Dst() != clientAddr6 || binary.BigEndian.Uint32(icmp[4:]) != 1360 || q.Src() != clientAddr6 || q.Dst() != vip6TUN {
		t.Fatalf("%v -> %v MTU %d quoting %v -> %v", ip.Src(), ip.Dst(), binary.BigEndian.Uint32(icmp[4:]), q.Src(), q.Dst())
	}
	r.inject(0, fits)
	w.poll()
	if out = r.sent(0); len(out) != 1 {
		t.Fatalf("the learnt MTU was not applied (drops %v)", dropsOf(w))
	}
	if _, _, icmp = checkICMPv6(t, out[0]); binary.BigEndian.Uint32(icmp[4:]) != 1360 {
		t.Fatalf("MTU %d, want the learnt 1400 less 40", binary.BigEndian.Uint32(icmp[4:]))
	}
	if w.cnt.own[ICMPv6TooBig] != 2 || w.cnt.own[ICMPErrors] != 1 {
		t.Fatalf("too big %d, errors %d", w.cnt.own[ICMPv6TooBig], w.cnt.own[ICMPErrors])
	}
	// A report not below the refused packet's size is not believed.
	r.inject(1, icmp6Error(routerAddr6, lanAddr6, hdr.ICMPv6PacketTooBig, 0, 9000,
		tunnel6(l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagACK, "x"), lanAddr6, rs62), 0))
	w.poll()
	if n := len(r.sent(0)); n != 0 || w.cnt.own[DropBadICMP] != 1 {
		t.Fatalf("a Packet Too Big of 9000: sent %d, bad_icmp %d", n, w.cnt.own[DropBadICMP])
	}
}

// TestTimeExceeded6: a packet whose hop limit runs out here is answered
// with a Time Exceeded from the receiving port's address.
func TestTimeExceeded6(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	f := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagSYN, "")
	hdr.IPv6(f[14:]).SetHopLimit(1)
	r.inject(0, f)
	w.poll()
	out := r.sent(0)
	if len(out) != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("no Time Exceeded (drops %v)", dropsOf(w))
	}
	eth, ip, icmp := checkICMPv6(t, out[0])
	if eth.Dst() != clientMAC || ip.Src() != wanAddr6 || ip.Dst() != clientAddr6 || icmp.Type() != hdr.ICMPv6TimeExceeded || icmp.Code() != 0 ||
		string(icmp[8:]) != string(f[14:]) {
		t.Fatalf("%v -> %v type %d code %d", ip.Src(), ip.Dst(), icmp.Type(), icmp.Code())
	}
	if w.cnt.own[ICMPv6HopLimit] != 1 {
		t.Fatalf("icmpv6_time_exceeded %d", w.cnt.own[ICMPv6HopLimit])
	}
	// An error whose hop limit runs out is dropped, not answered.
	e := fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, l4Frame6(wanMAC, clientMAC, hdr.ProtoTCP, vip6, 80, clientAddr6, 40000, hdr.TCPFlagACK, ""), 0))
	hdr.IPv6(e[14:]).SetHopLimit(1)
	r.inject(0, e)
	w.poll()
	if n := len(r.sent(0)) + len(r.sent(1)); n != 0 || w.cnt.own[DropTTLExpired] != 1 {
		t.Fatalf("an expiring error: sent %d, ttl_expired %d", n, w.cnt.own[DropTTLExpired])
	}
}

// TestICMPv6ErrorPathDoesNotAllocate guards the translated errors' path,
// NAT66's and NAT64's both ways.
func TestICMPv6ErrorPathDoesNotAllocate(t *testing.T) {
	r := rigSvc6(t)
	r.inject(0, udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 100))
	r.w.poll()
	r.sent(1)
	sent := udp6Frame(lanMAC, rs1MAC, clientAddr6, 41000, rs61, 5353, 1400)
	allocs := r.allocsPerBurst(1, 0, func(int) []byte {
		return icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1280, sent, 0)
	})
	if allocs != 0 {
		t.Fatalf("the ICMPv6 error path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[ICMPErrors] < 100 {
		t.Fatalf("%d errors delivered (drops %v)", r.w.cnt.own[ICMPErrors], dropsOf(r.w))
	}

	// NAT64, both ways: a server side's ICMPv4 error becomes ICMPv6, a
	// client side's ICMPv6 error ICMPv4.
	_, toServer := nat64Conn(t, r, 40000, 1400)
	lport := hdr.TCP(hdr.IPv4(toServer[14:]).Payload()).SrcPort()
	errors := r.w.cnt.own[ICMPErrors]
	allocs = r.allocsPerBurst(1, 0, func(int) []byte {
		return icmp4Error(router4, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1300, toServer, 0)
	})
	if allocs != 0 {
		t.Fatalf("the NAT64 ICMPv4 error path allocates %.1f times per burst", allocs)
	}
	reply := tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, string(make([]byte, 1300)))
	r.inject(1, reply)
	r.w.poll()
	toClient := r.sent(0)
	if len(toClient) != 1 {
		t.Fatalf("the reply was not translated (drops %v)", dropsOf(r.w))
	}
	allocs = r.allocsPerBurst(0, 1, func(int) []byte {
		return fromClient(icmp6Error(routerAddr6, vip6, hdr.ICMPv6PacketTooBig, 0, 1280, toClient[0], 1280-48))
	})
	if allocs != 0 {
		t.Fatalf("the NAT64 ICMPv6 error path allocates %.1f times per burst", allocs)
	}
	if n := r.w.cnt.own[ICMPErrors] - errors; n < 150 {
		t.Fatalf("%d NAT64 errors delivered (drops %v)", n, dropsOf(r.w))
	}
}

// TestICMPv6ErrorsReachTheOwner: on two workers, an ICMPv6 error about a
// NAT66 connection reaches the worker that owns it whichever queue it
// arrives on (a NIC hashes it on the router's address), steered by the
// quoted packet's client endpoint, from either side.
func TestICMPv6ErrorsReachTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	svc := service2(ServiceKey{VIP6: vip6, Port: 53, Proto: hdr.ProtoUDP}, sched.Dest{ID: 0, Addr6: rs61, Port: 5353, Weight: 1})
	svc.PersistMask = ^uint32(0)
	r.apply6(svc)
	delivered := 0
	for i := 0; i < 16; i++ {
		port := uint16(43000 + i)
		owner := Owner6(&clientAddr6, port, 2)
		r.inject(0, owner, udp6Frame(clientMAC, wanMAC, clientAddr6, port, vip6, 53, 10))
		r.pollBoth()
		if n := len(r.sentAll(1)); n != 1 {
			t.Fatalf("query %d not forwarded", i)
		}
		other := 1 - owner
		sent := udp6Frame(lanMAC, rs1MAC, clientAddr6, port, rs61, 5353, 1400)
		reply := udp6Frame(wanMAC, clientMAC, vip6, 53, clientAddr6, port, 60)
		toClient, toServer := r.deliverErrors(t, other,
			icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1280, sent, 0),
			fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, reply, 0)))
		checkICMPv6(t, toClient)
		checkICMPv6(t, toServer)
		delivered += 2
	}
	r.checkHandedErrors(t, delivered)
}

// deliverErrors puts an error from the servers' side on worker other's
// lan queue and one from the client's side on its wan queue, and returns
// what the client and the server got: one frame each.
func (r *multiRig) deliverErrors(t *testing.T, other int, fromServer, fromClient []byte) (toClient, toServer []byte) {
	t.Helper()
	r.inject(1, other, fromServer)
	r.inject(0, other, fromClient)
	r.pollBoth()
	c, s := r.sentAll(0), r.sentAll(1)
	if len(c) != 1 || len(s) != 1 {
		t.Fatalf("errors delivered %d to the client, %d to the server", len(c), len(s))
	}
	return c[0], s[0]
}

// apply6 gives the rig's ports their IPv6 addresses and both workers svc,
// with rs61 and the client resolved.
func (r *multiRig) apply6(svc Service) {
	ports := append([]PortInfo(nil), r.w[0].snap.Ports...)
	m64 := Mask6(64)
	ports[0].Addr6, ports[0].Mask6, ports[0].Net6 = wanAddr6, m64, masked6(&wanAddr6, &m64)
	ports[1].Addr6, ports[1].Mask6, ports[1].Net6 = lanAddr6, m64, masked6(&lanAddr6, &m64)
	old := r.w[0].snap
	next := NewSnapshot(old.Gen+1, ports, []Service{svc}, old.Neigh, old.Timeouts)
	next.Neigh6 = map[hdr.Addr6]hdr.MAC{rs61: rs1MAC, clientAddr6: clientMAC}
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
		w.runCommands(0)
	}
}

// checkHandedErrors checks that the workers delivered n ICMP errors, each
// handed over from the other worker, and found every connection.
func (r *multiRig) checkHandedErrors(t *testing.T, n int) {
	t.Helper()
	var errs, handed uint64
	for _, w := range r.w {
		errs += w.cnt.own[ICMPErrors]
		handed += w.cnt.own[HandedOff]
		if w.cnt.own[DropNoConn] != 0 {
			t.Fatalf("worker %d: no_conn %d", w.cfg.ID, w.cnt.own[DropNoConn])
		}
	}
	if errs != uint64(n) || handed < uint64(n) {
		t.Fatalf("errors delivered %d, handed off %d; want %d each at least", errs, handed, n)
	}
}
