package lcore

import (
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/ring"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withMultiFullNAT gives both of the multi-rig's workers withFullNAT's
// service (vipFN:80 -> rs1:8081 from lip1, PROXY v2).
func withMultiFullNAT(t *testing.T, r *multiRig) {
	t.Helper()
	d := sched.Dest{ID: 9, Addr: rs1, Port: 8081, Weight: 1, Fwd: fwd.FullNAT}
	var scheds []sched.Scheduler
	for range r.w {
		s, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
		scheds = append(scheds, s)
	}
	svc := Service{Key: ServiceKey{VIP: vipFN, Port: 80, Proto: hdr.ProtoTCP}, Scheduler: "rr", ProxyProtocol: true,
		Dests: []sched.Dest{d}, Scheds: scheds, LocalAddrs: []uint32{lip1}}
	old := r.w[0].snap
	snap := NewSnapshot(old.Gen+1, old.Ports, append(append([]Service(nil), old.Services...), svc), old.Neigh, old.Timeouts)
	for _, w := range r.w {
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
		w.runCommands(0)
		if w.AckedGen() != snap.Gen {
			t.Fatal("a worker did not take the FullNAT snapshot")
		}
	}
}

// steeredRecord is fullNATRecord from a client port that worker a owns
// and a local port the other worker owns, as a peer with another worker
// count or steering key would send it.
func steeredRecord(t *testing.T, a int, seqOut uint32) SyncConn {
	t.Helper()
	rec := fullNATRecord(0, seqOut)
	for p := uint16(40100); Owner(clientIP, p, 2) != a; p++ {
		rec.ClientPort = p + 1
	}
	for p := uint16(lportMin); rec.Ext.LPort == 0; p++ {
		if Owner(lip1, p, 2) != a {
			rec.Ext.LPort = p
		}
	}
	return rec
}

// TestSteeringEntry: a synced FullNAT connection whose local port the
// other worker owns goes on: its worker installs it without the port,
// the port's owner holds a steering entry (not a connection: not counted
// nor listed) that hands it the server's packets, which leave translated
// to the client, datagrams in fragments too; a later record renews the
// entry, which gives the port back when it ends.
func TestSteeringEntry(t *testing.T) {
	r := newMultiRig(t, false)
	withMultiFullNAT(t, r)
	const a, b = 0, 1
	const seqOut = 4444
	rec := steeredRecord(t, a, seqOut)
	if got := install(t, r.w[a], rec); got.Installed != 1 || got.LocalPort != 0 {
		t.Fatalf("the connection's worker: batch %+v", got)
	}
	steer := rec
	steer.Steer, steer.SteerTo = true, a
	if got := install(t, r.w[b], steer); got.Installed != 0 || got.LocalPort+got.Conflict+got.Invalid != 0 {
		t.Fatalf("the port's owner: batch %+v", got)
	}
	pool := r.w[b].lpools[lip1]
	if r.w[b].steers != 1 || !bit(&pool.used, rec.Ext.LPort) || r.w[b].cnt.own[Conns] != 0 {
		t.Fatalf("port owner: %d steering entries, port held %v, %d connections counted",
			r.w[b].steers, bit(&pool.used, rec.Ext.LPort), r.w[b].cnt.own[Conns])
	}
	req := &DumpRequest{Out: make([]ConnInfo, 0, 4)}
	r.w[b].dump = req
	for !req.Done() {
		r.w[b].runDump()
	}
	if len(req.Out) != 0 {
		t.Fatalf("the port's owner lists %+v", req.Out)
	}

	// The server's data arrives on the port owner's queue: it leaves from
	// the connection's worker, VIP -> client, in the client's numbering.
	r.inject(1, b, tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, rec.Ext.LPort, hdr.TCPFlagACK|hdr.TCPFlagPSH, 1001, 7001+proxyV2Len+10, nil, "OK"))
	r.pollBoth()
	out := r.take(0, a)
	if len(out) != 1 || len(r.take(0, b)) != 0 {
		t.Fatalf("%d frames from the connection's worker, want 1 (counters %v / %v)", len(out), r.w[a].cnt.own, r.w[b].cnt.own)
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != vipFN || ip.Dst() != clientIP || tcp.DstPort() != rec.ClientPort || tcp.Seq() != 1001+seqOut {
		t.Fatalf("reply %x -> %x:%d seq %d", ip.Src(), ip.Dst(), tcp.DstPort(), tcp.Seq())
	}
	if r.w[b].cnt.own[Steered] != 1 {
		t.Fatalf("steered %d, want 1", r.w[b].cnt.own[Steered])
	}
	// The client's side leaves from the connection's worker, from the
	// local endpoint it had.
	r.inject(0, a, tcpSeg(clientMAC, wanMAC, clientIP, rec.ClientPort, vipFN, 80, hdr.TCPFlagACK, 7011, 1003+seqOut, nil, ""))
	r.pollBoth()
	if out = r.take(1, a); len(out) != 1 {
		t.Fatalf("%d client segments sent, want 1", len(out))
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != lip1 || tcp.SrcPort() != rec.Ext.LPort || ip.Dst() != rs1 {
		t.Fatalf("client segment %x:%d -> %x", ip.Src(), tcp.SrcPort(), ip.Dst())
	}

	// The server's datagrams in fragments, whichever worker is their home
	// and whatever queues and order they arrive in: every fragment leaves
	// from the connection's worker, translated.
	homes := [2]int{}
	for id := uint16(1); id <= 24; id++ {
		whole := tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, rec.Ext.LPort, hdr.TCPFlagACK, 1003, 7011+proxyV2Len, nil, strings.Repeat("x", 60))
		hdr.IPv4(whole[hdr.EthernetLen:]).SetID(id)
		frags := fragmentFrame(whole, hdr.IPv4MinLen+32) // three
		order := []int{0, 1, 2}
		switch id % 3 {
		case 1: // a later fragment overtakes the first
			order = []int{1, 0, 2}
		case 2: // the middle one comes once the others went (and came back)
			order = []int{0, 2, -1, 1}
		}
		for i, j := range order {
			if j < 0 {
				for range 3 {
					r.pollBoth()
				}
				continue
			}
			r.inject(1, (int(id)/2+i)%2, frags[j])
		}
		homes[r.w[a].fragHome(fragKey{src: rs1, dst: lip1, id: uint32(id), proto: hdr.ProtoTCP})]++
		for range 3 {
			r.pollBoth()
		}
		out := r.take(0, a)
		if len(out) != len(frags) || len(r.take(0, b)) != 0 {
			t.Fatalf("datagram %d: %d of %d fragments sent by the connection's worker (counters %v / %v)", id, len(out), len(frags), r.w[a].cnt.own, r.w[b].cnt.own)
		}
		if src, dst, payload := reassemble(t, out); src != vipFN || dst != clientIP || len(payload) != 80 {
			t.Fatalf("datagram %d: %x -> %x, %d bytes", id, src, dst, len(payload))
		}
	}
	if homes[a] == 0 || homes[b] == 0 {
		t.Fatalf("the datagrams' homes %v: both workers must be one", homes)
	}

	// The record again (sync's refresh): the entry is renewed, not doubled.
	if got := install(t, r.w[b], steer); got.LocalPort+got.Conflict+got.Invalid != 0 || r.w[b].steers != 1 {
		t.Fatalf("renewal: batch %+v, %d entries", got, r.w[b].steers)
	}
	// A steering entry for another worker's connection on the same key
	// is refused.
	other := steer
	other.SteerTo = 5
	if got := install(t, r.w[b], other); got.Invalid != 1 {
		t.Fatalf("a steering entry to no worker: batch %+v", got)
	}

	// Both end: the port goes back to its owner's pool.
	for _, w := range r.w {
		w.table.Expire(w.now+int64(time.Hour), w.table.Cap(), w.expire)
	}
	if r.w[b].steers != 0 || r.w[b].table.Len() != 0 || bit(&pool.used, rec.Ext.LPort) {
		t.Fatalf("after expiry: %d steering entries, %d entries, port held %v", r.w[b].steers, r.w[b].table.Len(), bit(&pool.used, rec.Ext.LPort))
	}
	if r.w[a].table.Len() != 0 {
		t.Fatalf("the connection's worker still holds %d entries", r.w[a].table.Len())
	}
}

// TestSteeringEntryDoesNotAllocate: the server's packets a steering entry
// hands on, and their translation on the connection's worker, allocate
// nothing on the Go heap.
func TestSteeringEntryDoesNotAllocate(t *testing.T) {
	r := newMultiRig(t, false)
	withMultiFullNAT(t, r)
	const a, b = 0, 1
	rec := steeredRecord(t, a, 0)
	install(t, r.w[a], rec)
	steer := rec
	steer.Steer, steer.SteerTo = true, a
	install(t, r.w[b], steer)
	frame := tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, rec.Ext.LPort, hdr.TCPFlagACK, 1001, 7001+proxyV2Len, nil, "")
	var frames []*mbuf.Mbuf
	for range 150 {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			t.Fatal(err)
		}
		buf, _ := m.Append(len(frame))
		copy(buf, frame)
		frames = append(frames, m)
	}
	objs, out := ring.NewObjs(1), ring.NewObjs(8)
	defer ring.FreeObjs(objs)
	defer ring.FreeObjs(out)
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		objs[0] = frames[i].Pointer()
		i++
		r.rx[1][b].SPEnqueueBurst(objs)
		r.w[b].poll()
		r.w[a].poll()
		n := r.tx[0][a].SCDequeueBurst(out)
		for _, p := range out[:n] {
			mbuf.FromPointer(p).Free()
		}
	})
	if allocs != 0 {
		t.Fatalf("steered packets allocate %.1f times per burst", allocs)
	}
	if r.w[b].cnt.own[Steered] < 100 || r.w[a].cnt.own[TxPackets] < 100 {
		t.Fatalf("steered %d, sent %d", r.w[b].cnt.own[Steered], r.w[a].cnt.own[TxPackets])
	}
	for _, m := range frames[i:] {
		m.Free()
	}
}
