package lcore

import (
	"bytes"
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// lanRouter is a router between lbd and the real servers.
var lanRouter = ip4(198, 51, 100, 254)

// withDF sets DF on a frame's IPv4 header.
func withDF(f []byte) []byte {
	ip := hdr.IPv4(f[14:])
	ip.SetFlagsFragmentOffset(hdr.IPv4FlagDontFragment, 0)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	return f
}

// routerError is the ICMP error a router sends lbd about an IPIP frame
// lbd sent, quoting its first n bytes from the outer IP header on (a
// Linux router quotes up to 548).
func routerError(ipip []byte, typ, code uint8, mtu uint16, n int) []byte {
	q := ipip[14:]
	if len(q) > n {
		q = q[:n]
	}
	l4 := make([]byte, 8+len(q))
	icmp := hdr.ICMP(l4)
	icmp.SetType(typ)
	icmp.SetCode(code)
	if mtu != 0 {
		icmp.SetMTU(mtu)
	}
	copy(l4[8:], q)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(rs2MAC, lanMAC, lanRouter, lanAddr, hdr.ProtoICMP, false, l4)
}

// TestTunnelErrorToClient: a router's "fragmentation needed" about our
// IPIP packet reaches the client as one about the packet it sent the VIP,
// from the VIP, with room for the IPIP header; lbd then answers the
// client's next too-big packet itself with the learnt MTU.
func TestTunnelErrorToClient(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	seg := withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1400))))
	r.inject(0, seg)
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("not tunnelled (stats %v)", w.cnt.own)
	}
	ipip := out[0]
	if outer := hdr.IPv4(ipip[14:]); !outer.DF() {
		t.Fatal("the outer header lost the inner DF")
	}
	r.inject(1, routerError(ipip, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1280, 548))
	w.poll()
	if n := len(r.sent(1)); n != 0 {
		t.Fatalf("%d packets went to the servers' side", n)
	}
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("no error reached the client (stats %v)", w.cnt.own)
	}
	// The golden frame: Ethernet to the client, IP VIP -> client, ICMP 3/4
	// with MTU 1260, quoting what the router quoted of the inner packet
	// as lbd tunnelled it (its TTL already decremented).
	quoted := ipip[14+20 : 14+548]
	want := make([]byte, 8+len(quoted))
	icmp := hdr.ICMP(want)
	icmp.SetType(hdr.ICMPDestUnreachable)
	icmp.SetCode(hdr.ICMPCodeFragNeeded)
	icmp.SetMTU(1260)
	copy(want[8:], quoted)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	golden := ipFrame(wanMAC, clientMAC, vipTUN, clientIP, hdr.ProtoICMP, false, want)
	hdr.IPv4(golden[14:]).SetTTLWithChecksumUpdate(hdr.DefaultTTL)
	if !bytes.Equal(out[0], golden) {
		t.Fatalf("error to the client\n got %x\nwant %x", out[0], golden)
	}
	if w.cnt.own[ICMPErrors] != 1 {
		t.Fatalf("icmp_errors = %d", w.cnt.own[ICMPErrors])
	}

	// The path MTU to rs2 is now 1280: a 1300-byte DF packet of the
	// connection is answered by lbd with 1260, not tunnelled.
	r.inject(0, withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagACK, string(make([]byte, 1260)))))
	w.poll()
	out = r.sent(0)
	if len(r.sent(1)) != 0 || len(out) != 1 {
		t.Fatal("a packet above the learnt path MTU was tunnelled")
	}
	if got := hdr.ICMP(hdr.IPv4(out[0][14:]).Payload()); got.Code() != hdr.ICMPCodeFragNeeded || got.MTU() != 1260 {
		t.Fatalf("lbd's own answer %x", got)
	}
	// One that fits still goes.
	r.inject(0, withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagACK, string(make([]byte, 1220)))))
	w.poll()
	if len(r.sent(1)) != 1 {
		t.Fatal("a packet within the learnt path MTU was not tunnelled")
	}
}

// TestTunnelErrorKept: other errors quoting our IPIP packet reach the
// client with their type, code and word as they are; a quote that stops
// before the inner ports names no connection and is dropped and counted,
// as are a forged MTU and errors about IPIP packets not ours or not sent
// to us.
func TestTunnelErrorKept(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, "")))
	w.poll()
	ipip := r.sent(1)[0]
	r.inject(1, routerError(ipip, hdr.ICMPDestUnreachable, 1, 0, 548)) // host unreachable
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("host unreachable not passed to the client (stats %v)", w.cnt.own)
	}
	ip := hdr.IPv4(out[0][14:])
	icmp := hdr.ICMP(ip.Payload())
	if ip.Src() != vipTUN || ip.Dst() != clientIP || icmp.Type() != hdr.ICMPDestUnreachable || icmp.Code() != 1 ||
		icmp.Checksum() != recomputeICMP(icmp) || !bytes.Equal(icmp.Payload(), ipip[14+20:]) {
		t.Fatalf("translated %x", out[0])
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		why   Stat
	}{
		{"outer header and 8 bytes (RFC 792)", routerError(ipip, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1280, 28), DropBadICMP},
		{"inner header without ports", routerError(ipip, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1280, 44), DropBadICMP},
		{"MTU 0", routerError(ipip, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 0, 548), DropBadICMP},
		{"MTU not below the packet", routerError(ipip, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1500, 548), DropBadICMP},
		{"not from our address", func() []byte {
			f := append([]byte(nil), ipip...)
			o := hdr.IPv4(f[14:])
			o.SetSrcWithChecksumUpdate(ip4(198, 51, 100, 9))
			return routerError(f, hdr.ICMPDestUnreachable, 1, 0, 548)
		}(), DropNoConn},
		{"not to our address", func() []byte {
			f := routerError(ipip, hdr.ICMPDestUnreachable, 1, 0, 548)
			hdr.IPv4(f[14:]).SetDstWithChecksumUpdate(ip4(198, 51, 100, 77))
			return f
		}(), DropNoConn},
	} {
		before := w.cnt.own[tc.why]
		r.inject(1, tc.frame)
		w.poll()
		if n := len(r.sent(0)) + len(r.sent(1)); n != 0 || w.cnt.own[tc.why] != before+1 {
			t.Fatalf("%s: %d sent, %s %d -> %d", tc.name, n, tc.why.Name(), before, w.cnt.own[tc.why])
		}
	}
}

// TestTunnelOuterHeader: the outer header carries a per-worker IP ID that
// changes with every packet and DF only when the inner packet has it; a
// too-big packet without DF is dropped as too_big, not silently.
func TestTunnelOuterHeader(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, ""))
	r.inject(0, withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagACK, "")))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("%d tunnelled", len(out))
	}
	a, b := hdr.IPv4(out[0][14:]), hdr.IPv4(out[1][14:])
	if a.DF() || !b.DF() || b.ID() != a.ID()+1 || !a.IsChecksumValid() || !b.IsChecksumValid() {
		t.Fatalf("outer headers %x / %x", out[0][14:34], out[1][14:34])
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagACK, string(make([]byte, 1500-40))))
	w.poll()
	if len(r.sent(0))+len(r.sent(1)) != 0 || w.cnt.own[DropTooBig] != 1 {
		t.Fatalf("too big without DF: too_big = %d", w.cnt.own[DropTooBig])
	}
}

// TestTunnelErrorReachesTheOwner: the router's error is hashed on the
// router's address; whichever worker receives it, the owner of the inner
// packet's client endpoint translates it.
func TestTunnelErrorReachesTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	r.apply(nil, service2(ServiceKey{VIP: vipTUN, Port: 80, Proto: hdr.ProtoTCP},
		sched.Dest{ID: 0, Addr: rs2, Port: 80, Weight: 1, Fwd: fwd.TUN}))
	// The SYNs stay below minPathMTU, which each worker learns at the
	// first error.
	for port := uint16(47000); port < 47008; port++ {
		owner := Owner(clientIP, port, 2)
		r.inject(0, owner, withDF(tcpFrame(clientMAC, wanMAC, clientIP, port, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 480)))))
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 1 {
			t.Fatalf("port %d: SYN not tunnelled", port)
		}
		r.inject(1, 1-owner, routerError(out[0], hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 60, 548))
		r.pollBoth()
		got := r.take(0, owner)
		if len(got) != 1 {
			t.Fatalf("port %d: the error did not reach the client through the owner %d (stats %v / %v)",
				port, owner, r.w[owner].cnt.own, r.w[1-owner].cnt.own)
		}
		// A reported MTU below Linux's min_pmtu is raised to it.
		icmp := hdr.ICMP(hdr.IPv4(got[0][14:]).Payload())
		if icmp.MTU() != minPathMTU-ipipHeaderLen {
			t.Fatalf("port %d: MTU %d to the client", port, icmp.MTU())
		}
	}
}

// TestTunnelErrorPathDoesNotAllocate: parsing an error about our IPIP
// packet, steering, translating it for the client and learning the path
// MTU allocates nothing.
func TestTunnelErrorPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1200)))))
	w.poll()
	frame := routerError(r.sent(1)[0], hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1000, 548)
	if allocs := r.allocsPerBurst(1, 0, func(int) []byte { return frame }); allocs != 0 {
		t.Fatalf("the tunnel error path allocates %.1f times per burst", allocs)
	}
	if w.cnt.own[ICMPErrors] < 100 {
		t.Fatalf("only %d errors delivered", w.cnt.own[ICMPErrors])
	}
}
