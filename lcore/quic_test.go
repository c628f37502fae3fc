package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withQUIC adds a QUIC UDP service on key to rs1 and rs2 (ids 40 and 41,
// port 443, rs2 at weight w2), forwarded by method.
func withQUIC(t *testing.T, r *rig, key ServiceKey, method fwd.Method, w2 int32) {
	t.Helper()
	d := []sched.Dest{{ID: 40, Addr: rs1, Port: 443, Weight: 1, Fwd: method}, {ID: 41, Addr: rs2, Port: 443, Weight: w2, Fwd: method}}
	if key.IsIPv6() {
		d[0].Addr, d[0].Addr6, d[1].Addr, d[1].Addr6 = 0, rs61, 0, rs62
	}
	r.addService(Service{Key: key, Dests: d, QUIC: true})
}

// quicShort is a 1-RTT packet to the connection ID naming addr's last n
// bytes (and port, if not 0).
func quicShort(t *testing.T, addr []byte, n int, port uint16) string {
	t.Helper()
	cid, ok := hdr.AppendQUICCID([]byte{0x41}, 16, addr, n, port, bytes.Repeat([]byte{0x9e}, 20))
	if !ok {
		t.Fatal("AppendQUICCID refused")
	}
	return string(append(cid, 0x17, 0x2a, 0x00, 0x01))
}

// TestQUICMigration: new flows (another client port each, as after a
// NAT rebinding) of a QUIC service go to the server their connection ID
// names, even a quiescent one, whatever rr would choose; an ID that
// names no server of the service, or no QUIC at all, is scheduled.
func TestQUICMigration(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withQUIC(t, r, ServiceKey{VIP: vipDR, Port: 443, Proto: hdr.ProtoUDP}, fwd.DR, 0) // rs2 quiescent; its MAC says where a datagram went
	var b1, b2 [4]byte
	binary.BigEndian.PutUint32(b1[:], rs1)
	binary.BigEndian.PutUint32(b2[:], rs2)
	send := func(sport uint16, payload string) hdr.MAC {
		t.Helper()
		r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, sport, vipDR, 443, payload, true))
		w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("datagram from port %d not forwarded (drops %v)", sport, dropsOf(w))
		}
		return hdr.Ethernet(out[0]).Dst()
	}
	for i := range 6 {
		sport := uint16(41000 + i)
		if got := send(sport, quicShort(t, b2[:], 1+i%4, 0)); got != rs2MAC {
			t.Fatalf("flow %d names rs2 (last %d bytes): went to %v", i, 1+i%4, got)
		}
	}
	if got := send(42000, quicShort(t, b2[:], 4, 443)); got != rs2MAC {
		t.Fatalf("a flow naming rs2:443 went to %v", got)
	}
	if got := send(42001, quicShort(t, b1[:], 2, 0)); got != rs1MAC {
		t.Fatalf("a flow naming rs1 went to %v", got)
	}
	// Scheduled: rr over rs1 alone (rs2 has weight 0).
	other := []byte{203, 0, 113, 9}
	for i, p := range []string{quicShort(t, other, 4, 0), quicShort(t, b2[:], 4, 8443), "not quic"} {
		if got := send(uint16(43000+i), p); got != rs1MAC {
			t.Fatalf("scheduled flow %d went to %v, want rs1 (rs2 quiescent)", i, got)
		}
	}
	// A flow that has a connection keeps it: its later packets, whatever
	// their ID, go where the first went.
	if got := send(41000, quicShort(t, b1[:], 4, 0)); got != rs2MAC {
		t.Fatalf("a known flow went to %v, want its connection's rs2", got)
	}
}

// TestQUICMigration6: the same for an IPv6 service (by TUN), the ID
// naming the last 8 bytes of rs62.
func TestQUICMigration6(t *testing.T) {
	r := rigSvc6(t)
	withQUIC(t, r, ServiceKey{VIP6: vip6TUN, Port: 443, Proto: hdr.ProtoUDP}, fwd.TUN, 1) // the tunnel's destination says where
	for i := range 4 {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, uint16(41000+i), vip6TUN, 443, 0, quicShort(t, rs62[:], 8, 0)))
		r.w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("datagram %d not forwarded (drops %v)", i, dropsOf(r.w))
		}
		if dst := hdr.IPv6(hdr.Ethernet(out[0]).Payload()).Dst(); dst != rs62 {
			t.Fatalf("flow %d naming rs62 went to %x", i, dst)
		}
	}
}

// TestQUICPathDoesNotAllocate: new QUIC flows, each read for the server
// its connection ID names, allocate nothing.
func TestQUICPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withQUIC(t, r, ServiceKey{VIP: vipDR, Port: 443, Proto: hdr.ProtoUDP}, fwd.DR, 1)
	var b2 [4]byte
	binary.BigEndian.PutUint32(b2[:], rs2)
	payload := quicShort(t, b2[:], 3, 0)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return udpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vipDR, 443, payload, true)
	})
	if allocs != 0 {
		t.Fatalf("the QUIC path allocates %.1f times per burst", allocs)
	}
	if n := r.w.cnt.dest[41][DestConns]; n < 100 {
		t.Fatalf("rs2 got %d new connections, want every one (the ID names it)", n)
	}
}
