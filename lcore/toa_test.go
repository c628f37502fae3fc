package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// toaOption returns the TCP option address of a segment, or nil.
func toaOption(tcp hdr.TCP) []byte {
	opts := tcp.Options()
	for i := 0; i < len(opts); {
		switch opts[i] {
		case hdr.TCPOptEnd:
			return nil
		case hdr.TCPOptNOP:
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return nil
		}
		if opts[i] == toaKind {
			return opts[i : i+int(opts[i+1])]
		}
		i += int(opts[i+1])
	}
	return nil
}

// TestFullNATTOA: with toa, the client segments that acknowledge the
// server's SYN-ACK (the handshake's ACK, a retransmission, data before
// the server's first byte) reach the server with DPVS's option 254 after
// their own options: the client's port and address, the data offset two
// words longer, the payload intact, both checksums right. Later segments
// go unchanged, and so does one whose TCP header is full (toa_no_room).
func TestFullNATTOA(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNATService(t, r, func(s *Service) { s.TOA = true })
	w := r.w
	const isn, srvISN = 5000, 90000
	lport := openFullNAT(t, r, 40000, isn, srvISN)
	want := make([]byte, 8)
	want[0], want[1] = toaKind, toaLen
	binary.BigEndian.PutUint16(want[2:], 40000)
	binary.BigEndian.PutUint32(want[4:], clientIP)
	ts := []byte{hdr.TCPOptNOP, hdr.TCPOptNOP, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2} // timestamps

	for _, tc := range []struct {
		name    string
		opts    []byte
		payload string
		ack     uint32
		toa     bool
	}{
		{"the handshake's ACK", ts, "", srvISN + 1, true},
		{"its retransmission, no options", nil, "", srvISN + 1, true},
		{"data before the server's first byte", ts, "GET / HTTP/1.0\r\n\r\n", srvISN + 1, true},
		{"data after it", ts, "more", srvISN + 100, false},
		{"a full TCP header", bytes.Repeat([]byte{hdr.TCPOptNOP}, 40), "", srvISN + 1, false},
	} {
		r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, isn+1, tc.ack, tc.opts, tc.payload))
		w.poll()
		_, ip, tcp := checkTCP(t, one(t, r, 1)) // checksums summed in full
		if ip.Src() != lip1 || tcp.SrcPort() != lport || ip.Dst() != rs1 || tcp.DstPort() != 8081 || tcp.Ack() != tc.ack || tcp.Seq() != isn+1 {
			t.Fatalf("%s: left as %x:%d -> %x:%d seq %d ack %d", tc.name, ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort(), tcp.Seq(), tcp.Ack())
		}
		if string(tcp.Payload()) != tc.payload {
			t.Fatalf("%s: payload %q, want %q", tc.name, tcp.Payload(), tc.payload)
		}
		got := toaOption(tcp)
		wantOff := 20 + len(tc.opts)
		if tc.toa {
			wantOff += toaLen
			if !bytes.Equal(got, want) || !bytes.Equal(tcp.Options()[:len(tc.opts)], tc.opts) {
				t.Fatalf("%s: options % x, want % x then the option % x", tc.name, tcp.Options(), tc.opts, want)
			}
		} else if got != nil {
			t.Fatalf("%s: an option address % x where none belongs", tc.name, got)
		}
		if tcp.DataOffset() != wantOff || int(ip.TotalLength()) != 20+wantOff+len(tc.payload) {
			t.Fatalf("%s: data offset %d, IP length %d; want %d, %d", tc.name, tcp.DataOffset(), ip.TotalLength(), wantOff, 20+wantOff+len(tc.payload))
		}
	}
	if w.cnt.own[TOAOptions] != 3 || w.cnt.own[TOANoRoom] != 1 {
		t.Fatalf("toa_options %d, toa_no_room %d; want 3, 1", w.cnt.own[TOAOptions], w.cnt.own[TOANoRoom])
	}

	// The server's reply goes back unchanged but for the addresses.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagACK, srvISN+1, isn+1, nil, "HTTP/1.0 200 OK\r\n"))
	w.poll()
	if _, ip, tcp := checkTCP(t, one(t, r, 0)); ip.Dst() != clientIP || tcp.DstPort() != 40000 || toaOption(tcp) != nil {
		t.Fatalf("reply left as -> %x:%d", ip.Dst(), tcp.DstPort())
	}
}

// TestFullNATWithoutTOA: a FullNAT service without toa adds no option.
func TestFullNATWithoutTOA(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	openFullNAT(t, r, 40000, 5000, 90000)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, 5001, 90001, nil, ""))
	r.w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); toaOption(tcp) != nil || tcp.DataOffset() != 20 || r.w.cnt.own[TOAOptions] != 0 {
		t.Fatalf("an option address without toa: % x", tcp.Options())
	}
}

// TestFullNATTOANoAllocs guards the option's insertion against heap
// allocations.
func TestFullNATTOANoAllocs(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNATService(t, r, func(s *Service) { s.TOA = true })
	openFullNAT(t, r, 40000, 5000, 90000)
	if a := r.allocsPerBurst(0, 1, func(int) []byte {
		return tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, 5001, 90001, nil, "")
	}); a != 0 {
		t.Fatalf("the handshake's ACK with the option: %v allocations per burst", a)
	}
	if r.w.cnt.own[TOAOptions] == 0 {
		t.Fatal("no option put in: the path measured is not the option's")
	}
}

// TestSynProxyFullNATTOA: behind the SYN proxy the ACK lbd sends to
// complete the server's handshake carries the option (checksums right);
// the client's first data,
// which acknowledges the cookie, carries it too, in the server's
// numbering; the server's SYN-ACK retransmitted does not move the ISN the
// proxy keeps.
func TestSynProxyFullNATTOA(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.FullNAT)
	svcs := append([]Service(nil), r.w.snap.Services...)
	svcs[len(svcs)-1].TOA = true
	old := r.w.snap
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)})
	r.w.runCommands(0)
	const isn, rsISN = 70, 5000
	cookie, syn, _ := handshake(t, r, 40040, isn)
	lport := syn.SrcPort()
	want := make([]byte, 8)
	want[0], want[1] = toaKind, toaLen
	binary.BigEndian.PutUint16(want[2:], 40040)
	binary.BigEndian.PutUint32(want[4:], clientIP)

	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
	r.w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	if tcp.Flags() != hdr.TCPFlagACK || tcp.Ack() != rsISN+1 || !bytes.Equal(toaOption(tcp), want) {
		t.Fatalf("the proxy's ACK to the server: flags %#x ack %d options % x", tcp.Flags(), tcp.Ack(), tcp.Options())
	}
	// The SYN-ACK again (our ACK lost): answered, the proxy's numbering kept.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
	r.w.poll()
	r.drain(0)
	r.drain(1)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40040, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET"))
	r.w.poll()
	_, _, tcp = checkTCP(t, one(t, r, 1))
	if tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || string(tcp.Payload()) != "GET" || !bytes.Equal(toaOption(tcp), want) {
		t.Fatalf("client data: seq %d ack %d %q options % x", tcp.Seq(), tcp.Ack(), tcp.Payload(), tcp.Options())
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagACK, rsISN+1, isn+4, nil, "hi"))
	r.w.poll()
	if _, ip, tcp := checkTCP(t, one(t, r, 0)); ip.Dst() != clientIP || tcp.Seq() != cookie+1 || string(tcp.Payload()) != "hi" {
		t.Fatalf("server data: to %x seq %d, want %d", ip.Dst(), tcp.Seq(), cookie+1)
	}
}

// TestNAT64TOA: an IPv6 service's NAT64 connection with toa gets DPVS's
// 20-byte option (the client's port and IPv6 address) in the segments,
// IPv4 once translated, that acknowledge the server's SYN-ACK, and not in
// later ones; checksums right.
func TestNAT64TOA(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	for i := range w.snap.Services {
		if s := &w.snap.Services[i]; s.Key.VIP6 == vip6 && s.Key.Port == 8080 {
			s.TOA = true
		}
	}
	const isn, srvISN = 7000, 90000
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagSYN, isn, 0, ""))
	w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, srvISN, isn+1, nil, ""))
	w.poll()
	one(t, r, 0)
	want := make([]byte, toaLen6)
	want[0], want[1] = toaKind, toaLen6
	binary.BigEndian.PutUint16(want[2:], 40000)
	copy(want[4:], clientAddr6[:])

	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK, isn+1, srvISN+1, ""))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, srvISN+1, "hello"))
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8080, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+6, srvISN+9, "world"))
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("sent %d, want 3 (drops %v)", len(out), dropsOf(w))
	}
	for i, tc := range []struct {
		payload string
		toa     bool
	}{{"", true}, {"hello", true}, {"world", false}} {
		_, ip, tcp := checkTCP(t, out[i])
		got := toaOption(tcp)
		if tc.toa != (got != nil) || tc.toa && !bytes.Equal(got, want) || string(tcp.Payload()) != tc.payload || ip.Src() != lip64 {
			t.Fatalf("segment %d: options % x payload %q from %x", i, tcp.Options(), tcp.Payload(), ip.Src())
		}
	}
	if w.cnt.own[TOAOptions] != 2 {
		t.Fatalf("toa_options %d, want 2", w.cnt.own[TOAOptions])
	}
}
