package lcore

import (
	"math/rand/v2"
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withSynProxy6 gives rigSvc6's rig a SYN proxy service vip6:8443 ->
// rs61:8443 by NAT66.
func withSynProxy6(t testing.TB, r *rig) {
	t.Helper()
	withProxied6(t, r, 8443, sched.Dest{ID: 20, Addr6: rs61, Port: 8443, Weight: 1, Fwd: fwd.NAT}, false)
}

// withProxied6 gives rigSvc6's rig a SYN proxy service on vip6:port with
// the one server d (NAT64 from lip64 when d is fullnat), with the PROXY
// v2 header when proxy.
func withProxied6(t testing.TB, r *rig, port uint16, d sched.Dest, proxy bool) {
	t.Helper()
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svc := Service{Key: ServiceKey{VIP6: vip6, Port: port, Proto: hdr.ProtoTCP}, Scheduler: "rr",
		Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, SynProxy: true, ProxyProtocol: proxy, PersistMask: ^uint32(0)}
	if d.Fwd == fwd.FullNAT {
		svc = nat64svc(svc)
	}
	old := r.w.snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	snap.Neigh6 = old.Neigh6
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
	r.w.runCommands(0)
	if !r.w.table.HasExt() {
		t.Fatal("no extension array with a SYN proxy service")
	}
	r.w.poll()
	r.drain(0) // the new snapshot's neighbour advertisements
	r.drain(1)
}

// tcpOpts6 is an IPv6 TCP segment with options.
func tcpOpts6(srcMAC, dstMAC hdr.MAC, src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, flags uint8, seq, ack uint32, opts []byte, payload string) []byte {
	tcp := tcpBytes(sport, dport, flags, seq, ack, opts, payload)
	tcp.SetChecksum(hdr.TransportChecksum6(src, dst, hdr.ProtoTCP, tcp))
	b := make([]byte, 14+40+len(tcp))
	eth := hdr.Ethernet(b)
	eth.SetSrc(srcMAC)
	eth.SetDst(dstMAC)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(b[14:]).Encode(uint16(len(tcp)), hdr.ProtoTCP, 64, src, dst)
	copy(b[54:], tcp)
	return b
}

// checkTCP6 is check6 for a TCP segment.
func checkTCP6(t *testing.T, f []byte) (hdr.Ethernet, hdr.IPv6, hdr.TCP) {
	t.Helper()
	eth, ip, l4 := check6(t, f)
	if ip.NextHeader() != hdr.ProtoTCP {
		t.Fatalf("next header %d, want TCP", ip.NextHeader())
	}
	return eth, ip, hdr.TCP(l4)
}

// handshake6 runs a client's SYN and ACK (from sport, ISN isn) through
// the IPv6 proxy and returns the cookie and the SYN the server got.
func handshake6(t *testing.T, r *rig, sport uint16, isn uint32) (uint32, hdr.TCP, hdr.IPv6) {
	t.Helper()
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, sport, vip6, 8443, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.w.poll()
	eth, ip, tcp := checkTCP6(t, one(t, r, 0))
	wantMSS := r.w.snap.Ports[0].MTU - hdr.IPv6Len - hdr.TCPMinLen
	if eth.Dst() != clientMAC || ip.Src() != vip6 || ip.Dst() != clientAddr6 || tcp.SrcPort() != 8443 || tcp.DstPort() != sport ||
		tcp.Flags() != hdr.TCPFlagSYN|hdr.TCPFlagACK || tcp.Ack() != isn+1 || tcp.MSS() != wantMSS || !tcp.HasOption(hdr.TCPOptSACKPerm) {
		t.Fatalf("cookie SYN-ACK %s:%d -> %s:%d flags %#x ack %d mss %d (want %d)", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort(),
			tcp.Flags(), tcp.Ack(), tcp.MSS(), wantMSS)
	}
	if out := r.sent(1); len(out) != 0 {
		t.Fatal("a SYN reached the server side")
	}
	cookie := tcp.Seq()
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, sport, vip6, 8443, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
	r.w.poll()
	eth, ip, tcp = checkTCP6(t, one(t, r, 1))
	if eth.Dst() != rs1MAC || tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != isn || ip.Src() != clientAddr6 || ip.Dst() != rs61 ||
		tcp.SrcPort() != sport || tcp.DstPort() != 8443 || tcp.MSS() != 1460 || !tcp.HasOption(hdr.TCPOptSACKPerm) {
		t.Fatalf("SYN to the server: flags %#x seq %d %s:%d -> %s:%d mss %d", tcp.Flags(), tcp.Seq(), ip.Src(), tcp.SrcPort(),
			ip.Dst(), tcp.DstPort(), tcp.MSS())
	}
	return cookie, tcp, ip
}

// TestSynProxy6: an IPv6 flood's SYN is answered with a cookie and makes
// no entry, nor does an ACK without a good one; a client proving its
// cookie gets a NAT66 connection whose server the proxy opens with the
// client's options, and the data both ways moves between the two
// numberings.
func TestSynProxy6(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	w := r.w
	const isn, rsISN = 1000, 777000

	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40010, vip6, 8443, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40011, vip6, 8443, hdr.TCPFlagACK, isn+1, 12345, nil, ""))
	w.poll()
	r.drain(0)
	if w.table.Len() != 0 || w.cnt.own[SynCookiesSent] != 1 || w.cnt.own[DropSynCookieInvalid] != 1 {
		t.Fatalf("entries %d, cookies sent %d, invalid %d", w.table.Len(), w.cnt.own[SynCookiesSent], w.cnt.own[DropSynCookieInvalid])
	}
	// A cookie is for its flow only: another source address's ACK of it fails.
	cookie, _, _ := handshake6(t, r, 40010, isn)
	other := clientAddr6
	other[15]++
	r.inject(0, tcpOpts6(clientMAC, wanMAC, other, 40010, vip6, 8443, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
	w.poll()
	if len(r.sent(1)) != 0 || w.cnt.own[DropSynCookieInvalid] != 2 {
		t.Fatalf("another address's ACK of the cookie passed (drops %v)", dropsOf(w))
	}
	id, _, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40010, &vip6, 8443)
	if !ok || w.table.Len() != 1 || w.cnt.own[SynCookiesValid] != 1 || w.table.Get(id).State != conn.StateSynRecv {
		t.Fatalf("after the handshake: found %v, %d entries", ok, w.table.Len())
	}
	// The server's SYN-ACK completes its handshake: our ACK to it, nothing to the client.
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40010, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
	w.poll()
	_, ip, tcp := checkTCP6(t, one(t, r, 1))
	if tcp.Flags() != hdr.TCPFlagACK || tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || ip.Src() != clientAddr6 || ip.Dst() != rs61 {
		t.Fatalf("ACK to the server: flags %#x seq %d ack %d %s -> %s", tcp.Flags(), tcp.Seq(), tcp.Ack(), ip.Src(), ip.Dst())
	}
	if out := r.sent(0); len(out) != 0 {
		t.Fatal("the server's SYN-ACK reached the client")
	}
	if w.table.Get(id).State != conn.StateEstablished {
		t.Fatalf("state %v after the server's SYN-ACK", w.table.Get(id).State)
	}
	// Data both ways, in each end's own numbering.
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40010, vip6, 8443, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET"))
	w.poll()
	if _, ip, tcp = checkTCP6(t, one(t, r, 1)); tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || string(tcp.Payload()) != "GET" || ip.Dst() != rs61 {
		t.Fatalf("client data: seq %d ack %d %q to %s", tcp.Seq(), tcp.Ack(), tcp.Payload(), ip.Dst())
	}
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40010, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+4, nil, "OK"))
	w.poll()
	_, ip, tcp = checkTCP6(t, one(t, r, 0))
	if ip.Src() != vip6 || tcp.SrcPort() != 8443 || tcp.Seq() != cookie+1 || tcp.Ack() != isn+4 || string(tcp.Payload()) != "OK" {
		t.Fatalf("server data: from %s:%d seq %d (cookie %d) ack %d", ip.Src(), tcp.SrcPort(), tcp.Seq(), cookie, tcp.Ack())
	}
}

// TestTraceSynProxy6: a trace of a new flow to a SYN-proxied IPv6
// service says so.
func TestTraceSynProxy6(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	got := r.traceOne(t, TraceFlow{Proto: hdr.ProtoTCP, IPv6: true, Client6: clientAddr6, ClientPort: 40090, VIP6: vip6, VPort: 8443})
	if !got.HasService || !got.SynProxy || got.HasConn || got.Pick != 0 {
		t.Fatalf("trace %+v", got)
	}
}

// TestSynProxy6HoldAndRefused: the client's first data while the server
// has not answered is held, and sent on after our ACK once it answers;
// a server's RST to our SYN reaches the client in the VIP's numbering.
func TestSynProxy6HoldAndRefused(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	const isn, rsISN = 9000, 4242
	cookie, _, _ := handshake6(t, r, 40030, isn)
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40030, vip6, 8443, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "data"))
	r.w.poll()
	if out := r.sent(1); len(out) != 0 || r.w.cnt.own[SynProxyHeld] != 1 {
		t.Fatalf("held data: %d frames sent, held %d", len(out), r.w.cnt.own[SynProxyHeld])
	}
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40030, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("after the server's SYN-ACK: %d frames, want our ACK and the held data (drops %v)", len(out), dropsOf(r.w))
	}
	if _, _, tcp := checkTCP6(t, out[0]); len(tcp.Payload()) != 0 || tcp.Ack() != rsISN+1 || tcp.Seq() != isn+1 {
		t.Fatalf("first: seq %d ack %d %q, want our ACK", tcp.Seq(), tcp.Ack(), tcp.Payload())
	}
	if _, ip, tcp := checkTCP6(t, out[1]); string(tcp.Payload()) != "data" || tcp.Ack() != rsISN+1 || tcp.Seq() != isn+1 || ip.Dst() != rs61 {
		t.Fatalf("second: seq %d ack %d %q to %s, want the held data", tcp.Seq(), tcp.Ack(), tcp.Payload(), ip.Dst())
	}

	cookie, _, _ = handshake6(t, r, 40031, 500)
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40031, hdr.TCPFlagRST|hdr.TCPFlagACK, 0, 501, nil, ""))
	r.w.poll()
	_, ip, tcp := checkTCP6(t, one(t, r, 0))
	if ip.Src() != vip6 || tcp.Flags()&hdr.TCPFlagRST == 0 || tcp.Seq() != cookie+1 {
		t.Fatalf("RST to the client: from %s flags %#x seq %d, want %d", ip.Src(), tcp.Flags(), tcp.Seq(), cookie+1)
	}
}

// TestSynProxy6ReusedPort: a duplicate SYN of a live connection gets a
// cookie and leaves the entry; a finished connection's port is reopened
// by the ACK of a new cookie, never by an old ACK.
func TestSynProxy6ReusedPort(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	w := r.w
	const sport, isn = 40020, 5000
	cookie, _, _ := handshake6(t, r, sport, isn)
	id, _, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, sport, &vip6, 8443)
	if !ok {
		t.Fatal("no entry after the handshake")
	}
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, sport, vip6, 8443, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	w.poll()
	if _, _, tcp := checkTCP6(t, one(t, r, 0)); tcp.Flags() != hdr.TCPFlagSYN|hdr.TCPFlagACK || tcp.Ack() != isn+1 {
		t.Fatalf("duplicate SYN answered with flags %#x ack %d", tcp.Flags(), tcp.Ack())
	}
	if got, _, _ := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, sport, &vip6, 8443); got != id || w.table.Len() != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("after a duplicate SYN: entry %d (was %d), %d entries", got, id, w.table.Len())
	}
	w.setState(w.table.Get(id), conn.StateTimeWait)
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, sport, vip6, 8443, hdr.TCPFlagACK, isn+10, cookie+10, nil, ""))
	w.poll()
	r.drain(1)
	if got, _, _ := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, sport, &vip6, 8443); got != id || w.table.Get(id).State != conn.StateTimeWait {
		t.Fatal("an ACK without a cookie reopened a finished connection")
	}
	const isn2 = 900000
	cookie2, _, _ := handshake6(t, r, sport, isn2)
	nid, _, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, sport, &vip6, 8443)
	if !ok || w.table.Len() != 1 {
		t.Fatalf("after the reused port's handshake: found %v, %d entries", ok, w.table.Len())
	}
	if x := w.table.Ext(nid); x == nil || x.ServerISN != cookie2 || x.ClientISN != isn2 || x.Flags&extSynPending == 0 {
		t.Fatalf("the new connection's extension %+v, want the second cookie %d pending", x, cookie2)
	}
}

// TestSynProxy6NoAllocs guards the IPv6 cookie answer and a proxied NAT66
// connection's data path against heap allocations.
func TestSynProxy6NoAllocs(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	if a := r.allocsPerBurst(0, 0, func(i int) []byte {
		return tcpOpts6(clientMAC, wanMAC, clientAddr6, uint16(20000+i), vip6, 8443, hdr.TCPFlagSYN, 1, 0, synOpts, "")
	}); a != 0 {
		t.Fatalf("cookie SYN-ACK: %v allocations per burst", a)
	}
	handshake6(t, r, 40050, 100)
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40050, hdr.TCPFlagSYN|hdr.TCPFlagACK, 7, 101, nil, ""))
	r.w.poll()
	r.drain(1)
	if a := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40050, hdr.TCPFlagACK, 8, 101, nil, "reply")
	}); a != 0 {
		t.Fatalf("proxied reply: %v allocations per burst", a)
	}
}

// TestCookie6CoversAddresses: an IPv6 cookie is bound to both full
// addresses, not their folds or a prefix of them, and to the ISN.
func TestCookie6CoversAddresses(t *testing.T) {
	const now = int64(1) << 40
	c := makeCookie6(&clientAddr6, &vip6, 40000, 443, 1000, now, 1460, true)
	if mss, sack, ok := checkCookie6(&clientAddr6, &vip6, 40000, 443, 1000, c, now); !ok || mss != 1460 || !sack {
		t.Fatalf("own cookie: mss %d sack %v ok %v", mss, sack, ok)
	}
	for i := range 16 {
		src, dst := clientAddr6, vip6
		src[i] ^= 1
		dst[i] ^= 0x80
		if _, _, ok := checkCookie6(&src, &vip6, 40000, 443, 1000, c, now); ok {
			t.Fatalf("client byte %d changed: the cookie still checks", i)
		}
		if _, _, ok := checkCookie6(&clientAddr6, &dst, 40000, 443, 1000, c, now); ok {
			t.Fatalf("VIP byte %d changed: the cookie still checks", i)
		}
	}
	if _, _, ok := checkCookie6(&clientAddr6, &vip6, 40000, 443, 1001, c, now); ok {
		t.Fatal("another ISN's cookie checks")
	}
	if _, _, ok := checkCookie6(&clientAddr6, &vip6, 40000, 443, 1000, c, now+2<<cookieSlotShift); ok {
		t.Fatal("a cookie two slots old checks")
	}
}

// TestSynProxy6Synced: a proxied NAT66 connection syncs with its
// extension (ISNs, deltas, spliced options), and a peer that installs the
// record carries it on in both numberings: the server's data reaches the
// client moved by the cookie, the client's acknowledgement the server
// moved back.
func TestSynProxy6Synced(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	withSync(r, SyncParams{On: true, Threshold: 1})
	const isn, rsISN = 3000, 600000
	cookie, _, _ := handshake6(t, r, 40060, isn)
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40060, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	one(t, r, 1)
	r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40060, vip6, 8443, hdr.TCPFlagACK, isn+1, cookie+1, nil, "hi"))
	r.w.poll()
	one(t, r, 1)
	recs := syncedRecords(r.w)
	var rec *SyncConn
	for i := range recs {
		if recs[i].ClientPort == 40060 && recs[i].State == conn.StateEstablished {
			rec = &recs[i]
		}
	}
	if rec == nil || !rec.HasExt || !rec.IPv6 || rec.Fwd != fwd.NAT || rec.Ext.ServerISN != cookie || rec.Ext.ClientISN != isn ||
		rec.Ext.SeqOut != cookie-rsISN || rec.Ext.LIP != 0 || rec.Ext.LPort != 0 {
		t.Fatalf("records %+v: want the established connection with its extension (cookie %d)", recs, cookie)
	}

	peer := rigSvc6(t)
	withSynProxy6(t, peer)
	if b := install6(t, peer, *rec); b.Installed != 1 {
		t.Fatalf("batch %+v", b)
	}
	id, _, ok := peer.w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40060, &vip6, 8443)
	if !ok || peer.w.table.Get(id).Flags&flagSeqAdj == 0 || peer.w.table.Ext(id) == nil || *peer.w.table.Ext(id) != rec.Ext {
		t.Fatalf("installed: found %v, extension %+v", ok, peer.w.table.Ext(id))
	}
	peer.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40060, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+3, nil, "OK"))
	peer.w.poll()
	if _, ip, tcp := checkTCP6(t, one(t, peer, 0)); ip.Src() != vip6 || tcp.Seq() != cookie+1 || tcp.Ack() != isn+3 {
		t.Fatalf("server data through the peer: from %s seq %d (want %d) ack %d", ip.Src(), tcp.Seq(), cookie+1, tcp.Ack())
	}
	peer.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40060, vip6, 8443, hdr.TCPFlagACK, isn+3, cookie+3, nil, ""))
	peer.w.poll()
	if _, ip, tcp := checkTCP6(t, one(t, peer, 1)); ip.Dst() != rs61 || tcp.Ack() != rsISN+3 || tcp.Seq() != isn+3 {
		t.Fatalf("client ACK through the peer: to %s seq %d ack %d (want %d)", ip.Dst(), tcp.Seq(), tcp.Ack(), rsISN+3)
	}
}

// TestSynProxy6ICMPError: an ICMPv6 error from the client's side about
// the server's data (in the client's numbering) reaches the server
// quoting its own seq, with the quoted TCP checksum and the ICMPv6 one
// right: a server checks that an error's seq is within its window.
func TestSynProxy6ICMPError(t *testing.T) {
	r := rigSvc6(t)
	withSynProxy6(t, r)
	const isn, rsISN = 7000, 123456
	cookie, _, _ := handshake6(t, r, 40070, isn)
	r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 40070, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	one(t, r, 1)
	sent := tcpOpts6(wanMAC, clientMAC, vip6, 8443, clientAddr6, 40070, hdr.TCPFlagACK|hdr.TCPFlagPSH, cookie+1, isn+1, nil, "reply") // as lbd sent it
	r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6PacketTooBig, 0, 1280, sent, 0)))
	r.w.poll()
	eth, ip, icmp := checkICMPv6(t, one(t, r, 1))
	q := hdr.IPv6(icmp[8:])
	tcp := hdr.TCP(q.Payload())
	if eth.Dst() != rs1MAC || ip.Dst() != rs61 || q.Src() != rs61 || tcp.SrcPort() != 8443 || tcp.Seq() != rsISN+1 {
		t.Fatalf("to the server: %s, quoting %s:%d seq %d (want %d)", ip.Dst(), q.Src(), tcp.SrcPort(), tcp.Seq(), rsISN+1)
	}
	if got, want := tcp.Checksum(), func() uint16 {
		c := append(hdr.TCP(nil), tcp...)
		c.SetChecksum(0)
		return hdr.TransportChecksum6(q.Src(), q.Dst(), hdr.ProtoTCP, c)
	}(); got != want {
		t.Fatalf("quoted TCP checksum %#04x, recomputed %#04x", got, want)
	}
}

// TestSynProxy64: the SYN proxy of an IPv6 service with a NAT64 server:
// the client's handshake is IPv6, lbd's with the server IPv4 from the
// local address, and data moves between the two numberings once
// translated; with PROXY v2 the client's first bytes reach the server
// after the header naming its IPv6 endpoints, and the SYN-ACK's MSS
// leaves room for it.
func TestSynProxy64(t *testing.T) {
	for _, proxy := range []bool{false, true} {
		r := rigSvc6(t)
		withProxied6(t, r, 8444, sched.Dest{ID: 21, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.FullNAT}, proxy)
		w := r.w
		const isn, rsISN = 41000, 9000
		r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40080, vip6, 8444, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
		w.poll()
		_, ip6, tcp := checkTCP6(t, one(t, r, 0))
		wantMSS := w.snap.Ports[0].MTU - hdr.IPv6Len - hdr.TCPMinLen
		if proxy {
			wantMSS -= proxyV2Len6
		}
		if ip6.Src() != vip6 || tcp.Flags() != hdr.TCPFlagSYN|hdr.TCPFlagACK || tcp.MSS() != wantMSS || w.table.Len() != 0 {
			t.Fatalf("proxy %v: cookie SYN-ACK from %s flags %#x mss %d (want %d), %d entries", proxy, ip6.Src(), tcp.Flags(), tcp.MSS(), wantMSS, w.table.Len())
		}
		cookie := tcp.Seq()
		r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40080, vip6, 8444, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
		w.poll()
		eth, ip, syn := checkTCP(t, one(t, r, 1))
		if eth.EtherType() != hdr.EtherTypeIPv4 || eth.Dst() != rs1MAC || ip.Src() != lip64 || ip.Dst() != rs1 ||
			syn.DstPort() != 80 || syn.Flags() != hdr.TCPFlagSYN || syn.Seq() != isn || syn.MSS() != 1460 {
			t.Fatalf("proxy %v: SYN to the server %x -> %x:%d flags %#x seq %d mss %d", proxy, ip.Src(), ip.Dst(), syn.DstPort(), syn.Flags(), syn.Seq(), syn.MSS())
		}
		lport := syn.SrcPort()
		// The client's first bytes, before the server answered: held.
		r.inject(0, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40080, vip6, 8444, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET"))
		w.poll()
		if len(r.sent(1)) != 0 || w.cnt.own[SynProxyHeld] != 1 {
			t.Fatalf("proxy %v: data before the server's SYN-ACK was not held (held %d)", proxy, w.cnt.own[SynProxyHeld])
		}
		r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
		w.poll()
		out := r.sent(1)
		if len(out) != 2 {
			t.Fatalf("proxy %v: after the server's SYN-ACK %d frames, want our ACK and the held data (drops %v)", proxy, len(out), dropsOf(w))
		}
		if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != lip64 || tcp.Flags() != hdr.TCPFlagACK || tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || len(tcp.Payload()) != 0 {
			t.Fatalf("proxy %v: ACK to the server from %x flags %#x seq %d ack %d", proxy, ip.Src(), tcp.Flags(), tcp.Seq(), tcp.Ack())
		}
		if len(r.sent(0)) != 0 {
			t.Fatalf("proxy %v: the server's SYN-ACK reached the client", proxy)
		}
		// The held bytes, with the PROXY header before them when asked.
		_, _, tcp = checkTCP(t, out[1])
		want, shift := "GET", uint32(0)
		if proxy {
			shift = proxyV2Len6
		}
		if p := tcp.Payload(); tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || len(p) != len(want)+int(shift) || string(p[shift:]) != want ||
			proxy && string(p[:12]) != string(proxyV2Sig[:]) {
			t.Fatalf("proxy %v: client data seq %d ack %d payload %q", proxy, tcp.Seq(), tcp.Ack(), p)
		}
		// The server's answer, acknowledging all of it, in the client's numbering.
		r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip64, lport, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+4+shift, nil, "OK"))
		w.poll()
		_, ip6, tcp = checkTCP6(t, one(t, r, 0))
		if ip6.Src() != vip6 || tcp.SrcPort() != 8444 || tcp.Seq() != cookie+1 || tcp.Ack() != isn+4 || string(tcp.Payload()) != "OK" {
			t.Fatalf("proxy %v: server data from %s:%d seq %d (cookie %d) ack %d", proxy, ip6.Src(), tcp.SrcPort(), tcp.Seq(), cookie, tcp.Ack())
		}
		// The client side's error about that segment reaches the server
		// as ICMPv4, quoting the server's own seq.
		sent := tcpOpts6(wanMAC, clientMAC, vip6, 8444, clientAddr6, 40080, hdr.TCPFlagACK|hdr.TCPFlagPSH, cookie+1, isn+4, nil, "OK")
		r.inject(0, fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0, sent, 0)))
		w.poll()
		_, ip, icmp := checkICMPv4(t, one(t, r, 1))
		q := hdr.IPv4(icmp[hdr.ICMPLen:])
		if qt := hdr.TCP(q[q.HeaderLen():]); ip.Dst() != rs1 || q.Src() != rs1 || q.Dst() != lip64 || qt.DstPort() != lport || qt.Seq() != rsISN+1 {
			t.Fatalf("proxy %v: error to %x quoting %x -> %x:%d seq %d (want %d)", proxy, ip.Dst(), q.Src(), q.Dst(), qt.DstPort(), qt.Seq(), rsISN+1)
		}
	}
}

// TestRewriteTCP6Checksum: the checksum rewriteTCP6 sums from the words
// it writes is the full recomputation's, for random fields and options.
func TestRewriteTCP6Checksum(t *testing.T) {
	r := rigSvc6(t)
	rnd := rand.New(rand.NewPCG(3, 4))
	in := tcpOpts6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8443, hdr.TCPFlagACK, 1, 1, nil, "some data the handshake drops")
	for i := range 2000 {
		var src, dst hdr.Addr6
		for j := range src {
			src[j], dst[j] = byte(rnd.Uint32()), byte(rnd.Uint32())
		}
		f, o := randomHandshake(rnd, i)
		m := r.mbufOf(in)
		d := desc{m: m}
		if !d.rewriteTCP6(&src, &dst, &f, &o) {
			t.Fatal("no room")
		}
		got := append([]byte(nil), m.Data()...)
		m.Free()
		ip := hdr.IPv6(got[l3:])
		tcp := hdr.TCP(ip.Payload())
		if ip.Src() != src || ip.Dst() != dst || tcp.Seq() != f.Seq || tcp.Window() != f.Window ||
			tcp.Checksum() != hdr.TransportChecksum6(src, dst, hdr.ProtoTCP, tcp) {
			t.Fatalf("case %d: % x", i, got)
		}
	}
}
