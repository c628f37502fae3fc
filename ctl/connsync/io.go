package connsync

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/lcore"
)

// receive reads datagrams until the socket closes. Everything it drops is
// counted against the sender, or OtherPeer for a sender not yet proven by
// a right MAC; nothing it accepts waits on the install: a full queue
// drops the message.
func (d *Daemon) receive(r *running) {
	dec, _ := NewCodec(d.opt.Key) // the key was checked by New
	buf := make([]byte, MaxMessageLen+1)
	recs := make([]lcore.SyncConn, 0, MaxRecords)
	for {
		n, from, err := r.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			select {
			case <-r.closed:
				return
			case <-time.After(time.Millisecond): // a lasting error must not spin
				continue
			}
		}
		d.handle(r, dec, buf[:n], from.Addr().Unmap(), recs[:0])
	}
}

func (d *Daemon) handle(r *running, dec *Codec, msg []byte, src netip.Addr, recs []lcore.SyncConn) {
	p := d.peers.get(src, false)
	h, recs, why := dec.Decode(msg, recs)
	if why != ReasonNone {
		p.dropped[why].Add(1)
		return
	}
	if h.Boot == d.boot {
		p.dropped[ReasonSelf].Add(1)
		d.peers.noteSelf(src) // a multicast group loops our messages back
		return
	}
	p = d.peers.get(src, true) // the key holder earned its own counters
	m := d.modes.Load()
	if IsHello(h.Kind) && !m.backup {
		return // a peer's heartbeat: only a backup takes peers' addresses over, and it is no fault
	}
	switch {
	case h.Kind == KindBulkRequest && !m.master, h.Kind != KindBulkRequest && !m.backup:
		why = ReasonMode
	case h.Kind == KindBulkRequest && h.SyncID != m.masterID, h.Kind != KindBulkRequest && h.SyncID != m.backupID:
		why = ReasonSyncID
	default:
		why = p.window.Accept(h.Boot, h.Seq)
	}
	if why != ReasonNone {
		p.dropped[why].Add(1)
		return
	}
	switch h.Kind {
	case KindRecords, KindExtRecords, KindRecords6, KindFTP, KindFullNAT6:
		if d.enqueue(r, inbound{from: p, kind: KindRecords, recs: slices.Clone(recs)}) {
			p.received.Add(1)
			p.records.Add(uint64(len(recs)))
			p.lastRecord.Store(time.Now().UnixNano())
		}
	case KindHello, KindHello6:
		if h.Kind == KindHello {
			p.hellos.Add(1) // a hello's IPv6 half (kind 10) is not another hello
		}
		state := h.Ref &^ HelloTakesOver
		if state == HelloForget {
			p.hello.Store(nil)
			return
		}
		lips := HelloAddrs(msg)
		if old := p.hello.Load(); old != nil && old.Boot == h.Boot {
			// The other family's addresses came in the other kind.
			for _, a := range old.LIPs {
				if !lipFamily(h.Kind, a) {
					lips = append(lips, a)
				}
			}
		}
		slices.SortFunc(lips, netip.Addr.Compare)
		p.hello.Store(&Hello{Boot: h.Boot, At: time.Now(), Leaving: state == HelloLeaving,
			TakesOver: h.Ref&HelloTakesOver != 0, LIPs: lips})
	case KindPeers, KindPeers6:
		p.received.Add(1)
		if n := d.seed(PeersOf(msg, time.Now())); n > 0 {
			d.log.Info("peer directors known from a bulk dump", zap.String("from", p.name), zap.Int("peers", n))
		}
	case KindBulkEnd:
		// Another peer's bulk is not ours to wait for.
		if h.Ref != d.boot || d.enqueue(r, inbound{from: p, kind: KindBulkEnd}) {
			p.received.Add(1)
		}
	case KindBulkRequest:
		select {
		case r.bulk <- bulkRequest{from: p, addr: src, boot: h.Boot}:
			p.received.Add(1)
		default:
			p.dropped[ReasonQueueFull].Add(1)
		}
	}
}

// enqueue queues in for the install goroutine, or drops and counts it.
func (d *Daemon) enqueue(r *running, in inbound) bool {
	select {
	case r.queue <- in:
		return true
	default:
		in.from.dropped[ReasonQueueFull].Add(1)
		return false
	}
}

// install hands queued records to the workers, in arrival order, so a
// bulk-end is seen after the dump's records are installed.
func (d *Daemon) install(r *running) {
	for {
		select {
		case <-r.closed:
			return
		case in := <-r.queue:
			if in.kind == KindBulkEnd {
				in.from.bulkEnds.Add(1)
				d.waitMu.Lock()
				if d.bulkWait != nil {
					close(d.bulkWait)
					d.bulkWait = nil
				}
				d.waitMu.Unlock()
				continue
			}
			d.ctl.InstallSynced(in.recs)
		}
	}
}

// pull is a master's loop: every Pull, whatever the workers queued goes
// out, as many records per datagram as the MTU allows.
func (d *Daemon) pull(r *running, stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(d.opt.Pull)
	defer t.Stop()
	hello := time.NewTicker(HelloInterval)
	defer hello.Stop()
	d.sendHello(r, HelloAlive)
	var buf []lcore.SyncConn
	for {
		select {
		case <-stop:
			return
		case <-hello.C:
			d.sendHello(r, HelloAlive)
			continue
		case <-t.C:
		}
		buf = d.ctl.SyncRecords(buf[:0])
		d.sendRecords(r, buf, r.dests, 0)
		if cap(buf) > 64*r.perMsg { // a burst's buffer is not kept
			buf = nil
		}
	}
}

// sendRecords sends recs in full datagrams to dests, the connections
// with an extension and the IPv6 ones in messages of their own kinds
// (recs is reordered); pace > 0 sleeps that long after every bulkBurst
// datagrams.
func (d *Daemon) sendRecords(r *running, recs []lcore.SyncConn, dests []netip.AddrPort, pace time.Duration) {
	groupByKind(recs)
	for i := 0; len(recs) > 0; i++ {
		kind := RecordKind(&recs[0])
		n := 1
		for n < len(recs) && n < r.fit[kind] && RecordKind(&recs[n]) == kind {
			n++
		}
		d.send(r, Header{Kind: kind, SyncID: d.modes.Load().masterID}, recs[:n], dests)
		recs = recs[n:]
		if pace > 0 && i%bulkBurst == bulkBurst-1 {
			select {
			case <-r.closed:
				return
			case <-time.After(pace):
			}
		}
	}
}

// send numbers, signs and sends one message to each of dests.
func (d *Daemon) send(r *running, h Header, recs []lcore.SyncConn, dests []netip.AddrPort) {
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	d.seq++
	h.Boot, h.Seq = d.boot, d.seq
	d.out = d.enc.Append(d.out[:0], h, recs)
	d.transmit(r, dests, true)
}

// sendHello sends a master's hello, saying state, with this director's
// local addresses (as many of each family as a datagram holds) to every
// destination: kind 7 with the IPv4 ones, then kind 10 with the IPv6
// ones once this lbd has had any.
func (d *Daemon) sendHello(r *running, state uint64) {
	var lips []netip.Addr
	n4, n6 := 0, 0
	for _, a := range d.ctl.LocalAddrs() {
		if a.Is4() && n4 < r.fit[KindHello] {
			lips, n4 = append(lips, a), n4+1
		} else if a.Is6() && n6 < r.fit[KindHello6] {
			lips, n6 = append(lips, a), n6+1
		}
	}
	d.sendMu.Lock()
	defer d.sendMu.Unlock()
	m := d.modes.Load()
	if m.backup && d.opt.TakeOver {
		state |= HelloTakesOver
	}
	d.hello6 = d.hello6 || n6 > 0
	for _, k := range []Kind{KindHello, KindHello6} {
		if k == KindHello6 && !d.hello6 {
			break
		}
		d.seq++
		h := Header{Kind: k, SyncID: m.masterID, Boot: d.boot, Seq: d.seq, Ref: state}
		d.out = d.enc.AppendHello(d.out[:0], h, lips)
		d.transmit(r, r.dests, false)
	}
}

// transmit sends d.out to each of dests, counting it as a message sent
// when count (hellos are not: the counters are the sync traffic's); the
// caller holds sendMu.
func (d *Daemon) transmit(r *running, dests []netip.AddrPort, count bool) {
	for _, a := range dests {
		p := d.peers.get(a.Addr(), true)
		if _, err := r.conn.WriteToUDPAddrPort(d.out, a); err != nil {
			p.sendErrors.Add(1)
			continue
		}
		if count {
			p.sent.Add(1)
		}
	}
}

// serveBulk answers bulk requests one at a time: the whole table, paced,
// then a bulk-end naming the requester. With unicast peers the dump goes
// to the requester only; with multicast to the group (the requester's
// socket is bound to it).
func (d *Daemon) serveBulk(r *running) {
	for {
		var req bulkRequest
		select {
		case <-r.closed:
			return
		case req = <-r.bulk:
		}
		dests := r.dests
		if !r.transport.Multicast() {
			dests = []netip.AddrPort{netip.AddrPortFrom(req.addr, r.transport.Port)}
		}
		recs, err := d.ctl.SyncTable()
		if err != nil {
			d.log.Warn("bulk sync: dumping the table failed", zap.Error(err))
			continue // the requester asks again
		}
		d.sendRecords(r, recs, dests, bulkPace)
		d.sendPeers(r, req.addr, dests)
		req.from.bulkServed.Add(1) // before the end: the requester may look as soon as it has it
		d.send(r, Header{Kind: KindBulkEnd, SyncID: d.modes.Load().masterID, Ref: req.boot}, nil, dests)
		d.log.Info("bulk sync sent", zap.String("peer", req.from.name), zap.Int("records", len(recs)))
		// Requests the same peer repeated while it waited are answered.
		for pending := len(r.bulk); pending > 0; pending-- {
			next := <-r.bulk
			if next.boot == req.boot {
				continue
			}
			select {
			case r.bulk <- next:
			default:
				next.from.dropped[ReasonQueueFull].Add(1)
			}
		}
	}
}

// RequestBulk asks the masters for their whole table and returns once a
// bulk-end for this daemon arrived and every record before it was handed
// to the workers, or when ctx ends. The backup mode must run (it installs
// what comes). The request is repeated every few seconds, as UDP may lose
// it.
func (d *Daemon) RequestBulk(ctx context.Context) error {
	d.mu.Lock()
	r, m := d.run, d.modes.Load()
	d.mu.Unlock()
	if r == nil || !m.backup {
		return errNotRunning
	}
	return d.requestBulk(ctx, r, m.backupID)
}

// requestBulk is RequestBulk on the running socket r; it does not take
// d.mu, so a stop (which waits for it) cannot deadlock with it.
func (d *Daemon) requestBulk(ctx context.Context, r *running, syncID uint8) error {
	d.waitMu.Lock()
	if d.bulkWait == nil {
		d.bulkWait = make(chan struct{})
	}
	done := d.bulkWait
	d.waitMu.Unlock()
	t := time.NewTicker(bulkRetry)
	defer t.Stop()
	for {
		if !d.modes.Load().backup {
			return errNotRunning // the backup stopped: nothing would install the table
		}
		d.send(r, Header{Kind: KindBulkRequest, SyncID: syncID}, nil, r.dests)
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.closed:
			return errNotRunning
		case <-t.C:
		}
	}
}

// groupByKind orders recs by the kind of message that carries them
// (plain, extended, IPv6, FTP), each group in its order (a template stays
// before its connections).
func groupByKind(recs []lcore.SyncConn) {
	var rest []lcore.SyncConn
	n := 0
	for i := range recs {
		if RecordKind(&recs[i]) != KindRecords {
			rest = append(rest, recs[i])
			continue
		}
		recs[n] = recs[i]
		n++
	}
	for _, k := range []Kind{KindExtRecords, KindRecords6, KindFTP, KindFullNAT6} {
		for i := range rest {
			if RecordKind(&rest[i]) == k {
				recs[n] = rest[i]
				n++
			}
		}
	}
}
