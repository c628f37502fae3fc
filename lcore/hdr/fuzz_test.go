package hdr_test

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// inspect walks a frame through every gate and reads every field the way the
// dataplane would. It must never panic, whatever the bytes.
func inspect(frame []byte) (sum uint64) {
	eth := hdr.Ethernet(frame)
	if !eth.IsValid() {
		return 0
	}
	dst, src := eth.Dst(), eth.Src()
	sum += uint64(dst[0]) + uint64(src[5]) + uint64(eth.EtherType())
	switch eth.EtherType() {
	case hdr.EtherTypeARP:
		a := hdr.ARP(eth.Payload())
		if a.IsValid() {
			sm, tm := a.SenderMAC(), a.TargetMAC()
			sum += uint64(a.Op()) + uint64(a.SenderIP()) + uint64(a.TargetIP()) + uint64(sm[0]) + uint64(tm[5])
		}
		return sum
	case hdr.EtherTypeIPv4:
	default:
		return sum
	}
	ip := hdr.IPv4(eth.Payload())
	if !ip.IsValid(len(eth.Payload())) {
		return sum
	}
	sum += uint64(ip.HeaderLen()) + uint64(ip.TotalLength()) + uint64(ip.ID()) + uint64(ip.Flags()) +
		uint64(ip.FragmentOffset()) + uint64(ip.TTL()) + uint64(ip.TOS()) + uint64(ip.Checksum()) +
		uint64(ip.Src()) + uint64(ip.Dst()) + uint64(ip.CalculateChecksum()) + uint64(len(ip.Payload()))
	if ip.IsChecksumValid() || ip.DF() {
		sum++
	}
	if ip.IsFragment() {
		return sum
	}
	seg := ip.Payload()
	switch ip.Protocol() {
	case hdr.ProtoTCP:
		tcp := hdr.TCP(seg)
		if tcp.IsValid() {
			sum += uint64(tcp.SrcPort()) + uint64(tcp.DstPort()) + uint64(tcp.Seq()) + uint64(tcp.Ack()) +
				uint64(tcp.DataOffset()) + uint64(tcp.Flags()) + uint64(tcp.Window()) + uint64(tcp.Checksum()) +
				uint64(tcp.UrgentPointer()) + uint64(len(tcp.Payload()))
		}
	case hdr.ProtoUDP:
		udp := hdr.UDP(seg)
		if udp.IsValid() {
			sum += uint64(udp.SrcPort()) + uint64(udp.DstPort()) + uint64(udp.Length()) + uint64(udp.Checksum()) +
				uint64(len(udp.Payload()))
		}
	case hdr.ProtoICMP:
		icmp := hdr.ICMP(seg)
		if icmp.IsValid() {
			sum += uint64(icmp.Type()) + uint64(icmp.Code()) + uint64(icmp.Checksum()) + uint64(icmp.ID()) +
				uint64(icmp.Seq()) + uint64(icmp.MTU()) + uint64(len(icmp.Payload())) + uint64(hdr.ICMPChecksum(icmp))
		}
	}
	return sum
}

func addFixtureSeeds(f *testing.F) {
	for name := range fixtures {
		b := fixture(f, name)
		f.Add(b)
		f.Add(b[:len(b)/2]) // truncated mid-header
	}
	f.Add([]byte{})
}

// FuzzParse: any bytes through the gates and accessors, no panic.
func FuzzParse(f *testing.F) {
	addFixtureSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		inspect(frame)
	})
}

// FuzzNATRewrite: a packet that passed the gates and carried a correct
// checksum still carries a correct one after an incremental NAT rewrite, and
// an absent UDP checksum stays absent.
func FuzzNATRewrite(f *testing.F) {
	for name := range fixtures {
		f.Add(fixture(f, name), uint32(0x0a000005), uint16(8080))
	}
	f.Fuzz(func(t *testing.T, frame []byte, rip uint32, rport uint16) {
		eth := hdr.Ethernet(frame)
		if !eth.IsValid() || eth.EtherType() != hdr.EtherTypeIPv4 {
			return
		}
		ip := hdr.IPv4(eth.Payload())
		if !ip.IsValid(len(eth.Payload())) || ip.IsFragment() || !ip.IsChecksumValid() {
			return
		}
		seg := ip.Payload()
		proto := ip.Protocol()
		var field func() uint16
		switch proto {
		case hdr.ProtoTCP:
			if !hdr.TCP(seg).IsValid() {
				return
			}
			field = hdr.TCP(seg).Checksum
		case hdr.ProtoUDP:
			if !hdr.UDP(seg).IsValid() || int(hdr.UDP(seg).Length()) != len(seg) {
				return
			}
			field = hdr.UDP(seg).Checksum
		default:
			return
		}
		absent := proto == hdr.ProtoUDP && field() == 0
		if !absent && field() != hdr.TransportChecksum(ip.Src(), ip.Dst(), proto, seg) {
			return // arrived with a wrong (or non-canonical) checksum
		}
		if !dnat(ip, rip, rport) {
			return
		}
		if !ip.IsChecksumValid() || ip.Checksum() != ip.CalculateChecksum() {
			t.Fatalf("IPv4 checksum %#04x, full %#04x", ip.Checksum(), ip.CalculateChecksum())
		}
		want := hdr.TransportChecksum(ip.Src(), ip.Dst(), proto, seg)
		if absent {
			want = 0
		}
		if got := field(); got != want {
			t.Fatalf("transport checksum %#04x, full %#04x (absent=%v)", got, want, absent)
		}
	})
}

// FuzzChecksum: the word-at-a-time sum equals the textbook loop.
func FuzzChecksum(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}, uint32(0))
	f.Add([]byte{0xff}, uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, b []byte, initial uint32) {
		if got, want := hdr.Checksum(b, initial), refSum(b, initial); got != want {
			t.Fatalf("Checksum = %#x, reference %#x", got, want)
		}
	})
}

// FuzzParseMAC: no panic, and anything accepted prints back canonically.
func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"02:1a:b0:0c:de:9f", "FF-FF-FF-FF-FF-FF", "", "zz:zz:zz:zz:zz:zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := hdr.ParseMAC(s)
		if err != nil {
			return
		}
		back, err := hdr.ParseMAC(m.String())
		if err != nil || back != m {
			t.Fatalf("ParseMAC(%q) = %v, reparse = %v, %v", s, m, back, err)
		}
	})
}
