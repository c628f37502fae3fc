package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

var vipSP = ip4(203, 0, 113, 104)

func TestCookies(t *testing.T) {
	k := flowKey{src: clientIP, dst: vipSP, sport: 40000, dport: 80, proto: hdr.ProtoTCP}
	now := int64(5) << cookieSlotShift
	c := makeCookie(&k, 1000, now, 1460, true)
	if mss, sack, ok := checkCookie(&k, 1000, c, now); !ok || mss != 1460 || !sack {
		t.Fatalf("fresh cookie: mss %d sack %v ok %v", mss, sack, ok)
	}
	if mss, sack, ok := checkCookie(&k, 1000, makeCookie(&k, 1000, now, 1400, false), now); !ok || mss != 1300 || sack {
		t.Fatalf("MSS 1400: carried as %d (sack %v, ok %v), want 1300", mss, sack, ok)
	}
	if _, _, ok := checkCookie(&k, 1000, c, now+1<<cookieSlotShift); !ok {
		t.Fatal("a cookie of the previous slot refused")
	}
	if _, _, ok := checkCookie(&k, 1000, c, now+2<<cookieSlotShift); ok {
		t.Fatal("a cookie two slots old accepted")
	}
	if _, _, ok := checkCookie(&k, 1001, c, now); ok {
		t.Fatal("a cookie accepted for another ISN")
	}
	other := k
	other.sport++
	if _, _, ok := checkCookie(&other, 1000, c, now); ok {
		t.Fatal("a cookie accepted for another flow")
	}
	if _, _, ok := checkCookie(&k, 1000, c^1<<20, now); ok {
		t.Fatal("a forged cookie accepted")
	}
}

// withSynProxy gives the rig a SYN proxy service vipSP:80 -> rs1:80 by
// method m (FullNAT from lip1).
func withSynProxy(t testing.TB, r *rig, m fwd.Method) { withSynProxyPP(t, r, m, false) }

// withSynProxyPP is withSynProxy, with the PROXY v2 header when proxy.
func withSynProxyPP(t testing.TB, r *rig, m fwd.Method, proxy bool) {
	t.Helper()
	d := sched.Dest{ID: 10, Addr: rs1, Port: 80, Weight: 1, Fwd: m}
	s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svc := Service{Key: ServiceKey{VIP: vipSP, Port: 80, Proto: hdr.ProtoTCP}, Scheduler: "rr",
		Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}, SynProxy: true, ProxyProtocol: proxy}
	if m == fwd.FullNAT {
		svc.LocalAddrs = []uint32{lip1}
	}
	old := r.w.snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
	r.w.runCommands(0)
}

var synOpts = []byte{hdr.TCPOptMSS, 4, 0x05, 0xb4, hdr.TCPOptNOP, hdr.TCPOptNOP, hdr.TCPOptSACKPerm, 2}

// handshake runs a client's SYN and ACK through the proxy and returns
// the cookie and the SYN the real server got.
func handshake(t *testing.T, r *rig, sport uint16, isn uint32) (uint32, hdr.TCP, hdr.IPv4) {
	t.Helper()
	w := r.w
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipSP || ip.Dst() != clientIP || tcp.SrcPort() != 80 || tcp.DstPort() != sport ||
		tcp.Flags() != hdr.TCPFlagSYN|hdr.TCPFlagACK || tcp.Ack() != isn+1 || tcp.MSS() != 1460 {
		t.Fatalf("cookie SYN-ACK %x:%d -> %x:%d flags %#x ack %d mss %d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort(), tcp.Flags(), tcp.Ack(), tcp.MSS())
	}
	if out := r.sent(1); len(out) != 0 {
		t.Fatal("a SYN reached the server side")
	}
	cookie := tcp.Seq()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
	w.poll()
	_, ip, tcp = checkTCP(t, one(t, r, 1))
	if tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != isn || ip.Dst() != rs1 || tcp.DstPort() != 80 || tcp.MSS() != 1460 {
		t.Fatalf("SYN to the server: flags %#x seq %d to %x:%d mss %d", tcp.Flags(), tcp.Seq(), ip.Dst(), tcp.DstPort(), tcp.MSS())
	}
	return cookie, tcp, ip
}

func TestSynProxyNAT(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	w := r.w
	const isn, rsISN = 1000, 777000

	// A flood's SYN makes no entry; an ACK with no good cookie neither.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40010, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40011, vipSP, 80, hdr.TCPFlagACK, isn+1, 12345, nil, ""))
	w.poll()
	r.drain(0)
	if w.table.Len() != 0 || w.cnt.own[SynCookiesSent] != 1 || w.cnt.own[DropSynCookieInvalid] != 1 {
		t.Fatalf("entries %d, cookies sent %d, invalid %d", w.table.Len(), w.cnt.own[SynCookiesSent], w.cnt.own[DropSynCookieInvalid])
	}

	cookie, _, ip := handshake(t, r, 40010, isn)
	if ip.Src() != clientIP || w.table.Len() != 1 || w.cnt.own[SynCookiesValid] != 1 {
		t.Fatalf("SYN from %x, %d entries", ip.Src(), w.table.Len())
	}
	// The server's SYN-ACK completes its handshake: our ACK, not the client's business.
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40010, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, synOpts, ""))
	w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 1))
	if tcp.Flags() != hdr.TCPFlagACK || tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 {
		t.Fatalf("ACK to the server: flags %#x seq %d ack %d", tcp.Flags(), tcp.Seq(), tcp.Ack())
	}
	if out := r.sent(0); len(out) != 0 {
		t.Fatal("the server's SYN-ACK reached the client")
	}
	// Data both ways, in each end's own numbering.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40010, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET"))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 || string(tcp.Payload()) != "GET" {
		t.Fatalf("client data: seq %d ack %d %q", tcp.Seq(), tcp.Ack(), tcp.Payload())
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40010, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+4, nil, "OK"))
	w.poll()
	_, ip, tcp = checkTCP(t, one(t, r, 0))
	if ip.Src() != vipSP || tcp.Seq() != cookie+1 || tcp.Ack() != isn+4 || string(tcp.Payload()) != "OK" {
		t.Fatalf("server data: from %x seq %d (cookie %d) ack %d", ip.Src(), tcp.Seq(), cookie, tcp.Ack())
	}
}

// TestSynProxyRefused: a server's RST to our SYN reaches the client with
// the sequence number it expects from the VIP.
func TestSynProxyRefused(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	cookie, _, _ := handshake(t, r, 40020, 500)
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40020, hdr.TCPFlagRST|hdr.TCPFlagACK, 0, 501, nil, ""))
	r.w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipSP || tcp.Flags()&hdr.TCPFlagRST == 0 || tcp.Seq() != cookie+1 {
		t.Fatalf("RST to the client: flags %#x seq %d, want %d", tcp.Flags(), tcp.Seq(), cookie+1)
	}
}

// TestSynProxyHoldAndResend: the client's first data while the server
// has not answered is held; its retransmission sends the SYN again (ours
// was lost), with the client's MSS; the server's SYN-ACK then gets our
// ACK and the held data, in the server's numbering.
func TestSynProxyHoldAndResend(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	const isn, rsISN = 9000, 4242
	cookie, _, _ := handshake(t, r, 40030, isn)
	data := tcpSeg(clientMAC, wanMAC, clientIP, 40030, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "data")
	r.inject(0, data)
	r.w.poll()
	if out := r.sent(1); len(out) != 0 {
		t.Fatalf("held data: %d frames sent", len(out))
	}
	r.inject(0, data)
	r.w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != isn || tcp.MSS() != 1460 || len(tcp.Payload()) != 0 {
		t.Fatalf("again: flags %#x seq %d mss %d", tcp.Flags(), tcp.Seq(), tcp.MSS())
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40030, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("after the server's SYN-ACK: %d frames, want our ACK and the held data", len(out))
	}
	var sawACK, sawData bool
	for _, f := range out {
		_, _, tcp := checkTCP(t, f)
		switch {
		case len(tcp.Payload()) == 0 && tcp.Ack() == rsISN+1 && tcp.Seq() == isn+1:
			sawACK = true
		case string(tcp.Payload()) == "data" && tcp.Ack() == rsISN+1 && tcp.Seq() == isn+1:
			sawData = true
		}
	}
	if !sawACK || !sawData {
		t.Fatalf("ACK %v data %v", sawACK, sawData)
	}
}

// TestSynProxyHeldFreed: a held segment whose connection expires is
// freed (the rig checks that no mbuf leaks).
func TestSynProxyHeldFreed(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	cookie, _, _ := handshake(t, r, 40031, 1)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40031, vipSP, 80, hdr.TCPFlagACK, 2, cookie+1, nil, "x"))
	r.w.poll()
	held := func() (n int) {
		for _, h := range r.w.held {
			if h.m != nil {
				n++
			}
		}
		return n
	}
	if held() != 1 {
		t.Fatalf("%d segments held, want 1", held())
	}
	r.w.table.Expire(1<<62, r.w.table.Cap(), r.w.expire)
	r.w.flush()
	if held() != 0 || r.w.table.Len() != 0 || r.w.cnt.own[DropSynProxyPending] != 1 {
		t.Fatal("the held segment outlived its connection")
	}
}

// TestSynProxyFullNAT: the proxied handshake from a local address, with
// the reply found by its local port.
func TestSynProxyFullNAT(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.FullNAT)
	const isn, rsISN = 70, 5
	cookie, syn, ip := handshake(t, r, 40040, isn)
	if ip.Src() != lip1 {
		t.Fatalf("SYN from %x, want the local address", ip.Src())
	}
	lport := syn.SrcPort()
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); tcp.Flags() != hdr.TCPFlagACK || tcp.SrcPort() != lport || tcp.Ack() != rsISN+1 {
		t.Fatalf("ACK: flags %#x from %d ack %d", tcp.Flags(), tcp.SrcPort(), tcp.Ack())
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagACK, rsISN+1, isn+1, nil, "hi"))
	r.w.poll()
	if _, ip, tcp := checkTCP(t, one(t, r, 0)); ip.Dst() != clientIP || tcp.Seq() != cookie+1 || string(tcp.Payload()) != "hi" {
		t.Fatalf("server data: to %x seq %d", ip.Dst(), tcp.Seq())
	}
}

// TestSynProxyNoAllocs guards the cookie answer and a proxied NAT
// connection's data path against heap allocations.
func TestSynProxyNoAllocs(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	if a := r.allocsPerBurst(0, 0, func(i int) []byte {
		return tcpSeg(clientMAC, wanMAC, clientIP, uint16(20000+i), vipSP, 80, hdr.TCPFlagSYN, 1, 0, synOpts, "")
	}); a != 0 {
		t.Fatalf("cookie SYN-ACK: %v allocations per burst", a)
	}
	cookie, _, _ := handshake(t, r, 40050, 100)
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40050, hdr.TCPFlagSYN|hdr.TCPFlagACK, 7, 101, nil, ""))
	r.w.poll()
	r.drain(1)
	if a := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40050, hdr.TCPFlagACK, 8, 101, nil, "reply")
	}); a != 0 {
		t.Fatalf("proxied reply: %v allocations per burst", a)
	}
	_ = cookie
}

// TestSynProxyFullNATWithProxyV2: both deltas at once. The held first
// data reaches the server with the PROXY header before it, in the
// server's numbering; the server's acknowledgement of it comes back in
// the client's.
func TestSynProxyFullNATWithProxyV2(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxyPP(t, r, fwd.FullNAT, true)
	const isn, rsISN = 3000, 800000
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40060, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 0)); tcp.MSS() != 1500-40-proxyV2Len {
		t.Fatalf("cookie SYN-ACK MSS %d, want room for the header", tcp.MSS())
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40060, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.w.poll()
	_, _, synack := checkTCP(t, one(t, r, 0))
	cookie := synack.Seq()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40060, vipSP, 80, hdr.TCPFlagACK, isn+1, cookie+1, nil, ""))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40060, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET /"))
	r.w.poll()
	_, _, syn := checkTCP(t, one(t, r, 1)) // the SYN; the data is held
	lport := syn.SrcPort()
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("%d frames after the server's SYN-ACK, want 2", len(out))
	}
	_, _, data := checkTCP(t, out[1])
	if p := data.Payload(); data.Seq() != isn+1 || data.Ack() != rsISN+1 || len(p) != proxyV2Len+5 || string(p[proxyV2Len:]) != "GET /" {
		t.Fatalf("held data: seq %d ack %d payload %q", data.Seq(), data.Ack(), p)
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, lip1, lport, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+1+proxyV2Len+5, nil, "200"))
	r.w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 0))
	if ip.Src() != vipSP || tcp.Seq() != cookie+1 || tcp.Ack() != isn+6 || string(tcp.Payload()) != "200" {
		t.Fatalf("answer: seq %d (cookie+1 %d) ack %d", tcp.Seq(), cookie+1, tcp.Ack())
	}
}

// TestSynProxyReusedPort: the SYN proxy answers a SYN without looking its
// flow up, so a client reusing the ports of a finished connection gets
// its cookie, and its ACK, which finds the old entry, replaces it with
// the new connection. An ACK with no cookie leaves a finished connection
// alone, and a duplicate SYN of a live one gets a cookie and changes
// nothing.
func TestSynProxyReusedPort(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	w := r.w
	const sport, isn = 40020, 5000
	cookie, _, _ := handshake(t, r, sport, isn)
	id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, sport, vipSP, 80)
	if !ok {
		t.Fatal("no entry after the handshake")
	}

	// A duplicate SYN of the live connection: a cookie, the entry kept.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 0)); tcp.Flags() != hdr.TCPFlagSYN|hdr.TCPFlagACK || tcp.Ack() != isn+1 {
		t.Fatalf("duplicate SYN answered with flags %#x ack %d", tcp.Flags(), tcp.Ack())
	}
	if got, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, sport, vipSP, 80); got != id || w.table.Len() != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("after a duplicate SYN: entry %d (was %d), %d entries", got, id, w.table.Len())
	}

	c := w.table.Get(id)
	w.setState(c, conn.StateTimeWait)
	// The old connection's last ACK again: no cookie, the entry stays.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagACK, isn+10, cookie+10, nil, ""))
	w.poll()
	r.drain(1)
	if got, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, sport, vipSP, 80); got != id || w.table.Get(id).State != conn.StateTimeWait {
		t.Fatal("an ACK without a cookie reopened a finished connection")
	}

	// The client opens a new connection on the same ports.
	const isn2 = 900000
	cookie2, _, _ := handshake(t, r, sport, isn2)
	nid, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, sport, vipSP, 80)
	if !ok || w.table.Len() != 1 {
		t.Fatalf("after the reused port's handshake: found %v, %d entries", ok, w.table.Len())
	}
	if x := w.table.Ext(nid); x == nil || x.ServerISN != cookie2 || x.ClientISN != isn2 || x.Flags&extSynPending == 0 {
		t.Fatalf("the new connection's extension %+v, want the second cookie %d pending", x, cookie2)
	}
}
