package lcore

import (
	"maps"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// snatAddr is withSNAT's address, on the wan port's subnet.
var snatAddr = ip4(203, 0, 113, 60)

// snatProtos are the protocols of the rules withSNAT gives.
var snatProtos = []uint8{hdr.ProtoTCP, hdr.ProtoUDP, hdr.ProtoICMP}

// withSNAT gives the rig's worker SNAT rules for TCP, UDP and ICMP:
// sources in the lan subnet leave from snatAddr.
func withSNAT(t testing.TB, r *rig) {
	t.Helper()
	var svcs []Service
	for i, proto := range snatProtos {
		svcs = append(svcs, Service{Key: ServiceKey{VIP: ip4(198, 51, 100, 0), Proto: proto},
			Dests:      []sched.Dest{{ID: uint32(20 + i), Weight: 1, Fwd: fwd.FullNAT}},
			LocalAddrs: []uint32{snatAddr}, SNAT: &SNATRule{Net: ip4(198, 51, 100, 0), Mask: 0xffffff00}})
	}
	old := r.w.snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svcs...), old.Neigh, old.Timeouts)
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
	r.w.runCommands(0)
	if r.w.AckedGen() != snap.Gen {
		t.Fatal("the worker did not take the SNAT snapshot")
	}
}

// TestSNATBothWays: a real server's own connection to a host beyond lbd
// (no service, no VIP) leaves from the SNAT address and a port of it,
// its destination unchanged; the host's answers to that address and port
// go back to the server; UDP too. A packet from outside the rule's
// source network, or to lbd's own address, is not translated.
func TestSNATBothWays(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	w := r.w
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 33000, clientIP, 443, hdr.TCPFlagSYN, ""))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	lport := tcp.SrcPort()
	if ip.Src() != snatAddr || ip.Dst() != clientIP || tcp.DstPort() != 443 {
		t.Fatalf("the server's SYN left as %x:%d -> %x:%d, want from %x to %x:443", ip.Src(), lport, ip.Dst(), tcp.DstPort(), snatAddr, clientIP)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 443, snatAddr, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	_, ip, tcp = checkTCP(t, one(t, r, 1))
	if ip.Src() != clientIP || tcp.SrcPort() != 443 || ip.Dst() != rs1 || tcp.DstPort() != 33000 {
		t.Fatalf("the answer reached the server as %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 33000, clientIP, 443, hdr.TCPFlagACK, "GET /"))
	w.poll()
	if _, ip, tcp = checkTCP(t, one(t, r, 0)); ip.Src() != snatAddr || tcp.SrcPort() != lport {
		t.Fatalf("the server's next segment left from %x:%d", ip.Src(), tcp.SrcPort())
	}
	req := &DumpRequest{Out: make([]ConnInfo, 0, 8)}
	w.Commands().Push(Command{Kind: CmdDump, Dump: req})
	for i := 0; i < 10 && !req.Done(); i++ {
		w.runCommands(0)
	}
	if c := req.Out; len(c) != 1 || c[0].State != conn.StateEstablished || c[0].RIP != clientIP || c[0].RPort != 443 ||
		c[0].Fwd != fwd.FullNAT || c[0].LIP != snatAddr || c[0].ClientIP != rs1 {
		t.Fatalf("the connection: %+v", c)
	}

	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 53, "query", true))
	w.poll()
	uip, udp := checkUDP(t, one(t, r, 0))
	if uip.Src() != snatAddr || uip.Dst() != clientIP || udp.DstPort() != 53 {
		t.Fatalf("the server's datagram left as %x -> %x:%d", uip.Src(), uip.Dst(), udp.DstPort())
	}
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 53, snatAddr, udp.SrcPort(), "answer", true))
	w.poll()
	if uip, udp = checkUDP(t, one(t, r, 1)); uip.Dst() != rs1 || udp.DstPort() != 5353 || uip.Src() != clientIP {
		t.Fatalf("the answer reached the server as %x -> %x:%d", uip.Src(), uip.Dst(), udp.DstPort())
	}

	// Not the rule's: a source outside it (dropped as before), lbd's own
	// address (the kernel's, maybe), the SNAT address itself.
	before := w.cnt.own[NewConns]
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, ip4(192, 0, 2, 9), 80, hdr.TCPFlagSYN, ""))
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 33001, lanAddr, 22, hdr.TCPFlagSYN, ""))
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 33002, snatAddr, 22, hdr.TCPFlagSYN, ""))
	w.poll()
	if w.cnt.own[NewConns] != before || len(r.sent(0))+len(r.sent(1)) != 0 {
		t.Fatalf("new connections %d (want none), drops %v", w.cnt.own[NewConns]-before, dropsOf(w))
	}
	if w.cnt.own[DropNoConn] != 2 || w.cnt.own[DropToLocal] != 1 {
		t.Fatalf("drops %v, want no_conn 2 and to_local 1", dropsOf(w))
	}
}

// TestSNATARP: lbd answers ARP for the SNAT address on the port whose
// subnet holds it.
func TestSNATARP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	r.inject(0, arpFrame(hdr.ARPRequest, clientMAC, clientIP, snatAddr))
	r.w.poll()
	a := hdr.ARP(hdr.Ethernet(one(t, r, 0)).Payload())
	if a.Op() != hdr.ARPReply || a.SenderIP() != snatAddr || a.SenderMAC() != wanMAC {
		t.Fatalf("reply: op %d %x is-at %v", a.Op(), a.SenderIP(), a.SenderMAC())
	}
}

// TestSNATSynced: a peer's SNAT connection (a FullNAT record whose
// server is its destination) is installed under the rule that holds its
// source, and forwards the answers.
func TestSNATSynced(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	w := r.w
	rec := SyncConn{ClientIP: rs1, VIP: clientIP, RIP: clientIP, ClientPort: 33000, VPort: 443, RPort: 443,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, HasExt: true,
		Ext: conn.Ext{LIP: snatAddr, LPort: lportOwnedBy(w, snatAddr)}}
	if b := install(t, w, rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 443, snatAddr, rec.Ext.LPort, hdr.TCPFlagACK, "data"))
	w.poll()
	if _, ip, tcp := checkTCP(t, one(t, r, 1)); ip.Dst() != rs1 || tcp.DstPort() != 33000 || ip.Src() != clientIP {
		t.Fatalf("the answer reached the server as %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
}

// lportOwnedBy is a local port of lip that worker w hands out.
func lportOwnedBy(w *Worker, lip uint32) uint16 {
	p, ok := w.lpools[lip].get()
	if !ok {
		panic("no local port")
	}
	w.lpools[lip].put(p)
	return p
}

// TestSNATOnTwoWorkers: whichever queue a server's packets and the
// answers arrive on, one worker holds each SNAT connection: the server's
// SYN goes to the owner of its destination endpoint, which gives it a
// local port it owns, and the answers to that port steer back to it.
func TestSNATOnTwoWorkers(t *testing.T) {
	r := newMultiRig(t, false)
	var svcs []Service
	for i, proto := range snatProtos {
		d := sched.Dest{ID: uint32(20 + i), Weight: 1, Fwd: fwd.FullNAT}
		s := Service{Key: ServiceKey{VIP: ip4(198, 51, 100, 0), Proto: proto}, Dests: []sched.Dest{d},
			LocalAddrs: []uint32{snatAddr}, SNAT: &SNATRule{Net: ip4(198, 51, 100, 0), Mask: 0xffffff00}}
		for range r.w {
			sc, _ := sched.New("rr", s.Dests, sched.Options{})
			s.Scheds = append(s.Scheds, sc)
		}
		svcs = append(svcs, s)
	}
	old := r.w[0].snap
	neigh := maps.Clone(old.Neigh)
	for host := ip4(203, 0, 113, 70); host < ip4(203, 0, 113, 90); host++ {
		neigh[host] = clientMAC // the hosts the servers ping below
	}
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svcs...), neigh, old.Timeouts)
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
		w.runCommands(0)
	}
	seen := [2]bool{}
	for dport := uint16(443); dport < 463; dport++ {
		owner := Owner(clientIP, dport, 2)
		seen[owner] = true
		other := 1 - owner
		r.inject(1, other, tcpFrame(rs1MAC, lanMAC, rs1, 33000, clientIP, dport, hdr.TCPFlagSYN, ""))
		r.pollBoth()
		out := r.take(0, owner)
		if len(out) != 1 || len(r.take(0, other)) != 0 {
			t.Fatalf("port %d: the SYN left %d times from its owner %d", dport, len(out), owner)
		}
		_, ip, tcp := checkTCP(t, out[0])
		lport := tcp.SrcPort()
		if ip.Src() != snatAddr || Owner(snatAddr, lport, 2) != owner {
			t.Fatalf("port %d: from %x:%d, a port of worker %d, want one of worker %d", dport, ip.Src(), lport, Owner(snatAddr, lport, 2), owner)
		}
		r.inject(0, other, tcpFrame(clientMAC, wanMAC, clientIP, dport, snatAddr, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
		r.pollBoth()
		back := r.take(1, owner)
		if len(back) != 1 || len(r.take(1, other)) != 0 {
			t.Fatalf("port %d: the answer reached the server %d times from worker %d", dport, len(back), owner)
		}
		if _, ip, tcp = checkTCP(t, back[0]); ip.Dst() != rs1 || tcp.DstPort() != 33000 {
			t.Fatalf("port %d: the answer went to %x:%d", dport, ip.Dst(), tcp.DstPort())
		}
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("the destinations were all one worker's: %v", seen)
	}

	// Pings to hosts of both workers: each request leaves from the owner
	// of its destination, with an identifier that worker owns as a local
	// port, and the reply to it steers back there.
	seen = [2]bool{}
	for host := ip4(203, 0, 113, 70); host < ip4(203, 0, 113, 90); host++ {
		owner := Owner(host, 0, 2)
		seen[owner] = true
		other := 1 - owner
		r.inject(1, other, pingFrame(rs1MAC, lanMAC, rs1, host, 77))
		r.pollBoth()
		out := r.take(0, owner)
		if len(out) != 1 || len(r.take(0, other)) != 0 {
			t.Fatalf("ping %x: the request left %d times from its owner %d (drops %v %v)", host, len(out), owner, dropsOf(r.w[0]), dropsOf(r.w[1]))
		}
		ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
		id := hdr.ICMP(ip.Payload()).ID()
		if ip.Src() != snatAddr || Owner(snatAddr, id, 2) != owner {
			t.Fatalf("ping %x: from %x id %d, a port of worker %d, want one of worker %d", host, ip.Src(), id, Owner(snatAddr, id, 2), owner)
		}
		r.inject(0, other, echoReplyFrame(clientMAC, wanMAC, host, snatAddr, id))
		r.pollBoth()
		back := r.take(1, owner)
		if len(back) != 1 || len(r.take(1, other)) != 0 {
			t.Fatalf("ping %x: the reply reached the server %d times from worker %d", host, len(back), owner)
		}
		if ip = hdr.IPv4(hdr.Ethernet(back[0]).Payload()); ip.Dst() != rs1 || hdr.ICMP(ip.Payload()).ID() != 77 {
			t.Fatalf("ping %x: the reply went to %x id %d", host, ip.Dst(), hdr.ICMP(ip.Payload()).ID())
		}
	}
	if !seen[0] || !seen[1] {
		t.Fatalf("the pinged hosts were all one worker's: %v", seen)
	}
}

// pingFrame is an echo request src -> dst with identifier id.
func pingFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, id uint16) []byte {
	return echoOfType(hdr.ICMPEchoRequest, srcMAC, dstMAC, src, dst, id, "ping")
}

// checkICMP checks frame f is a whole IPv4 ICMP message of type typ,
// both checksums right, and returns its header and message.
func checkICMP(t *testing.T, f []byte, typ uint8) (hdr.IPv4, hdr.ICMP) {
	t.Helper()
	ip := hdr.IPv4(hdr.Ethernet(f).Payload())
	if !ip.IsValid(len(ip)) || ip.Protocol() != hdr.ProtoICMP || !ip.IsChecksumValid() {
		t.Fatalf("not an IPv4 ICMP packet with a good header checksum: %x", f)
	}
	icmp := hdr.ICMP(ip.Payload())
	if icmp.Type() != typ || hdr.Fold(hdr.Checksum(icmp, 0)) != 0xffff {
		t.Fatalf("ICMP type %d (want %d), checksum %#04x (verifies: %v)", icmp.Type(), typ, icmp.Checksum(), hdr.Fold(hdr.Checksum(icmp, 0)) == 0xffff)
	}
	return ip, icmp
}

// TestSNATPing: a real server's ping to a host beyond lbd leaves from the
// SNAT address with an identifier of its own (a local port), and the
// host's reply goes back to the server with the server's identifier,
// each checksum right; the next echo of the ping takes the same mapping,
// which the listing shows. Pings outside the rule, and to lbd, are not
// translated: lbd answers those to its addresses, the SNAT address too.
func TestSNATPing(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	w := r.w
	r.inject(1, pingFrame(rs1MAC, lanMAC, rs1, clientIP, 77))
	w.poll()
	ip, icmp := checkICMP(t, one(t, r, 0), hdr.ICMPEchoRequest)
	id := icmp.ID()
	if ip.Src() != snatAddr || ip.Dst() != clientIP || id == 77 || ip.TTL() != hdr.DefaultTTL-1 || string(icmp.Payload()) != "ping" {
		t.Fatalf("the server's ping left as %x -> %x id %d ttl %d", ip.Src(), ip.Dst(), id, ip.TTL())
	}
	r.inject(0, echoReplyFrame(clientMAC, wanMAC, clientIP, snatAddr, id))
	w.poll()
	ip, icmp = checkICMP(t, one(t, r, 1), hdr.ICMPEchoReply)
	if ip.Src() != clientIP || ip.Dst() != rs1 || icmp.ID() != 77 || string(icmp.Payload()) != "pong" {
		t.Fatalf("the reply reached the server as %x -> %x id %d", ip.Src(), ip.Dst(), icmp.ID())
	}
	r.inject(1, pingFrame(rs1MAC, lanMAC, rs1, clientIP, 77))
	w.poll()
	if ip, icmp = checkICMP(t, one(t, r, 0), hdr.ICMPEchoRequest); icmp.ID() != id || ip.Src() != snatAddr {
		t.Fatalf("the next echo left from %x id %d, want the mapping's id %d", ip.Src(), icmp.ID(), id)
	}
	if w.cnt.own[NewConns] != 1 {
		t.Fatalf("%d connections for one ping, want 1", w.cnt.own[NewConns])
	}
	req := &DumpRequest{Out: make([]ConnInfo, 0, 8)}
	w.Commands().Push(Command{Kind: CmdDump, Dump: req})
	for i := 0; i < 10 && !req.Done(); i++ {
		w.runCommands(0)
	}
	if c := req.Out; len(c) != 1 || c[0].Proto != hdr.ProtoICMP || c[0].ClientIP != rs1 || c[0].ClientPort != 77 ||
		c[0].RIP != clientIP || c[0].LIP != snatAddr || c[0].LPort != id || c[0].State != conn.StateUDP {
		t.Fatalf("the mapping: %+v", c)
	}

	// A reply nobody asked for (another identifier) is not delivered; a
	// ping from outside the rule is dropped; one to lbd is answered.
	r.inject(0, echoReplyFrame(clientMAC, wanMAC, clientIP, snatAddr, id+1))
	r.inject(0, pingFrame(clientMAC, wanMAC, clientIP, ip4(192, 0, 2, 9), 5))
	w.poll()
	if n := len(r.sent(0)) + len(r.sent(1)); n != 0 {
		t.Fatalf("%d packets sent, want none (drops %v)", n, dropsOf(w))
	}
	r.inject(1, pingFrame(rs1MAC, lanMAC, rs1, lanAddr, 78))
	w.poll()
	if ip, icmp = checkICMP(t, one(t, r, 1), hdr.ICMPEchoReply); ip.Src() != lanAddr || ip.Dst() != rs1 || icmp.ID() != 78 {
		t.Fatalf("lbd's answer to the server's ping: %x -> %x id %d", ip.Src(), ip.Dst(), icmp.ID())
	}
	r.inject(0, pingFrame(clientMAC, wanMAC, clientIP, snatAddr, 79))
	w.poll()
	if ip, icmp = checkICMP(t, one(t, r, 0), hdr.ICMPEchoReply); ip.Src() != snatAddr || ip.Dst() != clientIP || icmp.ID() != 79 {
		t.Fatalf("lbd's answer to a ping of the SNAT address: %x -> %x id %d", ip.Src(), ip.Dst(), icmp.ID())
	}
	if w.cnt.own[NewConns] != 1 {
		t.Fatalf("%d connections, want still 1", w.cnt.own[NewConns])
	}
}

// TestSNATPathDoesNotAllocate guards the SNAT path: the rule's lookup on
// a service miss, a new connection with a local port, the rewrite; for
// a TCP SYN and for a ping.
func TestSNATPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	allocs := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpFrame(rs1MAC, lanMAC, rs1, uint16(20000+i), clientIP, 443, hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the SNAT path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections (drops %v)", r.w.cnt.own[NewConns], dropsOf(r.w))
	}
	// Pings, each a new mapping.
	before := r.w.cnt.own[NewConns]
	allocs = r.allocsPerBurst(1, 0, func(i int) []byte {
		return pingFrame(rs1MAC, lanMAC, rs1, clientIP, uint16(1000+i))
	})
	if allocs != 0 {
		t.Fatalf("the SNAT ping path allocates %.1f times per burst", allocs)
	}
	if n := r.w.cnt.own[NewConns] - before; n < 100 {
		t.Fatalf("only %d pings mapped (drops %v)", n, dropsOf(r.w))
	}
}

// TestSNATErrors: a router beyond lbd reports on a SNAT connection's
// packet (time exceeded, as traceroute and mtr draw out): the error
// reaches the server from that router, not from the destination,
// quoting what the server sent; for a ping, its own identifier, the
// quoted checksum as the server computed it.
func TestSNATErrors(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSNAT(t, r)
	w := r.w
	router := ip4(203, 0, 113, 254)
	ping := pingFrame(rs1MAC, lanMAC, rs1, clientIP, 77)
	r.inject(1, ping)
	w.poll()
	left := one(t, r, 0)
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, router, snatAddr, hdr.ICMPTimeExceeded, 0, left))
	w.poll()
	ip, icmp := checkICMP(t, one(t, r, 1), hdr.ICMPTimeExceeded)
	q := hdr.IPv4(icmp.Payload())
	qicmp := hdr.ICMP(q[q.HeaderLen():])
	sent := hdr.ICMP(hdr.IPv4(hdr.Ethernet(ping).Payload()).Payload())
	if ip.Src() != router || ip.Dst() != rs1 || q.Src() != rs1 || q.Dst() != clientIP || !q.IsChecksumValid() ||
		qicmp.ID() != 77 || qicmp.Checksum() != sent.Checksum() {
		t.Fatalf("the error about the ping reached the server as %x -> %x quoting %x -> %x id %d checksum %#04x (sent %#04x)",
			ip.Src(), ip.Dst(), q.Src(), q.Dst(), qicmp.ID(), qicmp.Checksum(), sent.Checksum())
	}

	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 53, "query", true))
	w.poll()
	left = one(t, r, 0)
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, router, snatAddr, hdr.ICMPTimeExceeded, 0, left))
	w.poll()
	ip, icmp = checkICMP(t, one(t, r, 1), hdr.ICMPTimeExceeded)
	q = hdr.IPv4(icmp.Payload())
	qudp := hdr.UDP(q[q.HeaderLen():])
	if ip.Src() != router || ip.Dst() != rs1 || q.Src() != rs1 || qudp.SrcPort() != 5353 || q.Dst() != clientIP || qudp.DstPort() != 53 {
		t.Fatalf("the error about the datagram reached the server as %x -> %x quoting %x:%d -> %x:%d",
			ip.Src(), ip.Dst(), q.Src(), qudp.SrcPort(), q.Dst(), qudp.DstPort())
	}
}
