package gen

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

var (
	macC = hdr.MAC{2, 0, 0, 0, 0, 1}
	macL = hdr.MAC{2, 0, 0, 0, 0, 2}
	vip  = uint32(0xCB00710A) // 203.0.113.10
	cip  = uint32(0xCB007164) // 203.0.113.100
)

// checkFrame verifies a frame's IPv4 and L4 checksums by full recomputation.
func checkFrame(t *testing.T, p []byte) {
	t.Helper()
	ip := hdr.IPv4(p[ipOff:])
	if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
		t.Fatalf("bad IPv4 header or checksum: % x", p[ipOff:l4Off])
	}
	seg := ip.Payload()
	var got uint16
	if ip.Protocol() == hdr.ProtoTCP {
		got = hdr.TCP(seg).Checksum()
		hdr.TCP(seg).SetChecksum(0)
		defer hdr.TCP(seg).SetChecksum(got)
	} else {
		got = hdr.UDP(seg).Checksum()
		hdr.UDP(seg).SetChecksum(0)
		defer hdr.UDP(seg).SetChecksum(got)
	}
	if want := hdr.TransportChecksum(ip.Src(), ip.Dst(), ip.Protocol(), seg); got != want {
		t.Fatalf("L4 checksum %#04x, want %#04x", got, want)
	}
}

func TestBuildStampAnswer(t *testing.T) {
	newB := func(proto uint8, size int) (*Builder, error) { return NewBuilder(proto, size, macC, macL, vip, 80) }
	src := func(i int) uint32 { return cip + uint32(i) }
	forEachFrame(t, frameCases(MinFrame, MinFrame), newB, src, func(tc frameCase, p []byte, i int, fl uint8, seq, stamp uint32) {
		checkFrame(t, p)
		r := stampAnswer(t, p, tc.proto, fl, seq, stamp, tc.mode, MinFrame)
		checkFrame(t, r)
		ip := hdr.IPv4(r[ipOff:])
		if ip.Src() != vip || ip.Dst() != src(i) || hdr.Ethernet(r).Dst() != macC {
			t.Fatalf("reply not swapped: %x -> %x", ip.Src(), ip.Dst())
		}
	})
}

// forEachFrame builds frames of each case with newB, with each pattern's
// TCP flags (the same frames for UDP) and four sequence numbers and
// stamps, from src(i):1024+i for the i-th, and hands each to check.
func forEachFrame(t *testing.T, cases []frameCase, newB func(proto uint8, size int) (*Builder, error), src func(i int) uint32,
	check func(tc frameCase, p []byte, i int, fl uint8, seq, stamp uint32)) {
	t.Helper()
	for _, tc := range cases {
		b, err := newB(tc.proto, tc.size)
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range []uint8{hdr.TCPFlagSYN, hdr.TCPFlagACK | hdr.TCPFlagPSH, hdr.TCPFlagFIN | hdr.TCPFlagACK} {
			p := make([]byte, tc.size)
			for i, seq := range []uint32{0, 1, 0xffffffff, 0x12345678} {
				stamp := seq*7 + uint32(i)
				b.Build(p, src(i), 1024+uint16(i), fl, seq, stamp)
				check(tc, p, i, fl, seq, stamp)
			}
		}
	}
}

// frameCase is a frame the generator builds and the reply mode of the
// server side.
type frameCase struct {
	proto uint8
	size  int
	mode  ReplyMode
}

// frameCases are the smallest frames (minTCP, minUDP bytes), the
// largest and some between, TCP with each reply mode and UDP.
func frameCases(minTCP, minUDP int) []frameCase {
	return []frameCase{
		{hdr.ProtoTCP, minTCP, ReplyACK}, {hdr.ProtoTCP, minTCP, ReplyEcho}, {hdr.ProtoTCP, MaxFrame, ReplyACK},
		{hdr.ProtoTCP, MaxFrame, ReplyEcho}, {hdr.ProtoTCP, 333, ReplyACK}, {hdr.ProtoUDP, minUDP, ReplyEcho},
		{hdr.ProtoUDP, 1001, ReplyEcho},
	}
}

// stampAnswer checks the stamp of a client frame built into p (TCP
// flags fl, or UDP), answers it as the server side does and checks the
// reply's stamp, flags and length (bare replies are bare bytes long); it
// returns the reply.
func stampAnswer(t *testing.T, p []byte, proto, fl uint8, seq, stamp uint32, mode ReplyMode, bare int) []byte {
	t.Helper()
	k, gotFl, gotSeq, gotStamp := Stamp(p, false)
	wantK := KindTCP
	if proto == hdr.ProtoUDP {
		wantK, fl = KindUDP, 0
	}
	if k != wantK || gotFl != fl || gotSeq != seq || gotStamp != stamp {
		t.Fatalf("Stamp = %v %#x %d %d, want %v %#x %d %d", k, gotFl, gotSeq, gotStamp, wantK, fl, seq, stamp)
	}
	size := len(p)
	n := Answer(p, k, gotFl, mode)
	if n == 0 {
		t.Fatalf("no answer to flags %#x", fl)
	}
	r := p[:n]
	k2, rfl, rseq, rstamp := Stamp(r, true)
	if k2 != k || rseq != seq || rstamp != stamp {
		t.Fatalf("reply stamp %d %d, want %d %d", rseq, rstamp, seq, stamp)
	}
	if proto == hdr.ProtoTCP {
		if rfl&hdr.TCPFlagACK == 0 || rfl&(hdr.TCPFlagSYN|hdr.TCPFlagFIN) != fl&(hdr.TCPFlagSYN|hdr.TCPFlagFIN) {
			t.Fatalf("reply flags %#x to %#x", rfl, fl)
		}
		isBare := mode == ReplyACK || fl&(hdr.TCPFlagSYN|hdr.TCPFlagFIN) != 0
		if isBare && n != bare || !isBare && n != size {
			t.Fatalf("reply to %#x is %d bytes", fl, n)
		}
	}
	return r
}

func TestARP(t *testing.T) {
	p := make([]byte, MinFrame)
	ARPRequest(p, macL, 0xC6336401, 0xC633640B) // lbd asks for RS 198.51.100.11
	if k, _, _, _ := Stamp(p, false); k != KindARPReq {
		t.Fatalf("kind %v", k)
	}
	if AnswerARP(p, macC, Range{0xC633640C, 0xC633640C}) {
		t.Fatal("answered for an address out of range")
	}
	if !AnswerARP(p, macC, Range{0xC633640B, 0xC633640C}) {
		t.Fatal("no answer")
	}
	ip, mac, ok := ARPReplySender(p)
	if !ok || ip != 0xC633640B || mac != macC || hdr.Ethernet(p).Dst() != macL {
		t.Fatalf("reply %x %v %v", ip, mac, ok)
	}
}

func TestHistQuantiles(t *testing.T) {
	var h Hist
	for i := uint32(1); i <= 100000; i++ {
		h.Record(i)
	}
	for _, q := range []float64{0.5, 0.99, 0.999} {
		want := q * 100000
		got := float64(h.Quantile(q))
		if got < want*0.96 || got > want*1.04 {
			t.Errorf("q%.3f = %.0f, want %.0f within 4%%", q, got, want)
		}
	}
	h.Record(0xffffffff)
	if h.Max() != 0xffffffff || h.Quantile(1) != 0xffffffff {
		t.Errorf("max %d q1 %d", h.Max(), h.Quantile(1))
	}
}

// The per-packet functions must not allocate.
func TestPacketPathDoesNotAllocate(t *testing.T) {
	b, err := NewBuilder(hdr.ProtoTCP, 128, macC, macL, vip, 80)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 128)
	arp := make([]byte, MinFrame)
	var h Hist
	seq := uint32(0)
	allocs := testing.AllocsPerRun(1000, func() {
		b.Build(p, cip, 1024, hdr.TCPFlagACK, seq, seq)
		k, fl, s, st := Stamp(p, false)
		h.Record(s - st)
		Answer(p, k, fl, ReplyACK)
		Stamp(p, true)
		ARPRequest(arp, macL, 1, cip)
		AnswerARP(arp, macC, Range{cip, cip})
		ARPReplySender(arp)
		seq++
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per packet, want 0", allocs)
	}
}

func BenchmarkBuild(b *testing.B) {
	bl, _ := NewBuilder(hdr.ProtoTCP, 60, macC, macL, vip, 80)
	p := make([]byte, 60)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bl.Build(p, cip+uint32(i&15), uint16(i), hdr.TCPFlagACK, uint32(i), uint32(i))
	}
}

func BenchmarkAnswer(b *testing.B) {
	bl, _ := NewBuilder(hdr.ProtoTCP, 60, macC, macL, vip, 80)
	p := make([]byte, 60)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		bl.Build(p, cip, 1024, hdr.TCPFlagACK, uint32(i), uint32(i))
		k, fl, _, _ := Stamp(p, false)
		Answer(p, k, fl, ReplyACK)
	}
}

// A VS/TUN packet: the client's IPv4 packet inside an outer IPv4 header
// (protocol 4); Stamp reads the inner stamp and says it was tunnelled.
func TestStampIPIP(t *testing.T) {
	b, err := NewBuilder(hdr.ProtoTCP, MinFrame, macC, macL, vip, 80)
	if err != nil {
		t.Fatal(err)
	}
	inner := make([]byte, MinFrame)
	b.Build(inner, cip, 40000, hdr.TCPFlagSYN, 7, 12345)
	p := make([]byte, MinFrame+hdr.IPv4MinLen)
	copy(p, inner[:ipOff])
	copy(p[ipOff+hdr.IPv4MinLen:], inner[ipOff:])
	hdr.IPv4(p[ipOff:]).Encode(&hdr.IPv4Fields{TotalLength: uint16(len(p) - ipOff), TTL: hdr.DefaultTTL,
		Protocol: hdr.ProtoIPIP, Src: 0xC6336401, Dst: 0xC633640B}) // 198.51.100.1 -> .11
	k, flags, seq, stamp := Stamp(p, false)
	if k != KindIPIPTCP || flags != hdr.TCPFlagSYN || seq != 7 || stamp != 12345 {
		t.Fatalf("got kind %d flags %#x seq %d stamp %d", k, flags, seq, stamp)
	}
	if k, _, seq, _ := Stamp(inner, false); k != KindTCP || seq != 7 {
		t.Fatalf("plain frame: kind %d seq %d", k, seq)
	}
}
