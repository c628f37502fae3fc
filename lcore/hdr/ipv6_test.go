package hdr_test

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

var (
	a6src = hdr.Addr6From(netip.MustParseAddr("2001:db8::11"))
	a6dst = hdr.Addr6From(netip.MustParseAddr("2001:db8::10"))
)

// ip6Packet builds an IPv6 header, then the extension headers (each
// given whole, its next-header byte filled in here), then the payload.
func ip6Packet(first uint8, exts [][]byte, nexts []uint8, payload []byte) []byte {
	n := len(payload)
	for _, e := range exts {
		n += len(e)
	}
	b := make([]byte, hdr.IPv6Len+n)
	hdr.IPv6(b).Encode(uint16(n), first, 64, a6src, a6dst)
	off := hdr.IPv6Len
	for i, e := range exts {
		copy(b[off:], e)
		b[off] = nexts[i]
		off += len(e)
	}
	copy(b[off:], payload)
	return b
}

// naiveSum6 is the checksum computed the slow, obvious way: the
// pseudo-header laid out in bytes (RFC 8200 section 8.1), then the data.
func naiveSum6(src, dst hdr.Addr6, proto uint8, seg []byte, csumOff int) uint16 {
	p := make([]byte, 40+len(seg)+1)
	copy(p, src[:])
	copy(p[16:], dst[:])
	binary.BigEndian.PutUint32(p[32:], uint32(len(seg)))
	p[39] = proto
	copy(p[40:], seg)
	p[40+csumOff], p[41+csumOff] = 0, 0
	var s uint32
	for i := 0; i+1 < len(p); i += 2 {
		s += uint32(p[i])<<8 | uint32(p[i+1])
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

func TestIPv6Header(t *testing.T) {
	b := ip6Packet(hdr.ProtoTCP, nil, nil, make([]byte, 20))
	ip := hdr.IPv6(b)
	if !ip.IsValid(len(b)) || ip.Src() != a6src || ip.Dst() != a6dst || ip.NextHeader() != hdr.ProtoTCP ||
		ip.HopLimit() != 64 || ip.PayloadLength() != 20 || len(ip.Payload()) != 20 || ip.TrafficClass() != 0 || ip.FlowLabel() != 0 {
		t.Fatalf("fields read back wrong: %x", b)
	}
	if ip.IsValid(len(b) - 1) {
		t.Error("a payload length past what the NIC delivered passed")
	}
	if hdr.IPv6(b[:len(b)-1]).IsValid(len(b)) {
		t.Error("a payload length past the view passed")
	}
	b[0] = 0x45
	if ip.IsValid(len(b)) {
		t.Error("version 4 passed as IPv6")
	}
	if hdr.IPv6(b[:39]).IsValid(39) {
		t.Error("a short header passed")
	}
}

func TestAddr6Multicast(t *testing.T) {
	a := hdr.Addr6From(netip.MustParseAddr("2001:db8::1:2:3"))
	if got, want := a.SolicitedNode().Netip(), netip.MustParseAddr("ff02::1:ff02:3"); got != want {
		t.Errorf("solicited-node of %v = %v, want %v", a, got, want)
	}
	if m := a.SolicitedNode().MulticastMAC(); m != (hdr.MAC{0x33, 0x33, 0xff, 0x02, 0x00, 0x03}) {
		t.Errorf("multicast MAC %v", m)
	}
	if !hdr.AllNodes.IsMulticast() || a.IsMulticast() || !(hdr.Addr6{}).IsUnspecified() {
		t.Error("multicast/unspecified tests wrong")
	}
}

func TestTransportChecksum6(t *testing.T) {
	for _, n := range []int{8, 9, 20, 33, 1400} {
		seg := make([]byte, n)
		for i := range seg {
			seg[i] = byte(i*7 + n)
		}
		for _, c := range []struct {
			proto uint8
			off   int
		}{{hdr.ProtoTCP, 16}, {hdr.ProtoUDP, 6}, {hdr.ProtoICMPv6, 2}} {
			if n < c.off+2 {
				continue
			}
			got, want := hdr.TransportChecksum6(a6src, a6dst, c.proto, seg), naiveSum6(a6src, a6dst, c.proto, seg, c.off)
			if c.proto == hdr.ProtoUDP && want == 0 {
				want = 0xffff
			}
			if got != want {
				t.Errorf("proto %d, %d bytes: %#04x, want %#04x", c.proto, n, got, want)
			}
		}
	}
}

// TestUpdateAddr6: rewriting an address and updating the checksum
// incrementally gives what a full computation gives (NAT66's rewrite).
func TestUpdateAddr6(t *testing.T) {
	seg := make([]byte, 40)
	for i := range seg {
		seg[i] = byte(i * 13)
	}
	c := hdr.TransportChecksum6(a6src, a6dst, hdr.ProtoTCP, seg)
	nu := hdr.Addr6From(netip.MustParseAddr("fd00:1::abcd"))
	got := hdr.UpdateAddr6(c, a6dst, nu)
	if want := hdr.TransportChecksum6(a6src, nu, hdr.ProtoTCP, seg); got != want {
		t.Errorf("incremental %#04x, full %#04x", got, want)
	}
}

func TestWalkExt(t *testing.T) {
	opts := func(n int) []byte { b := make([]byte, 8*n); b[1] = byte(n - 1); return b }
	frag := func(off uint16, more bool) []byte {
		b := make([]byte, 8)
		v := off
		if more {
			v |= 1
		}
		binary.BigEndian.PutUint16(b[2:], v)
		binary.BigEndian.PutUint32(b[4:], 0xdeadbeef)
		return b
	}
	routing := func(left byte) []byte { b := opts(1); b[3] = left; return b }
	tcp := make([]byte, 20)
	H, R, F, D := uint8(hdr.ExtHopByHop), uint8(hdr.ExtRouting), uint8(hdr.ExtFragment), uint8(hdr.ExtDestOpts)
	cases := []struct {
		name    string
		first   uint8
		exts    [][]byte
		nexts   []uint8
		verdict hdr.ExtVerdict
		proto   uint8
		off     int
	}{
		{"plain", hdr.ProtoTCP, nil, nil, hdr.ExtOK, hdr.ProtoTCP, 40},
		{"hbh,dest", H, [][]byte{opts(1), opts(2)}, []uint8{D, hdr.ProtoTCP}, hdr.ExtOK, hdr.ProtoTCP, 40 + 8 + 16},
		{"routing done", R, [][]byte{routing(0)}, []uint8{hdr.ProtoUDP}, hdr.ExtOK, hdr.ProtoUDP, 48},
		{"routing left", R, [][]byte{routing(1)}, []uint8{hdr.ProtoUDP}, hdr.ExtRoutingLeft, R, 40},
		{"first fragment", F, [][]byte{frag(0, true)}, []uint8{hdr.ProtoTCP}, hdr.ExtOK, hdr.ProtoTCP, 48},
		{"later fragment", F, [][]byte{frag(1448, false)}, []uint8{hdr.ProtoTCP}, hdr.ExtOK, hdr.ProtoTCP, 48},
		{"two fragment headers", F, [][]byte{frag(0, true), frag(0, true)}, []uint8{F, hdr.ProtoTCP}, hdr.ExtBadFragment, F, 48},
		{"hbh not first", D, [][]byte{opts(1), opts(1)}, []uint8{H, hdr.ProtoTCP}, hdr.ExtUnknown, H, 48},
		{"AH", 51, nil, nil, hdr.ExtUnknown, 51, 40},
		{"no next", D, [][]byte{opts(1)}, []uint8{hdr.ExtNoNext}, hdr.ExtOK, hdr.ExtNoNext, 48},
		{"too many", D, [][]byte{opts(1), opts(1), opts(1), opts(1), opts(1), opts(1), opts(1)},
			[]uint8{D, D, D, D, D, D, hdr.ProtoTCP}, hdr.ExtTooMany, D, 40 + 6*8},
	}
	for _, c := range cases {
		b := ip6Packet(c.first, c.exts, c.nexts, tcp)
		x, v := hdr.IPv6(b).WalkExt()
		if v != c.verdict || x.Proto != c.proto || x.Off != c.off {
			t.Errorf("%s: verdict %d proto %d off %d, want %d %d %d", c.name, v, x.Proto, x.Off, c.verdict, c.proto, c.off)
		}
	}
	b := ip6Packet(F, [][]byte{frag(1448, true)}, []uint8{hdr.ProtoUDP}, tcp)
	if x, _ := hdr.IPv6(b).WalkExt(); !x.Fragment || !x.MoreFrags || x.FragOffset != 1448 || x.FragID != 0xdeadbeef || x.FragHdrOff != 40 {
		t.Errorf("fragment header read wrong: %+v", x)
	}
	// A header whose length runs past the payload.
	b = ip6Packet(D, [][]byte{opts(1)}, []uint8{hdr.ProtoTCP}, nil)
	b[hdr.IPv6Len+1] = 3
	if _, v := hdr.IPv6(b).WalkExt(); v != hdr.ExtTruncated {
		t.Errorf("truncated options header: verdict %d", v)
	}
}

func TestNDEncodeParse(t *testing.T) {
	mac := hdr.MAC{2, 0, 0, 0, 0, 9}
	b := make([]byte, hdr.NDLen+hdr.NDOptLen)
	nd := hdr.ND(b)
	nd.EncodeND(hdr.ICMPv6NeighAdvert, hdr.NAFlagSolicited|hdr.NAFlagOverride, a6dst, hdr.NDOptTargetLL, mac)
	if !nd.IsValid() || nd.Target() != a6dst || nd.Flags() != hdr.NAFlagSolicited|hdr.NAFlagOverride || hdr.ICMP(b).Type() != hdr.ICMPv6NeighAdvert {
		t.Fatalf("NA read back wrong: %x", b)
	}
	if m, ok := nd.LinkAddr(hdr.NDOptTargetLL); !ok || m != mac {
		t.Errorf("target link-layer option %v %v", m, ok)
	}
	if _, ok := nd.LinkAddr(hdr.NDOptSourceLL); ok {
		t.Error("found a source link-layer option that is not there")
	}
	b[25] = 0
	if nd.IsValid() {
		t.Error("an option of length 0 passed (RFC 4861 7.1.2)")
	}
	b[25] = 2
	if nd.IsValid() {
		t.Error("an option running past the message passed")
	}
	if hdr.ND(b[:23]).IsValid() {
		t.Error("a short NS/NA passed")
	}
}

// FuzzIPv6: whatever the bytes, the gates and the walk never panic, and
// what they accept is in bounds.
func FuzzIPv6(f *testing.F) {
	f.Add(ip6Packet(hdr.ProtoTCP, nil, nil, make([]byte, 20)))
	f.Add(ip6Packet(hdr.ExtHopByHop, [][]byte{make([]byte, 8)}, []uint8{hdr.ProtoICMPv6}, make([]byte, 32)))
	f.Add(ip6Packet(hdr.ExtFragment, [][]byte{{0, 0, 0, 1, 0, 0, 0, 1}}, []uint8{hdr.ProtoUDP}, make([]byte, 8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		ip := hdr.IPv6(b)
		if !ip.IsValid(len(b)) {
			return
		}
		_ = ip.Src().String()
		x, v := ip.WalkExt()
		if v != hdr.ExtOK {
			return
		}
		end := hdr.IPv6Len + int(ip.PayloadLength())
		if x.Off > end {
			t.Fatalf("transport offset %d past the payload's end %d", x.Off, end)
		}
		if x.Proto == hdr.ProtoICMPv6 && !(x.Fragment && x.FragOffset != 0) {
			nd := hdr.ND(b[x.Off:end])
			if nd.IsValid() {
				_, _ = nd.LinkAddr(hdr.NDOptSourceLL)
				_ = nd.Target()
			}
			_ = hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, b[x.Off:end])
		}
	})
}

// TestRewrite6: NAT66's incremental checksum update equals a recomputed
// checksum, for TCP and UDP, both ends.
func TestRewrite6(t *testing.T) {
	for _, proto := range []uint8{hdr.ProtoTCP, hdr.ProtoUDP} {
		l4len := hdr.UDPLen + 13
		if proto == hdr.ProtoTCP {
			l4len = 20 + 13
		}
		b := make([]byte, hdr.IPv6Len+l4len)
		src := hdr.Addr6From(netip.MustParseAddr("2001:db8::1"))
		dst := hdr.Addr6From(netip.MustParseAddr("2001:db8::10"))
		ip := hdr.IPv6(b)
		ip.Encode(uint16(l4len), proto, 64, src, dst)
		l4 := b[hdr.IPv6Len:]
		for i := range l4 {
			l4[i] = byte(i*7 + 3)
		}
		binary.BigEndian.PutUint16(l4[0:], 40000)
		binary.BigEndian.PutUint16(l4[2:], 80)
		if proto == hdr.ProtoTCP {
			l4[12] = 5 << 4
		} else {
			binary.BigEndian.PutUint16(l4[4:], uint16(l4len))
		}
		off := 16
		if proto == hdr.ProtoUDP {
			off = 6
		}
		binary.BigEndian.PutUint16(l4[off:], hdr.TransportChecksum6(src, dst, proto, l4))
		rip := hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))
		hdr.RewriteDst6(ip, l4, proto, rip, 8080)
		if ip.Dst() != rip || binary.BigEndian.Uint16(l4[2:]) != 8080 {
			t.Fatalf("proto %d: dst %s port %d", proto, ip.Dst(), binary.BigEndian.Uint16(l4[2:]))
		}
		if got, want := binary.BigEndian.Uint16(l4[off:]), hdr.TransportChecksum6(src, rip, proto, l4); got != want {
			t.Fatalf("proto %d dst rewrite: checksum %#x, recomputed %#x", proto, got, want)
		}
		vip := hdr.Addr6From(netip.MustParseAddr("2001:db8::99"))
		hdr.RewriteSrc6(ip, l4, proto, vip, 443)
		if got, want := binary.BigEndian.Uint16(l4[off:]), hdr.TransportChecksum6(vip, rip, proto, l4); got != want {
			t.Fatalf("proto %d src rewrite: checksum %#x, recomputed %#x", proto, got, want)
		}
	}
}

// TestWalkExtQuote: a quote cut short of its payload length is walked
// within what it holds.
func TestWalkExtQuote(t *testing.T) {
	opts := make([]byte, 16)
	opts[1] = 1
	b := ip6Packet(hdr.ExtDestOpts, [][]byte{opts}, []uint8{hdr.ProtoUDP}, make([]byte, 100))
	if x, v := hdr.IPv6(b[:40+16+8]).WalkExtQuote(); v != hdr.ExtOK || x.Proto != hdr.ProtoUDP || x.Off != 56 {
		t.Errorf("quote with the ports: verdict %d proto %d off %d", v, x.Proto, x.Off)
	}
	if _, v := hdr.IPv6(b[:40+12]).WalkExtQuote(); v != hdr.ExtTruncated {
		t.Errorf("quote cut in the options: verdict %d", v)
	}
}
