package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// cookieFor runs a client's SYN through the proxy and returns the cookie.
func cookieFor(t *testing.T, r *rig, sport uint16, isn uint32) uint32 {
	t.Helper()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagSYN, isn, 0, synOpts, ""))
	r.w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 0))
	return tcp.Seq()
}

// TestSynProxyCookieACKWithData: the client's first bytes on the very ACK
// that proves the cookie are held, the SYN to the server built apart, and
// the bytes reach the server right after the handshake, in its numbering;
// without a spare mbuf the ACK still becomes the SYN, the data deferred
// to the client's retransmission (counted).
func TestSynProxyCookieACKWithData(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	w := r.w
	w.refillSynSpares()
	if w.nspare != synSpares {
		t.Fatalf("%d spares, want %d", w.nspare, synSpares)
	}
	const isn, rsISN = 3000, 8000
	cookie := cookieFor(t, r, 40060, isn)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40060, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET /"))
	w.poll()
	_, ip, tcp := checkTCP(t, one(t, r, 1))
	if tcp.Flags() != hdr.TCPFlagSYN || tcp.Seq() != isn || len(tcp.Payload()) != 0 || ip.Dst() != rs1 || hdr.Ethernet(ip).Dst() == (hdr.MAC{}) {
		t.Fatalf("SYN to the server: flags %#x seq %d, %d bytes", tcp.Flags(), tcp.Seq(), len(tcp.Payload()))
	}
	if w.cnt.own[SynProxyHeld] != 1 || w.nspare != synSpares-1 {
		t.Fatalf("synproxy_held %d, %d spares", w.cnt.own[SynProxyHeld], w.nspare)
	}
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 40060, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, nil, ""))
	w.poll()
	out := r.sent(1)
	if len(out) != 2 {
		t.Fatalf("after the server's SYN-ACK: %d frames, want our ACK and the held data (drops %v)", len(out), dropsOf(w))
	}
	if _, _, tcp = checkTCP(t, out[0]); len(tcp.Payload()) != 0 || tcp.Ack() != rsISN+1 {
		t.Fatalf("first: %d bytes ack %d, want our bare ACK", len(tcp.Payload()), tcp.Ack())
	}
	if _, _, tcp = checkTCP(t, out[1]); string(tcp.Payload()) != "GET /" || tcp.Seq() != isn+1 || tcp.Ack() != rsISN+1 {
		t.Fatalf("held data: %q seq %d ack %d", tcp.Payload(), tcp.Seq(), tcp.Ack())
	}
	w.refillSynSpares()
	if w.nspare != synSpares {
		t.Fatalf("refill: %d spares", w.nspare)
	}

	// No spare: the ACK leaves as the SYN and the data is deferred.
	w.freeSynSpares()
	cookie = cookieFor(t, r, 40061, isn)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40061, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+1, nil, "GET /"))
	w.poll()
	if _, _, tcp = checkTCP(t, one(t, r, 1)); tcp.Flags() != hdr.TCPFlagSYN || len(tcp.Payload()) != 0 {
		t.Fatalf("SYN: flags %#x, %d bytes", tcp.Flags(), len(tcp.Payload()))
	}
	if w.cnt.own[SynProxyDeferred] != 1 {
		t.Fatalf("synproxy_deferred %d, want 1", w.cnt.own[SynProxyDeferred])
	}
	// A snapshot without the SYN proxy gives the spares back.
	w.refillSynSpares()
	w.snap = NewSnapshot(w.snap.Gen+1, w.snap.Ports, nil, w.snap.Neigh, w.snap.Timeouts)
	w.refillSynSpares()
	if w.nspare != 0 {
		t.Fatalf("%d spares kept without a SYN proxy", w.nspare)
	}
}

// TestSynProxyCookieDataNoAllocs guards the cookie ACK with data against
// heap allocations: held (while spares last) and deferred.
func TestSynProxyCookieDataNoAllocs(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	r.w.refillSynSpares()
	cookies := make([]uint32, 200)
	for i := range cookies {
		cookies[i] = cookieFor(t, r, uint16(30000+i), 5)
	}
	if a := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpSeg(clientMAC, wanMAC, clientIP, uint16(30000+i), vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, 6, cookies[i]+1, nil, "x")
	}); a != 0 {
		t.Fatalf("cookie ACK with data: %v allocations per burst", a)
	}
	if r.w.cnt.own[SynProxyHeld] != synSpares || r.w.cnt.own[SynProxyDeferred] == 0 {
		t.Fatalf("synproxy_held %d, synproxy_deferred %d", r.w.cnt.own[SynProxyHeld], r.w.cnt.own[SynProxyDeferred])
	}
}
