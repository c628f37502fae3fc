package hdr_test

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// TestIPv4EncodeGolden: encoding a fixture's fields gives its header back,
// byte for byte, checksum included.
func TestIPv4EncodeGolden(t *testing.T) {
	for _, name := range []string{"tcpsyn", "tcpdata", "udpdns", "icmpecho", "udpnocsum"} {
		t.Run(name, func(t *testing.T) {
			want := ipv4Of(t, fixture(t, name))
			got := hdr.IPv4(make([]byte, hdr.IPv4MinLen))
			got.Encode(&hdr.IPv4Fields{
				TOS: want.TOS(), TotalLength: want.TotalLength(), ID: want.ID(), Flags: want.Flags(),
				FragmentOffset: want.FragmentOffset(), TTL: want.TTL(), Protocol: want.Protocol(),
				Src: want.Src(), Dst: want.Dst(),
			})
			if !bytes.Equal(got, want[:hdr.IPv4MinLen]) {
				t.Fatalf("encoded %x\n    want %x", []byte(got), []byte(want[:hdr.IPv4MinLen]))
			}
		})
	}
}

// TestIPv4EncodeMatchesSetters: the header Encode writes word by word,
// with its checksum summed from the words, is byte for byte the one the
// field setters and CalculateChecksum write, over random fields.
func TestIPv4EncodeMatchesSetters(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		f := hdr.IPv4Fields{
			TOS: uint8(r.Uint32()), TotalLength: uint16(r.Uint32()), ID: uint16(r.Uint32()),
			Flags: uint8(r.Uint32()), FragmentOffset: uint16(r.Uint32()) &^ 7,
			TTL: uint8(r.Uint32()), Protocol: uint8(r.Uint32()), Src: r.Uint32(), Dst: r.Uint32(),
		}
		want := hdr.IPv4(make([]byte, hdr.IPv4MinLen))
		want.SetVersionIHL(hdr.IPv4MinLen)
		want.SetTOS(f.TOS)
		want.SetTotalLength(f.TotalLength)
		want.SetID(f.ID)
		want.SetFlagsFragmentOffset(f.Flags, f.FragmentOffset)
		want.SetTTL(f.TTL)
		want.SetProtocol(f.Protocol)
		want.SetSrc(f.Src)
		want.SetDst(f.Dst)
		want.SetChecksum(want.CalculateChecksum())
		got := hdr.IPv4(bytes.Repeat([]byte{0xa5}, hdr.IPv4MinLen))
		got.Encode(&f)
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %x\n    setters %x", f, []byte(got), []byte(want))
		}
	}
}

// TestIPv4EncodeOverwrites: Encode makes a valid header whatever the bytes
// held before (a reused mbuf).
func TestIPv4EncodeOverwrites(t *testing.T) {
	b := hdr.IPv4(bytes.Repeat([]byte{0xff}, 40))
	b.Encode(&hdr.IPv4Fields{TotalLength: 40, TTL: 64, Protocol: hdr.ProtoIPIP, Src: clientIP, Dst: vip, FragmentOffset: 16})
	if !b.IsValid(40) || !b.IsChecksumValid() || b.HeaderLen() != 20 || b.TOS() != 0 || b.ID() != 0 ||
		b.Flags() != 0 || b.FragmentOffset() != 16 || b.Protocol() != hdr.ProtoIPIP {
		t.Fatalf("header %x", []byte(b[:20]))
	}
}

// TestTCPEncode: the segment Encode writes parses back to its fields and
// its checksum matches a full recomputation.
func TestTCPEncode(t *testing.T) {
	seg := hdr.TCP(bytes.Repeat([]byte{0xff}, hdr.TCPMinLen))
	f := hdr.TCPFields{SrcPort: 61007, DstPort: 8080, Seq: 0x01020304, Ack: 0x0a0b0c0d, Flags: hdr.TCPFlagRST, Window: 0}
	seg.Encode(&f, clientIP, vip)
	if !seg.IsValid() || seg.SrcPort() != f.SrcPort || seg.DstPort() != f.DstPort || seg.Seq() != f.Seq ||
		seg.Ack() != f.Ack || seg.Flags() != f.Flags || seg.Window() != 0 || seg.UrgentPointer() != 0 || seg.DataOffset() != 20 {
		t.Fatalf("segment %x", []byte(seg))
	}
	if c := hdr.TransportChecksum(clientIP, vip, hdr.ProtoTCP, seg); seg.Checksum() != c {
		t.Fatalf("checksum %#04x, full recomputation %#04x", seg.Checksum(), c)
	}
}

// TestRewriteGolden: RewriteDst (after a TTL hop) gives the outputs of
// TestNATGolden, produced by full recomputation.
func TestRewriteGolden(t *testing.T) {
	for _, tt := range []struct {
		fixture string
		rip     uint32
		rport   uint16
		want    string
	}{
		{"tcpdata", 0x0a000005, 8080, "02000000000202000000000108004500003b1c4740003f065367c000020a0a0000059c401f9012345679abcdef01501801f622c70000474554202f20485454502f312e300d0a0d0a21"},
		{"udpdns", 0x0a000035, 5353, "020000000002020000000001080045000039000100003f11af74c000020a0a000035cf0814e90025d437abcd01000001000000000000076578616d706c6503636f6d0000010001"},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			frame := fixture(t, tt.fixture)
			ip := ipv4Of(t, frame)
			ip.DecTTLWithChecksumUpdate()
			hdr.RewriteDst(ip, ip.Payload(), tt.rip, tt.rport, false)
			if got := hex.EncodeToString(frame); got != tt.want {
				t.Errorf("output\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestRewriteSrcRoundTrip: rewriting the source and back restores the
// frame exactly; the checksums stay right at every step.
func TestRewriteSrcRoundTrip(t *testing.T) {
	for _, name := range []string{"tcpsyn", "tcpdata", "udpdns"} {
		frame := fixture(t, name)
		orig := append([]byte(nil), frame...)
		ip := ipv4Of(t, frame)
		src, sport := ip.Src(), hdr.UDP(ip.Payload()).SrcPort()
		hdr.RewriteSrc(ip, ip.Payload(), 0xc0000264, 80, false)
		l4 := ip.Payload()
		if !ip.IsChecksumValid() || ip.Src() != 0xc0000264 || hdr.UDP(l4).SrcPort() != 80 {
			t.Fatalf("%s: rewrite gave %x", name, frame)
		}
		off := 16 // TCP's checksum
		if ip.Protocol() == hdr.ProtoUDP {
			off = 6
		}
		if got, want := uint16(l4[off])<<8|uint16(l4[off+1]), hdr.TransportChecksum(ip.Src(), ip.Dst(), ip.Protocol(), l4); got != want {
			t.Fatalf("%s: L4 checksum %#04x, full recomputation %#04x", name, got, want)
		}
		hdr.RewriteSrc(ip, l4, src, sport, false)
		if !bytes.Equal(frame, orig) {
			t.Fatalf("%s: round trip changed the frame", name)
		}
	}
}

// TestRewriteQuoted: on the 8 bytes an ICMP error quotes, the UDP checksum
// is updated and a TCP checksum (beyond them) is not touched.
func TestRewriteQuoted(t *testing.T) {
	quoted, whole := ipv4Of(t, fixture(t, "udpdns")), ipv4Of(t, fixture(t, "udpdns"))
	hdr.RewriteDst(quoted, quoted.Payload()[:8], 0x0a000035, 5353, false)
	hdr.RewriteDst(whole, whole.Payload(), 0x0a000035, 5353, false)
	if !bytes.Equal(quoted, whole) {
		t.Fatalf("quoted UDP rewrite %x, whole %x", []byte(quoted), []byte(whole))
	}
	ip := ipv4Of(t, fixture(t, "tcpdata"))
	before := hdr.TCP(ip.Payload()).Checksum()
	hdr.RewriteDst(ip, ip.Payload()[:8], 0x0a000005, 8080, false)
	if hdr.TCP(ip.Payload()).Checksum() != before || hdr.TCP(ip.Payload()).DstPort() != 8080 || !ip.IsChecksumValid() {
		t.Fatal("quoted TCP: checksum touched or port/IP header wrong")
	}
}

// TestRewriteOffload: with offload the addresses and ports change and no
// checksum does; PrepareTxOffload then zeroes the IPv4 checksum and puts
// the pseudo-header sum where the NIC wants it (none for UDP without).
func TestRewriteOffload(t *testing.T) {
	frame := fixture(t, "tcpdata")
	ip := ipv4Of(t, frame)
	ipc, tcpc := ip.Checksum(), hdr.TCP(ip.Payload()).Checksum()
	hdr.RewriteDst(ip, ip.Payload(), 0x0a000005, 8080, true)
	tcp := hdr.TCP(ip.Payload())
	if ip.Checksum() != ipc || tcp.Checksum() != tcpc || ip.Dst() != 0x0a000005 || tcp.DstPort() != 8080 {
		t.Fatal("offloaded rewrite touched a checksum or missed a field")
	}
	if !hdr.PrepareTxOffload(ip, tcp) || ip.Checksum() != 0 ||
		tcp.Checksum() != hdr.Fold(hdr.PseudoHeaderSum(ip.Src(), ip.Dst(), hdr.ProtoTCP, uint16(len(tcp)))) {
		t.Fatalf("prepared %x", frame)
	}
	ip = ipv4Of(t, fixture(t, "udpnocsum"))
	if hdr.PrepareTxOffload(ip, ip.Payload()) || hdr.UDP(ip.Payload()).Checksum() != 0 {
		t.Fatal("a UDP datagram without a checksum was given one")
	}
}

func TestICMPErrorTypes(t *testing.T) {
	for typ := 0; typ < 256; typ++ {
		want := typ == hdr.ICMPDestUnreachable || typ == hdr.ICMPTimeExceeded || typ == hdr.ICMPParamProblem
		if hdr.IsICMPError(uint8(typ)) != want {
			t.Errorf("IsICMPError(%d) = %v", typ, !want)
		}
	}
	icmp := hdr.ICMP(ipv4Of(t, fixture(t, "icmpecho")).Payload())
	want := icmp.Checksum()
	icmp.SetChecksum(0x1234)
	icmp.SetChecksumFull()
	if icmp.Checksum() != want {
		t.Fatalf("SetChecksumFull gave %#04x, want %#04x", icmp.Checksum(), want)
	}
}
