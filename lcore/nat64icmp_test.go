package lcore

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// router4 is an IPv4 router between lbd and the NAT64 servers.
var router4 = ip4(198, 51, 100, 254)

// icmp4Error is an ICMPv4 error frame from src to dst on the lan side
// quoting the IPv4 packet of frame (cut to quoteLen bytes when > 0).
func icmp4Error(src, dst uint32, typ, code uint8, word uint32, frame []byte, quoteLen int) []byte {
	q := hdr.IPv4(frame[14:])
	msg := errorMsg(typ, code, word, q[:q.TotalLength()], quoteLen)
	hdr.ICMP(msg).SetChecksum(hdr.ICMPChecksum(msg))
	return ipFrame(rs1MAC, lanMAC, src, dst, hdr.ProtoICMP, false, msg)
}

// checkICMPv4 parses a sent frame as an ICMPv4 message and checks its
// header and message checksums by full recomputation.
func checkICMPv4(t *testing.T, f []byte) (hdr.Ethernet, hdr.IPv4, hdr.ICMP) {
	t.Helper()
	eth := hdr.Ethernet(f)
	ip := hdr.IPv4(eth.Payload())
	if eth.EtherType() != hdr.EtherTypeIPv4 || !ip.IsValid(len(ip)) || !ip.IsChecksumValid() || ip.Protocol() != hdr.ProtoICMP {
		t.Fatalf("not ICMPv4: %x", f)
	}
	icmp := hdr.ICMP(ip.Payload())
	if c := hdr.ICMPChecksum(icmp); c != icmp.Checksum() {
		t.Fatalf("ICMP checksum %#04x, recomputed %#04x", icmp.Checksum(), c)
	}
	return eth, ip, icmp
}

// sameButHop reports whether the IPv6 packet q (as an error quotes it)
// is the start of the packet of frame, its hop limit apart.
func sameButHop(q []byte, frame []byte) bool {
	orig := append([]byte(nil), frame[14:]...)
	if len(q) > len(orig) {
		return false
	}
	orig[7] = q[7]
	return bytes.Equal(q, orig[:len(q)])
}

// nat64Conn opens a NAT64 TCP connection from clientAddr6:cport with a
// SYN carrying n bytes; it returns the client's IPv6 frame and the IPv4
// frame lbd sent the server.
func nat64Conn(t *testing.T, r *rig, cport uint16, n int) (client, sent []byte) {
	t.Helper()
	client = l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, cport, vip6, 8080, hdr.TCPFlagSYN, strings.Repeat("x", n))
	r.inject(0, client)
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("the SYN was not translated (drops %v)", dropsOf(r.w))
	}
	return client, out[0]
}

// TestICMPErrors64FromServerSide: an ICMPv4 error about a packet lbd sent
// a NAT64 server reaches the client as ICMPv6 from the VIP, quoting the
// packet the client sent (bytes equal but the hop limit), with the
// type, code and MTU mapped (RFC 7915 4.2), a quote cut to fit 1280
// bytes, and checksums a full recomputation agrees with.
func TestICMPErrors64FromServerSide(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	client, sent := nat64Conn(t, r, 40000, 1400)
	for _, tc := range []struct {
		name       string
		typ, code  uint8
		word       uint32
		quoteLen   int
		t6, c6     uint8
		w6         uint32
		wholeQuote bool
	}{
		{"frag needed", hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1300, 0, hdr.ICMPv6PacketTooBig, 0, 1320, false},
		{"frag needed below 1260", hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 576, 0, hdr.ICMPv6PacketTooBig, 0, 1280, false},
		{"port unreachable, RFC 792 quote", hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0, 28, hdr.ICMPv6DestUnreachable, 4, 0, false},
		{"host unreachable, 548 bytes", hdr.ICMPDestUnreachable, 1, 0, 548, hdr.ICMPv6DestUnreachable, 0, 0, false},
		{"time exceeded", hdr.ICMPTimeExceeded, 0, 0, 0, hdr.ICMPv6TimeExceeded, 0, 0, false},
		{"protocol unreachable", hdr.ICMPDestUnreachable, 2, 0, 0, hdr.ICMPv6ParamProblem, 1, 6, false},
		{"parameter problem at the TTL", hdr.ICMPParamProblem, 0, 8 << 24, 0, hdr.ICMPv6ParamProblem, 0, 7, false},
	} {
		r.inject(1, icmp4Error(router4, lip64, tc.typ, tc.code, tc.word, sent, tc.quoteLen))
		w.poll()
		out := r.sent(0)
		if len(out) != 1 {
			t.Fatalf("%s: not delivered (drops %v)", tc.name, dropsOf(w))
		}
		eth, ip, icmp := checkICMPv6(t, out[0])
		if eth.Dst() != clientMAC || ip.Src() != vip6 || ip.Dst() != clientAddr6 || ip.HopLimit() != 63 {
			t.Fatalf("%s: to %v, %v -> %v hop %d", tc.name, eth.Dst(), ip.Src(), ip.Dst(), ip.HopLimit())
		}
		if icmp.Type() != tc.t6 || icmp.Code() != tc.c6 || binary.BigEndian.Uint32(icmp[4:]) != tc.w6 {
			t.Fatalf("%s: type %d code %d word %d", tc.name, icmp.Type(), icmp.Code(), binary.BigEndian.Uint32(icmp[4:]))
		}
		q := icmp[8:]
		want := len(client) - 14 // the whole packet, 1460 bytes: cut to fit 1280
		if tc.quoteLen > 0 {
			want = tc.quoteLen + 20
		}
		if want = min(want, 1280-48); len(q) != want || len(ip) > 1280 {
			t.Fatalf("%s: quote of %d bytes, want %d (error of %d)", tc.name, len(q), want, len(ip))
		}
		if !sameButHop(q, client) {
			t.Fatalf("%s: the quote is not the client's packet:\n%x\n%x", tc.name, q, client[14:14+len(q)])
		}
	}
	if w.cnt.own[ICMPErrors] != 7 {
		t.Fatalf("icmp_errors %d", w.cnt.own[ICMPErrors])
	}

	// A whole UDP datagram quoted: its checksum, translated, is the
	// client's.
	udp := l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 5300, 0, "query")
	r.inject(0, udp)
	w.poll()
	toServer := r.sent(1)
	if len(toServer) != 1 {
		t.Fatalf("UDP not translated (drops %v)", dropsOf(w))
	}
	r.inject(1, icmp4Error(rs1, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0, toServer[0], 0))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("port unreachable not delivered (drops %v)", dropsOf(w))
	}
	_, _, icmp := checkICMPv6(t, out[0])
	qip := hdr.IPv6(icmp[8:])
	if !sameButHop(qip, udp) || len(qip) != len(udp)-14 {
		t.Fatalf("the quote is not the client's datagram: %x", qip)
	}
	if got, want := port6(qip.Payload(), 6), hdr.TransportChecksum6(qip.Src(), qip.Dst(), hdr.ProtoUDP, qip.Payload()); got != want {
		t.Fatalf("quoted UDP checksum %#04x, recomputed %#04x", got, want)
	}

	// A wrong ICMPv4 checksum stays wrong.
	bad := icmp4Error(router4, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1300, sent, 0)
	bad[14+20+2] ^= 0x10
	r.inject(1, bad)
	w.poll()
	if out = r.sent(0); len(out) != 1 {
		t.Fatalf("sent %d", len(out))
	}
	ip := hdr.IPv6(out[0][14:])
	if m := hdr.ICMP(ip.Payload()); hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, m) == m.Checksum() {
		t.Fatal("a wrong ICMPv4 checksum came out right")
	}

	// Not translated: dropped and counted.
	for _, tc := range []struct {
		name      string
		typ, code uint8
		word      uint32
		frame     []byte
		why       Stat
	}{
		{"precedence violation", hdr.ICMPDestUnreachable, 14, 0, sent, DropICMPType},
		{"parameter problem at the ID", hdr.ICMPParamProblem, 0, 4 << 24, sent, DropICMPType},
		{"missing option", hdr.ICMPParamProblem, 1, 0, sent, DropICMPType},
		{"an MTU the packet fitted", hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1500, sent, DropBadICMP},
	} {
		before := w.cnt.own[tc.why]
		r.inject(1, icmp4Error(router4, lip64, tc.typ, tc.code, tc.word, tc.frame, 0))
		w.poll()
		if n := len(r.sent(0)); n != 0 || w.cnt.own[tc.why] != before+1 {
			t.Fatalf("%s: sent %d, drops %v", tc.name, n, dropsOf(w))
		}
	}
}

// TestICMPErrors64FromClientSide: an ICMPv6 error about a packet lbd
// sent a NAT64 client reaches the server as ICMPv4 from the local
// address, quoting the server's packet (its transport bytes as the
// server sent them), the type, code and MTU mapped (RFC 7915 5.2).
func TestICMPErrors64FromClientSide(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	_, sent := nat64Conn(t, r, 40000, 0)
	lport := hdr.TCP(hdr.IPv4(sent[14:]).Payload()).SrcPort()
	answer := tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, strings.Repeat("y", 1300))
	r.inject(1, answer)
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("the answer was not translated (drops %v)", dropsOf(w))
	}
	reply := out[0] // VIP:8080 -> client:40000, 1360 bytes of IPv6
	for _, tc := range []struct {
		name      string
		typ, code uint8
		word      uint32
		t4, c4    uint8
		w4        uint32
	}{
		{"packet too big", hdr.ICMPv6PacketTooBig, 0, 1300, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1280},
		{"packet too big below 1280", hdr.ICMPv6PacketTooBig, 0, 1000, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1260},
		{"port unreachable", hdr.ICMPv6DestUnreachable, 4, 0, hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0},
		{"prohibited", hdr.ICMPv6DestUnreachable, 1, 0, hdr.ICMPDestUnreachable, 10, 0},
		{"time exceeded", hdr.ICMPv6TimeExceeded, 0, 0, hdr.ICMPTimeExceeded, 0, 0},
		{"parameter problem at the next header", hdr.ICMPv6ParamProblem, 0, 6, hdr.ICMPParamProblem, 0, 9 << 24},
		{"unrecognized next header", hdr.ICMPv6ParamProblem, 1, 0, hdr.ICMPDestUnreachable, 2, 0},
	} {
		// A router quotes what fits in 1280 bytes.
		r.inject(0, fromClient(icmp6Error(routerAddr6, vip6, tc.typ, tc.code, tc.word, reply, 1280-48)))
		w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("%s: not delivered (drops %v)", tc.name, dropsOf(w))
		}
		eth, ip, icmp := checkICMPv4(t, out[0])
		if eth.Dst() != rs1MAC || ip.Src() != lip64 || ip.Dst() != rs1 || ip.TTL() != 63 {
			t.Fatalf("%s: to %v, %v -> %v TTL %d", tc.name, eth.Dst(), ip.Src(), ip.Dst(), ip.TTL())
		}
		if icmp.Type() != tc.t4 || icmp.Code() != tc.c4 || binary.BigEndian.Uint32(icmp[4:]) != tc.w4 {
			t.Fatalf("%s: type %d code %d word %d", tc.name, icmp.Type(), icmp.Code(), binary.BigEndian.Uint32(icmp[4:]))
		}
		q := hdr.IPv4(icmp[8:])
		if !q.IsChecksumValid() || q.Src() != rs1 || q.Dst() != lip64 || q.Protocol() != hdr.ProtoTCP || q.TotalLength() != 40+1300 ||
			q.TTL() != 63 || !q.DF() || len(q) != 1280-48-40+20 {
			t.Fatalf("%s: quoted header %x, %d bytes", tc.name, q[:20], len(q))
		}
		if orig := answer[34:]; !bytes.Equal(q[20:], orig[:len(q)-20]) {
			t.Fatalf("%s: the quoted segment is not the server's", tc.name)
		}
	}

	// The client's port unreachable about a whole UDP reply: the quoted
	// datagram's checksum, translated, is right for IPv4.
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 5300, 0, "q"))
	w.poll()
	toServer := r.sent(1)
	if len(toServer) != 1 {
		t.Fatalf("UDP not translated (drops %v)", dropsOf(w))
	}
	ulport := hdr.UDP(hdr.IPv4(toServer[0][14:]).Payload()).SrcPort()
	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 53, lip64, ulport, "answer", true))
	w.poll()
	if out = r.sent(0); len(out) != 1 {
		t.Fatalf("UDP reply not translated (drops %v)", dropsOf(w))
	}
	r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, out[0], 0)))
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatalf("port unreachable not delivered (drops %v)", dropsOf(w))
	}
	_, _, icmp := checkICMPv4(t, out[0])
	q := hdr.IPv4(icmp[8:])
	if u := hdr.UDP(q.Payload()); u.SrcPort() != 53 || u.DstPort() != ulport || len(u) != 8+6 ||
		u.Checksum() != hdr.TransportChecksum(q.Src(), q.Dst(), hdr.ProtoUDP, u) {
		t.Fatalf("quoted datagram %x", q)
	}

	// A wrong ICMPv6 checksum stays wrong.
	bad := fromClient(icmp6Error(routerAddr6, vip6, hdr.ICMPv6PacketTooBig, 0, 1300, reply, 1280-48))
	bad[54+2] ^= 0x10
	r.inject(0, bad)
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatalf("sent %d", len(out))
	}
	if m := hdr.ICMP(hdr.IPv4(out[0][14:]).Payload()); hdr.ICMPChecksum(m) == m.Checksum() {
		t.Fatal("a wrong ICMPv6 checksum came out right")
	}

	for _, tc := range []struct {
		name      string
		typ, code uint8
		word      uint32
		why       Stat
	}{
		{"parameter problem at the flow label", hdr.ICMPv6ParamProblem, 0, 2, DropICMPType},
		{"unrecognized option", hdr.ICMPv6ParamProblem, 2, 0, DropICMPType},
		{"source address failed policy", hdr.ICMPv6DestUnreachable, 5, 0, DropICMPType},
		{"an MTU the packet fitted", hdr.ICMPv6PacketTooBig, 0, 1400, DropBadICMP},
	} {
		before := w.cnt.own[tc.why]
		r.inject(0, fromClient(icmp6Error(routerAddr6, vip6, tc.typ, tc.code, tc.word, reply, 1280-48)))
		w.poll()
		if n := len(r.sent(1)); n != 0 || w.cnt.own[tc.why] != before+1 {
			t.Fatalf("%s: sent %d, drops %v", tc.name, n, dropsOf(w))
		}
	}
}

// TestICMPErrors64Fragments: errors quoting a first fragment translate
// it: the client's IPv6 fragment header comes back (its 16-bit
// identification zero-extended), and a server's first fragment keeps
// its identification and more-fragments flag.
func TestICMPErrors64Fragments(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 5001, vip6, 5300, 3000), 1500, 0x4321)
	out := r.passAll(t, 0, 1, frags)
	first := out[0]
	lport := hdr.UDP(hdr.IPv4(first[14:]).Payload()).SrcPort()
	r.inject(1, icmp4Error(rs1, lip64, hdr.ICMPTimeExceeded, 1, 0, first, 0))
	w.poll()
	sent := r.sent(0)
	if len(sent) != 1 {
		t.Fatalf("not delivered (drops %v)", dropsOf(w))
	}
	_, _, icmp := checkICMPv6(t, sent[0])
	if icmp.Type() != hdr.ICMPv6TimeExceeded || icmp.Code() != 1 || !sameButHop(icmp[8:], frags[0]) {
		t.Fatalf("type %d code %d, quoting %x", icmp.Type(), icmp.Code(), icmp[8:8+48])
	}

	answer := bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 3000, 0x77)
	out = r.passAll(t, 1, 0, fragmentFrame(answer, 1472))
	r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6TimeExceeded, 1, 0, out[0], 1280-48)))
	w.poll()
	if sent = r.sent(1); len(sent) != 1 {
		t.Fatalf("not delivered to the server (drops %v)", dropsOf(w))
	}
	_, _, icmp = checkICMPv4(t, sent[0])
	q := hdr.IPv4(icmp[8:])
	if icmp.Type() != hdr.ICMPTimeExceeded || icmp.Code() != 1 || q.ID() != 0x77 || q.Flags() != hdr.IPv4FlagMoreFragments ||
		q.FragmentOffset() != 0 || q.Src() != rs1 || q.Dst() != lip64 {
		t.Fatalf("type %d code %d, quoting %x", icmp.Type(), icmp.Code(), q[:28])
	}
}

// TestICMPMapping64: RFC 7915's tables, where the path tests do not go:
// a "fragmentation needed" without an MTU gets the plateau below the
// packet, parameter problem pointers move both ways.
func TestICMPMapping64(t *testing.T) {
	for _, tc := range []struct {
		typ, code uint8
		word      uint32
		size      uint16
		t6, c6    uint8
		w6        uint32
		why       Stat
	}{
		{hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 0, 9000, hdr.ICMPv6PacketTooBig, 0, 8166 + 20, 0},
		{hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 0, 1500, hdr.ICMPv6PacketTooBig, 0, 1492 + 20, 0},
		{hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 0, 1400, hdr.ICMPv6PacketTooBig, 0, 1280, 0},
		{hdr.ICMPDestUnreachable, 13, 0, 100, hdr.ICMPv6DestUnreachable, 1, 0, 0},
		{hdr.ICMPParamProblem, 2, 17 << 24, 100, hdr.ICMPv6ParamProblem, 0, 24, 0},
		{hdr.ICMPParamProblem, 0, 2 << 24, 100, hdr.ICMPv6ParamProblem, 0, 4, 0},
		{hdr.ICMPParamProblem, 0, 10 << 24, 100, 0, 0, 0, DropICMPType},
		{hdr.ICMPTimeExceeded, 2, 0, 100, 0, 0, 0, DropICMPType},
	} {
		t6, c6, w6, why := icmp4To6(tc.typ, tc.code, tc.word, tc.size)
		if t6 != tc.t6 || c6 != tc.c6 || w6 != tc.w6 || why != tc.why {
			t.Errorf("ICMPv4 %d/%d %#x (%d bytes): %d/%d %d %s", tc.typ, tc.code, tc.word, tc.size, t6, c6, w6, why.Name())
		}
	}
	for _, tc := range []struct {
		typ, code uint8
		word      uint32
		t4, c4    uint8
		w4        uint32
		why       Stat
	}{
		{hdr.ICMPv6ParamProblem, 0, 0, hdr.ICMPParamProblem, 0, 0, 0},
		{hdr.ICMPv6ParamProblem, 0, 5, hdr.ICMPParamProblem, 0, 2 << 24, 0},
		{hdr.ICMPv6ParamProblem, 0, 7, hdr.ICMPParamProblem, 0, 8 << 24, 0},
		{hdr.ICMPv6ParamProblem, 0, 20, hdr.ICMPParamProblem, 0, 12 << 24, 0},
		{hdr.ICMPv6ParamProblem, 0, 39, hdr.ICMPParamProblem, 0, 16 << 24, 0},
		{hdr.ICMPv6ParamProblem, 0, 40, 0, 0, 0, DropICMPType},
		{hdr.ICMPv6DestUnreachable, 3, 0, hdr.ICMPDestUnreachable, 1, 0, 0},
		{hdr.ICMPv6PacketTooBig, 0, 9000, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 8980, 0},
		{hdr.ICMPv6TimeExceeded, 1, 0, hdr.ICMPTimeExceeded, 1, 0, 0},
	} {
		t4, c4, w4, why := icmp6To4(tc.typ, tc.code, tc.word, 9040)
		if t4 != tc.t4 || c4 != tc.c4 || w4 != tc.w4 || why != tc.why {
			t.Errorf("ICMPv6 %d/%d %d: %d/%d %#x %s", tc.typ, tc.code, tc.word, t4, c4, w4, why.Name())
		}
	}
}

// TestICMPErrors64ReachTheOwner: on two workers, a NAT64 connection's
// errors reach the worker that owns it whichever queue they arrive on:
// the server side's ICMPv4 error steered by the quoted LIP:lport (a port
// the owner hands out), the client side's ICMPv6 error by the quoted
// client endpoint.
func TestICMPErrors64ReachTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	svc := service2(ServiceKey{VIP6: vip6, Port: 5300, Proto: hdr.ProtoUDP}, sched.Dest{ID: 0, Addr: rs1, Port: 53, Weight: 1, Fwd: fwd.FullNAT})
	svc.PersistMask, svc.LocalAddrs = ^uint32(0), []uint32{lip64}
	r.apply6(svc)
	const n = 16
	for i := 0; i < n; i++ {
		port := uint16(43000 + i)
		owner := Owner6(&clientAddr6, port, 2)
		r.inject(0, owner, udp6Frame(clientMAC, wanMAC, clientAddr6, port, vip6, 5300, 10))
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 1 {
			t.Fatalf("query %d not translated", i)
		}
		other := 1 - owner
		reply := l4Frame6(wanMAC, clientMAC, hdr.ProtoUDP, vip6, 5300, clientAddr6, port, 0, "answer")
		toClient, toServer := r.deliverErrors(t, other,
			icmp4Error(rs1, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodePortUnreachable, 0, out[0], 0),
			fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, reply, 0)))
		checkICMPv6(t, toClient)
		checkICMPv4(t, toServer)
	}
	r.checkHandedErrors(t, 2*n)
}
