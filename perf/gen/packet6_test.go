package gen

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

var (
	cnet6, _ = Split6(hdr.Addr6From(netip.MustParseAddr("2001:db8:1::")))
	snet6, _ = Split6(hdr.Addr6From(netip.MustParseAddr("fd00:1::")))
	vip6     = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::10"))
	lbSrv6   = hdr.Addr6From(netip.MustParseAddr("fd00:1::1"))
)

// checkFrame6 parses an IPv6 frame with lcore/hdr's parsers (fixed
// header, extension walk, TCP or UDP header) and verifies its transport
// checksum by full recomputation; it returns the IPv6 header.
func checkFrame6(t *testing.T, p []byte) hdr.IPv6 {
	t.Helper()
	if hdr.Ethernet(p).EtherType() != hdr.EtherTypeIPv6 {
		t.Fatalf("EtherType %#x", hdr.Ethernet(p).EtherType())
	}
	ip := hdr.IPv6(p[ipOff:])
	if !ip.IsValid(len(p)-ipOff) || int(ip.PayloadLength()) != len(p)-l4Off6 {
		t.Fatalf("bad IPv6 header: % x", p[ipOff:l4Off6])
	}
	x, v := ip.WalkExt()
	if v != hdr.ExtOK || x.Off != hdr.IPv6Len {
		t.Fatalf("extension walk: %+v %v", x, v)
	}
	seg := ip.Payload()
	var got uint16
	switch x.Proto {
	case hdr.ProtoTCP:
		if !hdr.TCP(seg).IsValid() {
			t.Fatal("bad TCP header")
		}
		got = hdr.TCP(seg).Checksum()
	case hdr.ProtoUDP:
		if !hdr.UDP(seg).IsValid() || int(hdr.UDP(seg).Length()) != len(seg) {
			t.Fatal("bad UDP header")
		}
		got = hdr.UDP(seg).Checksum()
	default:
		t.Fatalf("next header %d", x.Proto)
	}
	if want := hdr.TransportChecksum6(ip.Src(), ip.Dst(), x.Proto, seg); got != want {
		t.Fatalf("L4 checksum %#04x, want %#04x", got, want)
	}
	return ip
}

// TestBuildStampAnswer6: IPv6 frames of every pattern's flags parse and
// checksum correctly, carry their stamp, and the server side's answer
// (addresses, ports and MACs swapped; SYN-ACK, ACK, echo, FIN-ACK) does
// too, back to the client.
func TestBuildStampAnswer6(t *testing.T) {
	newB := func(proto uint8, size int) (*Builder, error) {
		return NewBuilder6(proto, size, macC, macL, cnet6, vip6, 80)
	}
	src := func(i int) uint32 { return 0x100 + uint32(i)*0x10001 }
	forEachFrame(t, frameCases(MinFrame6, l4Off6+hdr.UDPLen+stampLen), newB, src, func(tc frameCase, p []byte, i int, fl uint8, seq, stamp uint32) {
		ip := checkFrame6(t, p)
		if ip.Src() != cnet6.Addr(src(i)) || ip.Dst() != vip6 || ip.NextHeader() != tc.proto {
			t.Fatalf("addresses %v -> %v", ip.Src(), ip.Dst())
		}
		r := stampAnswer(t, p, tc.proto, fl, seq, stamp, tc.mode, MinFrame6)
		ip = checkFrame6(t, r)
		if ip.Src() != vip6 || ip.Dst() != cnet6.Addr(src(i)) || hdr.Ethernet(r).Dst() != macC {
			t.Fatalf("reply not swapped: %v -> %v", ip.Src(), ip.Dst())
		}
	})
	if _, err := NewBuilder6(hdr.ProtoTCP, MinFrame6-1, macC, macL, cnet6, vip6, 80); err == nil {
		t.Fatal("a frame too short for IPv6 TCP accepted")
	}
}

// TestND: the generator's solicitation is a valid NS for lbd's address
// from the server network; an NS for a server address is answered with
// a valid NA from it to the solicitor, and one out of the range is not.
func TestND(t *testing.T) {
	p := make([]byte, ndFrame)
	rs := snet6.Addr(0x11)
	NSRequest(p, macL, lbSrv6, rs) // lbd asks for RS fd00:1::11
	if k, _, _, _ := Stamp(p, false); k != KindNS {
		t.Fatalf("kind %v", k)
	}
	ip := hdr.IPv6(p[ipOff:])
	nd := hdr.ND(ip.Payload())
	if !ip.IsValid(len(p)-ipOff) || ip.HopLimit() != hdr.NDHopLimit || ip.Dst() != rs.SolicitedNode() || !nd.IsValid() || nd.Target() != rs ||
		hdr.ICMP(nd).Checksum() != hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, nd) || hdr.Ethernet(p).Dst() != rs.SolicitedNode().MulticastMAC() {
		t.Fatalf("bad NS: % x", p)
	}
	if AnswerNS(p, macC, &snet6, Range{0x12, 0x13}) != 0 || AnswerNS(p, macC, &cnet6, Range{0x11, 0x11}) != 0 {
		t.Fatal("answered for an address out of range")
	}
	if n := AnswerNS(p, macC, &snet6, Range{0x11, 0x12}); n != ndFrame {
		t.Fatalf("answer of %d bytes", n)
	}
	if k, _, _, _ := Stamp(p, false); k != KindNA {
		t.Fatalf("kind %v", k)
	}
	if ip.Src() != rs || ip.Dst() != lbSrv6 || hdr.Ethernet(p).Dst() != macL ||
		hdr.ICMP(nd).Checksum() != hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, nd) || nd.Flags() != hdr.NAFlagSolicited|hdr.NAFlagOverride {
		t.Fatalf("bad NA: % x", p)
	}
	target, mac, ok := NASender(p)
	if !ok || target != rs || mac != macC {
		t.Fatalf("NA from %v %v %v", target, mac, ok)
	}
}

// TestAlignWithConfiguredKey6: IPv6 flows are placed on the queue of
// the lcore lbd's Owner6 gives their client endpoint under the same key.
func TestAlignWithConfiguredKey6(t *testing.T) {
	key, err := conf.ParseSteeringKey("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Flows: 5000, Clients: Range{First: 0x100, Last: 0x10f}, ClientPorts: [2]uint16{1024, 65535},
		AlignOwner: true, SteeringKey: key, Six: &Six{ClientNet: cnet6}}
	owner6 := func(low uint32, sport uint16, n int) int {
		a := cnet6.Addr(low)
		return lcore.Owner6(&a, sport, n)
	}
	checkPlacement(t, cfg, owner6)
	// The IPv6 placement is keyed on the whole address, not the IPv4 one
	// of its low 32 bits.
	same := 0
	for k := range cfg.Flows {
		low, sport := flowTuple(&cfg, uint64(k))
		if owner6(low, sport, 4) == lcore.Owner(low, sport, 4) {
			same++
		}
	}
	if same > cfg.Flows/2 {
		t.Fatalf("%d of %d IPv6 flows owned as IPv4 would be", same, cfg.Flows)
	}
}

// The IPv6 per-packet functions must not allocate either.
func TestPacketPath6DoesNotAllocate(t *testing.T) {
	b, err := NewBuilder6(hdr.ProtoTCP, 128, macC, macL, cnet6, vip6, 80)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 128)
	nd := make([]byte, ndFrame)
	seq := uint32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		b.Build(p, 0x100, 1024, hdr.TCPFlagACK, seq, seq)
		k, fl, _, _ := Stamp(p, false)
		Answer(p, k, fl, ReplyACK)
		Stamp(p, true)
		NSRequest(nd, macL, lbSrv6, snet6.Addr(0x11))
		AnswerNS(nd, macC, &snet6, Range{0x11, 0x11})
		NASender(nd)
		seq++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per packet, want 0", allocs)
	}
}

func BenchmarkBuild6(b *testing.B) {
	bl, _ := NewBuilder6(hdr.ProtoTCP, MinFrame6, macC, macL, cnet6, vip6, 80)
	p := make([]byte, MinFrame6)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bl.Build(p, 0x100+uint32(i&15), uint16(i), hdr.TCPFlagACK, uint32(i), uint32(i))
	}
}
