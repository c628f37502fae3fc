package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// snatAddr is withSNAT's address, on the wan port's subnet.
var snatAddr = ip4(203, 0, 113, 60)

// withSNAT gives the rig's worker SNAT rules for TCP and UDP: sources in
// the lan subnet leave from snatAddr.
func withSNAT(t testing.TB, r *rig) {
	t.Helper()
	var svcs []Service
	for i, proto := range []uint8{hdr.ProtoTCP, hdr.ProtoUDP} {
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
	for i, proto := range []uint8{hdr.ProtoTCP, hdr.ProtoUDP} {
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
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svcs...), old.Neigh, old.Timeouts)
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
}

// TestSNATPathDoesNotAllocate guards the SNAT path: the rule's lookup on
// a service miss, a new connection with a local port, the rewrite.
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
}
