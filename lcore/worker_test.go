package lcore

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

func TestMain(m *testing.M) {
	// A fixed steering key: which worker owns which test flow must not
	// depend on the per-boot key, or a test whose flows must reach both
	// workers would fail on the keys that put them all on one.
	copy(steerKey[:], msKey)
	toeplitz = toeplitzTable(steerKey[:])
	dpdktest.Main(m)
}

// The seeds' VS/NAT example on RFC 5737 addresses: clients on 203.0.113.0/24
// (port 0), real servers on 198.51.100.0/24 (port 1).
var (
	clientIP = ip4(203, 0, 113, 7)
	vip      = ip4(203, 0, 113, 100)
	vipDR    = ip4(203, 0, 113, 101)
	vipTUN   = ip4(203, 0, 113, 102)
	wanAddr  = ip4(203, 0, 113, 1)
	lanAddr  = ip4(198, 51, 100, 1)
	rs1      = ip4(198, 51, 100, 11)
	rs2      = ip4(198, 51, 100, 12)

	wanMAC    = hdr.MAC{0x02, 0, 0, 0, 0, 0x01}
	lanMAC    = hdr.MAC{0x02, 0, 0, 0, 0, 0x02}
	clientMAC = hdr.MAC{0x02, 0, 0, 0, 0, 0x07}
	rs1MAC    = hdr.MAC{0x02, 0, 0, 0, 0, 0x11}
	rs2MAC    = hdr.MAC{0x02, 0, 0, 0, 0, 0x12}
)

func ip4(a, b, c, d byte) uint32 { return binary.BigEndian.Uint32([]byte{a, b, c, d}) }

// rig is a worker between two ring ports: the test writes what the ports
// receive and reads what they send.
type rig struct {
	t      testing.TB
	w      *Worker
	pool   *mempool.Mempool
	rx, tx [2]*ring.Ring
	objs   ring.Objs

	offloadLAN bool // the lan port offloads checksums
}

var rigSeq int

func newRig(t testing.TB, neigh map[uint32]hdr.MAC) *rig {
	return newRigWith(t, neigh, false)
}

func newRigWith(t testing.TB, neigh map[uint32]hdr.MAC, offloadLAN bool) *rig {
	t.Helper()
	dpdktest.Skip(t)
	rigSeq++
	r := &rig{t: t, objs: ring.NewObjs(64), offloadLAN: offloadLAN}
	var err error
	r.pool, err = mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: fmt.Sprint("rig", rigSeq), N: 1023, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	var pqs []PortQueue
	for i := 0; i < 2; i++ {
		if r.rx[i], err = ring.Create(fmt.Sprintf("rig%d-rx%d", rigSeq, i), 256, -1, ring.SingleProducer|ring.SingleConsumer); err != nil {
			t.Fatal(err)
		}
		if r.tx[i], err = ring.Create(fmt.Sprintf("rig%d-tx%d", rigSeq, i), 256, -1, ring.SingleProducer|ring.SingleConsumer); err != nil {
			t.Fatal(err)
		}
		p, err := ethdev.FromRings(fmt.Sprintf("rig%d-p%d", rigSeq, i), []*ring.Ring{r.rx[i]}, []*ring.Ring{r.tx[i]}, -1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Configure(ethdev.Config{RxQueues: 1, TxQueues: 1}); err != nil {
			t.Fatal(err)
		}
		if err := p.RxQueueSetup(0, 256, -1, r.pool); err != nil {
			t.Fatal(err)
		}
		if err := p.TxQueueSetup(0, 256, -1, 0); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		pqs = append(pqs, PortQueue{Port: p})
	}
	dests := []sched.Dest{{ID: 0, Addr: rs1, Port: 80, Weight: 1}, {ID: 1, Addr: rs2, Port: 8000, Weight: 2}}
	rr, _ := sched.New("rr", dests, sched.Options{})
	ftp := []sched.Dest{{ID: 2, Addr: rs2, Port: 21, Weight: 1}}
	rrftp, _ := sched.New("rr", ftp, sched.Options{})
	one := func(key ServiceKey, d sched.Dest) Service {
		s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		return Service{Key: key, Scheduler: "rr", Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{s}}
	}
	snap := NewSnapshot(1, []PortInfo{
		{Name: "wan", MAC: wanMAC, Addr: wanAddr, Net: ip4(203, 0, 113, 0), Mask: 0xFFFFFF00, FacesClients: true, MTU: 1500},
		{Name: "lan", MAC: lanMAC, Addr: lanAddr, Net: ip4(198, 51, 100, 0), Mask: 0xFFFFFF00, MTU: 1500, CsumOffload: r.offloadLAN},
	}, []Service{
		{Key: ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: dests, Scheds: []sched.Scheduler{rr}},
		{Key: ServiceKey{VIP: vip, Port: 21, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: ftp, Scheds: []sched.Scheduler{rrftp}},
		one(ServiceKey{VIP: vip, Port: 53, Proto: hdr.ProtoUDP}, sched.Dest{ID: 3, Addr: rs1, Port: 5353, Weight: 1}),
		one(ServiceKey{VIP: vipDR, Port: 80, Proto: hdr.ProtoTCP}, sched.Dest{ID: 4, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.DR}),
		one(ServiceKey{VIP: vipTUN, Port: 80, Proto: hdr.ProtoTCP}, sched.Dest{ID: 5, Addr: rs2, Port: 80, Weight: 1, Fwd: fwd.TUN}),
		func() Service {
			s := one(ServiceKey{VIP: vip, Port: 8080, Proto: hdr.ProtoTCP}, sched.Dest{ID: 6, Addr: rs1, Port: 8080, Weight: 1})
			s.SloppyTCP = true
			return s
		}(),
		persistentService(),
	}, neigh, conn.DefaultTimeouts())
	r.w, err = NewWorker(Config{ID: 0, CPU: -1, Ports: pqs, Pool: r.pool, Burst: 32, ConnTableSize: 1024, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.drain(0)
		r.drain(1)
		for _, pq := range pqs {
			pq.Port.Stop()
			pq.Port.Close()
		}
		r.w.Free()
		if n := r.pool.InUse(); n != 0 {
			t.Errorf("%d mbufs leaked", n)
		}
		r.pool.Free()
		for i := 0; i < 2; i++ {
			r.rx[i].Free()
			r.tx[i].Free()
		}
		ring.FreeObjs(r.objs)
	})
	return r
}

func defaultNeigh() map[uint32]hdr.MAC {
	return map[uint32]hdr.MAC{clientIP: clientMAC, rs1: rs1MAC, rs2: rs2MAC}
}

// inject puts a frame on a port's RX ring.
func (r *rig) inject(port int, frame []byte) {
	r.t.Helper()
	m, err := mbuf.Alloc(r.pool)
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := m.Append(len(frame))
	if err != nil {
		r.t.Fatal(err)
	}
	copy(b, frame)
	r.objs[0] = m.Pointer()
	if r.rx[port].SPEnqueueBurst(r.objs[:1]) != 1 {
		r.t.Fatal("RX ring full")
	}
}

// sent takes the frames a port transmitted (copies; the mbufs are freed).
func (r *rig) sent(port int) [][]byte {
	var out [][]byte
	for {
		n := r.tx[port].SCDequeueBurst(r.objs)
		if n == 0 {
			return out
		}
		for _, p := range r.objs[:n] {
			m := mbuf.FromPointer(p)
			out = append(out, append([]byte(nil), m.Data()...))
			m.Free()
		}
	}
}

func (r *rig) drain(port int) { r.sent(port) }

// tcpFrame builds an Ethernet/IPv4/TCP frame with valid checksums.
func tcpFrame(srcMAC, dstMAC hdr.MAC, src uint32, sport uint16, dst uint32, dport uint16, flags uint8, payload string) []byte {
	b := make([]byte, 14+20+20+len(payload))
	eth := hdr.Ethernet(b)
	eth.SetDst(dstMAC)
	eth.SetSrc(srcMAC)
	eth.SetEtherType(hdr.EtherTypeIPv4)
	ip := hdr.IPv4(b[14:])
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
	ip[8] = 64
	ip[9] = hdr.ProtoTCP
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], dst)
	binary.BigEndian.PutUint16(ip[10:], ^hdr.Fold(hdr.Checksum(ip[:20], 0)))
	tcp := hdr.TCP(b[34:])
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12] = 5 << 4
	tcp[13] = flags
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], payload)
	binary.BigEndian.PutUint16(tcp[16:], hdr.TransportChecksum(src, dst, hdr.ProtoTCP, tcp))
	return b
}

// checkTCP parses an output frame and verifies both checksums by full recomputation.
func checkTCP(t *testing.T, f []byte) (eth hdr.Ethernet, ip hdr.IPv4, tcp hdr.TCP) {
	t.Helper()
	eth = hdr.Ethernet(f)
	ip = hdr.IPv4(eth.Payload())
	if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
		t.Fatalf("bad IPv4 header in %x", f)
	}
	tcp = hdr.TCP(ip.Payload())
	if got, want := tcp.Checksum(), hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp); got != want {
		t.Fatalf("TCP checksum %#04x, full recomputation gives %#04x", got, want)
	}
	return eth, ip, tcp
}

func TestNATBothDirections(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	// SYN to VIP:80 -> DNAT to rs1:80 (rr's first choice).
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("lan sent %d frames, want 1 (stats %v)", len(out), w.cnt.own)
	}
	eth, ip, tcp := checkTCP(t, out[0])
	if ip.Src() != clientIP || ip.Dst() != rs1 || tcp.SrcPort() != 40000 || tcp.DstPort() != 80 {
		t.Fatalf("DNAT gave %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
	if eth.Src() != lanMAC || eth.Dst() != rs1MAC {
		t.Fatalf("L2 %v -> %v", eth.Src(), eth.Dst())
	}
	// The reply from rs1 -> SNAT back to VIP:80.
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	out = r.sent(0)
	if len(out) != 1 {
		t.Fatalf("wan sent %d frames, want 1", len(out))
	}
	eth, ip, tcp = checkTCP(t, out[0])
	if ip.Src() != vip || tcp.SrcPort() != 80 || ip.Dst() != clientIP || tcp.DstPort() != 40000 {
		t.Fatalf("SNAT gave %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
	if eth.Src() != wanMAC || eth.Dst() != clientMAC {
		t.Fatalf("L2 %v -> %v", eth.Src(), eth.Dst())
	}
	// The client's ACK with data follows the same connection.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagACK, "GET / HTTP/1.0\r\n\r\n"))
	w.poll()
	if out = r.sent(1); len(out) != 1 {
		t.Fatalf("data not forwarded")
	}
	_, ip, _ = checkTCP(t, out[0])
	if ip.Dst() != rs1 {
		t.Fatalf("data went to %x, want rs1", ip.Dst())
	}
	// A second client port goes to rs2:8000 (port mapping as the seeds' example).
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatal("second SYN not forwarded")
	}
	_, ip, tcp = checkTCP(t, out[0])
	if ip.Dst() != rs2 || tcp.DstPort() != 8000 {
		t.Fatalf("second connection went to %x:%d, want rs2:8000", ip.Dst(), tcp.DstPort())
	}
	r.inject(1, tcpFrame(rs2MAC, lanMAC, rs2, 8000, clientIP, 40001, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	out = r.sent(0)
	_, ip, tcp = checkTCP(t, out[0])
	if ip.Src() != vip || tcp.SrcPort() != 80 {
		t.Fatalf("reply from rs2:8000 left as %x:%d, want VIP:80", ip.Src(), tcp.SrcPort())
	}

	w.runPublish(0)
	st := w.Stats()
	if st[NewConns] != 2 || st[Conns] != 2 || st[RxPackets] != 5 || st[TxPackets] != 5 {
		t.Fatalf("stats: new %d conns %d rx %d tx %d", st[NewConns], st[Conns], st[RxPackets], st[TxPackets])
	}
	d0, d1 := w.DestStats(0), w.DestStats(1)
	if d0[DestConns] != 1 || d0[DestInPkts] != 2 || d0[DestOutPkts] != 1 || d1[DestConns] != 1 {
		t.Fatalf("dest stats %v %v", d0, d1)
	}
	// rs1's connection saw SYN, SYN-ACK, ACK: ESTABLISHED (active).
	if d0[DestEstablished] != 1 || d1[DestEstablished] != 0 {
		t.Fatalf("established: rs1 %d rs2 %d", d0[DestEstablished], d1[DestEstablished])
	}
	if d0[DestActive] != 1 || d0[DestInactive] != 0 || d1[DestActive] != 0 || d1[DestInactive] != 1 {
		t.Fatalf("active/inactive: rs1 %d/%d rs2 %d/%d", d0[DestActive], d0[DestInactive], d1[DestActive], d1[DestInactive])
	}
}

func TestDropsAreCountedAndFreed(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	good := tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, "")
	badCsum := append([]byte(nil), good...)
	badCsum[14+10] ^= 0xFF
	frag := tcpFrame(clientMAC, wanMAC, clientIP, 40002, vip, 80, hdr.TCPFlagSYN, "")
	frag[14+6] = 0x20 // MF
	ipv4 := hdr.IPv4(frag[14:])
	binary.BigEndian.PutUint16(ipv4[10:], 0)
	binary.BigEndian.PutUint16(ipv4[10:], ^hdr.Fold(hdr.Checksum(ipv4[:20], 0)))
	lying := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(lying[14+2:], 1500) // total length beyond the frame
	lldp := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(lldp[12:], 0x88CC)
	ipv6 := append([]byte(nil), good...)
	binary.BigEndian.PutUint16(ipv6[12:], 0x86DD)

	for _, tc := range []struct {
		name  string
		port  int
		frame []byte
		why   Stat
	}{
		{"runt", 0, good[:10], DropBadEthernet},
		{"not IP", 0, lldp, DropNotIPv4},
		{"IPv4 header as IPv6", 0, ipv6, DropBadIPv6},
		{"truncated IPv4", 0, good[:14+12], DropBadIPv4},
		{"lying length", 0, lying, DropBadIPv4},
		{"bad IP checksum", 0, badCsum, DropBadIPChecksum},
		{"misaligned fragment", 0, frag, DropBadFragment},
		{"truncated TCP", 0, func() []byte {
			b := append([]byte(nil), good[:14+20+10]...)
			ip := hdr.IPv4(b[14:])
			binary.BigEndian.PutUint16(ip[2:], 30)
			binary.BigEndian.PutUint16(ip[10:], 0)
			binary.BigEndian.PutUint16(ip[10:], ^hdr.Fold(hdr.Checksum(ip[:20], 0)))
			return b
		}(), DropBadL4},
		{"no service on port 81", 0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 81, hdr.TCPFlagSYN, ""), DropNoService},
		{"not a SYN", 0, tcpFrame(clientMAC, wanMAC, clientIP, 40003, vip, 80, hdr.TCPFlagACK, ""), DropNotSYN},
		{"to the LB itself", 0, tcpFrame(clientMAC, wanMAC, clientIP, 40004, wanAddr, 22, hdr.TCPFlagSYN, ""), DropToLocal},
		{"transit", 0, tcpFrame(clientMAC, wanMAC, clientIP, 40005, ip4(8, 8, 8, 8), 80, hdr.TCPFlagSYN, ""), DropNoConn},
		{"unknown reply", 1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 49999, hdr.TCPFlagACK, ""), DropNoConn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.cnt.own[tc.why]
			r.inject(tc.port, tc.frame)
			w.poll()
			if got := w.cnt.own[tc.why] - before; got != 1 {
				t.Fatalf("%s counted %d times, want once", tc.why.Name(), got)
			}
			if n := len(r.sent(0)) + len(r.sent(1)); n != 0 {
				t.Fatalf("a dropped packet was sent (%d frames)", n)
			}
			if n := r.pool.InUse(); n != 0 {
				t.Fatalf("%d mbufs held after the drop", n)
			}
		})
	}
}

func TestARP(t *testing.T) {
	r := newRig(t, map[uint32]hdr.MAC{})
	w := r.w
	arpFrame := func(op uint16, smac hdr.MAC, sip, tip uint32) []byte {
		b := make([]byte, 60)
		eth := hdr.Ethernet(b)
		eth.SetDst(hdr.BroadcastMAC)
		eth.SetSrc(smac)
		eth.SetEtherType(hdr.EtherTypeARP)
		a := hdr.ARP(eth.Payload())
		a.SetRequest(smac, sip, tip)
		if op == hdr.ARPReply {
			a.SetReply(smac, sip, wanMAC, tip)
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		port    int
		target  uint32
		answer  bool
		replyAs hdr.MAC
	}{
		{"VIP on the client side", 0, vip, true, wanMAC},
		{"own address", 0, wanAddr, true, wanMAC},
		{"own lan address", 1, lanAddr, true, lanMAC},
		{"VIP is not answered on the server side", 1, vip, false, hdr.MAC{}},
		{"someone else", 0, ip4(203, 0, 113, 50), false, hdr.MAC{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sip := clientIP
			if tc.port == 1 {
				sip = rs1
			}
			r.inject(tc.port, arpFrame(hdr.ARPRequest, clientMAC, sip, tc.target))
			w.poll()
			out := r.sent(tc.port)
			if !tc.answer {
				if len(out) != 0 {
					t.Fatalf("answered an ARP for %x", tc.target)
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("no ARP reply")
			}
			eth := hdr.Ethernet(out[0])
			a := hdr.ARP(eth.Payload())
			if a.Op() != hdr.ARPReply || a.SenderIP() != tc.target || a.SenderMAC() != tc.replyAs ||
				a.TargetIP() != sip || a.TargetMAC() != clientMAC || eth.Dst() != clientMAC || eth.Src() != tc.replyAs {
				t.Fatalf("bad reply %x", out[0])
			}
			ev, ok := w.Events().Pop()
			if !ok || ev.Kind != EvNeighbour || ev.IP != sip || ev.MAC != clientMAC || ev.Port != tc.port {
				t.Fatalf("learn event %+v %v", ev, ok)
			}
		})
	}
	// A reply to our request is learnt and consumed.
	r.inject(0, arpFrame(hdr.ARPReply, clientMAC, clientIP, wanAddr))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.IP != clientIP {
		t.Fatalf("reply not learnt: %+v", ev)
	}
	// The control plane asks for a resolution: a broadcast request leaves the lan port.
	w.Commands().Push(Command{Kind: CmdARPRequest, Port: 1, IP: rs2})
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("no ARP request sent")
	}
	a := hdr.ARP(hdr.Ethernet(out[0]).Payload())
	if hdr.Ethernet(out[0]).Dst() != hdr.BroadcastMAC || a.Op() != hdr.ARPRequest || a.TargetIP() != rs2 || a.SenderIP() != lanAddr || a.SenderMAC() != lanMAC {
		t.Fatalf("bad request %x", out[0])
	}
	// Without a neighbour entry the packet is dropped and a miss reported.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	if w.cnt.own[DropNoNeighbour] != 1 {
		t.Fatalf("no_neighbour = %d", w.cnt.own[DropNoNeighbour])
	}
	if ev, ok := w.Events().Pop(); !ok || ev.Kind != EvNeighbourMiss || ev.IP != rs1 || ev.Port != 1 {
		t.Fatalf("miss event %+v", ev)
	}
}
