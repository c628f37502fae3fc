package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// Ownership that never moves under a connection: which worker holds a
// connection is a function of its packets alone, so no snapshot (a
// persistent service added, a DR-only service given a NAT server, a
// reload) strands an established connection.

// service2 is a service with one scheduler per worker of a two-worker rig.
func service2(key ServiceKey, dests ...sched.Dest) Service {
	s := Service{Key: key, Scheduler: "rr", Dests: dests}
	for i := 0; i < 2; i++ {
		sc, _ := sched.New("rr", dests, sched.Options{})
		s.Scheds = append(s.Scheds, sc)
	}
	return s
}

// apply hands both workers a snapshot of these services on the rig's ports.
func (r *multiRig) apply(ports []PortInfo, svcs ...Service) {
	old := r.w[0].snap
	if ports == nil {
		ports = old.Ports
	}
	next := NewSnapshot(old.Gen+1, ports, svcs, old.Neigh, old.Timeouts)
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
		w.runCommands(0)
	}
}

// sentAll takes what both queues of a port sent.
func (r *multiRig) sentAll(port int) [][]byte { return append(r.take(port, 0), r.take(port, 1)...) }

// stream is one client connection through the rig: its packets arrive on
// fixed queues (a NIC's RSS keeps a flow on one), the client's on cq and
// the server's on sq.
type stream struct {
	vip    uint32
	port   uint16
	cq, sq int
	rs     uint32
	nat    bool
}

// open sends the SYN (and for NAT the server's SYN-ACK) and the client's ACK.
func (r *multiRig) open(t *testing.T, s *stream) {
	t.Helper()
	r.inject(0, s.cq, tcpFrame(clientMAC, wanMAC, clientIP, s.port, s.vip, 80, hdr.TCPFlagSYN, ""))
	r.pollBoth()
	out := r.sentAll(1)
	if len(out) != 1 {
		t.Fatalf("port %d: SYN not forwarded", s.port)
	}
	eth, ip, _ := checkTCP(t, out[0])
	s.rs = ip.Dst()
	if !s.nat {
		s.rs = map[hdr.MAC]uint32{rs1MAC: rs1, rs2MAC: rs2}[eth.Dst()]
		return
	}
	r.inject(1, s.sq, tcpFrame(rs1MAC, lanMAC, s.rs, 80, clientIP, s.port, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	r.pollBoth()
	if len(r.sentAll(0)) != 1 {
		t.Fatalf("port %d: SYN-ACK not forwarded", s.port)
	}
	r.inject(0, s.cq, tcpFrame(clientMAC, wanMAC, clientIP, s.port, s.vip, 80, hdr.TCPFlagACK, ""))
	r.pollBoth()
	r.sentAll(1)
}

// alive sends data both ways and reports whether it got through to the
// same real server (and back, for NAT).
func (r *multiRig) alive(t *testing.T, s *stream) bool {
	t.Helper()
	r.inject(0, s.cq, tcpFrame(clientMAC, wanMAC, clientIP, s.port, s.vip, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, "data"))
	r.pollBoth()
	out := r.sentAll(1)
	if len(out) != 1 {
		return false
	}
	if eth, ip, _ := checkTCP(t, out[0]); (s.nat && ip.Dst() != s.rs) || (!s.nat && eth.Dst() != map[uint32]hdr.MAC{rs1: rs1MAC, rs2: rs2MAC}[s.rs]) {
		return false
	}
	if !s.nat {
		return true
	}
	r.inject(1, s.sq, tcpFrame(rs1MAC, lanMAC, s.rs, 80, clientIP, s.port, hdr.TCPFlagACK|hdr.TCPFlagPSH, "reply"))
	r.pollBoth()
	return len(r.sentAll(0)) == 1
}

// TestOwnershipSurvivesEdits: 40 streams (NAT and DR, on every mix of
// queues) keep working through a series of snapshots that used to move
// their owner: a persistent service added, a DR-only service given a NAT
// server, the persistence netmask changed, a reload; and removing their
// service lets them drain on the worker that holds them.
func TestOwnershipSurvivesEdits(t *testing.T) {
	for _, aligned := range []bool{false, true} {
		name := "any queues"
		if aligned {
			name = "both directions on one queue, as an aligned NIC gives them"
		}
		t.Run(name, func(t *testing.T) {
			r := newMultiRig(t, false)
			ports := r.w[0].snap.Ports
			nat := service2(ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP},
				sched.Dest{ID: 0, Addr: rs1, Port: 80, Weight: 1}, sched.Dest{ID: 1, Addr: rs2, Port: 80, Weight: 1})
			drOnly := service2(ServiceKey{VIP: vipDR, Port: 80, Proto: hdr.ProtoTCP},
				sched.Dest{ID: 2, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.DR}, sched.Dest{ID: 3, Addr: rs2, Port: 80, Weight: 1, Fwd: fwd.DR})
			r.apply(ports, nat, drOnly)
			var streams []*stream
			for p := uint16(0); p < 40; p++ {
				s := &stream{vip: vip, port: 45000 + p, cq: int(p) % 2, sq: int(p/2) % 2, nat: true}
				if p%4 == 3 {
					s.vip, s.nat = vipDR, false
				}
				if aligned {
					s.sq = s.cq // the NIC gives both directions the same queue
				}
				r.open(t, s)
				streams = append(streams, s)
			}
			persistent := service2(ServiceKey{VIP: vip, Port: 443, Proto: hdr.ProtoTCP}, sched.Dest{ID: 4, Addr: rs1, Port: 443, Weight: 1})
			persistent.Persistence, persistent.PersistMask = int64(time.Minute), 0xFFFFFF00
			wider := persistent
			wider.PersistMask = 0xFFFF0000
			mixed := drOnly
			mixed.Dests = append(append([]sched.Dest(nil), drOnly.Dests...), sched.Dest{ID: 5, Addr: rs2, Port: 8080, Weight: 1})
			mixed = service2(mixed.Key, mixed.Dests...)
			for _, edit := range []struct {
				name string
				svcs []Service
			}{
				{"a persistent service added", []Service{nat, drOnly, persistent}},
				{"its netmask widened", []Service{nat, drOnly, wider}},
				{"a NAT server added to the DR-only service", []Service{nat, mixed, wider}},
				{"the persistent service removed", []Service{nat, mixed}},
				{"reload", []Service{nat, drOnly}},
				{"the NAT service removed: its connections drain", []Service{drOnly}},
			} {
				r.apply(ports, edit.svcs...)
				broken := 0
				for _, s := range streams {
					if !r.alive(t, s) {
						broken++
					}
				}
				if broken > 0 {
					t.Errorf("%s: %d of %d streams broke (drops w0 not_syn %d no_conn %d, w1 not_syn %d no_conn %d)", edit.name, broken, len(streams),
						r.w[0].cnt.own[DropNotSYN], r.w[0].cnt.own[DropNoConn], r.w[1].cnt.own[DropNotSYN], r.w[1].cnt.own[DropNoConn])
				}
			}
		})
	}
}

// TestPersistenceSharedAcrossWorkers: a persistent service with a /24
// netmask keeps the whole client network on one real server whichever
// worker sees its connections, even when the workers' schedulers would
// choose differently.
func TestPersistenceSharedAcrossWorkers(t *testing.T) {
	r := newMultiRig(t, false)
	p := service2(ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP},
		sched.Dest{ID: 0, Addr: rs1, Port: 80, Weight: 1}, sched.Dest{ID: 1, Addr: rs2, Port: 80, Weight: 1})
	p.Persistence, p.PersistMask = int64(time.Minute), 0xFFFFFF00
	r.apply(nil, p)
	// Worker 1's scheduler has moved on (another network took rs1 there).
	idx := p.Scheds[1].Schedule(&sched.Flow{}, r.w[1].cnt)
	if p.Dests[idx].Addr != rs1 {
		t.Fatal("rr did not start at rs1")
	}
	var first uint32
	for i := 0; i < 24; i++ {
		client := ip4(203, 0, 113, byte(7+i%3))
		port := uint16(46000 + i)
		r.inject(0, i%2, tcpFrame(clientMAC, wanMAC, client, port, vip, 80, hdr.TCPFlagSYN, ""))
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 1 {
			t.Fatalf("connection %d not forwarded", i)
		}
		_, ip, _ := checkTCP(t, out[0])
		if first == 0 {
			first = ip.Dst()
		} else if ip.Dst() != first {
			t.Fatalf("connection %d from %x went to %x, the network's first went to %x", i, client, ip.Dst(), first)
		}
	}
	if n := r.w[0].cnt.own[Templates] + r.w[1].cnt.own[Templates]; n != 1 {
		t.Fatalf("%d templates made for one client network", n)
	}
	if r.w[0].cnt.own[NewConns] == 0 || r.w[1].cnt.own[NewConns] == 0 {
		t.Fatal("the network's connections all landed on one worker: the test shows nothing")
	}
}

// TestICMPErrorsReachTheOwner: an ICMP error about a connection reaches
// the worker that holds it, whatever queue it arrives on (a NIC hashes an
// error on the router's address, not the connection's), for NAT, DR and
// TUN, from either side.
func TestICMPErrorsReachTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	router := ip4(203, 0, 113, 254)
	r.apply(nil,
		service2(ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP}, sched.Dest{ID: 0, Addr: rs1, Port: 8080, Weight: 1}),
		service2(ServiceKey{VIP: vipDR, Port: 80, Proto: hdr.ProtoTCP}, sched.Dest{ID: 1, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.DR}),
		service2(ServiceKey{VIP: vipTUN, Port: 80, Proto: hdr.ProtoTCP}, sched.Dest{ID: 2, Addr: rs2, Port: 80, Weight: 1, Fwd: fwd.TUN}))
	errors := 0
	for _, tc := range []struct {
		name string
		vip  uint32
	}{{"NAT", vip}, {"DR", vipDR}, {"TUN", vipTUN}} {
		for port := uint16(47000); port < 47008; port++ {
			owner := Owner(clientIP, port, 2)
			r.inject(0, owner, tcpFrame(clientMAC, wanMAC, clientIP, port, tc.vip, 80, hdr.TCPFlagSYN, ""))
			r.pollBoth()
			if len(r.sentAll(1)) != 1 {
				t.Fatalf("%s port %d: SYN not forwarded", tc.name, port)
			}
			// A router on the client's side cannot deliver what the
			// balancer (NAT) or the real server (DR, TUN) sent the client
			// from VIP:80; the error arrives on the other worker's queue.
			reply := tcpFrame(wanMAC, clientMAC, tc.vip, 80, clientIP, port, hdr.TCPFlagSYN|hdr.TCPFlagACK, "")
			r.inject(0, 1-owner, icmpErrorFrame(clientMAC, wanMAC, router, tc.vip, hdr.ICMPDestUnreachable, 1, reply))
			r.pollBoth()
			out := r.take(1, owner)
			if len(out) != 1 {
				t.Fatalf("%s port %d: the error did not leave its owner %d towards the server (stats %v / %v)",
					tc.name, port, owner, r.w[owner].cnt.own, r.w[1-owner].cnt.own)
			}
			errors++
		}
	}
	if got := r.w[0].cnt.own[ICMPErrors] + r.w[1].cnt.own[ICMPErrors]; got != uint64(errors) {
		t.Fatalf("icmp_errors %d, want %d", got, errors)
	}
	// From the server's side: rs1 cannot deliver to the client what the
	// balancer sent it (NAT); the error arrives anywhere and reaches the
	// client from the VIP.
	for port := uint16(47000); port < 47008; port++ {
		owner := Owner(clientIP, port, 2)
		toRS := tcpFrame(lanMAC, rs1MAC, clientIP, port, rs1, 8080, hdr.TCPFlagSYN, "")
		r.inject(1, 1-owner, icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, toRS))
		r.pollBoth()
		out := r.take(0, owner)
		if len(out) != 1 {
			t.Fatalf("port %d: the server's error did not reach the client through the owner %d", port, owner)
		}
		if ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload()); ip.Src() != vip || ip.Dst() != clientIP {
			t.Fatalf("port %d: error left as %x -> %x", port, ip.Src(), ip.Dst())
		}
	}
}

// TestPersistenceConcurrently: both workers on their own threads make
// connections of two client networks at once; each network ends on one
// real server (the race detector watches the shared template table).
func TestPersistenceConcurrently(t *testing.T) {
	r := newMultiRig(t, false)
	p := service2(ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP},
		sched.Dest{ID: 0, Addr: rs1, Port: 80, Weight: 1}, sched.Dest{ID: 1, Addr: rs2, Port: 80, Weight: 1})
	p.Persistence, p.PersistMask = int64(time.Minute), 0xFFFFFF00
	r.apply(nil, p)
	for _, w := range r.w {
		w.cfg.IdleSleep = 10 * time.Microsecond
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	const n = 200
	got := map[uint32]map[uint32]int{} // client network -> real server -> connections
	collect := func() {
		for _, f := range r.sentAll(1) {
			ip := hdr.IPv4(hdr.Ethernet(f).Payload())
			cnet := ip.Src() & 0xFFFFFF00
			if got[cnet] == nil {
				got[cnet] = map[uint32]int{}
			}
			got[cnet][ip.Dst()]++
		}
	}
	for i := 0; i < n; i++ {
		client := ip4(203, 0, byte(113+i%2), byte(1+i%50))
		r.inject(0, (i/2)%2, tcpFrame(clientMAC, wanMAC, client, uint16(48000+i), vip, 80, hdr.TCPFlagSYN, ""))
		if i%16 == 0 {
			collect()
		}
	}
	total := func() (s int) {
		for _, m := range got {
			for _, c := range m {
				s += c
			}
		}
		return s
	}
	for deadline := time.Now().Add(5 * time.Second); total() < n && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		collect()
	}
	for _, w := range r.w {
		w.Stop()
	}
	collect()
	if total() != n {
		t.Fatalf("%d of %d connections forwarded", total(), n)
	}
	for cnet, m := range got {
		if len(m) != 1 {
			t.Errorf("network %x went to %d servers: %v", cnet, len(m), m)
		}
	}
}
