package lcore

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// uoaSeen is what a server's uoa module would read from a datagram lbd
// sent: the option (nil without one), and the UDP datagram after it,
// whose checksum must hold with protocol 17 over the IPv4 addresses.
func uoaSeen(t *testing.T, f []byte) (ip hdr.IPv4, opt []byte, udp hdr.UDP) {
	t.Helper()
	ip = hdr.IPv4(hdr.Ethernet(f).Payload())
	if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
		t.Fatalf("bad IPv4 header in % x", f[:min(len(f), 80)])
	}
	l4 := ip.Payload()
	switch ip.Protocol() {
	case ipProtoOPP:
		n := int(binary.BigEndian.Uint16(l4[2:]))
		if l4[1] != hdr.ProtoUDP || n < uoaOPPLen+2 || n > len(l4) {
			t.Fatalf("option protocol header % x", l4[:uoaOPPLen])
		}
		opt, l4 = l4[uoaOPPLen:n], l4[n:]
	case hdr.ProtoUDP:
		if o := ip[hdr.IPv4MinLen:ip.HeaderLen()]; len(o) > 0 {
			opt = o
		}
	default:
		t.Fatalf("protocol %d", ip.Protocol())
	}
	udp = hdr.UDP(l4)
	if int(udp.Length()) != len(l4) {
		t.Fatalf("UDP length %d in %d bytes", udp.Length(), len(l4))
	}
	if got, want := udp.Checksum(), hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoUDP, l4); got != want {
		t.Fatalf("UDP checksum %#04x, full recomputation gives %#04x", got, want)
	}
	return ip, opt, udp
}

// TestFullNATUOA: with uoa, the first three datagrams of a FullNAT UDP
// connection reach the server with DPVS's option 31 (the client's port
// and address): as an IPv4 option (ipo) or in an option protocol header
// (opp, version 1, protocol 17). A datagram with no room for it (here,
// one that fills the MTU) goes as it is, an empty datagram of the
// connection's with the option just ahead of it. Later datagrams go
// unchanged but for the addresses, and so does the server's reply.
func TestFullNATUOA(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode uint8
	}{{"ipo", UOAIPOption}, {"opp", UOAOptionProtocol}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, defaultNeigh())
			withFullNATService(t, r, func(s *Service) { s.Key.Proto, s.UOA = hdr.ProtoUDP, tc.mode })
			w := r.w
			want := make([]byte, uoaLen)
			want[0], want[1] = uoaCode, uoaLen
			binary.BigEndian.PutUint16(want[2:], 40000)
			binary.BigEndian.PutUint32(want[4:], clientIP)
			full := strings.Repeat("x", 1500-20-8) // fills the MTU: no room
			var lport uint16
			check := func(i int, f []byte, payload string, withOption bool) {
				t.Helper()
				ip, opt, udp := uoaSeen(t, f)
				if i == 0 && lport == 0 {
					lport = udp.SrcPort()
				}
				if ip.Src() != lip1 || udp.SrcPort() != lport || ip.Dst() != rs1 || udp.DstPort() != 8081 || string(udp.Payload()) != payload {
					t.Fatalf("datagram %d left as %x:%d -> %x:%d with %d bytes", i, ip.Src(), udp.SrcPort(), ip.Dst(), udp.DstPort(), len(udp.Payload()))
				}
				switch {
				case withOption && !bytes.Equal(opt, want):
					t.Fatalf("datagram %d: option % x, want % x", i, opt, want)
				case !withOption && opt != nil:
					t.Fatalf("datagram %d: option % x where none belongs", i, opt)
				case withOption && tc.mode == UOAOptionProtocol && ip.Payload()[0] != 1<<4:
					t.Fatalf("datagram %d: option protocol version byte %#x, want 0x10 (an IPv4 client)", i, ip.Payload()[0])
				}
			}
			for i, dg := range []struct {
				payload       string
				option, alone bool
			}{{"one", true, false}, {full, false, true}, {"two", true, false}, {"three", false, false}, {full, false, false}} {
				r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, dg.payload, true))
				w.poll()
				out := r.sent(1)
				if len(out) != 1+btoi(dg.alone) {
					t.Fatalf("datagram %d: %d frames sent, want %d (drops %v)", i, len(out), 1+btoi(dg.alone), dropsOf(w))
				}
				if dg.alone {
					check(i, out[0], "", true) // the option's own, ahead
				}
				check(i, out[len(out)-1], dg.payload, dg.option)
			}
			if w.cnt.own[UOAOptions] != 2 || w.cnt.own[UOAAlone] != 1 {
				t.Fatalf("uoa_options %d, uoa_alone %d; want 2, 1", w.cnt.own[UOAOptions], w.cnt.own[UOAAlone])
			}
			r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 8081, lip1, lport, "answer", true))
			w.poll()
			if ip, u := checkUDP(t, one(t, r, 0)); ip.Dst() != clientIP || u.DstPort() != 40000 || ip.HeaderLen() != 20 {
				t.Fatalf("reply left as -> %x:%d, header %d bytes", ip.Dst(), u.DstPort(), ip.HeaderLen())
			}
		})
	}
}

// TestFullNATUOAOptionsFull: an ipo datagram whose IPv4 options leave no
// room for 8 more bytes goes with its own options only, the option in an
// empty datagram just ahead of it.
func TestFullNATUOAOptionsFull(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNATService(t, r, func(s *Service) { s.Key.Proto, s.UOA = hdr.ProtoUDP, UOAIPOption })
	f := udpFrame(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, "query", true)
	// 36 bytes of no-operation options (35 and an end of list).
	opts := append(bytes.Repeat([]byte{1}, 35), 0)
	g := append(append(append([]byte(nil), f[:34]...), opts...), f[34:]...)
	ip := hdr.IPv4(g[14:])
	ip.SetVersionIHL(20 + len(opts))
	ip.SetTotalLength(ip.TotalLength() + uint16(len(opts)))
	ip.SetChecksum(ip.CalculateChecksum())
	r.inject(0, g)
	r.w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("%d frames sent, want the option's own and the datagram", len(out))
	}
	if _, opt, udp := uoaSeen(t, out[0]); opt[0] != uoaCode || len(udp.Payload()) != 0 {
		t.Fatalf("ahead: option % x with %d bytes of data, want the UOA in an empty datagram", opt, len(udp.Payload()))
	}
	if _, opt, udp := uoaSeen(t, out[1]); !bytes.Equal(opt, opts) || string(udp.Payload()) != "query" || r.w.cnt.own[UOAAlone] != 1 {
		t.Fatalf("options % x, payload %q (uoa_alone %d), want the datagram's own", opt, udp.Payload(), r.w.cnt.own[UOAAlone])
	}
}

// TestNAT64UOA: a NAT64 UDP connection's first datagrams carry the IPv6
// client (option length 20) in an option protocol header of version 2.
func TestNAT64UOA(t *testing.T) {
	r := rigSvc6(t)
	services := append([]Service(nil), r.w.snap.Services...)
	for i := range services {
		if services[i].Key.Port == 5300 && services[i].Key.Proto == hdr.ProtoUDP {
			services[i].UOA = UOAOptionProtocol
		}
	}
	old := r.w.snap
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, services, old.Neigh, old.Timeouts)})
	r.w.runCommands(0)
	want := make([]byte, uoaLen6)
	want[0], want[1] = uoaCode, uoaLen6
	binary.BigEndian.PutUint16(want[2:], 40000)
	copy(want[4:], clientAddr6[:])
	for i := range 4 {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 40000, vip6, 5300, 0, "query"))
		r.w.poll()
		var sent [][]byte
		for _, f := range r.sent(1) {
			if hdr.Ethernet(f).EtherType() == hdr.EtherTypeIPv4 { // not the port's first neighbour advertisement
				sent = append(sent, f)
			}
		}
		if len(sent) != 1 {
			t.Fatalf("datagram %d: %d IPv4 frames sent (drops %v)", i, len(sent), dropsOf(r.w))
		}
		ip, opt, udp := uoaSeen(t, sent[0])
		if ip.Dst() != rs1 || udp.DstPort() != 53 || string(udp.Payload()) != "query" {
			t.Fatalf("datagram %d left as -> %x:%d, %q", i, ip.Dst(), udp.DstPort(), udp.Payload())
		}
		if i < uoaTrail && (!bytes.Equal(opt, want) || ip.Payload()[0] != 2<<4) {
			t.Fatalf("datagram %d: option % x (version byte %#x), want % x (0x20)", i, opt, ip.Payload()[0], want)
		}
		if i >= uoaTrail && opt != nil {
			t.Fatalf("datagram %d: option % x after the first %d", i, opt, uoaTrail)
		}
	}
}

// TestFullNATUOANoAllocs guards the option's insertion against heap
// allocations.
func TestFullNATUOANoAllocs(t *testing.T) {
	for _, mode := range []uint8{UOAIPOption, UOAOptionProtocol} {
		r := newRig(t, defaultNeigh())
		withFullNATService(t, r, func(s *Service) { s.Key.Proto, s.UOA = hdr.ProtoUDP, mode })
		if a := r.allocsPerBurst(0, 1, func(i int) []byte {
			return udpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vipFN, 80, "query", true) // each a new connection
		}); a != 0 {
			t.Fatalf("mode %d: %v allocations per burst", mode, a)
		}
		if r.w.cnt.own[UOAOptions] == 0 {
			t.Fatalf("mode %d: no option was inserted", mode)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSyncedUOATrail: a FullNAT UDP connection's UOA count travels in
// its sync record, so the backup that takes it over puts the option in
// the datagrams the master had not yet sent it in, and in no more.
func TestSyncedUOATrail(t *testing.T) {
	uoa := func(s *Service) { s.Key.Proto, s.UOA = hdr.ProtoUDP, UOAOptionProtocol }
	master := newRig(t, defaultNeigh())
	withFullNATService(t, master, uoa)
	withSync(master, SyncParams{On: true, Threshold: 2})
	for range 2 {
		master.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, "q", true))
		master.w.poll()
		master.drain(1)
	}
	recs := syncedRecords(master.w)
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	left := int(recs[0].Ext.Flags&extUOALeft) >> extUOALeftShift
	if left == 0 || recs[0].Ext.Flags&extUOAOPP == 0 {
		t.Fatalf("record's flags %#x: no UOA left to send, or not opp", recs[0].Ext.Flags)
	}

	backup := newRig(t, defaultNeigh())
	withFullNATService(t, backup, uoa)
	if b := install(t, backup.w, recs[0]); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	for i := range left + 1 {
		backup.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, "q", true))
		backup.w.poll()
		ip, opt, _ := uoaSeen(t, one(t, backup, 1))
		if ip.Src() != recs[0].Ext.LIP || (opt != nil) != (i < left) {
			t.Fatalf("datagram %d on the backup: from %x, option % x; want the option in the first %d", i, ip.Src(), opt, left)
		}
	}
}
