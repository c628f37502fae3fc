package lcore

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

var routerAddr6 = hdr.Addr6From(netip.MustParseAddr("2001:db8:2::fe"))

// tcp6Frame is an Ethernet/IPv6/TCP frame (20-byte header, ACK) with a
// valid checksum.
func tcp6Frame(src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, payload string) []byte {
	b := make([]byte, 14+40+20+len(payload))
	eth := hdr.Ethernet(b)
	eth.SetSrc(clientMAC)
	eth.SetDst(wanMAC)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(b[14:]).Encode(uint16(20+len(payload)), hdr.ProtoTCP, 64, src, dst)
	s := b[54:]
	binary.BigEndian.PutUint16(s[0:], sport)
	binary.BigEndian.PutUint16(s[2:], dport)
	binary.BigEndian.PutUint32(s[4:], 1000)
	s[12], s[13] = 5<<4, hdr.TCPFlagACK
	copy(s[20:], payload)
	binary.BigEndian.PutUint16(s[16:], hdr.TransportChecksum6(src, dst, hdr.ProtoTCP, s))
	return b
}

// icmp6Error is an ICMPv6 error frame from src to dst quoting the IPv6
// packet of frame (cut to quoteLen bytes when > 0).
func icmp6Error(src, dst hdr.Addr6, typ, code uint8, word uint32, frame []byte, quoteLen int) []byte {
	return icmp6Frame(rs1MAC, lanMAC, src, dst, 64, errorMsg(typ, code, word, frame[14:], quoteLen))
}

// errorMsg is an ICMP or ICMPv6 error message (checksum 0) quoting the
// packet q (cut to quoteLen bytes when > 0).
func errorMsg(typ, code uint8, word uint32, q []byte, quoteLen int) []byte {
	if quoteLen > 0 {
		q = q[:quoteLen]
	}
	msg := make([]byte, 8+len(q))
	msg[0], msg[1] = typ, code
	binary.BigEndian.PutUint32(msg[4:], word)
	copy(msg[8:], q)
	return msg
}

// TestParseQuote6: the quote of an ICMPv6 error is located when it names
// a TCP or UDP connection, through extension headers and our IPv6-in-IPv6
// header, and refused otherwise.
func TestParseQuote6(t *testing.T) {
	udp := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 100)
	later := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 3000), 1500, 5)[1]
	first := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 3000), 1500, 5)[0]
	echo := icmp6Frame(clientMAC, wanMAC, clientAddr6, vipAddr6, 64, []byte{hdr.ICMPv6EchoRequest, 0, 0, 0, 0, 1, 0, 1})
	// Our IPv6-in-IPv6 packet to a real server: an outer header in front.
	tun := make([]byte, 14+40+len(udp)-14)
	copy(tun, udp[:14])
	hdr.IPv6(tun[14:]).Encode(uint16(len(udp)-14), hdr.ProtoIPv6, 64, wanAddr6, rs1Addr6)
	copy(tun[54:], udp[14:])
	for _, tc := range []struct {
		name   string
		frame  []byte
		cut    int
		why    Stat
		proto  uint8
		tunnel bool
	}{
		{"UDP", udp, 0, 0, hdr.ProtoUDP, false},
		{"UDP, 8 bytes quoted", udp, 48, 0, hdr.ProtoUDP, false},
		{"TCP", tcp6Frame(clientAddr6, 41000, vipAddr6, 80, "x"), 0, 0, hdr.ProtoTCP, false},
		{"first fragment", first, 0, 0, hdr.ProtoUDP, false},
		{"IPv6 in IPv6", tun, 0, 0, hdr.ProtoUDP, true},
		{"ports cut off", udp, 44, DropBadICMP, 0, false},
		{"header cut", udp, 30, DropBadICMP, 0, false},
		{"later fragment", later, 0, DropBadICMP, 0, false},
		{"echo", echo, 0, DropNoConn, 0, false},
		{"IPv4 quoted", tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, ""), 0, DropBadICMP, 0, false},
	} {
		f := icmp6Error(rs1Addr6, clientAddr6, hdr.ICMPv6DestUnreachable, 1, 0, tc.frame, tc.cut)
		q, why := parseQuote6(hdr.ICMP(f[54:]))
		if why != tc.why || q.proto != tc.proto || (q.outer != nil) != tc.tunnel {
			t.Errorf("%s: drop %q proto %d tunnel %v", tc.name, why.Name(), q.proto, q.outer != nil)
			continue
		}
		if why == 0 && (q.ip.Src() != clientAddr6 || binary.BigEndian.Uint16(q.l4) != 41000) {
			t.Errorf("%s: quote %v port %d", tc.name, q.ip.Src(), binary.BigEndian.Uint16(q.l4))
		}
	}
}

// TestNATICMPv6Error: an error about a NAT66 connection's packet is
// translated both ways; the quoted transport checksum and the ICMPv6
// checksum come out as a full recomputation gives, and a wrong ICMPv6
// checksum stays wrong.
func TestNATICMPv6Error(t *testing.T) {
	for _, tc := range []struct {
		name     string
		quoted   []byte // the packet the error is about, as it left lbd
		from, to hdr.Addr6
		toServer bool
		addr     hdr.Addr6
		port     uint16
		wantSrc  hdr.Addr6 // the quoted packet after translation
		wantDst  hdr.Addr6
	}{
		{"server side, UDP", udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, rs1Addr6, 5353, 200), routerAddr6, clientAddr6,
			false, vipAddr6, 53, clientAddr6, vipAddr6},
		{"server side, TCP", tcp6Frame(clientAddr6, 41000, rs1Addr6, 8080, "hello"), rs1Addr6, clientAddr6,
			false, vipAddr6, 80, clientAddr6, vipAddr6},
		{"client side, UDP", udp6Frame(clientMAC, wanMAC, vipAddr6, 53, clientAddr6, 41000, 1200), routerAddr6, vipAddr6,
			true, rs1Addr6, 5353, rs1Addr6, clientAddr6},
		{"client side, TCP", tcp6Frame(vipAddr6, 80, clientAddr6, 41000, "world"), clientAddr6, vipAddr6,
			true, rs1Addr6, 8080, rs1Addr6, clientAddr6},
	} {
		f := icmp6Error(tc.from, tc.to, hdr.ICMPv6PacketTooBig, 0, 1400, tc.quoted, 0)
		bad := append([]byte(nil), f...)
		bad[54+2] ^= 0x40
		for i, frame := range [][]byte{f, bad} {
			ip := hdr.IPv6(frame[14:])
			icmp := hdr.ICMP(ip.Payload())
			q, why := parseQuote6(icmp)
			if why != 0 {
				t.Fatalf("%s: %s", tc.name, why.Name())
			}
			natICMPv6Error(ip, icmp, q, tc.toServer, tc.addr, tc.port)
			if q.ip.Src() != tc.wantSrc || q.ip.Dst() != tc.wantDst {
				t.Fatalf("%s: quoted %v -> %v", tc.name, q.ip.Src(), q.ip.Dst())
			}
			outerSrc, outerDst := tc.from, tc.addr
			quotedPort := binary.BigEndian.Uint16(q.l4[0:])
			if !tc.toServer {
				outerSrc, outerDst, quotedPort = tc.addr, tc.to, binary.BigEndian.Uint16(q.l4[2:])
			}
			if ip.Src() != outerSrc || ip.Dst() != outerDst || quotedPort != tc.port {
				t.Fatalf("%s: outer %v -> %v, quoted port %d", tc.name, ip.Src(), ip.Dst(), quotedPort)
			}
			full := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, icmp)
			if (icmp.Checksum() == full) != (i == 0) {
				t.Fatalf("%s (frame %d): ICMPv6 checksum %#04x, full recomputation %#04x", tc.name, i, icmp.Checksum(), full)
			}
			seg := q.ip.Payload()
			sumOff := 6
			if q.proto == hdr.ProtoTCP {
				sumOff = 16
			}
			if got, want := binary.BigEndian.Uint16(seg[sumOff:]), hdr.TransportChecksum6(q.ip.Src(), q.ip.Dst(), q.proto, seg); got != want {
				t.Fatalf("%s: quoted checksum %#04x, full recomputation %#04x", tc.name, got, want)
			}
			if icmp.Type() != hdr.ICMPv6PacketTooBig || binary.BigEndian.Uint32(icmp[4:]) != 1400 {
				t.Fatalf("%s: type %d MTU %d", tc.name, icmp.Type(), binary.BigEndian.Uint32(icmp[4:]))
			}
		}
	}
}

// mbufOf copies a frame into a fresh mbuf of the rig's pool.
func (r *rig) mbufOf(frame []byte) *mbuf.Mbuf {
	r.t.Helper()
	m, err := mbuf.Alloc(r.pool)
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := m.Append(len(frame))
	if err != nil {
		r.t.Fatal(err)
	}
	copy(b, frame)
	return m
}

// TestICMP6ToSender: an error lbd sends quotes as much of the packet as
// fits in 1280 bytes, goes back to where the packet came from with a
// right checksum, is rate-limited, and is not sent to a multicast source.
func TestICMP6ToSender(t *testing.T) {
	r := rig6(t)
	w := r.w
	big := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 1400)
	send := func(frame []byte) exit {
		var d desc
		parse(&d, r.mbufOf(frame), 0)
		x := w.icmp6ToSender(&d, hdr.ICMPv6PacketTooBig, 0, 1300, vipAddr6, ICMPv6TooBig, DropTooBig)
		w.leave(d.m, d.in, x)
		w.flush()
		return x
	}
	if x := send(big); x.kind != exitTransmit {
		t.Fatalf("exit %+v", x)
	}
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d frames", len(out))
	}
	eth := hdr.Ethernet(out[0])
	ip := hdr.IPv6(eth.Payload())
	if eth.Dst() != clientMAC || eth.EtherType() != hdr.EtherTypeIPv6 || !ip.IsValid(len(ip)) || len(ip) != 1280 {
		t.Fatalf("frame to %v, IPv6 packet of %d bytes", eth.Dst(), len(ip))
	}
	icmp := hdr.ICMP(ip.Payload())
	if ip.Src() != vipAddr6 || ip.Dst() != clientAddr6 || ip.NextHeader() != hdr.ProtoICMPv6 || icmp.Type() != hdr.ICMPv6PacketTooBig ||
		binary.BigEndian.Uint32(icmp[4:]) != 1300 {
		t.Fatalf("%v -> %v next %d type %d word %d", ip.Src(), ip.Dst(), ip.NextHeader(), icmp.Type(), binary.BigEndian.Uint32(icmp[4:]))
	}
	if c := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, icmp); c != icmp.Checksum() {
		t.Fatalf("checksum %#04x, want %#04x", icmp.Checksum(), c)
	}
	if !bytes.Equal(icmp[8:], big[14:14+1280-48]) {
		t.Fatal("the quote is not the packet's first bytes")
	}
	// A small packet is quoted whole.
	small := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 10)
	send(small)
	if out = r.sent(0); len(out) != 1 || !bytes.Equal(out[0][14+48:], small[14:]) {
		t.Fatal("a small packet was not quoted whole")
	}
	// A multicast source gets nothing.
	mc := udp6Frame(clientMAC, wanMAC, hdr.AllNodes, 41000, vipAddr6, 53, 10)
	if x := send(mc); x.kind != exitDrop || x.why != DropTooBig {
		t.Fatalf("an error to a multicast source: exit %+v", x)
	}
	// The budget: a burst of timeExceededBurst, then nothing until credit returns.
	for i := 0; i < 2*timeExceededBurst; i++ {
		send(small)
	}
	if n := len(r.sent(0)); n != timeExceededBurst-2 {
		t.Fatalf("%d errors sent in a burst, want %d", n, timeExceededBurst-2)
	}
	w.now += timeExceededCost
	send(small)
	if n := len(r.sent(0)); n != 1 {
		t.Fatalf("%d errors after one token's worth of time", n)
	}
	if w.cnt.own[ICMPv6TooBig] != timeExceededBurst+1 {
		t.Fatalf("icmpv6_too_big %d", w.cnt.own[ICMPv6TooBig])
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use", n)
	}
}

// TestICMPv6ErrorsDoNotAllocate: building an error and translating one
// allocate nothing on the Go heap.
func TestICMPv6ErrorsDoNotAllocate(t *testing.T) {
	r := rig6(t)
	w := r.w
	big := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 1400)
	errFrame := icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1400,
		udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, rs1Addr6, 5353, 200), 0)
	var d desc
	allocs := testing.AllocsPerRun(200, func() {
		w.now += timeExceededCost
		m := r.mbufOf(big)
		parse(&d, m, 0)
		if x := w.icmp6ToSender(&d, hdr.ICMPv6PacketTooBig, 0, 1300, vipAddr6, ICMPv6TooBig, DropTooBig); x.kind != exitTransmit {
			t.Fatalf("exit %+v", x)
		}
		m.Free()
		m = r.mbufOf(errFrame)
		ip := hdr.IPv6(m.Data()[l3:])
		icmp := hdr.ICMP(ip.Payload())
		q, why := parseQuote6(icmp)
		if why != 0 {
			t.Fatal(why.Name())
		}
		natICMPv6Error(ip, icmp, q, false, vipAddr6, 53)
		m.Free()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per error", allocs)
	}
}
