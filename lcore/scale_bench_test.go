package lcore

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// BenchmarkNATFlowScale is the perf run's flow-scale target (nat-1M over
// nat) for lbd's own work, without the driver and the generator, whose
// share of a perf step moves with the host: two workers, one whose
// table holds 1k established VS/NAT connections and one with 1M (each
// table of 2M entries, as the perf run's), take turns with the same
// traffic as the perf run's: a burst of 32 client segments of
// consecutive flows (lbgen's order), then the 32 servers' ACKs to them,
// each through the lookup stage and processing. It reports ns per packet
// of each and their ratio, 1k-flow time over 1M-flow time (the perf
// run's target reads rates: 0.8 or more).
func BenchmarkNATFlowScale(b *testing.B) {
	small := newFlowScaleRig(b, 1000)
	large := newFlowScaleRig(b, 1<<20)
	var tSmall, tLarge time.Duration
	b.ReportAllocs()
	for b.Loop() {
		tSmall += small.round()
		tLarge += large.round()
	}
	pkts := float64(b.N * 2 * atScaleBurst)
	b.ReportMetric(float64(tSmall.Nanoseconds())/pkts, "ns/pkt-1k")
	b.ReportMetric(float64(tLarge.Nanoseconds())/pkts, "ns/pkt-1M")
	if tLarge > 0 {
		b.ReportMetric(float64(tSmall)/float64(tLarge), "x-1k")
	}
	for _, r := range []*flowScaleRig{small, large} {
		if got := r.w.cnt.dest[0][DestOutPkts] + r.w.cnt.dest[1][DestOutPkts]; got < uint64(b.N*atScaleBurst) {
			b.Fatalf("%d flows: %d replies forwarded of %d", r.flows, got, b.N*atScaleBurst)
		}
	}
}

// flowScaleRig is a worker whose table holds flows established VS/NAT
// connections to vip:80, and the next flow its bursts send.
type flowScaleRig struct {
	w            *Worker
	flows, next  int
	ms           []*mbuf.Mbuf
	data, answer []byte // a client's segment and rs1's ACK, readdressed per flow
}

// flowScaleClient is flow i's client address and port: 64 512 ports per
// address from clientIP's /24's .100 on, as the perf run's 1M flows use
// 16 addresses.
func flowScaleClient(i int) (uint32, uint16) {
	return clientIP&^0xff | uint32(100+i/64512), uint16(1024 + i%64512)
}

func newFlowScaleRig(b *testing.B, flows int) *flowScaleRig {
	b.Helper()
	neigh := defaultNeigh()
	for i := 0; i < flows; i += 64512 {
		a, _ := flowScaleClient(i)
		neigh[a] = clientMAC
	}
	w := newRig(b, neigh).w
	table, err := conn.New(2 << 20)
	if err != nil {
		b.Fatal(err)
	}
	table.Prefault()
	w.table, w.budget = table, sweepBudget(table.Cap())
	w.now = int64(time.Second)
	for i := range flows {
		a, p := flowScaleClient(i)
		c := conn.Conn{Proto: hdr.ProtoTCP, ClientIP: a, ClientPort: p, VIP: vip, VPort: 80, RIP: rs1, RPort: 80,
			State: conn.StateEstablished, Expires: int64(time.Hour)}
		if _, err := table.Insert(&c); err != nil {
			b.Fatal(err)
		}
	}
	r := &flowScaleRig{w: w, flows: flows,
		data:   tcpFrame(clientMAC, wanMAC, clientIP, 1, vip, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, ""),
		answer: tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 1, hdr.TCPFlagACK, "")}
	r.ms = burstMbufs(b, w, len(r.data))
	return r
}

// round sends a burst of client segments of the next flows, then their
// server's ACKs, and returns the time the worker took for both (building
// the frames is outside it).
func (r *flowScaleRig) round() time.Duration {
	w, ds := r.w, r.w.descs[:atScaleBurst]
	first := r.next
	r.build(ds, first, r.data, false)
	t0 := time.Now()
	w.prefetch(ds)
	w.run(ds, false)
	spent := time.Since(t0)
	r.flush()
	r.build(ds, first, r.answer, true)
	t0 = time.Now()
	w.prefetch(ds)
	w.run(ds, false)
	spent += time.Since(t0)
	r.flush()
	r.next = (first + atScaleBurst) % r.flows
	return spent
}

// build writes frame, addressed to or from flow first+i, into the burst's
// mbufs and parses them: from the client to the VIP, or (toClient) from
// the real server to the client.
func (r *flowScaleRig) build(ds []desc, first int, frame []byte, toClient bool) {
	for i, m := range r.ms {
		a, p := flowScaleClient((first + i) % r.flows)
		data := m.Data()
		copy(data, frame)
		ip := hdr.IPv4(data[hdr.EthernetLen:])
		in := 0
		if toClient {
			ip.SetDstWithChecksumUpdate(a)
			binary.BigEndian.PutUint16(data[hdr.EthernetLen+22:], p)
			in = 1
		} else {
			ip.SetSrcWithChecksumUpdate(a)
			binary.BigEndian.PutUint16(data[hdr.EthernetLen+20:], p)
		}
		parse(&ds[i], m, in)
	}
}

// flush forgets the burst's queued frames: the mbufs stay the rig's.
func (r *flowScaleRig) flush() {
	for p := range r.w.tx {
		r.w.tx[p].n, r.w.tx[p].bytes = 0, 0
	}
}
