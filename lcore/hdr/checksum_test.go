package hdr_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// refSum is the textbook RFC 1071 loop, kept deliberately naive as an oracle
// for the word-at-a-time Checksum.
func refSum(b []byte, initial uint32) uint32 {
	sum := uint64(initial)
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint64(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint32(sum)
}

func TestChecksumRFC1071Example(t *testing.T) {
	// RFC 1071 section 3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2.
	data := []byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}
	if got := hdr.Checksum(data, 0); got != 0xddf2 {
		t.Errorf("Checksum = %#04x, want 0xddf2", got)
	}
	if got := ^hdr.Fold(hdr.Checksum(data, 0)); got != 0x220d {
		t.Errorf("checksum field = %#04x, want 0x220d", got)
	}
}

func TestIPv4ChecksumWellKnownHeader(t *testing.T) {
	// The header used as the worked example on Wikipedia's "IPv4 header
	// checksum" page: 192.168.0.1 -> 192.168.0.199, checksum b861.
	ip := hdr.IPv4{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := ip.CalculateChecksum(); got != 0xb861 {
		t.Errorf("CalculateChecksum = %#04x, want 0xb861", got)
	}
	if !ip.IsChecksumValid() {
		t.Error("IsChecksumValid = false")
	}
	if ip.Src() != 0xC0A80001 || ip.Dst() != 0xC0A800C7 {
		t.Errorf("Src=%#08x Dst=%#08x", ip.Src(), ip.Dst())
	}
}

func TestChecksumTable(t *testing.T) {
	tests := []struct {
		name    string
		b       []byte
		initial uint32
		want    uint32
	}{
		{"empty", nil, 0, 0},
		{"empty keeps folded initial", nil, 0x1234, 0x1234},
		{"empty folds initial", nil, 0x0001ffff, 0x0001},
		{"one byte is high half", []byte{0xab}, 0, 0xab00},
		{"three bytes", []byte{0x12, 0x34, 0x56}, 0, 0x6834},
		{"carry wraps", []byte{0xff, 0xff, 0x00, 0x01}, 0, 0x0001},
		{"all ones stays -0", []byte{0xff, 0xff, 0xff, 0xff}, 0, 0xffff},
		{"seven bytes tail", []byte{1, 2, 3, 4, 5, 6, 7}, 0, 0x0102 + 0x0304 + 0x0506 + 0x0700},
		{"initial large", []byte{0x00, 0x01}, 0xffffffff, 0x0001},
	}
	for _, tt := range tests {
		if got := hdr.Checksum(tt.b, tt.initial); got != tt.want {
			t.Errorf("%s: Checksum = %#x, want %#x", tt.name, got, tt.want)
		}
	}
}

func TestChecksumMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1071, 1624))
	buf := make([]byte, 2048)
	for i := 0; i < 5000; i++ {
		n := r.IntN(len(buf))
		if i < 100 {
			n = i // every short length, the tail cases
		}
		b := buf[:n]
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		if i%7 == 0 {
			for j := range b {
				b[j] = 0xff // maximal carries
			}
		}
		initial := r.Uint32()
		if got, want := hdr.Checksum(b, initial), refSum(b, initial); got != want {
			t.Fatalf("len %d initial %#x: Checksum = %#x, reference %#x", n, initial, got, want)
		}
		// Chaining over an even split equals one pass.
		split := r.IntN(n+1) &^ 1
		if got, want := hdr.Checksum(b[split:], hdr.Checksum(b[:split], initial)), refSum(b, initial); got != want {
			t.Fatalf("len %d split %d: chained = %#x, one pass %#x", n, split, got, want)
		}
	}
}

func TestFold(t *testing.T) {
	tests := []struct {
		in   uint32
		want uint16
	}{
		{0, 0},
		{0xffff, 0xffff},
		{0x10000, 0x0001},
		{0x1fffe, 0xffff},
		{0x12345678, 0x68ac},
		{0xffffffff, 0xffff},
	}
	for _, tt := range tests {
		if got := hdr.Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%#x) = %#x, want %#x", tt.in, got, tt.want)
		}
	}
}

func TestPseudoHeaderSum(t *testing.T) {
	tests := []struct {
		src, dst uint32
		proto    uint8
		length   uint16
		want     uint32
	}{
		{0, 0, 0, 0, 0},
		{0xC000020A, 0xC6336401, hdr.ProtoTCP, 40, 0xc000 + 0x020a + 0xc633 + 0x6401 + 6 + 40},
		{0xffffffff, 0xffffffff, 0xff, 0xffff, 4*0xffff + 0xff + 0xffff},
	}
	for _, tt := range tests {
		if got := hdr.PseudoHeaderSum(tt.src, tt.dst, tt.proto, tt.length); got != tt.want {
			t.Errorf("PseudoHeaderSum(%#x, %#x, %d, %d) = %#x, want %#x", tt.src, tt.dst, tt.proto, tt.length, got, tt.want)
		}
	}
}

func TestUpdate16(t *testing.T) {
	tests := []struct {
		name          string
		csum, old, nw uint16
		want          uint16
	}{
		// RFC 1624 section 4: eqn. 3 gives 0x0000 where eqn. 2 gave -0.
		{"RFC 1624 example", 0xdd2f, 0x5555, 0x3285, 0x0000},
		{"no change", 0x1234, 0xabcd, 0xabcd, 0x1234},
		{"word up by one", 0x1234, 0x0001, 0x0002, 0x1233},
		{"word down by one", 0x1234, 0x0002, 0x0001, 0x1235},
	}
	for _, tt := range tests {
		if got := hdr.Update16(tt.csum, tt.old, tt.nw); got != tt.want {
			t.Errorf("%s: Update16 = %#04x, want %#04x", tt.name, got, tt.want)
		}
	}
}

func TestUpdateUDP(t *testing.T) {
	tests := []struct {
		name          string
		csum, old, nw uint16
		want          uint16
	}{
		{"absent stays absent", 0, 0x1111, 0x2222, 0},
		{"computed zero is sent as ffff", 0xdd2f, 0x5555, 0x3285, 0xffff},
		{"ordinary", 0x1234, 0x0001, 0x0002, 0x1233},
	}
	for _, tt := range tests {
		if got := hdr.UpdateUDP16(tt.csum, tt.old, tt.nw); got != tt.want {
			t.Errorf("%s: UpdateUDP16 = %#04x, want %#04x", tt.name, got, tt.want)
		}
		// The same change as the low half of a 32-bit field.
		if got := hdr.UpdateUDP32(tt.csum, 0xabcd0000|uint32(tt.old), 0xabcd0000|uint32(tt.nw)); got != tt.want {
			t.Errorf("%s: UpdateUDP32 = %#04x, want %#04x", tt.name, got, tt.want)
		}
	}
}

func TestUpdate32MatchesFull(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 32))
	b := make([]byte, 64)
	for i := 0; i < 10000; i++ {
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		off := 2 * r.IntN(len(b)/2-1)
		csum := ^hdr.Fold(hdr.Checksum(b, 0x1234)) // any non-zero seed
		old, nw := binary.BigEndian.Uint32(b[off:]), r.Uint32()
		binary.BigEndian.PutUint32(b[off:], nw)
		if got, want := hdr.Update32(csum, old, nw), ^hdr.Fold(hdr.Checksum(b, 0x1234)); got != want {
			t.Fatalf("iteration %d: Update32 = %#04x, full %#04x", i, got, want)
		}
	}
}

// randomPacket builds a checksummed IPv4+TCP/UDP packet with random
// addresses, ports, IP options and a payload of any length (odd included).
func randomPacket(r *rand.Rand, proto uint8, noUDPChecksum bool) hdr.IPv4 {
	ihl := 20 + 4*r.IntN(4)
	thl := hdr.UDPLen
	if proto == hdr.ProtoTCP {
		thl = 20 + 4*r.IntN(3)
	}
	payload := r.IntN(1501)
	total := ihl + thl + payload
	b := make([]byte, total+r.IntN(8)) // trailing slack like Ethernet padding
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	ip := hdr.IPv4(b)
	ip.SetVersionIHL(ihl)
	ip.SetTotalLength(uint16(total))
	ip.SetFlagsFragmentOffset(hdr.IPv4FlagDontFragment, 0)
	ip.SetTTL(uint8(2 + r.IntN(254)))
	ip.SetProtocol(proto)
	ip.SetSrc(r.Uint32())
	ip.SetDst(r.Uint32())
	ip.SetChecksum(ip.CalculateChecksum())
	seg := ip.Payload()
	switch proto {
	case hdr.ProtoTCP:
		tcp := hdr.TCP(seg)
		tcp.SetDataOffset(thl)
		tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), proto, seg))
	case hdr.ProtoUDP:
		udp := hdr.UDP(seg)
		udp.SetLength(uint16(len(seg)))
		udp.SetChecksum(0)
		if !noUDPChecksum {
			udp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), proto, seg))
		}
	}
	return ip
}

// checkAgainstFull asserts that the checksums in ip equal a full recomputation.
func checkAgainstFull(t *testing.T, ip hdr.IPv4, noUDPChecksum bool, what string) {
	t.Helper()
	if got, want := ip.Checksum(), ip.CalculateChecksum(); got != want {
		t.Fatalf("%s: IPv4 checksum %#04x, full %#04x", what, got, want)
	}
	seg := ip.Payload()
	var got, want uint16
	switch ip.Protocol() {
	case hdr.ProtoTCP:
		got, want = hdr.TCP(seg).Checksum(), hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, seg)
	case hdr.ProtoUDP:
		got, want = hdr.UDP(seg).Checksum(), hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoUDP, seg)
		if noUDPChecksum {
			want = 0
		}
	}
	if got != want {
		t.Fatalf("%s: transport checksum %#04x, full %#04x", what, got, want)
	}
}

// natRewrite applies the RFC 1624 helpers as the dataplane does.
func natRewrite(ip hdr.IPv4, newSrc, newDst *uint32, newSrcPort, newDstPort *uint16) {
	tcp, udp := hdr.TCP(ip.Payload()), hdr.UDP(ip.Payload())
	isTCP := ip.Protocol() == hdr.ProtoTCP
	if newSrc != nil {
		old := ip.Src()
		ip.SetSrcWithChecksumUpdate(*newSrc)
		if isTCP {
			tcp.UpdateChecksumForAddr(old, *newSrc)
		} else {
			udp.UpdateChecksumForAddr(old, *newSrc)
		}
	}
	if newDst != nil {
		old := ip.Dst()
		ip.SetDstWithChecksumUpdate(*newDst)
		if isTCP {
			tcp.UpdateChecksumForAddr(old, *newDst)
		} else {
			udp.UpdateChecksumForAddr(old, *newDst)
		}
	}
	if newSrcPort != nil {
		if isTCP {
			tcp.SetSrcPortWithChecksumUpdate(*newSrcPort)
		} else {
			udp.SetSrcPortWithChecksumUpdate(*newSrcPort)
		}
	}
	if newDstPort != nil {
		if isTCP {
			tcp.SetDstPortWithChecksumUpdate(*newDstPort)
		} else {
			udp.SetDstPortWithChecksumUpdate(*newDstPort)
		}
	}
}

func TestNATIncrementalMatchesFullRecomputation(t *testing.T) {
	r := rand.New(rand.NewPCG(2024, 1624))
	for i := 0; i < 10000; i++ {
		proto := uint8(hdr.ProtoTCP)
		if r.IntN(2) == 0 {
			proto = hdr.ProtoUDP
		}
		noUDPChecksum := proto == hdr.ProtoUDP && r.IntN(8) == 0
		ip := randomPacket(r, proto, noUDPChecksum)
		if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
			t.Fatalf("packet %d: built an invalid packet", i)
		}
		checkAgainstFull(t, ip, noUDPChecksum, "built")
		var src, dst *uint32
		var sport, dport *uint16
		for src == nil && dst == nil && sport == nil && dport == nil {
			if r.IntN(2) == 0 {
				v := r.Uint32()
				src = &v
			}
			if r.IntN(2) == 0 {
				v := r.Uint32()
				dst = &v
			}
			if r.IntN(2) == 0 {
				v := uint16(r.Uint32())
				sport = &v
			}
			if r.IntN(2) == 0 {
				v := uint16(r.Uint32())
				dport = &v
			}
		}
		natRewrite(ip, src, dst, sport, dport)
		if r.IntN(2) == 0 && !ip.DecTTLWithChecksumUpdate() {
			t.Fatalf("packet %d: TTL %d refused", i, ip.TTL())
		}
		checkAgainstFull(t, ip, noUDPChecksum, "after NAT")
	}
}

// TestNATChecksumEdgeValues covers the two representations of zero, which
// random packets hit only once in 65535: a UDP computed 0 must be sent as
// 0xFFFF before and after a rewrite, and TCP must keep 0x0000 (never -0).
func TestNATChecksumEdgeValues(t *testing.T) {
	const src, dst, newDst = 0xC000020A, 0xC6336401, 0x0a000005
	build := func(proto uint8, word uint16) hdr.IPv4 {
		thl := hdr.UDPLen
		if proto == hdr.ProtoTCP {
			thl = hdr.TCPMinLen
		}
		ip := hdr.IPv4(make([]byte, 20+thl+2))
		ip.SetVersionIHL(20)
		ip.SetTotalLength(uint16(len(ip)))
		ip.SetTTL(64)
		ip.SetProtocol(proto)
		ip.SetSrc(src)
		ip.SetDst(dst)
		ip.SetChecksum(ip.CalculateChecksum())
		seg := ip.Payload()
		binary.BigEndian.PutUint16(seg[0:], 40000)
		binary.BigEndian.PutUint16(seg[2:], 80)
		if proto == hdr.ProtoTCP {
			hdr.TCP(seg).SetDataOffset(thl)
		} else {
			hdr.UDP(seg).SetLength(uint16(len(seg)))
		}
		binary.BigEndian.PutUint16(seg[thl:], word)
		c := hdr.TransportChecksum(src, dst, proto, seg)
		if proto == hdr.ProtoTCP {
			hdr.TCP(seg).SetChecksum(c)
		} else {
			hdr.UDP(seg).SetChecksum(c)
		}
		return ip
	}
	// findWord returns the payload word that makes the full checksum, before
	// or after the rewrite, equal want.
	findWord := func(proto uint8, after bool, want uint16) uint16 {
		for w := 0; w <= 0xffff; w++ {
			ip := build(proto, uint16(w))
			if after {
				natRewrite(ip, nil, ptr(uint32(newDst)), nil, ptr(uint16(8080)))
			}
			if hdr.TransportChecksum(ip.Src(), ip.Dst(), proto, ip.Payload()) == want {
				return uint16(w)
			}
		}
		t.Fatalf("no payload word gives checksum %#04x", want)
		return 0
	}
	tests := []struct {
		name  string
		proto uint8
		after bool
		zero  uint16 // how a computed zero appears in the field
	}{
		{"UDP zero before rewrite", hdr.ProtoUDP, false, 0xffff},
		{"UDP zero after rewrite", hdr.ProtoUDP, true, 0xffff},
		{"TCP zero before rewrite", hdr.ProtoTCP, false, 0x0000},
		{"TCP zero after rewrite", hdr.ProtoTCP, true, 0x0000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := findWord(tt.proto, tt.after, tt.zero)
			ip := build(tt.proto, w)
			field := func() uint16 {
				if tt.proto == hdr.ProtoTCP {
					return hdr.TCP(ip.Payload()).Checksum()
				}
				return hdr.UDP(ip.Payload()).Checksum()
			}
			natRewrite(ip, nil, ptr(uint32(newDst)), nil, ptr(uint16(8080)))
			checkAgainstFull(t, ip, false, tt.name)
			if tt.after && field() != tt.zero {
				t.Errorf("checksum after rewrite = %#04x, want %#04x", field(), tt.zero)
			}
			// And back again: the reply path restores the original.
			natRewrite(ip, nil, ptr(uint32(dst)), nil, ptr(uint16(80)))
			checkAgainstFull(t, ip, false, tt.name+" reversed")
			if want := build(tt.proto, w); !bytes.Equal(ip, want) {
				t.Errorf("reversed rewrite\n got %x\nwant %x", []byte(ip), []byte(want))
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{20, 64, 1500} {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var sink uint32
			for b.Loop() {
				sink += hdr.Checksum(buf, sink)
			}
		})
	}
}

func BenchmarkIPv4CalculateChecksum(b *testing.B) {
	ip := hdr.IPv4(fixture(b, "tcpsyn")[hdr.EthernetLen:])
	b.ReportAllocs()
	var sink uint16
	for b.Loop() {
		ip[ipv4IDByte]++ // defeat hoisting
		sink += ip.CalculateChecksum()
	}
	_ = sink
}

const ipv4IDByte = 5

// BenchmarkTCPNAT compares a VS/NAT rewrite (destination address and port,
// TTL) done with RFC 1624 updates against full recomputation of both
// checksums, at an empty segment and at a full 1460-byte MSS.
func BenchmarkTCPNAT(b *testing.B) {
	for _, payload := range []int{0, 1460} {
		r := rand.New(rand.NewPCG(1, uint64(payload)))
		var ip hdr.IPv4
		for {
			ip = randomPacket(r, hdr.ProtoTCP, false)
			if len(ip.Payload())-hdr.TCP(ip.Payload()).DataOffset() >= payload {
				break
			}
		}
		ip.SetVersionIHL(20)
		ip.SetTotalLength(uint16(20 + 20 + payload))
		hdr.TCP(ip.Payload()).SetDataOffset(20)
		ip.SetTTL(255)
		ip.SetChecksum(ip.CalculateChecksum())
		tcp := hdr.TCP(ip.Payload())
		tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
		rip := [2]uint32{0x0a000005, 0x0a000006}

		b.Run("incremental/payload="+strconv.Itoa(payload), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				old := ip.Dst()
				ip.SetDstWithChecksumUpdate(rip[i&1])
				ip.SetTTLWithChecksumUpdate(uint8(i))
				tcp.UpdateChecksumForAddr(old, rip[i&1])
				tcp.SetDstPortWithChecksumUpdate(uint16(i))
			}
		})
		b.Run("full/payload="+strconv.Itoa(payload), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				ip.SetDst(rip[i&1])
				ip.SetTTL(uint8(i))
				ip.SetChecksum(ip.CalculateChecksum())
				tcp.SetDstPort(uint16(i))
				tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
			}
		})
	}
}

func BenchmarkParseTCP(b *testing.B) {
	frame := fixture(b, "tcpdata")
	b.ReportAllocs()
	var sink uint32
	for b.Loop() {
		eth := hdr.Ethernet(frame)
		if !eth.IsValid() || eth.EtherType() != hdr.EtherTypeIPv4 {
			b.Fatal("gate")
		}
		ip := hdr.IPv4(eth.Payload())
		if !ip.IsValid(len(eth.Payload())) {
			b.Fatal("gate")
		}
		tcp := hdr.TCP(ip.Payload())
		if !tcp.IsValid() {
			b.Fatal("gate")
		}
		sink += ip.Src() ^ ip.Dst() ^ uint32(tcp.SrcPort())<<16 ^ uint32(tcp.DstPort())
	}
	_ = sink
}

// TestUpdateBlock: rewriting a block in place and updating by its sums
// gives what a full recomputation gives, and a checksum that was wrong
// stays wrong.
func TestUpdateBlock(t *testing.T) {
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i*37 + 11)
	}
	full := func(b []byte) uint16 { return ^hdr.Fold(hdr.Checksum(b, 0)) }
	for _, off := range []int{0, 8, 30} {
		b := append([]byte(nil), msg...)
		cs := full(b)
		block := b[off : off+28]
		before := hdr.Checksum(block, 0)
		for i := range block {
			block[i] ^= byte(0x5a + i)
		}
		if got, want := hdr.UpdateBlock(cs, before, hdr.Checksum(block, 0)), full(b); got != want {
			t.Errorf("offset %d: updated %#04x, recomputed %#04x", off, got, want)
		}
		copy(b, msg)
		wrong := cs + 0x0101
		for i := range block {
			block[i] ^= byte(0x5a + i)
		}
		if got := hdr.UpdateBlock(wrong, before, hdr.Checksum(block, 0)); got == full(b) {
			t.Errorf("offset %d: a wrong checksum became right", off)
		}
	}
}
