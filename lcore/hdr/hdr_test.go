package hdr_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// Golden frames, built by a separate Python script with its own RFC 1071
// checksum and cross-checked with `tcpdump -vv` ("cksum ... (correct)",
// "udp sum ok"). Client 02:00:00:00:00:01 192.0.2.10, balancer
// 02:00:00:00:00:02 VIP 198.51.100.1.
var fixtures = map[string]string{
	// ARP who-has 198.51.100.1 tell 192.0.2.10, padded to 60 bytes.
	"arp": "ffffffffffff02000000000108060001080006040001020000000001c000020a000000000000c6336401000000000000000000000000000000000000",
	// TCP SYN 40000 -> 80, options mss 1460,sackOK,TS,nop,wscale 7; DF, ttl 64.
	"tcpsyn": "02000000000202000000000108004500003c1c46400040063237c000020ac63364019c4000501234567800000000a002faf079510000020405b40402080a0001e2400000000001030307",
	// TCP PSH|ACK with a 19-byte (odd) payload.
	"tcpdata": "02000000000202000000000108004500003b1c47400040063237c000020ac63364019c40005012345679abcdef01501801f621d70000474554202f20485454502f312e300d0a0d0a21",
	// UDP DNS query "A? example.com" id 0xabcd, 53000 -> 53, no DF.
	"udpdns": "0200000000020200000000010800450000390001000040118e74c000020ac6336401cf0800350025c8ebabcd01000001000000000000076578616d706c6503636f6d0000010001",
	// ICMP echo request id 0x1234 seq 1, 23 bytes of data.
	"icmpecho": "0200000000020200000000010800450000330002400040014e89c000020ac63364010800d121123400016162636465666768696a6b6c6d6e6f7071727374757677",
	// UDP 5000 -> 5001 "hi" without checksum (0), ttl 1, Ethernet-padded to 60 bytes.
	"udpnocsum": "02000000000202000000000108004500001e0003400001118d8dc000020ac633640113881389000a0000686900000000000000000000000000000000",
	// UDP 1234 -> 4321 "abc" under an IPv4 header with a Router Alert option (IHL 6).
	"ipopts": "020000000002020000000001080046000023000400004011f982c000020ac63364019404000004d210e1000b3983616263",
}

const (
	clientIP = 0xC000020A // 192.0.2.10
	vip      = 0xC6336401 // 198.51.100.1
)

var (
	clientMAC = hdr.MAC{2, 0, 0, 0, 0, 1}
	lbMAC     = hdr.MAC{2, 0, 0, 0, 0, 2}
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	s, ok := fixtures[name]
	if !ok {
		t.Fatalf("no fixture %q", name)
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("fixture %q: %v", name, err)
	}
	return b
}

// ipv4Of runs the Ethernet and IPv4 gates the way the dataplane does.
func ipv4Of(t testing.TB, frame []byte) hdr.IPv4 {
	t.Helper()
	eth := hdr.Ethernet(frame)
	if !eth.IsValid() || eth.EtherType() != hdr.EtherTypeIPv4 {
		t.Fatalf("not an IPv4 frame")
	}
	ip := hdr.IPv4(eth.Payload())
	if !ip.IsValid(len(ip)) {
		t.Fatalf("IPv4 gate failed")
	}
	return ip
}

func TestEthernetGolden(t *testing.T) {
	tests := []struct {
		fixture    string
		dst, src   hdr.MAC
		etherType  uint16
		payloadLen int
	}{
		{"arp", hdr.BroadcastMAC, clientMAC, hdr.EtherTypeARP, 46},
		{"tcpsyn", lbMAC, clientMAC, hdr.EtherTypeIPv4, 60},
		{"udpnocsum", lbMAC, clientMAC, hdr.EtherTypeIPv4, 46},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			eth := hdr.Ethernet(fixture(t, tt.fixture))
			if !eth.IsValid() {
				t.Fatal("IsValid = false")
			}
			if got := eth.Dst(); got != tt.dst {
				t.Errorf("Dst = %v, want %v", got, tt.dst)
			}
			if got := eth.Src(); got != tt.src {
				t.Errorf("Src = %v, want %v", got, tt.src)
			}
			if got := eth.EtherType(); got != tt.etherType {
				t.Errorf("EtherType = %#04x, want %#04x", got, tt.etherType)
			}
			if got := len(eth.Payload()); got != tt.payloadLen {
				t.Errorf("len(Payload) = %d, want %d", got, tt.payloadLen)
			}
		})
	}
}

func TestEthernetSetters(t *testing.T) {
	frame := fixture(t, "tcpsyn")
	eth := hdr.Ethernet(frame)
	// Swap the addresses as a reply would, then set a made-up EtherType.
	eth.SetDst(clientMAC)
	eth.SetSrc(lbMAC)
	eth.SetEtherType(0x88b5)
	want := "020000000001" + "020000000002" + "88b5"
	if got := hex.EncodeToString(frame[:hdr.EthernetLen]); got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	if !bytes.Equal(frame[hdr.EthernetLen:], fixture(t, "tcpsyn")[hdr.EthernetLen:]) {
		t.Error("setters touched the payload")
	}
	eth.SetDstPacked(0xffff_0a0b_0c0d_0e0f) // bits above 48 ignored
	if got := eth.Dst(); got != (hdr.MAC{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}) {
		t.Errorf("SetDstPacked wrote %s", got)
	}
	if got := eth.Src(); got != lbMAC {
		t.Errorf("SetDstPacked touched the source: %s", got)
	}
}

func TestMACString(t *testing.T) {
	tests := []struct {
		mac  hdr.MAC
		want string
	}{
		{hdr.MAC{}, "00:00:00:00:00:00"},
		{hdr.BroadcastMAC, "ff:ff:ff:ff:ff:ff"},
		{hdr.MAC{0x02, 0x1a, 0xb0, 0x0c, 0xde, 0x9f}, "02:1a:b0:0c:de:9f"},
	}
	for _, tt := range tests {
		if got := tt.mac.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in      string
		want    hdr.MAC
		wantErr bool
	}{
		{"02:1a:b0:0c:de:9f", hdr.MAC{0x02, 0x1a, 0xb0, 0x0c, 0xde, 0x9f}, false},
		{"02:1A:B0:0C:DE:9F", hdr.MAC{0x02, 0x1a, 0xb0, 0x0c, 0xde, 0x9f}, false},
		{"ff-ff-ff-ff-ff-ff", hdr.BroadcastMAC, false},
		{"00:00:00:00:00:00", hdr.MAC{}, false},
		{"", hdr.MAC{}, true},
		{"02:1a:b0:0c:de", hdr.MAC{}, true},
		{"02:1a:b0:0c:de:9f:00", hdr.MAC{}, true},
		{"02:1a-b0:0c:de:9f", hdr.MAC{}, true},
		{"02.1a.b0.0c.de.9f", hdr.MAC{}, true},
		{"02:1a:b0:0c:de:9g", hdr.MAC{}, true},
		{"2:1a:b0:0c:de:9f0", hdr.MAC{}, true},
		{" 02:1a:b0:0c:de:9f", hdr.MAC{}, true},
	}
	for _, tt := range tests {
		got, err := hdr.ParseMAC(tt.in)
		if tt.wantErr {
			if !errors.Is(err, hdr.ErrInvalidMAC) {
				t.Errorf("ParseMAC(%q) error = %v, want ErrInvalidMAC", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMAC(%q) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestMACIsZero(t *testing.T) {
	tests := []struct {
		mac  hdr.MAC
		want bool
	}{
		{hdr.MAC{}, true},
		{hdr.MAC{0, 0, 0, 0, 0, 1}, false},
		{hdr.BroadcastMAC, false},
	}
	for _, tt := range tests {
		if got := tt.mac.IsZero(); got != tt.want {
			t.Errorf("%v.IsZero() = %v, want %v", tt.mac, got, tt.want)
		}
	}
}

func TestARPGolden(t *testing.T) {
	a := hdr.ARP(hdr.Ethernet(fixture(t, "arp")).Payload())
	if !a.IsValid() {
		t.Fatal("IsValid = false")
	}
	if got := a.Op(); got != hdr.ARPRequest {
		t.Errorf("Op = %d, want %d", got, hdr.ARPRequest)
	}
	if got := a.SenderMAC(); got != clientMAC {
		t.Errorf("SenderMAC = %v", got)
	}
	if got := a.SenderIP(); got != clientIP {
		t.Errorf("SenderIP = %#08x", got)
	}
	if got := a.TargetMAC(); !got.IsZero() {
		t.Errorf("TargetMAC = %v, want zero", got)
	}
	if got := a.TargetIP(); got != vip {
		t.Errorf("TargetIP = %#08x", got)
	}
}

func TestARPSetRequestReply(t *testing.T) {
	// SetRequest on garbage must reproduce the captured request exactly.
	req := bytes.Repeat([]byte{0xee}, hdr.ARPLen)
	hdr.ARP(req).SetRequest(clientMAC, clientIP, vip)
	if want := fixture(t, "arp")[hdr.EthernetLen : hdr.EthernetLen+hdr.ARPLen]; !bytes.Equal(req, want) {
		t.Errorf("SetRequest = %x, want %x", req, want)
	}

	// Answer in place, as the dataplane does with the request mbuf.
	a := hdr.ARP(req)
	a.SetReply(lbMAC, a.TargetIP(), a.SenderMAC(), a.SenderIP())
	want := "0001080006040002" + "020000000002" + "c6336401" + "020000000001" + "c000020a"
	if got := hex.EncodeToString(req); got != want {
		t.Errorf("SetReply = %s, want %s", got, want)
	}
	if !a.IsValid() || a.Op() != hdr.ARPReply {
		t.Errorf("reply IsValid=%v Op=%d", a.IsValid(), a.Op())
	}
}

func TestARPIsValid(t *testing.T) {
	good := fixture(t, "arp")[hdr.EthernetLen:]
	mutate := func(i int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = v
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"padded", good, true},
		{"exact", good[:hdr.ARPLen], true},
		{"truncated", good[:hdr.ARPLen-1], false},
		{"empty", nil, false},
		{"htype 6", mutate(1, 6), false},
		{"ptype IPv6", mutate(2, 0x86), false},
		{"hlen 8", mutate(4, 8), false},
		{"plen 16", mutate(5, 16), false},
	}
	for _, tt := range tests {
		if got := hdr.ARP(tt.b).IsValid(); got != tt.want {
			t.Errorf("%s: IsValid = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestIPv4Golden(t *testing.T) {
	tests := []struct {
		fixture               string
		headerLen             int
		totalLen, id, fragOff uint16
		flags, ttl, proto     uint8
		df, isFragment        bool
		checksum              uint16
		src, dst              uint32
		payloadLen            int
	}{
		{"tcpsyn", 20, 60, 0x1c46, 0, hdr.IPv4FlagDontFragment, 64, hdr.ProtoTCP, true, false, 0x3237, clientIP, vip, 40},
		{"tcpdata", 20, 59, 0x1c47, 0, hdr.IPv4FlagDontFragment, 64, hdr.ProtoTCP, true, false, 0x3237, clientIP, vip, 39},
		{"udpdns", 20, 57, 0x0001, 0, 0, 64, hdr.ProtoUDP, false, false, 0x8e74, clientIP, vip, 37},
		{"icmpecho", 20, 51, 0x0002, 0, hdr.IPv4FlagDontFragment, 64, hdr.ProtoICMP, true, false, 0x4e89, clientIP, vip, 31},
		{"udpnocsum", 20, 30, 0x0003, 0, hdr.IPv4FlagDontFragment, 1, hdr.ProtoUDP, true, false, 0x8d8d, clientIP, vip, 10},
		{"ipopts", 24, 35, 0x0004, 0, 0, 64, hdr.ProtoUDP, false, false, 0xf982, clientIP, vip, 11},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			ip := ipv4Of(t, fixture(t, tt.fixture))
			type fields struct {
				HeaderLen                int
				TotalLength, ID, FragOff uint16
				Flags, TTL, Proto        uint8
				DF, IsFragment           bool
				Checksum                 uint16
				Src, Dst                 uint32
				PayloadLen               int
			}
			got := fields{ip.HeaderLen(), ip.TotalLength(), ip.ID(), ip.FragmentOffset(), ip.Flags(), ip.TTL(), ip.Protocol(),
				ip.DF(), ip.IsFragment(), ip.Checksum(), ip.Src(), ip.Dst(), len(ip.Payload())}
			want := fields{tt.headerLen, tt.totalLen, tt.id, tt.fragOff, tt.flags, tt.ttl, tt.proto,
				tt.df, tt.isFragment, tt.checksum, tt.src, tt.dst, tt.payloadLen}
			if got != want {
				t.Errorf("fields\n got %+v\nwant %+v", got, want)
			}
			if !ip.IsChecksumValid() {
				t.Error("IsChecksumValid = false")
			}
			if c := ip.CalculateChecksum(); c != tt.checksum {
				t.Errorf("CalculateChecksum = %#04x, want %#04x", c, tt.checksum)
			}
		})
	}
}

func TestIPv4ChecksumInvalid(t *testing.T) {
	ip := ipv4Of(t, fixture(t, "tcpsyn"))
	ip.SetChecksum(ip.Checksum() ^ 0x0100)
	if ip.IsChecksumValid() {
		t.Error("IsChecksumValid = true after corrupting the checksum")
	}
	if got := ip.CalculateChecksum(); got != 0x3237 {
		t.Errorf("CalculateChecksum = %#04x, want 0x3237 (field ignored)", got)
	}
}

func TestIPv4Setters(t *testing.T) {
	b := make([]byte, 24)
	ip := hdr.IPv4(b)
	ip.SetVersionIHL(24)
	ip.SetTOS(0xb8)
	ip.SetTotalLength(24)
	ip.SetID(0xbeef)
	ip.SetFlagsFragmentOffset(hdr.IPv4FlagMoreFragments, 1480)
	ip.SetTTL(9)
	ip.SetProtocol(hdr.ProtoUDP)
	ip.SetSrc(0x0a000001)
	ip.SetDst(0x0a000002)
	ip.SetChecksum(ip.CalculateChecksum())
	// 1480/8 = 185 = 0x0b9, MF = 0x2000.
	want := "46b80018beef20b90911" + hex.EncodeToString([]byte{byte(ip.Checksum() >> 8), byte(ip.Checksum())}) + "0a0000010a00000200000000"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	if !ip.IsValid(len(b)) || !ip.IsChecksumValid() {
		t.Errorf("built header: IsValid=%v IsChecksumValid=%v", ip.IsValid(len(b)), ip.IsChecksumValid())
	}
	if ip.TOS() != 0xb8 || ip.FragmentOffset() != 1480 || ip.Flags() != hdr.IPv4FlagMoreFragments {
		t.Errorf("TOS=%#x FragmentOffset=%d Flags=%d", ip.TOS(), ip.FragmentOffset(), ip.Flags())
	}
}

func TestIPv4Fragments(t *testing.T) {
	tests := []struct {
		name       string
		flags      uint8
		offset     uint16
		isFragment bool
		df         bool
	}{
		{"whole", 0, 0, false, false},
		{"whole DF", hdr.IPv4FlagDontFragment, 0, false, true},
		{"first", hdr.IPv4FlagMoreFragments, 0, true, false},
		{"middle", hdr.IPv4FlagMoreFragments, 1480, true, false},
		{"last", 0, 2960, true, false},
		{"max offset", 0, 0x1fff * 8, true, false},
		{"reserved bit only", 0x4, 0, false, false},
	}
	for _, tt := range tests {
		ip := ipv4Of(t, fixture(t, "udpdns"))
		ip.SetFlagsFragmentOffset(tt.flags, tt.offset)
		if ip.IsFragment() != tt.isFragment || ip.DF() != tt.df || ip.FragmentOffset() != tt.offset || ip.Flags() != tt.flags {
			t.Errorf("%s: IsFragment=%v DF=%v FragmentOffset=%d Flags=%d", tt.name, ip.IsFragment(), ip.DF(), ip.FragmentOffset(), ip.Flags())
		}
	}
}

func TestIPv4IsValid(t *testing.T) {
	good := fixture(t, "tcpsyn")[hdr.EthernetLen:] // 60 bytes, TotalLength 60
	with := func(i int, v byte) []byte {
		b := append([]byte(nil), good...)
		b[i] = v
		return b
	}
	padded := append(append([]byte(nil), good...), make([]byte, 6)...)
	tests := []struct {
		name   string
		b      []byte
		pktLen int
		want   bool
	}{
		{"exact", good, 60, true},
		{"padded", padded, len(padded), true},
		{"pktLen beyond view (multi-segment)", good, 9000, true},
		{"empty", nil, 0, false},
		{"19 bytes", good[:19], 19, false},
		{"truncated below TotalLength", good[:59], 59, false},
		{"TotalLength lies past pktLen", good, 59, false},
		{"negative pktLen", good, -1, false},
		{"version 6", with(0, 0x65), 60, false},
		{"version 0", with(0, 0x05), 60, false},
		{"IHL 4", with(0, 0x44), 60, false},
		{"IHL 0", with(0, 0x40), 60, false},
		{"IHL 15 = TotalLength (options only)", with(0, 0x4f), 60, true},
		{"IHL 15 beyond TotalLength", func() []byte { b := with(0, 0x4f); b[3] = 40; return b }(), 60, false},
		{"IHL 15 beyond view", with(0, 0x4f)[:40:40], 40, false},
		{"TotalLength 19", with(3, 19), 60, false},
		{"TotalLength 0", with(3, 0), 60, false},
		{"TotalLength = IHL*4", with(3, 20), 60, true},
		{"TotalLength 0xff3c", with(2, 0xff), 60, false},
	}
	for _, tt := range tests {
		if got := hdr.IPv4(tt.b).IsValid(tt.pktLen); got != tt.want {
			t.Errorf("%s: IsValid = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestIPv4TTL(t *testing.T) {
	tests := []struct {
		ttl     uint8
		ok      bool
		wantTTL uint8
	}{
		{64, true, 63},
		{255, true, 254},
		{2, true, 1},
		{1, false, 1},
		{0, false, 0},
	}
	for _, tt := range tests {
		ip := ipv4Of(t, fixture(t, "tcpsyn"))
		ip.SetTTL(tt.ttl)
		ip.SetChecksum(ip.CalculateChecksum())
		before := append([]byte(nil), ip...)
		ok := ip.DecTTLWithChecksumUpdate()
		if ok != tt.ok || ip.TTL() != tt.wantTTL {
			t.Errorf("TTL %d: ok=%v TTL=%d, want ok=%v TTL=%d", tt.ttl, ok, ip.TTL(), tt.ok, tt.wantTTL)
		}
		if !ok && !bytes.Equal(before, ip) {
			t.Errorf("TTL %d: refused decrement changed the packet", tt.ttl)
		}
		if ip.Protocol() != hdr.IPv4(before).Protocol() { // it shares the TTL's word
			t.Errorf("TTL %d: protocol %d, was %d", tt.ttl, ip.Protocol(), hdr.IPv4(before).Protocol())
		}
		if ip.Checksum() != ip.CalculateChecksum() {
			t.Errorf("TTL %d: checksum %#04x, full %#04x", tt.ttl, ip.Checksum(), ip.CalculateChecksum())
		}
	}
}

// TestDecTTLEveryChecksum: the decrement's checksum is the full
// recomputation's for every checksum value a header can have before it
// (the ID field swept through all 65536 values moves the checksum through
// all of them), the end-around carry and 0xFFFF included.
func TestDecTTLEveryChecksum(t *testing.T) {
	ip := ipv4Of(t, fixture(t, "tcpsyn"))
	for _, ttl := range []uint8{2, 64, 255} {
		for id := range 1 << 16 {
			ip.SetTTL(ttl)
			ip.SetID(uint16(id))
			ip.SetChecksum(ip.CalculateChecksum())
			if !ip.DecTTLWithChecksumUpdate() || ip.TTL() != ttl-1 {
				t.Fatalf("TTL %d ID %#04x: not decremented (TTL %d)", ttl, id, ip.TTL())
			}
			if got, want := ip.Checksum(), ip.CalculateChecksum(); got != want {
				t.Fatalf("TTL %d ID %#04x: checksum %#04x, full recomputation %#04x", ttl, id, got, want)
			}
		}
	}
}

func TestTCPGolden(t *testing.T) {
	tests := []struct {
		fixture          string
		srcPort, dstPort uint16
		seq, ack         uint32
		dataOffset       int
		flags            uint8
		window, checksum uint16
		payload          string
	}{
		{"tcpsyn", 40000, 80, 0x12345678, 0, 40, hdr.TCPFlagSYN, 64240, 0x7951, ""},
		{"tcpdata", 40000, 80, 0x12345679, 0xabcdef01, 20, hdr.TCPFlagPSH | hdr.TCPFlagACK, 502, 0x21d7, "GET / HTTP/1.0\r\n\r\n!"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			ip := ipv4Of(t, fixture(t, tt.fixture))
			tcp := hdr.TCP(ip.Payload())
			if !tcp.IsValid() {
				t.Fatal("IsValid = false")
			}
			if tcp.SrcPort() != tt.srcPort || tcp.DstPort() != tt.dstPort || tcp.Seq() != tt.seq || tcp.Ack() != tt.ack ||
				tcp.DataOffset() != tt.dataOffset || tcp.Flags() != tt.flags || tcp.Window() != tt.window ||
				tcp.Checksum() != tt.checksum || tcp.UrgentPointer() != 0 || string(tcp.Payload()) != tt.payload {
				t.Errorf("got ports %d>%d seq %#x ack %#x off %d flags %#x win %d csum %#04x payload %q",
					tcp.SrcPort(), tcp.DstPort(), tcp.Seq(), tcp.Ack(), tcp.DataOffset(), tcp.Flags(), tcp.Window(), tcp.Checksum(), tcp.Payload())
			}
			if c := hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp); c != tt.checksum {
				t.Errorf("TransportChecksum = %#04x, want %#04x", c, tt.checksum)
			}
		})
	}
}

func TestTCPSetters(t *testing.T) {
	b := make([]byte, 24)
	tcp := hdr.TCP(b)
	tcp.SetSrcPort(0x0102)
	tcp.SetDstPort(0x0304)
	tcp.SetSeq(0x05060708)
	tcp.SetAck(0x090a0b0c)
	tcp.SetDataOffset(24)
	tcp.SetFlags(hdr.TCPFlagRST | hdr.TCPFlagACK | hdr.TCPFlagCWR)
	tcp.SetWindow(0x0d0e)
	tcp.SetChecksum(0x0f10)
	tcp.SetUrgentPointer(0x1112)
	want := "0102" + "0304" + "05060708" + "090a0b0c" + "60" + "94" + "0d0e" + "0f10" + "1112" + "00000000"
	if got := hex.EncodeToString(b); got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	if !tcp.IsValid() || tcp.DataOffset() != 24 || len(tcp.Payload()) != 0 {
		t.Errorf("IsValid=%v DataOffset=%d", tcp.IsValid(), tcp.DataOffset())
	}
}

func TestTCPIsValid(t *testing.T) {
	syn := fixture(t, "tcpsyn")[hdr.EthernetLen+hdr.IPv4MinLen:] // 40-byte header
	withOff := func(b []byte, dataOffsetWords byte) []byte {
		c := append([]byte(nil), b...)
		c[12] = dataOffsetWords << 4
		return c
	}
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"syn with options", syn, true},
		{"empty", nil, false},
		{"19 bytes", syn[:19], false},
		{"options truncated", syn[:39], false},
		{"offset 5 in 20 bytes", withOff(syn[:20], 5), true},
		{"offset 4", withOff(syn, 4), false},
		{"offset 0", withOff(syn, 0), false},
		{"offset 15 past end", withOff(syn, 15), false},
	}
	for _, tt := range tests {
		if got := hdr.TCP(tt.b).IsValid(); got != tt.want {
			t.Errorf("%s: IsValid = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestUDPGolden(t *testing.T) {
	tests := []struct {
		fixture          string
		srcPort, dstPort uint16
		length, checksum uint16
		payload          string
	}{
		{"udpdns", 53000, 53, 37, 0xc8eb, "\xab\xcd\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"},
		{"udpnocsum", 5000, 5001, 10, 0, "hi"},
		{"ipopts", 1234, 4321, 11, 0x3983, "abc"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			ip := ipv4Of(t, fixture(t, tt.fixture))
			udp := hdr.UDP(ip.Payload())
			if !udp.IsValid() {
				t.Fatal("IsValid = false")
			}
			if udp.SrcPort() != tt.srcPort || udp.DstPort() != tt.dstPort || udp.Length() != tt.length ||
				udp.Checksum() != tt.checksum || string(udp.Payload()) != tt.payload {
				t.Errorf("got %d>%d len %d csum %#04x payload %q", udp.SrcPort(), udp.DstPort(), udp.Length(), udp.Checksum(), udp.Payload())
			}
			if tt.checksum != 0 {
				if c := hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoUDP, udp); c != tt.checksum {
					t.Errorf("TransportChecksum = %#04x, want %#04x", c, tt.checksum)
				}
			}
		})
	}
}

func TestUDPSetters(t *testing.T) {
	b := make([]byte, 10)
	udp := hdr.UDP(b)
	udp.SetSrcPort(0x0102)
	udp.SetDstPort(0x0304)
	udp.SetLength(9)
	udp.SetChecksum(0x0506)
	if got, want := hex.EncodeToString(b), "01020304000905060000"; got != want {
		t.Errorf("header = %s, want %s", got, want)
	}
	if !udp.IsValid() || len(udp.Payload()) != 1 {
		t.Errorf("IsValid=%v len(Payload)=%d", udp.IsValid(), len(udp.Payload()))
	}
}

func TestUDPIsValid(t *testing.T) {
	dns := fixture(t, "udpdns")[hdr.EthernetLen+hdr.IPv4MinLen:] // 37 bytes, Length 37
	withLen := func(n uint16) []byte {
		c := append([]byte(nil), dns...)
		c[4], c[5] = byte(n>>8), byte(n)
		return c
	}
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"dns", dns, true},
		{"empty", nil, false},
		{"7 bytes", dns[:7], false},
		{"Length past view", dns[:36], false},
		{"Length 7", withLen(7), false},
		{"Length 0", withLen(0), false},
		{"Length 8 (empty datagram)", withLen(8), true},
		{"Length 0xffff", withLen(0xffff), false},
	}
	for _, tt := range tests {
		if got := hdr.UDP(tt.b).IsValid(); got != tt.want {
			t.Errorf("%s: IsValid = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestICMPGolden(t *testing.T) {
	ip := ipv4Of(t, fixture(t, "icmpecho"))
	icmp := hdr.ICMP(ip.Payload())
	if !icmp.IsValid() {
		t.Fatal("IsValid = false")
	}
	if icmp.Type() != hdr.ICMPEchoRequest || icmp.Code() != 0 || icmp.Checksum() != 0xd121 ||
		icmp.ID() != 0x1234 || icmp.Seq() != 1 || string(icmp.Payload()) != "abcdefghijklmnopqrstuvw" {
		t.Errorf("got type %d code %d csum %#04x id %#x seq %d payload %q",
			icmp.Type(), icmp.Code(), icmp.Checksum(), icmp.ID(), icmp.Seq(), icmp.Payload())
	}
	if c := hdr.ICMPChecksum(icmp); c != 0xd121 {
		t.Errorf("ICMPChecksum = %#04x, want 0xd121", c)
	}
}

func TestICMPEchoReplyInPlace(t *testing.T) {
	icmp := hdr.ICMP(ipv4Of(t, fixture(t, "icmpecho")).Payload())
	icmp.SetTypeCodeWithChecksumUpdate(hdr.ICMPEchoReply, 0)
	// Type 8 -> 0 lowers the sum by 0x0800, so the checksum rises by 0x0800.
	if icmp.Type() != hdr.ICMPEchoReply || icmp.Checksum() != 0xd921 || hdr.ICMPChecksum(icmp) != 0xd921 {
		t.Errorf("type %d checksum %#04x full %#04x, want 0 0xd921", icmp.Type(), icmp.Checksum(), hdr.ICMPChecksum(icmp))
	}
}

// TestICMPIDInPlace: a new echo identifier (a SNAT'd ping's) keeps the
// checksum right, as a full computation finds it.
func TestICMPIDInPlace(t *testing.T) {
	icmp := hdr.ICMP(ipv4Of(t, fixture(t, "icmpecho")).Payload())
	for _, id := range []uint16{0xfedc, 0, 0xffff, 0x1234} {
		icmp.SetIDWithChecksumUpdate(id)
		if icmp.ID() != id || hdr.Fold(hdr.Checksum(icmp, 0)) != 0xffff {
			t.Fatalf("id %#x: got id %#x, checksum %#04x does not verify (full %#04x)", id, icmp.ID(), icmp.Checksum(), hdr.ICMPChecksum(icmp))
		}
	}
	if icmp.Checksum() != 0xd121 {
		t.Errorf("back to id 0x1234: checksum %#04x, want the original 0xd121", icmp.Checksum())
	}
}

func TestICMPFragNeeded(t *testing.T) {
	b := make([]byte, hdr.ICMPLen+28)
	for i := range b {
		b[i] = 0xaa
	}
	icmp := hdr.ICMP(b)
	icmp.SetType(hdr.ICMPDestUnreachable)
	icmp.SetCode(hdr.ICMPCodeFragNeeded)
	icmp.SetMTU(1400)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	if got, want := hex.EncodeToString(b[:2]), "0304"; got != want {
		t.Errorf("type/code = %s, want %s", got, want)
	}
	if icmp.MTU() != 1400 || icmp.ID() != 0 || len(icmp.Payload()) != 28 {
		t.Errorf("MTU=%d unused=%#x len(Payload)=%d", icmp.MTU(), icmp.ID(), len(icmp.Payload()))
	}
	if hdr.Fold(hdr.Checksum(b, 0)) != 0xffff {
		t.Error("message does not verify")
	}
	icmp.SetID(7)
	icmp.SetSeq(9)
	if icmp.ID() != 7 || icmp.Seq() != 9 {
		t.Errorf("ID=%d Seq=%d", icmp.ID(), icmp.Seq())
	}
}

func TestICMPIsValid(t *testing.T) {
	tests := []struct {
		n    int
		want bool
	}{{0, false}, {7, false}, {8, true}, {64, true}}
	for _, tt := range tests {
		if got := hdr.ICMP(make([]byte, tt.n)).IsValid(); got != tt.want {
			t.Errorf("len %d: IsValid = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestEthernetIsValid(t *testing.T) {
	tests := []struct {
		n    int
		want bool
	}{{0, false}, {13, false}, {14, true}, {60, true}}
	for _, tt := range tests {
		if got := hdr.Ethernet(make([]byte, tt.n)).IsValid(); got != tt.want {
			t.Errorf("len %d: IsValid = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// dnat rewrites the destination to a real server as VS/NAT does on the way
// in: address and port with incremental checksum updates, and a TTL hop.
func dnat(ip hdr.IPv4, rip uint32, rport uint16) bool {
	if !ip.DecTTLWithChecksumUpdate() {
		return false
	}
	old := ip.Dst()
	ip.SetDstWithChecksumUpdate(rip)
	switch ip.Protocol() {
	case hdr.ProtoTCP:
		tcp := hdr.TCP(ip.Payload())
		if !tcp.IsValid() {
			return false
		}
		tcp.UpdateChecksumForAddr(old, rip)
		tcp.SetDstPortWithChecksumUpdate(rport)
	case hdr.ProtoUDP:
		udp := hdr.UDP(ip.Payload())
		if !udp.IsValid() {
			return false
		}
		udp.UpdateChecksumForAddr(old, rip)
		udp.SetDstPortWithChecksumUpdate(rport)
	default:
		return false
	}
	return true
}

// TestNATGolden: input frame, verdict, exact output frame. Expected outputs
// were produced by the Python script with full recomputation.
func TestNATGolden(t *testing.T) {
	tests := []struct {
		fixture string
		rip     uint32
		rport   uint16
		ok      bool
		want    string
	}{
		{"tcpsyn", 0x0a000005, 8080, true, "02000000000202000000000108004500003c1c4640003f065367c000020a0a0000059c401f901234567800000000a002faf07a410000020405b40402080a0001e2400000000001030307"},
		{"tcpdata", 0x0a000005, 8080, true, "02000000000202000000000108004500003b1c4740003f065367c000020a0a0000059c401f9012345679abcdef01501801f622c70000474554202f20485454502f312e300d0a0d0a21"},
		{"udpdns", 0x0a000035, 5353, true, "020000000002020000000001080045000039000100003f11af74c000020a0a000035cf0814e90025d437abcd01000001000000000000076578616d706c6503636f6d0000010001"},
		// TTL 1: refused, frame untouched.
		{"udpnocsum", 0x0a000005, 9999, false, fixtures["udpnocsum"]},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			frame := fixture(t, tt.fixture)
			ok := dnat(ipv4Of(t, frame), tt.rip, tt.rport)
			if ok != tt.ok {
				t.Errorf("verdict = %v, want %v", ok, tt.ok)
			}
			if got := hex.EncodeToString(frame); got != tt.want {
				t.Errorf("output\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestUDPNoChecksumStaysZero(t *testing.T) {
	frame := fixture(t, "udpnocsum")
	ip := ipv4Of(t, frame)
	ip.SetTTL(64)
	ip.SetChecksum(ip.CalculateChecksum())
	if !dnat(ip, 0x0a000005, 9999) {
		t.Fatal("dnat refused")
	}
	udp := hdr.UDP(ip.Payload())
	if udp.Checksum() != 0 || udp.DstPort() != 9999 || ip.Dst() != 0x0a000005 || !ip.IsChecksumValid() {
		t.Errorf("checksum %#04x port %d dst %#08x ipOK %v", udp.Checksum(), udp.DstPort(), ip.Dst(), ip.IsChecksumValid())
	}
	udp.SetSrcPortWithChecksumUpdate(1)
	if udp.Checksum() != 0 {
		t.Errorf("source port rewrite set checksum %#04x", udp.Checksum())
	}
}

// TestPerPacketPathDoesNotAllocate guards the rule that the packet path
// never allocates: gates, accessors and a full VS/NAT rewrite of a TCP packet.
func TestPerPacketPathDoesNotAllocate(t *testing.T) {
	frame := fixture(t, "tcpdata")
	var sink uint32
	allocs := testing.AllocsPerRun(1000, func() {
		eth := hdr.Ethernet(frame)
		if !eth.IsValid() || eth.EtherType() != hdr.EtherTypeIPv4 {
			t.Fatal("gate")
		}
		ip := hdr.IPv4(eth.Payload())
		if !ip.IsValid(len(eth.Payload())) || ip.IsFragment() {
			t.Fatal("gate")
		}
		tcp := hdr.TCP(ip.Payload())
		if !tcp.IsValid() {
			t.Fatal("gate")
		}
		sink += uint32(tcp.SrcPort()) + uint32(tcp.DstPort()) + ip.Src() + ip.Dst() + uint32(tcp.Flags())
		src, dst := eth.Src(), eth.Dst()
		eth.SetSrc(dst)
		eth.SetDst(src)
		ip.SetTTLWithChecksumUpdate(64)
		old := ip.Dst()
		ip.SetDstWithChecksumUpdate(old ^ 1)
		tcp.UpdateChecksumForAddr(old, old^1)
		tcp.SetDstPortWithChecksumUpdate(tcp.DstPort() ^ 1)
		tcp.SetSrcPortWithChecksumUpdate(tcp.SrcPort() ^ 1)
	})
	if allocs != 0 {
		t.Errorf("per-packet path allocates %v times per packet", allocs)
	}
	_ = sink
}
