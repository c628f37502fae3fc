package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

var (
	vipFN = ip4(203, 0, 113, 103)
	lip1  = ip4(198, 51, 100, 50)
)

// withFullNAT gives the rig's worker a FullNAT service vipFN:80 -> rs1:8081
// from lip1, with or without the PROXY v2 header.
func withFullNAT(t testing.TB, r *rig, proxy bool) {
	t.Helper()
	withFullNATService(t, r, func(s *Service) { s.ProxyProtocol = proxy })
}

// withFullNATService is withFullNAT with the service as edit leaves it.
func withFullNATService(t testing.TB, r *rig, edit func(*Service)) {
	t.Helper()
	d := sched.Dest{ID: 9, Addr: rs1, Port: 8081, Weight: 1, Fwd: fwd.FullNAT}
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svc := Service{Key: ServiceKey{VIP: vipFN, Port: 80, Proto: hdr.ProtoTCP}, Scheduler: "rr",
		Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, LocalAddrs: []uint32{lip1}}
	edit(&svc)
	old := r.w.snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
	r.w.runCommands(0)
	if r.w.AckedGen() != snap.Gen {
		t.Fatal("the worker did not take the FullNAT snapshot")
	}
}

// tcpSeg builds an Ethernet/IPv4/TCP frame with options and valid checksums.
func tcpSeg(srcMAC, dstMAC hdr.MAC, src uint32, sport uint16, dst uint32, dport uint16, flags uint8, seq, ack uint32, opts []byte, payload string) []byte {
	tcp := tcpBytes(sport, dport, flags, seq, ack, opts, payload)
	tcp.SetChecksum(hdr.TransportChecksum(src, dst, hdr.ProtoTCP, tcp))
	return ipFrame(srcMAC, dstMAC, src, dst, hdr.ProtoTCP, true, tcp)
}

// tcpBytes is a TCP segment with options, window 65535 and checksum 0
// (its caller sums it over its addresses).
func tcpBytes(sport, dport uint16, flags uint8, seq, ack uint32, opts []byte, payload string) hdr.TCP {
	tcp := hdr.TCP(make([]byte, 20+len(opts)+len(payload)))
	tcp.SetSrcPort(sport)
	tcp.SetDstPort(dport)
	tcp.SetSeq(seq)
	tcp.SetAck(ack)
	tcp.SetDataOffset(20 + len(opts))
	tcp.SetFlags(flags)
	tcp.SetWindow(65535)
	copy(tcp[20:], opts)
	copy(tcp[20+len(opts):], payload)
	return tcp
}

// openFullNAT takes a client's connection from sport (ISN isn) through
// the SYN and the server's SYN-ACK (ISN srvISN) of withFullNAT's service
// and returns its local port; nothing it sent is left on the rings.
func openFullNAT(t *testing.T, r *rig, sport uint16, isn, srvISN uint32) uint16 {
	t.Helper()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipFN, 80, hdr.TCPFlagSYN, isn, 0, nil, ""))
	r.w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, srvISN, isn+1, nil, ""))
	r.w.poll()
	one(t, r, 0)
	return lport
}

func one(t *testing.T, r *rig, port int) []byte {
	t.Helper()
	out := r.sent(port)
	if len(out) != 1 {
		t.Fatalf("port %d sent %d frames, want 1 (drops: %v)", port, len(out), dropsOf(r.w))
	}
	return out[0]
}

func dropsOf(w *Worker) map[string]uint64 {
	m := map[string]uint64{}
	for s := firstDrop; s < numStats; s++ {
		if w.cnt.own[s] != 0 {
			m[s.Name()] = w.cnt.own[s]
		}
	}
	return m
}

func TestFullNATWithProxyV2(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	w := r.w
	const isn = 5000
	mss := []byte{hdr.TCPOptMSS, 4, 0x05, 0xb4} // 1460

	// SYN: client -> VIP becomes LIP:lport -> RIP:rport, seq untouched.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagSYN, isn, 0, mss, ""))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	if ip.Src() != lip1 || ip.Dst() != rs1 || tcp.DstPort() != 8081 || tcp.Seq() != isn || lport < lportMin {
		t.Fatalf("SYN left as %x:%d -> %x:%d seq %d", ip.Src(), lport, ip.Dst(), tcp.DstPort(), tcp.Seq())
	}

	// SYN-ACK: RIP -> LIP:lport becomes VIP -> client, the MSS leaves room
	// for the header.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, 90000, isn+1, mss, ""))
	w.poll()
	_, ip, tcp = checkTCP(t, one(t, r, 0))
	if ip.Src() != vipFN || tcp.SrcPort() != 80 || ip.Dst() != clientIP || tcp.DstPort() != 40000 || tcp.Ack() != isn+1 {
		t.Fatalf("SYN-ACK left as %x:%d -> %x:%d ack %d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort(), tcp.Ack())
	}
	if got := tcp.MSS(); got != 1500-40-proxyV2Len {
		t.Fatalf("MSS %d, want %d", got, 1500-40-proxyV2Len)
	}

	// The handshake's ACK keeps its seq; the first data gets the header.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, isn+1, 90001, nil, ""))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, 90001, nil, "hello"))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+6, 90001, nil, "world"))
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("sent %d, want 3 (drops %v)", len(out), dropsOf(w))
	}
	_, _, tcp = checkTCP(t, out[0])
	if tcp.Seq() != isn+1 || len(tcp.Payload()) != 0 {
		t.Fatalf("handshake ACK seq %d, %d bytes", tcp.Seq(), len(tcp.Payload()))
	}
	_, ip, tcp = checkTCP(t, out[1])
	want := make([]byte, proxyV2Len)
	copy(want, proxyV2Sig[:])
	want[12], want[13], want[15] = 0x21, 0x11, 12
	binary.BigEndian.PutUint32(want[16:], clientIP)
	binary.BigEndian.PutUint32(want[20:], vipFN)
	binary.BigEndian.PutUint16(want[24:], 40000)
	binary.BigEndian.PutUint16(want[26:], 80)
	if tcp.Seq() != isn+1 || !bytes.Equal(tcp.Payload(), append(want, "hello"...)) || ip.Src() != lip1 {
		t.Fatalf("first data seq %d payload %q", tcp.Seq(), tcp.Payload())
	}
	_, _, tcp = checkTCP(t, out[2])
	if tcp.Seq() != isn+6+proxyV2Len || string(tcp.Payload()) != "world" {
		t.Fatalf("second data seq %d payload %q", tcp.Seq(), tcp.Payload())
	}
	if w.cnt.own[ProxyHeaders] != 1 {
		t.Fatalf("proxy_headers %d", w.cnt.own[ProxyHeaders])
	}

	// The server's ACK and SACK blocks go back into the client's numbering.
	sack := []byte{hdr.TCPOptNOP, hdr.TCPOptNOP, hdr.TCPOptSACK, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(sack[4:], isn+1+proxyV2Len+20)
	binary.BigEndian.PutUint32(sack[8:], isn+1+proxyV2Len+30)
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagACK, 90001, isn+1+proxyV2Len+10, sack, ""))
	// An acknowledgement of part of the header is of the client's ISN+1.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagACK, 90001, isn+1+10, nil, ""))
	w.poll()
	out = r.sent(0)
	if len(out) != 2 {
		t.Fatalf("sent %d, want 2", len(out))
	}
	_, _, tcp = checkTCP(t, out[0])
	opts := tcp.Options()
	if tcp.Ack() != isn+11 || binary.BigEndian.Uint32(opts[4:]) != isn+21 || binary.BigEndian.Uint32(opts[8:]) != isn+31 {
		t.Fatalf("ack %d SACK %d-%d", tcp.Ack(), binary.BigEndian.Uint32(opts[4:]), binary.BigEndian.Uint32(opts[8:]))
	}
	if _, _, tcp = checkTCP(t, out[1]); tcp.Ack() != isn+1 {
		t.Fatalf("ack inside the header became %d", tcp.Ack())
	}

	// A retransmitted first segment gets the header again.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, 90001, nil, "hello"))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); len(tcp.Payload()) != proxyV2Len+5 || tcp.Seq() != isn+1 {
		t.Fatalf("retransmission: seq %d, %d bytes", tcp.Seq(), len(tcp.Payload()))
	}

	// Expiry gives the port back.
	pool := w.lpools[lip1]
	free := pool.free
	w.table.Expire(1<<62, w.table.Cap(), w.expire)
	if pool.free != free+1 || w.table.Len() != 0 {
		t.Fatalf("after expiry: %d free ports (was %d), %d entries", pool.free, free, w.table.Len())
	}
}

// TestFullNATNoProxy: without the header nothing moves the sequence
// numbers, and UDP is translated too.
func TestFullNATPlain(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	w := r.w
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40001, vipFN, 80, hdr.TCPFlagSYN, 7, 0, nil, ""))
	w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	lport := tcp.SrcPort()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40001, vipFN, 80, hdr.TCPFlagACK, 8, 1, nil, "data"))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); tcp.Seq() != 8 || string(tcp.Payload()) != "data" {
		t.Fatalf("data seq %d payload %q", tcp.Seq(), tcp.Payload())
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, lport, hdr.TCPFlagACK, 1, 12, nil, "answer"))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipFN || ip.Dst() != clientIP || tcp.Ack() != 12 || string(tcp.Payload()) != "answer" {
		t.Fatalf("reply %x -> %x ack %d", ip.Src(), ip.Dst(), tcp.Ack())
	}
	if w.cnt.own[ProxyHeaders] != 0 {
		t.Fatal("a header without proxy_protocol")
	}
}

// TestFullNATPortExhaustion: a worker out of local ports refuses the new
// connection, counted, and keeps the others.
func TestFullNATPortExhaustion(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	w := r.w
	w.lpools[lip1] = &lportPool{ports: []uint16{5000}, free: 1}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40002, vipFN, 80, hdr.TCPFlagSYN, 7, 0, nil, ""))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40003, vipFN, 80, hdr.TCPFlagSYN, 7, 0, nil, ""))
	w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); tcp.SrcPort() != 5000 {
		t.Fatalf("local port %d", tcp.SrcPort())
	}
	if w.cnt.own[DropNoLocalPort] != 1 || w.table.Len() != 1 {
		t.Fatalf("no_local_port %d, %d entries", w.cnt.own[DropNoLocalPort], w.table.Len())
	}
}

// TestLportPoolsPartition: among n workers the pools of one LIP are
// disjoint, cover the range, and each port is owned (owner.go) by the
// worker that hands it out: a reply to LIP:lport steers to it.
func TestLportPoolsPartition(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		seen := map[uint16]int{}
		for wk := 0; wk < n; wk++ {
			p := newLportPool(lip1, wk, n)
			for p.free > 0 {
				port, _ := p.get()
				if Owner(lip1, port, n) != wk {
					t.Fatalf("n=%d: worker %d hands out %d, owned by %d", n, wk, port, Owner(lip1, port, n))
				}
				seen[port]++
			}
		}
		if len(seen) != lportMax-lportMin+1 {
			t.Fatalf("n=%d: %d ports handed out", n, len(seen))
		}
		for port, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: port %d handed out %d times", n, port, c)
			}
		}
	}
}

// TestLportPoolFIFO: a freed port goes to the back of the line.
func TestLportPoolFIFO(t *testing.T) {
	p := &lportPool{ports: []uint16{1, 2, 3}, free: 3}
	a, _ := p.get()
	p.put(a)
	b, _ := p.get()
	if a != 1 || b != 2 {
		t.Fatalf("got %d then %d", a, b)
	}
}

// TestFullNATICMP: a "fragmentation needed" from the server's side about
// LIP:lport -> RIP reaches the client about client -> VIP.
func TestFullNATICMP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	w := r.w
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40004, vipFN, 80, hdr.TCPFlagSYN, 100, 0, nil, ""))
	w.poll()
	syn := one(t, r, 1)
	_, _, tcp := checkTCP(t, syn)
	lport := tcp.SrcPort()
	q := hdr.IPv4(hdr.Ethernet(syn).Payload())
	quote := append([]byte(nil), q[:28]...)
	icmp := make([]byte, 8+len(quote))
	icmp[0], icmp[1] = hdr.ICMPDestUnreachable, 4
	copy(icmp[8:], quote)
	binary.BigEndian.PutUint16(icmp[2:], hdr.ICMPChecksum(icmp))
	r.inject(1, ipFrame(rs1MAC, lanMAC, rs1, lip1, hdr.ProtoICMP, false, icmp))
	w.poll()
	f := one(t, r, 0)
	ip := hdr.IPv4(hdr.Ethernet(f).Payload())
	msg := hdr.ICMP(ip.Payload())
	qi := hdr.IPv4(msg.Payload())
	ql4 := qi[qi.HeaderLen():]
	if ip.Src() != vipFN || ip.Dst() != clientIP || qi.Src() != clientIP || qi.Dst() != vipFN ||
		binary.BigEndian.Uint16(ql4) != 40004 || binary.BigEndian.Uint16(ql4[2:]) != 80 || !ip.IsChecksumValid() {
		t.Fatalf("error went %x -> %x quoting %x -> %x (lport %d)", ip.Src(), ip.Dst(), qi.Src(), qi.Dst(), lport)
	}
	if hdr.ICMPChecksum(msg) != msg.Checksum() {
		t.Fatal("ICMP checksum wrong")
	}
}

// TestFullNATNoAllocs guards the FullNAT path (new connection, PROXY
// header, sequence adjustment) against heap allocations.
func TestFullNATNoAllocs(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	if a := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpSeg(clientMAC, wanMAC, clientIP, uint16(20000+i), vipFN, 80, hdr.TCPFlagSYN, 1, 0, nil, "")
	}); a != 0 {
		t.Fatalf("FullNAT SYN: %v allocations per burst", a)
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 41000, vipFN, 80, hdr.TCPFlagSYN, 1, 0, nil, ""))
	r.w.poll()
	r.drain(1)
	if a := r.allocsPerBurst(0, 1, func(i int) []byte {
		seq := uint32(2 + 4*i)
		if i == 0 {
			seq = 2
		}
		return tcpSeg(clientMAC, wanMAC, clientIP, 41000, vipFN, 80, hdr.TCPFlagACK, seq, 1, nil, "data")
	}); a != 0 {
		t.Fatalf("FullNAT data with PROXY v2: %v allocations per burst", a)
	}
	id, _, ok := r.w.table.Lookup(hdr.ProtoTCP, clientIP, 41000, vipFN, 80)
	if !ok {
		t.Fatal("no entry")
	}
	x := r.w.table.Ext(id)
	if a := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpSeg(rs1MAC, lanMAC, rs1, 8081, x.LIP, x.LPort, hdr.TCPFlagACK, 1, 2+proxyV2Len, nil, "reply")
	}); a != 0 {
		t.Fatalf("FullNAT reply: %v allocations per burst", a)
	}
	_ = conn.Original
}

// TestFullNATUDP: a UDP datagram leaves from the local address and its
// answer returns from the VIP, checksums right.
func TestFullNATUDP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNATUDP(r)
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vipFN, 53, "query", true))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("lan sent %d", len(out))
	}
	ip, u := checkUDP(t, out[0])
	if ip.Src() != lip1 || ip.Dst() != rs2 || u.DstPort() != 5353 || string(u.Payload()) != "query" {
		t.Fatalf("sent %x:%d -> %x:%d", ip.Src(), u.SrcPort(), ip.Dst(), u.DstPort())
	}
	r.inject(1, udpFrame(rs2MAC, lanMAC, rs2, 5353, lip1, u.SrcPort(), "answer", true))
	r.w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("wan sent %d", len(out))
	}
	ip, u = checkUDP(t, out[0])
	if ip.Src() != vipFN || u.SrcPort() != 53 || ip.Dst() != clientIP || u.DstPort() != 40000 || string(u.Payload()) != "answer" {
		t.Fatalf("answer %x:%d -> %x:%d", ip.Src(), u.SrcPort(), ip.Dst(), u.DstPort())
	}
}

// withFullNATUDP gives the rig's worker a UDP FullNAT service vipFN:53 ->
// rs2:5353 from lip1.
func withFullNATUDP(r *rig) {
	d := sched.Dest{ID: 11, Addr: rs2, Port: 5353, Weight: 1, Fwd: fwd.FullNAT}
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svc := Service{Key: ServiceKey{VIP: vipFN, Port: 53, Proto: hdr.ProtoUDP}, Scheduler: "rr",
		Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, LocalAddrs: []uint32{lip1}}
	old := r.w.snap
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)})
	r.w.runCommands(0)
}

// TestFullNATARP: lbd answers ARP for a local address on the port whose
// subnet holds it, not on the other.
func TestFullNATARP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	r.inject(1, arpFrame(hdr.ARPRequest, rs1MAC, rs1, lip1))
	r.inject(0, arpFrame(hdr.ARPRequest, clientMAC, clientIP, lip1))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("lan sent %d ARP replies, want 1", len(out))
	}
	a := hdr.ARP(hdr.Ethernet(out[0]).Payload())
	if a.Op() != hdr.ARPReply || a.SenderIP() != lip1 || a.SenderMAC() != lanMAC {
		t.Fatalf("reply: op %d %x is-at %v", a.Op(), a.SenderIP(), a.SenderMAC())
	}
	if n := len(r.sent(0)); n != 0 {
		t.Fatalf("the client side answered for a local address (%d frames)", n)
	}
}
