package gen

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

type flow struct {
	src   uint32
	sport uint16
}

// readPcap parses a classic little-endian pcap file into its frames.
func readPcap(t *testing.T, b []byte) [][]byte {
	t.Helper()
	if len(b) < 24 || binary.LittleEndian.Uint32(b) != pcapMagic || binary.LittleEndian.Uint32(b[20:]) != pcapEthernet {
		t.Fatalf("not an Ethernet pcap file: % x", b[:min(len(b), 24)])
	}
	var out [][]byte
	for b = b[24:]; len(b) > 0; {
		if len(b) < 16 {
			t.Fatalf("truncated record header")
		}
		incl, orig := binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
		if incl != orig || int(incl) > len(b)-16 {
			t.Fatalf("record lengths %d/%d with %d bytes left", incl, orig, len(b)-16)
		}
		out = append(out, b[16:16+incl])
		b = b[16+incl:]
	}
	return out
}

func TestWriteSYNPcap(t *testing.T) {
	src, dst := hdr.MAC{2, 0, 0, 0, 0, 9}, hdr.MAC{2, 0, 0, 0, 0, 1}
	vip := uint32(203<<24 | 113<<8 | 10)
	b, err := NewBuilder(hdr.ProtoTCP, 60, src, dst, vip, 80)
	if err != nil {
		t.Fatal(err)
	}
	clients := Range{First: vip + 90, Last: vip + 93} // 4 addresses
	ports := [2]uint16{65530, 65535}                  // 6 ports, up to the top
	var buf bytes.Buffer
	n, err := WriteSYNPcap(&buf, b, clients, ports)
	if err != nil {
		t.Fatal(err)
	}
	if n != 24 || RangeFlows(clients, ports) != 24 {
		t.Fatalf("%d SYNs, want 4 x 6 = 24", n)
	}
	frames := readPcap(t, buf.Bytes())
	if len(frames) != n {
		t.Fatalf("%d frames, %d reported", len(frames), n)
	}
	have := map[flow]bool{}
	for i, f := range frames {
		if len(f) != 60 || hdr.Ethernet(f).Dst() != dst || hdr.Ethernet(f).Src() != src {
			t.Fatalf("frame %d: length %d or MACs wrong", i, len(f))
		}
		ip := hdr.IPv4(f[ipOff:])
		if ip.Dst() != vip || ip.Protocol() != hdr.ProtoTCP || hdr.Fold(hdr.Checksum(f[ipOff:l4Off], 0)) != 0xffff {
			t.Fatalf("frame %d: bad IPv4 header", i)
		}
		tcp := hdr.TCP(f[l4Off:])
		if tcp.Flags() != hdr.TCPFlagSYN || tcp.DstPort() != 80 {
			t.Fatalf("frame %d: flags %#x port %d, want a SYN to 80", i, tcp.Flags(), tcp.DstPort())
		}
		l4len := uint16(len(f) - l4Off)
		if hdr.Fold(hdr.Checksum(f[l4Off:], hdr.PseudoHeaderSum(ip.Src(), vip, hdr.ProtoTCP, l4len))) != 0xffff {
			t.Fatalf("frame %d: bad TCP checksum", i)
		}
		fl := flow{ip.Src(), tcp.SrcPort()}
		if have[fl] {
			t.Fatalf("frame %d: flow %v twice", i, fl)
		}
		have[fl] = true
	}
	// Pktgen's range mode steps each field on its own, wrapping from max
	// to min; wherever each counter starts (gcd(4, 6) = 2: the start
	// decides which half of the pairs it sends), every flow it sends must
	// have had its SYN.
	for start := 0; start < 24; start++ {
		a, p := clients.First+uint32(start/6), uint32(ports[0])+uint32(start%6)
		for k := 0; k < 2*n; k++ {
			if !have[flow{a, uint16(p)}] {
				t.Fatalf("range packet %d from start %d: %d:%d has no SYN", k, start, a, p)
			}
			if a++; a > clients.Last {
				a = clients.First
			}
			if p++; p > uint32(ports[1]) {
				p = uint32(ports[0])
			}
		}
	}
}

func TestWriteSYNPcapRefuses(t *testing.T) {
	tcp, _ := NewBuilder(hdr.ProtoTCP, 60, hdr.MAC{}, hdr.MAC{}, 1, 80)
	udp, _ := NewBuilder(hdr.ProtoUDP, 60, hdr.MAC{}, hdr.MAC{}, 1, 80)
	for _, c := range []struct {
		b       *Builder
		clients Range
		ports   [2]uint16
		want    string
	}{
		{udp, Range{1, 1}, [2]uint16{1, 1}, "not TCP"},
		{tcp, Range{1, 1}, [2]uint16{9, 8}, "port range"},
		{tcp, Range{1, 17}, [2]uint16{1, 65535}, "narrow"}, // 17 x 65535 > 1M
	} {
		var buf bytes.Buffer
		if _, err := WriteSYNPcap(&buf, c.b, c.clients, c.ports); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.clients, c.ports, err, c.want)
		} else if buf.Len() != 0 {
			t.Errorf("%v %v: wrote %d bytes on error", c.clients, c.ports, buf.Len())
		}
	}
}
