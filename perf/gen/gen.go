// Package gen is dplb's traffic generator: a DPDK process with two ports
// that plays many TCP or UDP clients on one side of a load balancer and its
// real servers on the other. The client side sends flows to a VIP at a
// fixed or maximal rate; the server side answers what the load balancer
// forwards to it (SYN-ACK, ACK or echo, FIN-ACK) so the balancer sees both
// directions; both sides answer ARP for their address ranges. Every packet
// carries a sequence number and its send time, so each step of a run
// reports the received rate, loss and latency percentiles (one way, client
// to server, and the round trip) of what was sent after a warm-up.
//
// One goroutine, locked to the EAL main lcore's thread, does everything:
// the per-packet work is done on mbuf memory with burst arrays in C memory,
// one cgo call per burst and no allocation per packet.
package gen

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
	"github.com/dplb/dplb/lcore/hdr"
)

// Config describes a generator. The EAL must be initialised by the caller
// with both devices (--vdev or -a) and the calling thread locked.
type Config struct {
	ClientDev, ServerDev string // DPDK device strings (vdev or PCI address)

	Clients     Range     // client addresses; the client side answers ARP for them
	ClientPorts [2]uint16 // first and last client port
	VIP         uint32
	VPort       uint16
	Servers     Range // addresses the server side answers ARP for (the real servers)

	// Resolve learns the balancer's MAC by ARP for the VIP from every client
	// address (which also fills the balancer's neighbour table) and, when
	// LBServerAddr is set, asks the balancer's server-side address from every
	// server address. Without it frames go to DstMAC (a loop or a plain
	// forwarder).
	Resolve      bool
	LBServerAddr uint32
	DstMAC       hdr.MAC

	Flows    int
	Pattern  Pattern
	Size     int // frame size without FCS
	Reply    ReplyMode
	Burst    int
	OpenRate float64 // SYNs per second when opening established flows

	// Queues is the number of RX and TX queues on each port (0 = 1): as
	// many as the balancer's workers, so that memif connects them all.
	// The client side sends each flow on one queue, the server side
	// answers on the queue a packet arrived on.
	Queues int
	// AlignOwner puts each flow on the queue of the worker that owns its
	// client endpoint; else flow k goes to queue k mod Queues. Ownership
	// is keyed: with SteeringKey (lbd's dataplane.steering_key) every flow
	// arrives at its owner; without it, at the owner under this process's
	// own random key, which is not lbd's, so lbd hands (Queues-1)/Queues
	// of them over.
	AlignOwner bool
	// SteeringKey is lbd's configured steering key (40 bytes), or nil.
	SteeringKey []byte
	// Six makes the flows IPv6 (nil: IPv4): Clients and Servers are the
	// low 32 bits of addresses in its networks, VIP and LBServerAddr are
	// unused (Six has them), and neighbour discovery replaces ARP.
	Six *Six
	// OneWay: the balancer forwards with VS/DR or VS/TUN, whose replies do
	// not pass through it; the server side counts what arrives (IPIP
	// unwrapped) and answers nothing, not even SYNs.
	OneWay bool
}

// Step is one measurement at one offered load.
type Step struct {
	Rate     float64 // packets per second offered by the client side; 0 = as fast as possible
	Warmup   time.Duration
	Duration time.Duration
	Drain    time.Duration // wait for packets in flight after sending stops
}

// Latency is a latency distribution, in microseconds.
type Latency struct {
	Samples uint64  `json:"samples"`
	P50     float64 `json:"p50_us"`
	P99     float64 `json:"p99_us"`
	P999    float64 `json:"p999_us"`
	Mean    float64 `json:"mean_us"`
	Max     float64 `json:"max_us"`
}

// Result is what one step measured after its warm-up.
type Result struct {
	Pattern    string  `json:"pattern"`
	Flows      int     `json:"flows"`
	FrameSize  int     `json:"frame_size"`
	OfferedPPS float64 `json:"offered_pps"` // the rate asked for; 0 = max
	Seconds    float64 `json:"seconds"`
	Sent       uint64  `json:"sent"`        // accepted by the client port's TX
	TxDropped  uint64  `json:"tx_dropped"`  // built but refused by the TX queue (generator-side)
	ServerRx   uint64  `json:"server_rx"`   // arrived at the server side
	ClientRx   uint64  `json:"client_rx"`   // replies arrived back at the client side
	SentPPS    float64 `json:"sent_pps"`    // Sent / Seconds
	ServerPPS  float64 `json:"server_pps"`  // ServerRx / Seconds
	ClientPPS  float64 `json:"client_pps"`  // ClientRx / Seconds
	Loss       float64 `json:"loss"`        // 1 - ServerRx/Sent
	ReplyLoss  float64 `json:"reply_loss"`  // 1 - ClientRx/(replies the server side sent)
	RepliesOut uint64  `json:"replies_out"` // replies the server side sent
	OneWay     Latency `json:"one_way"`     // client TX -> server RX, through the balancer
	RoundTrip  Latency `json:"round_trip"`  // client TX -> server -> client RX
}

// Counters are totals since the generator opened.
type Counters struct {
	Sent, TxDropped, AllocFailed         uint64
	ServerRx, ServerOther, ServerReplies uint64
	ServerReplyDropped, ClientRx         uint64
	ClientOther, SynAcks, ARPAnswered    uint64
	ARPReplies, ServerSyns, ServerIPIP   uint64
}

type port struct {
	id  ethdev.Port
	mac hdr.MAC
}

// Gen is an open generator.
type Gen struct {
	cfg     Config
	pool    *mempool.Mempool
	cli     port
	srv     port
	b       *Builder
	tx      *mbuf.Array // client TX burst
	rx      *mbuf.Array
	out     *mbuf.Array
	drop    *mbuf.Array
	spare   *mbuf.Array // received frames recycled for the next client burst
	nspare  int
	base    time.Time
	stop    atomic.Bool
	lbMAC   hdr.MAC
	lbSrvOK bool
	lbCliOK bool

	seq    uint32
	nq     uint16
	txq    uint16     // queue of the next client burst
	qflows [][]uint32 // flow indexes per queue (nil: queue 0 has all, in order)
	qcur   []int      // per queue: position in its flows (x3 for syn-data-fin)
	newK   uint64     // SYN pattern: next tuple of the whole client space
	c      Counters

	// measurement window
	measuring bool
	winSeq    uint32
	win       struct{ sent, txDrop, srvRx, cliRx, replies uint64 }
	oneWay    Hist
	roundTrip Hist
}

const (
	poolSize  = 32767
	poolCache = 256
	ringSize  = 1024
)

// Open sets up both ports and the packet pool.
func Open(cfg Config) (_ *Gen, err error) {
	if cfg.Burst <= 0 || cfg.Burst > 512 {
		return nil, fmt.Errorf("burst %d: want 1..512", cfg.Burst)
	}
	if cfg.Flows <= 0 {
		return nil, fmt.Errorf("flows %d: want > 0", cfg.Flows)
	}
	if cfg.ClientPorts[0] == 0 || cfg.ClientPorts[1] < cfg.ClientPorts[0] {
		return nil, fmt.Errorf("client ports %d-%d: want 1 <= first <= last", cfg.ClientPorts[0], cfg.ClientPorts[1])
	}
	if cfg.Clients.Last < cfg.Clients.First || cfg.Servers.Last < cfg.Servers.First {
		return nil, errors.New("address ranges must have first <= last")
	}
	if max := cfg.Clients.Len() * (int(cfg.ClientPorts[1]-cfg.ClientPorts[0]) + 1); cfg.Flows > max {
		return nil, fmt.Errorf("flows %d: the client addresses and ports give only %d 5-tuples", cfg.Flows, max)
	}
	if cfg.OpenRate <= 0 {
		cfg.OpenRate = 200e3
	}
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if cfg.Queues > 64 {
		return nil, fmt.Errorf("queues %d: want 1..64", cfg.Queues)
	}
	g := &Gen{cfg: cfg, base: time.Now(), nq: uint16(cfg.Queues)}
	g.qcur = make([]int, cfg.Queues)
	if cfg.Queues > 1 {
		if g.qflows, err = FlowQueues(&cfg); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	g.pool, err = mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: "lbgen", N: poolSize, Cache: poolCache, Socket: -1})
	if err != nil {
		return nil, fmt.Errorf("packet pool: %w", err)
	}
	for _, a := range []**mbuf.Array{&g.tx, &g.rx, &g.out, &g.drop} {
		*a = mbuf.NewArray(cfg.Burst)
	}
	g.spare = mbuf.NewArray(2 * cfg.Burst)
	if g.cli, err = g.openPort(cfg.ClientDev); err != nil {
		return nil, fmt.Errorf("client port: %w", err)
	}
	if g.srv, err = g.openPort(cfg.ServerDev); err != nil {
		return nil, fmt.Errorf("server port: %w", err)
	}
	return g, nil
}

func (g *Gen) openPort(dev string) (port, error) {
	name, _, _ := strings.Cut(dev, ",")
	id, err := ethdev.ByName(name)
	if err != nil {
		return port{}, fmt.Errorf("%s: %w", name, err)
	}
	if err := id.Configure(ethdev.Config{RxQueues: g.nq, TxQueues: g.nq}); err != nil {
		return port{}, fmt.Errorf("%s: %w", name, err)
	}
	info, err := id.Info()
	if err != nil {
		return port{}, fmt.Errorf("%s: %w", name, err)
	}
	for q := uint16(0); q < g.nq; q++ {
		if err := id.RxQueueSetup(q, ringSize, info.SocketID, g.pool); err != nil {
			return port{}, fmt.Errorf("%s: queue %d: %w", name, q, err)
		}
		if err := id.TxQueueSetup(q, ringSize, info.SocketID, 0); err != nil {
			return port{}, fmt.Errorf("%s: queue %d: %w", name, q, err)
		}
	}
	if err := id.Start(); err != nil {
		return port{}, fmt.Errorf("%s: %w", name, err)
	}
	mac, err := id.MACAddr()
	if err != nil {
		id.Stop()
		return port{}, fmt.Errorf("%s: %w", name, err)
	}
	return port{id: id, mac: hdr.MAC(mac)}, nil
}

// Close stops and closes the ports and frees the pool; it reports mbufs
// still in use (a leak) as an error.
func (g *Gen) Close() error {
	for _, p := range []*port{&g.cli, &g.srv} {
		if p.mac.IsZero() {
			continue
		}
		p.id.Stop()
		p.id.Close()
		p.mac = hdr.MAC{}
	}
	if g.spare != nil {
		mbuf.FreeBulk(g.spare.Pkt[:g.nspare])
		g.nspare = 0
	}
	for _, a := range []*mbuf.Array{g.tx, g.rx, g.out, g.drop, g.spare} {
		if a != nil {
			a.Free()
		}
	}
	g.tx, g.rx, g.out, g.drop, g.spare = nil, nil, nil, nil, nil
	var err error
	if g.pool != nil {
		if n := g.pool.InUse(); n != 0 {
			err = fmt.Errorf("%d mbufs still in use at exit", n)
		} else {
			g.pool.Free()
		}
		g.pool = nil
	}
	return err
}

// Stop makes a running Setup or Step return early (from another goroutine).
func (g *Gen) Stop() { g.stop.Store(true) }

// Counters returns the totals so far.
func (g *Gen) Counters() Counters { return g.c }

// LBMAC is the balancer's client-side MAC learnt by ARP.
func (g *Gen) LBMAC() hdr.MAC { return g.lbMAC }

func (g *Gen) now() int64 { return int64(time.Since(g.base)) }

// ErrStopped is returned when Stop interrupted the generator.
var ErrStopped = errors.New("generator stopped")

// Setup waits for both links, resolves the balancer when configured, and
// opens the flows of the Established pattern (a SYN each, counting the
// SYN-ACKs that come back).
func (g *Gen) Setup(timeout time.Duration) (synAcks uint64, err error) {
	deadline := g.now() + int64(timeout)
	for _, p := range []port{g.cli, g.srv} {
		for {
			if l, _ := p.id.Link(); l.Up {
				break
			}
			if g.now() > deadline {
				return 0, fmt.Errorf("port %d: link down after %v (is the peer running?)", p.id, timeout)
			}
			if g.stop.Load() {
				return 0, ErrStopped
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	dst := g.cfg.DstMAC
	if g.cfg.Resolve {
		next := int64(0)
		for !g.lbCliOK || (g.hasLBServer() && !g.lbSrvOK) {
			now := g.now()
			if now > deadline {
				return 0, fmt.Errorf("no ARP or NA reply from the balancer for %s within %v", g.vipString(), timeout)
			}
			if g.stop.Load() {
				return 0, ErrStopped
			}
			if now >= next {
				g.solicit(false)
				if g.hasLBServer() {
					g.solicit(true)
				}
				next = now + int64(200*time.Millisecond)
			}
			g.poll()
		}
		dst = g.lbMAC
		// Let the balancer publish its neighbour table before traffic.
		g.idle(300 * time.Millisecond)
	}
	proto := uint8(hdr.ProtoTCP)
	if g.cfg.Pattern == UDP {
		proto = hdr.ProtoUDP
	}
	if six := g.cfg.Six; six != nil {
		g.b, err = NewBuilder6(proto, g.cfg.Size, g.cli.mac, dst, six.ClientNet, six.VIP, g.cfg.VPort)
	} else {
		g.b, err = NewBuilder(proto, g.cfg.Size, g.cli.mac, dst, g.cfg.VIP, g.cfg.VPort)
	}
	if err != nil {
		return 0, err
	}
	if g.cfg.Pattern != Established {
		return 0, nil
	}
	// Open every flow: one SYN each, paced, queue by queue.
	start, opened := g.now(), 0
	for q := 0; q < int(g.nq); q++ {
		n := g.queueFlows(q)
		for done := 0; done < n; {
			if g.stop.Load() {
				return 0, ErrStopped
			}
			now := g.now()
			due := int(float64(now-start)*g.cfg.OpenRate/1e9) - opened
			due = min(due, g.cfg.Burst, n-done)
			if due > 0 {
				// SYNs the TX queue refused are sent again: a flow
				// without its SYN would have no connection in the balancer.
				sent := g.sendBurstQ(uint16(q), due, now, hdr.TCPFlagSYN)
				g.qcur[q] = (g.qcur[q] - (due - sent) + n) % n
				opened += sent
				done += sent
			}
			g.poll()
		}
	}
	answered := func() uint64 {
		if g.cfg.OneWay {
			return g.c.ServerSyns
		}
		return g.c.SynAcks
	}
	end := g.now() + int64(2*time.Second)
	for answered() < uint64(g.cfg.Flows) && g.now() < end && !g.stop.Load() {
		g.poll()
	}
	clear(g.qcur)
	return answered(), nil
}

// queueFlows is the number of flows queue q sends.
func (g *Gen) queueFlows(q int) int {
	if g.qflows == nil {
		return g.cfg.Flows
	}
	return len(g.qflows[q])
}

// idle polls both ports for d (answering ARP and stray packets).
func (g *Gen) idle(d time.Duration) {
	end := g.now() + int64(d)
	for now := g.now(); now < end && !g.stop.Load(); now = g.now() {
		g.poll()
	}
}

// hasLBServer reports whether the balancer's server-side address is set.
func (g *Gen) hasLBServer() bool {
	if g.cfg.Six != nil {
		return !g.cfg.Six.LBServerAddr.IsUnspecified()
	}
	return g.cfg.LBServerAddr != 0
}

func (g *Gen) vipString() string {
	if g.cfg.Six != nil {
		return g.cfg.Six.VIP.String()
	}
	return ipString(g.cfg.VIP)
}

// solicit asks the balancer for the VIP from every client address (or,
// server side, for its server-side address from every server address),
// by ARP or, for IPv6, neighbour solicitation, a burst at a time (at most
// 4096 addresses).
func (g *Gen) solicit(server bool) {
	p, r, target := g.cli, g.cfg.Clients, g.cfg.VIP
	if server {
		p, r, target = g.srv, g.cfg.Servers, g.cfg.LBServerAddr
	}
	six := g.cfg.Six
	var net *Net6
	var target6 hdr.Addr6
	if six != nil {
		net, target6 = &six.ClientNet, six.VIP
		if server {
			net, target6 = &six.ServerNet, six.LBServerAddr
		}
	}
	n := min(r.Len(), 4096)
	for i := 0; i < n; {
		k := min(g.cfg.Burst, n-i)
		pk := g.out.Pkt[:k]
		if !allocBulk(g.pool, pk) {
			g.c.AllocFailed++
			return
		}
		for j, m := range pk {
			src := r.First + uint32(i+j)
			if six != nil {
				_ = m.SetLen(ndFrame)
				NSRequest(m.Data(), p.mac, net.Addr(src), target6)
				continue
			}
			_ = m.SetLen(MinFrame)
			ARPRequest(m.Data(), p.mac, src, target)
		}
		p.id.TxBurstOrFree(0, pk)
		i += k
	}
}

// Step runs one offered load and returns what was measured.
func (g *Gen) Step(s Step) (Result, error) {
	if g.b == nil {
		return Result{}, errors.New("Step before Setup")
	}
	g.oneWay.Reset()
	g.roundTrip.Reset()
	g.win = struct{ sent, txDrop, srvRx, cliRx, replies uint64 }{}
	start := g.now()
	warmEnd := start + int64(s.Warmup)
	end := warmEnd + int64(s.Duration)
	drainEnd := end + int64(s.Drain)
	var offered int64
	for {
		if g.stop.Load() {
			g.measuring = false
			return Result{}, ErrStopped
		}
		now := g.now()
		if now >= drainEnd {
			break
		}
		if !g.measuring && now >= warmEnd && now < end {
			g.measuring = true
			g.winSeq = g.seq
		}
		if now < end {
			due := int64(g.cfg.Burst)
			if s.Rate > 0 {
				due = min(due, int64(float64(now-start)*s.Rate/1e9)-offered)
			}
			if due > 0 {
				g.sendBurst(int(due), now, 0)
				offered += due
			}
		}
		g.poll()
	}
	g.measuring = false
	secs := s.Duration.Seconds()
	r := Result{
		Pattern: g.cfg.Pattern.String(), Flows: g.cfg.Flows, FrameSize: g.cfg.Size,
		OfferedPPS: s.Rate, Seconds: secs,
		Sent: g.win.sent, TxDropped: g.win.txDrop, ServerRx: g.win.srvRx, ClientRx: g.win.cliRx,
		RepliesOut: g.win.replies,
		SentPPS:    float64(g.win.sent) / secs, ServerPPS: float64(g.win.srvRx) / secs,
		ClientPPS: float64(g.win.cliRx) / secs,
		OneWay:    latency(&g.oneWay), RoundTrip: latency(&g.roundTrip),
	}
	if r.Sent > 0 {
		r.Loss = 1 - float64(r.ServerRx)/float64(r.Sent)
	}
	if r.RepliesOut > 0 {
		r.ReplyLoss = 1 - float64(r.ClientRx)/float64(r.RepliesOut)
	}
	return r, nil
}

func latency(h *Hist) Latency {
	us := func(ns uint64) float64 { return float64(ns) / 1e3 }
	return Latency{
		Samples: h.Count(), P50: us(h.Quantile(0.5)), P99: us(h.Quantile(0.99)),
		P999: us(h.Quantile(0.999)), Mean: h.Mean() / 1e3, Max: us(h.Max()),
	}
}

// ipString formats a big-endian IPv4 address.
func ipString(a uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&0xff, a>>8&0xff, a&0xff)
}
