package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withOnePacket adds a one-packet UDP service on key to rs1 and rs2 (ids
// 30 and 31, on the service's port), forwarded by method.
func withOnePacket(t *testing.T, r *rig, key ServiceKey, method fwd.Method) {
	t.Helper()
	d := []sched.Dest{{ID: 30, Addr: rs1, Port: key.Port, Weight: 1, Fwd: method}, {ID: 31, Addr: rs2, Port: key.Port, Weight: 1, Fwd: method}}
	if key.IsIPv6() {
		d[0].Addr, d[0].Addr6, d[1].Addr, d[1].Addr6 = 0, rs61, 0, rs62
	}
	r.addService(Service{Key: key, Dests: d, OnePacket: true})
}

// addService adds svc to r's snapshot, scheduled by rr over its Dests.
func (r *rig) addService(svc Service) {
	r.t.Helper()
	old := r.w.snap
	rr, err := sched.New("rr", svc.Dests, sched.Options{})
	if err != nil {
		r.t.Fatal(err)
	}
	svc.Scheduler, svc.Scheds, svc.PersistMask = "rr", []sched.Scheduler{rr}, ^uint32(0)
	svcs := append(append([]Service(nil), old.Services...), svc)
	snap := NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)
	snap.Neigh6 = old.Neigh6
	r.w.snap = snap
	r.w.learnVIPs(snap)
}

// TestOnePacketScheduling: datagrams of one client socket to a one-packet
// service are each scheduled (rr alternates the servers), sent by DR
// unchanged but for the MACs, and leave no connection; each counts as a
// connection of its server.
func TestOnePacketScheduling(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withOnePacket(t, r, ServiceKey{VIP: vipDR, Port: 53, Proto: hdr.ProtoUDP}, fwd.DR)
	got := map[hdr.MAC]int{}
	for i := range 6 {
		r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 53, "query", true))
		w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("datagram %d not forwarded (stats %v)", i, w.cnt.own)
		}
		eth := hdr.Ethernet(out[0])
		ip := hdr.IPv4(eth.Payload())
		if ip.Dst() != vipDR || ip.Src() != clientIP {
			t.Fatalf("DR changed the addresses: %x -> %x", ip.Src(), ip.Dst())
		}
		got[eth.Dst()]++
		if n := w.table.Len(); n != 0 {
			t.Fatalf("after datagram %d the table holds %d connections, want none", i, n)
		}
	}
	if got[rs1MAC] != 3 || got[rs2MAC] != 3 {
		t.Fatalf("datagrams per server MAC %v, want 3 and 3 (each scheduled)", got)
	}
	w.runPublish(0)
	if w.cnt.own[NewConns] < 6 || w.cnt.dest[30][DestInPkts] != 3 || w.cnt.dest[31][DestInPkts] != 3 {
		t.Fatalf("new connections %d, packets per server %d/%d", w.cnt.own[NewConns], w.cnt.dest[30][DestInPkts], w.cnt.dest[31][DestInPkts])
	}
}

// TestOnePacketScheduling6: the same over IPv6, by TUN.
func TestOnePacketScheduling6(t *testing.T) {
	r := rigSvc6(t)
	withOnePacket(t, r, ServiceKey{VIP6: vip6TUN, Port: 53, Proto: hdr.ProtoUDP}, fwd.TUN)
	got := map[hdr.Addr6]int{}
	for i := range 4 {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 40000, vip6TUN, 53, 0, "query"))
		r.w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("datagram %d not forwarded (drops %v)", i, dropsOf(r.w))
		}
		outer := hdr.IPv6(hdr.Ethernet(out[0]).Payload())
		if outer.NextHeader() != hdr.ProtoIPv6 || hdr.IPv6(outer.Payload()).Dst() != vip6TUN {
			t.Fatalf("datagram %d: not tunnelled to the VIP: %x", i, out[0])
		}
		got[outer.Dst()]++
		if n := r.w.table.Len(); n != 0 {
			t.Fatalf("after datagram %d the table holds %d connections", i, n)
		}
	}
	if got[rs61] != 2 || got[rs62] != 2 {
		t.Fatalf("datagrams per server %v, want 2 and 2", got)
	}
}

// TestOnePacketPathDoesNotAllocate: one-packet datagrams allocate nothing.
func TestOnePacketPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withOnePacket(t, r, ServiceKey{VIP: vipDR, Port: 53, Proto: hdr.ProtoUDP}, fwd.DR)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return udpFrame(clientMAC, wanMAC, clientIP, 40000, vipDR, 53, "query", true)
	})
	if allocs != 0 {
		t.Fatalf("the one-packet path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 || r.w.table.Len() != 0 {
		t.Fatalf("%d connections made, %d left", r.w.cnt.own[NewConns], r.w.table.Len())
	}
}

// TestOnePacketFragments: a datagram in fragments to a one-packet service
// reaches one server whole (its later fragments follow the first's
// connection), and the connection ends with its last fragment; one whose
// fragments never all come ends when its fragment entry expires.
func TestOnePacketFragments(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withOnePacket(t, r, ServiceKey{VIP: vipDR, Port: 53, Proto: hdr.ProtoUDP}, fwd.DR)
	frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41001, vipDR, 53, 4000, 11), 1500)
	for _, f := range frags {
		r.inject(0, f)
	}
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("lan sent %d fragments, want 3 (stats %v)", len(out), w.cnt.own)
	}
	for _, f := range out {
		if hdr.Ethernet(f).Dst() != rs1MAC {
			t.Fatal("a fragment did not go to rs1's MAC, the first one's server")
		}
	}
	checkReassembledUDP(t, out, clientIP, 41001, vipDR, 53, 4000)
	if n := w.table.Len(); n != 0 {
		t.Fatalf("%d connections left after the datagram's last fragment", n)
	}
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 41001, vipDR, 53, "query", true))
	w.poll()
	if out := r.sent(1); len(out) != 1 || hdr.Ethernet(out[0]).Dst() != rs2MAC {
		t.Fatal("the next datagram was not scheduled anew (rr: rs2)")
	}

	// The first fragment alone: its connection waits for the rest, and
	// ends when the datagram's fragment entry expires.
	first := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41002, vipDR, 53, 4000, 12), 1500)[0]
	r.inject(0, first)
	w.poll()
	if out := r.sent(1); len(out) != 1 || w.table.Len() != 1 {
		t.Fatalf("first fragment: sent %d, %d connections", len(out), w.table.Len())
	}
	w.now += w.frags.timeout + 1
	w.sweepFrags(len(w.frags.entries))
	if n := w.table.Len(); n != 0 {
		t.Fatalf("%d connections left after the datagram's fragments expired", n)
	}
}
