package lcore

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// BenchmarkNATNewConnectionAtScale is the new-connection path as the perf
// run's nat-new case drives it, without the generator: bursts of 32 SYNs,
// each from a new client address:port, go through parse, the lookup
// stage and processing into a table of 8M entries that holds 4M to 5M
// live connections while they arrive (a fake clock runs at 1M new
// connections per second, SYN timeout 4 s) and the expire job removes
// them as in the worker. ns/conn is per new connection, its expiry
// included; profile it with -cpuprofile.
func BenchmarkNATNewConnectionAtScale(b *testing.B) { newConnectionsAtScale(b, vip) }

// BenchmarkDRNewConnectionAtScale is the same for a VS/DR service (one
// real server): no reply key, the SYN forwarded with a MAC rewrite.
func BenchmarkDRNewConnectionAtScale(b *testing.B) { newConnectionsAtScale(b, vipDR) }

// BenchmarkTUNNewConnectionAtScale is the same for a VS/TUN service: the
// SYN forwarded in an IPIP header.
func BenchmarkTUNNewConnectionAtScale(b *testing.B) { newConnectionsAtScale(b, vipTUN) }

// BenchmarkNATNewConnectionAtScale8 is BenchmarkNATNewConnectionAtScale
// with eight real servers in the service (rr): more than the lookup stage
// prefetches every reply cell of, so only a foretold pick has its cell
// warmed.
func BenchmarkNATNewConnectionAtScale8(b *testing.B) { newConnectionsAtScale(b, vip, 8) }

// newConnectionsAtScale drives SYNs to service to:80 (see
// BenchmarkNATNewConnectionAtScale); the table is filled with
// connections of that service. With servers, the VS/NAT service vip:80
// gets that many real servers first (rr; rs1 and rs2 in turn, each
// server on a port of its own).
func newConnectionsAtScale(b *testing.B, to uint32, servers ...int) {
	w, table := atScale(b, to)
	if len(servers) > 0 {
		old := w.snap
		dests := make([]sched.Dest, servers[0])
		for i := range dests {
			dests[i] = sched.Dest{ID: uint32(i), Addr: []uint32{rs1, rs2}[i%2], Port: uint16(8000 + i), Weight: 1, Fwd: fwd.NAT}
		}
		rr, _ := sched.New("rr", dests, sched.Options{})
		svcs := append([]Service(nil), old.Services...)
		svcs[0] = Service{Key: svcs[0].Key, Scheduler: "rr", Dests: dests, Scheds: []sched.Scheduler{rr}}
		w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)})
		w.runCommands(0)
	}
	frame := tcpFrame(clientMAC, wanMAC, clientIP, 1, to, 80, hdr.TCPFlagSYN, "")
	ms := burstMbufs(b, w, len(frame))
	next, nextExpire := uint32(0), int64(0)
	b.ReportAllocs()
	for b.Loop() {
		w.now += atScalePerBurst
		if w.now >= nextExpire {
			w.runExpire(w.now)
			nextExpire = w.now + int64(expirePeriod)
		}
		ds := w.descs[:atScaleBurst]
		newSYNs(ds, ms, frame, &next)
		w.prefetch(ds)
		w.run(ds, false)
		for p := range w.tx {
			w.tx[p].n, w.tx[p].bytes = 0, 0 // queued, not sent: the mbufs stay ours
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*atScaleBurst), "ns/conn")
	b.ReportMetric(float64(table.Len()), "live")
	if w.cnt.own[NewConns] < uint64(b.N*atScaleBurst) {
		b.Fatalf("%d connections for %d SYNs (drops: table_full %d conn_exists %d)", w.cnt.own[NewConns], b.N*atScaleBurst,
			w.cnt.own[DropTableFull], w.cnt.own[DropConnExists])
	}
}

// BenchmarkNATHandshakeAtScale is the perf run's nat-new case per
// connection, where the cycles go: BenchmarkNATNewConnectionAtScale's
// bursts of 32 SYNs, each followed by a burst of the real servers'
// SYN-ACKs to them (the reply key's lookup, the state change, SNAT). It
// reports ns per connection of the stages as the worker's stage counters
// split them, in the best of the run's chunks of 256 bursts (the least
// disturbed by the rest of a shared machine): syn-lookup (the SYNs'
// lookup stage), syn-process, synack (its lookup stage and processing)
// and expire (the expire job), and their sum, best-ns/conn. Building the
// SYN-ACKs from the new entries is outside the stages.
func BenchmarkNATHandshakeAtScale(b *testing.B) {
	const burst, chunk = atScaleBurst, 256
	w, table := atScale(b, vip)
	syn := tcpFrame(clientMAC, wanMAC, clientIP, 1, vip, 80, hdr.TCPFlagSYN, "")
	synAck := map[uint32][]byte{ // by real server, to be addressed to the client
		rs1: tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 1, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""),
		rs2: tcpFrame(rs2MAC, lanMAC, rs2, 8000, clientIP, 1, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""),
	}
	ms := burstMbufs(b, w, len(syn))
	var stage, chunkStart [4]time.Duration // syn-lookup, syn-process, synack, expire
	var bestSplit [4]time.Duration
	best, bursts := time.Duration(-1), 0
	next, nextExpire := uint32(0), int64(0)
	ds := w.descs[:burst]
	b.ReportAllocs()
	for b.Loop() {
		w.now += atScalePerBurst
		t0 := time.Now()
		if w.now >= nextExpire {
			w.runExpire(w.now)
			nextExpire = w.now + int64(expirePeriod)
		}
		t1 := time.Now()
		newSYNs(ds, ms, syn, &next)
		t2 := time.Now()
		w.prefetch(ds)
		t3 := time.Now()
		w.run(ds, false)
		t4 := time.Now()
		for p := range w.tx {
			w.tx[p].n, w.tx[p].bytes = 0, 0 // queued, not sent: the mbufs stay ours
		}
		for i, m := range ms { // each SYN's SYN-ACK from the server it went to
			k := ds[i].flow
			id, _, ok := table.Lookup(k.proto, k.src, k.sport, k.dst, k.dport)
			if !ok {
				b.Fatalf("SYN %d opened no connection", next)
			}
			c := table.Get(id)
			data := m.Data()
			copy(data, synAck[c.RIP])
			hdr.IPv4(data[hdr.EthernetLen:]).SetDstWithChecksumUpdate(c.ClientIP)
			binary.BigEndian.PutUint16(data[hdr.EthernetLen+22:], c.ClientPort)
			parse(&ds[i], m, 1)
		}
		t5 := time.Now()
		w.prefetch(ds)
		w.run(ds, false)
		t6 := time.Now()
		for p := range w.tx {
			w.tx[p].n, w.tx[p].bytes = 0, 0
		}
		stage[0] += t3.Sub(t2)
		stage[1] += t4.Sub(t3)
		stage[2] += t6.Sub(t5)
		stage[3] += t1.Sub(t0)
		if bursts++; bursts%chunk == 0 {
			var sum time.Duration
			var split [4]time.Duration
			for j := range stage {
				split[j] = stage[j] - chunkStart[j]
				sum += split[j]
			}
			if best < 0 || sum < best {
				best, bestSplit = sum, split
			}
			chunkStart = stage
		}
	}
	if best >= 0 {
		for j, name := range []string{"syn-lookup", "syn-process", "synack", "expire"} {
			b.ReportMetric(float64(bestSplit[j].Nanoseconds())/(chunk*burst), name+"-ns/conn")
		}
		b.ReportMetric(float64(best.Nanoseconds())/(chunk*burst), "best-ns/conn")
	}
	if got := w.cnt.dest[0][DestInPkts] + w.cnt.dest[1][DestInPkts]; got < uint64(bursts*burst) {
		b.Fatalf("%d SYNs forwarded of %d", got, bursts*burst)
	}
	if got := w.cnt.dest[0][DestOutPkts] + w.cnt.dest[1][DestOutPkts]; got < uint64(bursts*burst) {
		b.Fatalf("%d SYN-ACKs forwarded of %d", got, bursts*burst)
	}
}

// The at-scale benchmarks' traffic: bursts of 32 new connections, 1M a
// second on the worker's fake clock, into a table of 8M entries holding
// 4M more that expire evenly over the SYN timeout (4 s).
const (
	atScaleBurst    = 32
	atScaleLive     = 4 << 20
	atScaleTimeout  = 4 * time.Second
	atScalePerBurst = int64(atScaleBurst * time.Second / 1e6)
)

// atScale is a rig's worker with that table, faulted in as a worker's
// loop does, every state's timeout atScaleTimeout, filled with
// connections of service to:80 (VS/DR for any VIP but vip), its clock at 0.
func atScale(b *testing.B, to uint32) (*Worker, *conn.Table) {
	b.Helper()
	w := newRig(b, defaultNeigh()).w
	table, err := conn.New(8 << 20)
	if err != nil {
		b.Fatal(err)
	}
	table.Prefault()
	w.table, w.budget = table, sweepBudget(table.Cap())
	for i := range w.snap.Timeouts.ByState {
		w.snap.Timeouts.ByState[i] = atScaleTimeout
	}
	for i := range atScaleLive { // expiring evenly over the next timeout
		c := conn.Conn{Proto: hdr.ProtoTCP, ClientIP: 0x0A800000 + uint32(i>>8), ClientPort: uint16(1024 + i&0xff),
			VIP: to, VPort: 80, RIP: rs1, RPort: 80, State: conn.StateSynRecv, Expires: int64(i) * int64(atScaleTimeout) / atScaleLive}
		if to != vip {
			c.Flags, c.Fwd = conn.FlagOneWay, fwd.DR
		}
		if _, err = table.Insert(&c); err != nil {
			b.Fatal(err)
		}
	}
	w.now = 0
	return w, table
}

// burstMbufs is a burst of mbufs of n bytes from the worker's pool, freed
// when the benchmark ends.
func burstMbufs(b *testing.B, w *Worker, n int) []*mbuf.Mbuf {
	b.Helper()
	ms := make([]*mbuf.Mbuf, atScaleBurst)
	for i := range ms {
		m, err := mbuf.Alloc(w.cfg.Pool)
		if err != nil {
			b.Fatal(err)
		}
		m.Append(n)
		ms[i] = m
	}
	b.Cleanup(func() {
		for _, m := range ms {
			m.Free()
		}
	})
	return ms
}

// newSYNs rewrites ms as the SYN frame from the next tuples (128 client
// addresses x ports 1024..65535, from *next on) and parses them into ds.
func newSYNs(ds []desc, ms []*mbuf.Mbuf, frame []byte, next *uint32) {
	for i, m := range ms {
		*next++
		n := *next
		data := m.Data()
		copy(data, frame)
		binary.BigEndian.PutUint16(data[hdr.EthernetLen+20:], uint16(1024+n%64512))
		hdr.IPv4(data[hdr.EthernetLen:]).SetSrcWithChecksumUpdate(clientIP&^0xff | (100 + n/64512%128))
		parse(&ds[i], m, 0)
	}
}
