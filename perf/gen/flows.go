package gen

import (
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// The per-packet side: which flow sends next, bursts out, and what the
// two ports receive.

// tuple is the client address and port of flow (or tuple) k.
func (g *Gen) tuple(k uint64) (src uint32, sport uint16) { return flowTuple(&g.cfg, k) }

func flowTuple(c *Config, k uint64) (src uint32, sport uint16) {
	n := uint64(c.Clients.Len())
	return c.Clients.First + uint32(k%n), c.ClientPorts[0] + uint16(k/n)
}

// FlowQueues spreads the flows over the queues (see Config.AlignOwner):
// the flow numbers of each queue.
func FlowQueues(cfg *Config) ([][]uint32, error) {
	owner, owner6 := lcore.Owner, lcore.Owner6
	if cfg.AlignOwner && cfg.SteeringKey != nil {
		s, err := lcore.NewSteering(cfg.SteeringKey)
		if err != nil {
			return nil, err
		}
		owner, owner6 = s.Owner, s.Owner6
	}
	if six := cfg.Six; six != nil {
		// The owner of an IPv6 flow is keyed on its whole client address.
		owner = func(src uint32, sport uint16, n int) int {
			a := six.ClientNet.Addr(src)
			return owner6(&a, sport, n)
		}
	}
	qflows := make([][]uint32, max(cfg.Queues, 1))
	for k := 0; k < cfg.Flows; k++ {
		q := k % len(qflows)
		if cfg.AlignOwner {
			src, sport := flowTuple(cfg, uint64(k))
			q = owner(src, sport, len(qflows))
		}
		qflows[q] = append(qflows[q], uint32(k))
	}
	return qflows, nil
}

// next picks the flow and flags of the next packet on queue q (flags 0:
// the pattern's data).
func (g *Gen) next(q uint16, flags uint8) (src uint32, sport uint16, fl uint8) {
	c := &g.cfg
	if c.Pattern == SYN && flags == 0 {
		// Every packet a new connection: the whole client address x port
		// space in turn.
		src, sport = g.tuple(g.newK)
		g.newK++
		if g.newK >= g.tuples() {
			g.newK = 0
		}
		return src, sport, hdr.TCPFlagSYN
	}
	k := g.qcur[q]
	fl = flags
	mult := 1
	if fl == 0 {
		switch c.Pattern {
		case Connect:
			switch k % 3 {
			case 0:
				fl = hdr.TCPFlagSYN
			case 1:
				fl = hdr.TCPFlagACK | hdr.TCPFlagPSH
			default:
				fl = hdr.TCPFlagFIN | hdr.TCPFlagACK
			}
			k /= 3
			mult = 3
		default:
			fl = hdr.TCPFlagACK | hdr.TCPFlagPSH
		}
	}
	g.qcur[q]++
	if g.qcur[q] >= g.queueFlows(int(q))*mult {
		g.qcur[q] = 0
	}
	if g.qflows != nil {
		k = int(g.qflows[q][k])
	}
	src, sport = g.tuple(uint64(k))
	return src, sport, fl
}

// unsendNew gives back the last n tuples next handed out, whose frames
// the TX queue refused: the next burst sends them. Without it a flood
// faster than the balancer takes it (at max, most bursts are refused)
// runs through the whole tuple space in seconds and comes back to the
// tuples of connections still live, whose SYNs open nothing.
func (g *Gen) unsendNew(n uint64) {
	t := g.tuples()
	g.newK = (g.newK + t - n%t) % t
}

// tuples is the size of the client address x port space.
func (g *Gen) tuples() uint64 {
	return uint64(g.cfg.Clients.Len()) * (uint64(g.cfg.ClientPorts[1]-g.cfg.ClientPorts[0]) + 1)
}

// sendBurst builds n client packets for the next queue in turn.
func (g *Gen) sendBurst(n int, now int64, flags uint8) {
	q := g.txq
	g.txq++
	if g.txq == g.nq {
		g.txq = 0
	}
	if g.queueFlows(int(q)) == 0 && g.cfg.Pattern != SYN {
		return
	}
	g.sendBurstQ(q, n, now, flags)
}

// sendBurstQ builds n client packets and hands them to queue q of the
// client port; it returns how many the queue took.
func (g *Gen) sendBurstQ(q uint16, n int, now int64, flags uint8) int {
	pk := g.tx.Pkt[:n]
	// Frames the client side received are built over first (recycle):
	// a free and an allocation fewer per packet, which is most of what
	// the generator spends on one besides building it.
	r := min(n, g.nspare)
	copy(pk, g.spare.Pkt[g.nspare-r:g.nspare])
	g.nspare -= r
	if !allocBulk(g.pool, pk[r:]) {
		g.nspare += r // still in place in the spare array
		g.c.AllocFailed++
		return 0
	}
	stamp := uint32(now)
	size := g.b.Size()
	for _, m := range pk {
		_ = m.SetLen(size)
		src, sport, fl := g.next(q, flags)
		g.b.Build(m.Data(), src, sport, fl, g.seq, stamp)
		g.seq++
	}
	sent := uint64(g.cli.id.TxBurstOrFree(q, pk))
	if unsent := uint64(n) - sent; unsent > 0 && g.cfg.Pattern == SYN && flags == 0 {
		g.unsendNew(unsent)
	}
	g.c.Sent += sent
	g.c.TxDropped += uint64(n) - sent
	if g.measuring {
		g.win.sent += sent
		g.win.txDrop += uint64(n) - sent
	}
	return int(sent)
}

// inWindow reports whether a packet with this sequence number was sent in
// the measurement window.
func (g *Gen) inWindow(seq uint32) bool { return g.measuring && int32(seq-g.winSeq) >= 0 }

// poll receives one burst on each queue of each side and answers it.
func (g *Gen) poll() {
	for q := uint16(0); q < g.nq; q++ {
		g.pollServer(q)
		g.pollClient(q)
	}
}

func (g *Gen) pollServer(q uint16) {
	rx := g.rx.Pkt
	n := g.srv.id.RxBurst(q, rx)
	if n == 0 {
		return
	}
	now := uint32(g.now())
	out, drop := g.out.Pkt, g.drop.Pkt
	no, nd := 0, 0
	for _, m := range rx[:n] {
		p := m.Data()
		k, flags, seq, stamp := Stamp(p, false)
		switch k {
		case KindTCP, KindUDP, KindIPIPTCP, KindIPIPUDP:
			g.c.ServerRx++
			if flags&hdr.TCPFlagSYN != 0 && k != KindUDP && k != KindIPIPUDP {
				g.c.ServerSyns++
			}
			if k >= KindIPIPTCP {
				g.c.ServerIPIP++
			}
			if g.inWindow(seq) {
				g.win.srvRx++
				g.oneWay.Record(now - stamp)
			}
			if g.cfg.OneWay || k >= KindIPIPTCP {
				break
			}
			if l := Answer(p, k, flags, g.cfg.Reply); l > 0 {
				_ = m.SetLen(l)
				out[no] = m
				no++
				continue
			}
		case KindARPReq:
			if AnswerARP(p, g.srv.mac, g.cfg.Servers) {
				g.c.ARPAnswered++
				out[no] = m
				no++
				continue
			}
		case KindARPReply:
			if ip, _, ok := ARPReplySender(p); ok && ip == g.cfg.LBServerAddr {
				g.lbSrvOK = true
			}
			g.c.ARPReplies++
		case KindNS:
			if g.answerNS(m, g.srv.mac, g.cfg.Servers, true) {
				out[no] = m
				no++
				continue
			}
		case KindNA:
			if a, _, ok := NASender(p); ok && g.cfg.Six != nil && a == g.cfg.Six.LBServerAddr {
				g.lbSrvOK = true
			}
			g.c.ARPReplies++
		default:
			g.c.ServerOther++
		}
		drop[nd] = m
		nd++
	}
	mbuf.FreeBulk(drop[:nd])
	if no > 0 {
		sent := uint64(g.srv.id.TxBurstOrFree(q, out[:no]))
		g.c.ServerReplies += sent
		g.c.ServerReplyDropped += uint64(no) - sent
		if g.measuring {
			g.win.replies += sent
		}
	}
}

func (g *Gen) pollClient(q uint16) {
	rx := g.rx.Pkt
	n := g.cli.id.RxBurst(q, rx)
	if n == 0 {
		return
	}
	now := uint32(g.now())
	out, drop := g.out.Pkt, g.drop.Pkt
	no, nd := 0, 0
	for _, m := range rx[:n] {
		p := m.Data()
		k, flags, seq, stamp := Stamp(p, true)
		switch k {
		case KindTCP, KindUDP:
			g.c.ClientRx++
			if flags&(hdr.TCPFlagSYN|hdr.TCPFlagACK) == hdr.TCPFlagSYN|hdr.TCPFlagACK {
				g.c.SynAcks++
			}
			if g.inWindow(seq) {
				g.win.cliRx++
				g.roundTrip.Record(now - stamp)
			}
		case KindARPReq:
			if AnswerARP(p, g.cli.mac, g.cfg.Clients) {
				g.c.ARPAnswered++
				out[no] = m
				no++
				continue
			}
		case KindARPReply:
			if ip, mac, ok := ARPReplySender(p); ok && ip == g.cfg.VIP {
				g.lbMAC = mac
				g.lbCliOK = true
			}
			g.c.ARPReplies++
		case KindNS:
			if g.answerNS(m, g.cli.mac, g.cfg.Clients, false) {
				out[no] = m
				no++
				continue
			}
		case KindNA:
			if a, mac, ok := NASender(p); ok && g.cfg.Six != nil && a == g.cfg.Six.VIP {
				g.lbMAC = mac
				g.lbCliOK = true
			}
			g.c.ARPReplies++
		default:
			g.c.ClientOther++
		}
		if g.nspare < len(g.spare.Pkt) && m.Recycle() {
			g.spare.Pkt[g.nspare] = m
			g.nspare++
			continue
		}
		drop[nd] = m
		nd++
	}
	mbuf.FreeBulk(drop[:nd])
	if no > 0 {
		g.cli.id.TxBurstOrFree(q, out[:no])
	}
}

// answerNS turns a neighbour solicitation for an address of r (in the
// server or client network) into the advertisement from mac in m.
func (g *Gen) answerNS(m *mbuf.Mbuf, mac hdr.MAC, r Range, server bool) bool {
	six := g.cfg.Six
	if six == nil {
		return false
	}
	net := &six.ClientNet
	if server {
		net = &six.ServerNet
	}
	l := AnswerNS(m.Data(), mac, net, r)
	if l == 0 {
		return false
	}
	_ = m.SetLen(l)
	g.c.ARPAnswered++
	return true
}
