package ctl

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Health probes through lbd (health.via: lbd): for real servers reachable
// only through the DPDK ports, a TCP check is a SYN that worker 0 sends
// from the output port's address; the answer comes back as an lcore event
// that the control loop delivers here. An HTTP check goes on from the
// SYN-ACK to a request and the answer's status line (ProbeHTTP); a UDP
// check is a datagram and its reply (ProbeUDP), an ICMP check an echo
// request and its reply (ProbeICMP).
//
// Nobody on the wire may fake a result: each probe has a source port and
// an initial sequence number drawn from crypto/rand, and an answer counts
// only if it acknowledges that number (a SYN-ACK, or the RST|ACK a closed
// port sends, both carry ack = seq + 1). The lcores already dropped answers
// that came in on a port that does not lead to the server (probe_spoofed).

type probeKey struct {
	proto            uint8 // hdr.ProtoTCP or hdr.ProtoUDP
	ip               uint32
	ip6              hdr.Addr6 // an IPv6 server's (ip 0)
	dstPort, srcPort uint16
}

// eventKey is the key of the probe an lcore event answers.
func eventKey(ev lcore.Event) probeKey {
	proto := ev.Proto
	if proto == 0 {
		proto = hdr.ProtoTCP
	}
	return probeKey{proto, ev.IP, ev.IP6, ev.DstPort, ev.SrcPort}
}

type probeWaiter struct {
	seq uint32 // the probe's initial sequence number
	// sent is how much data an HTTP probe has sent after its SYN: an
	// answer to that data acknowledges seq + 1 + sent.
	sent uint32
	// open is set once an HTTP probe's SYN-ACK is in, serverNext then the
	// server's sequence number after its SYN.
	open       bool
	serverNext uint32
	ch         chan lcore.Event
}

// acceptsTCP reports whether a TCP answer ev is to the probe w: it
// acknowledges the SYN, or the data after it. A RST without ACK is the
// answer of a server whose socket is gone to the request (RFC 793 3.4:
// the RST takes its sequence number from the segment's ack); it counts if
// it sits exactly at the server's next sequence number (RFC 5961 3.2),
// which only the SYN-ACK told.
func (w *probeWaiter) acceptsTCP(ev lcore.Event) bool {
	if ev.Ack == w.seq+1 || w.sent != 0 && ev.Ack == w.seq+1+w.sent {
		return true
	}
	return ev.Result == lcore.ProbeRefused && ev.Flags&hdr.TCPFlagACK == 0 && w.open && ev.Seq == w.serverNext
}

type probeState struct {
	mu      sync.Mutex
	waiters map[probeKey]*probeWaiter
	// ended holds when each recently finished probe's key was given up:
	// a new probe avoids those for probeQuarantine, as TCP's TIME_WAIT
	// does, so that the old exchange's late segments (the server's FIN
	// after its answer, an answer after the timeout) find no probe rather
	// than a new one, which would count them as rejected.
	ended    map[probeKey]time.Time
	prunedAt time.Time // when ended was last swept of keys out of quarantine
	// rejected counts answers to a probe in flight that did not acknowledge
	// its sequence number (dplb_probe_answers_rejected_total).
	rejected atomic.Uint64
}

// deliver hands ev to the probe it answers; it reports whether ev was
// rejected (counted in rejected).
func (p *probeState) deliver(ev lcore.Event) (rejected bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := eventKey(ev)
	w, ok := p.waiters[k]
	if !ok {
		return false // no probe in flight: late, or made up
	}
	// TCP answers acknowledge what the probe sent, an echo reply carries
	// the request's sequence number; UDP has no such number: its random
	// source port and the server's address and port are what a reply
	// must match.
	switch {
	case ev.Result == lcore.ProbeNotSent:
	case k.proto == hdr.ProtoTCP && !w.acceptsTCP(ev),
		k.proto == hdr.ProtoICMP && ev.Ack != w.seq&0xffff:
		p.rejected.Add(1)
		return true
	}
	select {
	case w.ch <- ev:
	default:
	}
	return false
}

// start registers a probe of t over proto from a random source port of
// the count ports from first on that no probe in flight uses, with a
// random initial sequence number; done unregisters it.
func (p *probeState) start(t health.Target, proto uint8, first, count uint16) (k probeKey, w *probeWaiter, done func()) {
	addr := t.ProbeAddr()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiters == nil {
		p.waiters = map[probeKey]*probeWaiter{}
	}
	k = probeKey{proto: proto, ip: ipv4(addr.Addr()), ip6: ipv6(addr.Addr()), dstPort: addr.Port()}
	if proto == hdr.ProtoICMP {
		k.dstPort = 0 // an echo has no port; srcPort is its identifier
	}
	now := time.Now()
	begin := random32()
	// A port no probe in flight uses: out of quarantine, or else the one
	// that left its last probe longest ago.
	free, freeEnded := -1, now
	for i := uint32(0); i < uint32(count); i++ {
		k.srcPort = first + uint16((begin+i)%uint32(count))
		if _, busy := p.waiters[k]; busy {
			continue
		}
		at, ok := p.ended[k]
		if !ok || now.Sub(at) >= probeQuarantine {
			free = int(k.srcPort)
			break
		}
		if free < 0 || at.Before(freeEnded) {
			free, freeEnded = int(k.srcPort), at
		}
	}
	if free >= 0 {
		k.srcPort = uint16(free)
	}
	delete(p.ended, k)
	w = &probeWaiter{seq: random32(), ch: make(chan lcore.Event, 4)}
	p.waiters[k] = w
	return k, w, func() {
		p.mu.Lock()
		delete(p.waiters, k)
		p.retire(k, time.Now())
		p.mu.Unlock()
	}
}

// probeQuarantine is how long a finished probe's key stays unused: longer
// than a server or the path holds a late segment back.
const probeQuarantine = 5 * time.Second

// retire quarantines k from now on. Once a quarantine's length it
// forgets the keys whose quarantine is over, so ended holds the probes
// of the last two quarantines at most, swept once per quarantine.
func (p *probeState) retire(k probeKey, now time.Time) {
	if p.ended == nil {
		p.ended = map[probeKey]time.Time{}
	}
	if now.Sub(p.prunedAt) >= probeQuarantine {
		for old, at := range p.ended {
			if now.Sub(at) >= probeQuarantine {
				delete(p.ended, old)
			}
		}
		p.prunedAt = now
	}
	p.ended[k] = now
}

// logRejected says why a health probe's answer ev was rejected, so that
// an operator who sees dplb_probe_answers_rejected_total move can tell a
// forgery from a server that answers oddly.
func (c *Controller) logRejected(ev lcore.Event) {
	var server fmt.Stringer = addrOf(ev.IP)
	if ev.IP == 0 {
		server = ev.IP6
	}
	c.log.Warn("health probe answer rejected: it does not acknowledge the probe's sequence number (a forgery, or a server's odd answer); logged once a minute, each counted in dplb_probe_answers_rejected_total",
		zap.Stringer("server", server), zap.Uint16("server_port", ev.DstPort), zap.Uint16("probe_port", ev.SrcPort),
		zap.Uint8("proto", eventKey(ev).proto), zap.Stringer("result", ev.Result), zap.Uint8("tcp_flags", ev.Flags),
		zap.Uint32("seq", ev.Seq), zap.Uint32("ack", ev.Ack), zap.Uint64("rejected_total", c.probes.rejected.Load()))
}

// opened records that the HTTP probe w has its SYN-ACK, whose server
// goes on at serverNext, and sends n bytes after its SYN.
func (p *probeState) opened(w *probeWaiter, serverNext uint32, n int) {
	p.mu.Lock()
	w.open, w.serverNext, w.sent = true, serverNext, uint32(n)
	p.mu.Unlock()
}

// random32 draws from crypto/rand: probe ports and sequence numbers must
// not be guessable from earlier ones.
func random32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the kernel's generator does not fail
	}
	return binary.LittleEndian.Uint32(b[:])
}

const probeRingFull = "probe not sent: lbd's command ring is full"

// probeNotSent is why the dataplane could not send a probe's packet.
const probeNotSent = "probe not sent: no route or no MAC for the server"

// await waits for the next answer to the probe w. A probe that could
// not leave for want of the server's MAC (ProbeNotSent; the lcore's miss
// has the control loop ask ARP or neighbour discovery) is sent again with
// resend every probeResend while ctx lasts, as the kernel holds a packet
// while it resolves the next hop: the first checks after lbd starts,
// before the first ARP answers, are not failed for that. A nil resend
// fails the probe at once instead. It returns the answer, or why none
// came: probeRingFull, probeNotSent, or "" when ctx ended first.
func (c *Controller) await(ctx context.Context, w *probeWaiter, resend func() bool) (lcore.Event, string) {
	var retry <-chan time.Time
	notSent := false
	for {
		select {
		case ev := <-w.ch:
			if ev.Result != lcore.ProbeNotSent {
				return ev, ""
			}
			if resend == nil {
				return ev, probeNotSent
			}
			notSent, retry = true, time.After(probeResend)
		case <-retry:
			if ctx.Err() != nil {
				continue // the time is up: ctx.Done ends it, as not sent
			}
			if !resend() {
				return lcore.Event{}, probeRingFull
			}
			notSent, retry = false, nil
		case <-ctx.Done():
			if notSent {
				return lcore.Event{}, probeNotSent
			}
			return lcore.Event{}, ""
		}
	}
}

// exchange sends a probe's packet with send and waits for the answer
// (await, which sends it again while the server's MAC is missing).
func (c *Controller) exchange(ctx context.Context, w *probeWaiter, send func() bool) (lcore.Event, string) {
	if !send() {
		return lcore.Event{}, probeRingFull
	}
	return c.await(ctx, w, send)
}

// probeResend is how long a probe that found no MAC waits before it is
// sent again: a few control loop steps, time for an ARP answer on a LAN
// to reach the lcores in a snapshot.
const probeResend = 50 * time.Millisecond

// ProbeTCP is a health.Checker for checks with via: lbd: it asks the
// dataplane for a SYN to the server and waits for its answer.
func (c *Controller) ProbeTCP(ctx context.Context, t health.Target) (bool, string) {
	k, w, done := c.probes.start(t, hdr.ProtoTCP, lcore.ProbePortFirst, lcore.TCPProbePorts)
	defer done()
	syn := func() bool { return c.dp.SendProbe(k.ip, k.ip6, k.dstPort, k.srcPort, w.seq) }
	ev, fail := c.exchange(ctx, w, syn)
	switch {
	case fail != "":
		return false, fail
	case ev.Result == lcore.ProbeOpen:
		return true, ""
	case ev.Result == lcore.ProbeRefused:
		return false, "connect: connection refused (through lbd)"
	}
	return false, probeTimeout(t)
}

func probeTimeout(t health.Target) string {
	return fmt.Sprintf("timeout after %v (through lbd)", t.Check.Effective().Timeout)
}

// ProbeHTTP is the health.Checker for HTTP checks with via: lbd. The
// dataplane has no TCP stack, so the control plane drives the
// connection: a SYN, the request in one segment once the server's
// SYN-ACK is in, and the status line from the first segment of the
// answer, after which the lcore that got it resets the connection. It
// reads the status only (the configuration refuses expect_body and https
// with via: lbd). A lost segment fails the probe: rise and fall absorb
// that, as they absorb a lost SYN. Each of extra_urls is one more
// connection, after the last passed; a failure's reason then starts with
// the path that failed, as the host's probes say it.
func (c *Controller) ProbeHTTP(ctx context.Context, t health.Target) (bool, string) {
	ok, reason := c.probeHTTPOne(ctx, t)
	if len(t.Check.ExtraURLs) == 0 {
		return ok, reason
	}
	if !ok {
		return false, t.Check.Effective().Path + ": " + reason
	}
	for _, u := range t.Check.ExtraURLs {
		ut := t
		ut.Check = t.Check.URL(u)
		if ok, reason := c.probeHTTPOne(ctx, ut); !ok {
			return false, u.Path + ": " + reason
		}
	}
	return true, ""
}

// probeHTTPOne requests the check's path through lbd.
func (c *Controller) probeHTTPOne(ctx context.Context, t health.Target) (bool, string) {
	k, w, done := c.probes.start(t, hdr.ProtoTCP, lcore.HTTPProbePortFirst, lcore.ProbePorts-lcore.TCPProbePorts)
	defer done()
	syn := func() bool { return c.dp.SendProbe(k.ip, k.ip6, k.dstPort, k.srcPort, w.seq) }
	if !syn() {
		return false, probeRingFull
	}
	req := httpProbeRequest(t)
	segment := func(flags uint8, seq, ack uint32, payload []byte) bool {
		return c.dp.SendCommand(0, lcore.Command{Kind: lcore.CmdProbeSegment, IP: k.ip, IP6: k.ip6, DstPort: k.dstPort, SrcPort: k.srcPort,
			Flags: flags, Seq: seq, Ack: ack, Payload: payload})
	}
	var serverNext uint32 // the server's sequence number after its SYN
	open := false
	for {
		resend := syn // until the SYN-ACK; a request that finds no MAC fails
		if open {
			resend = nil
		}
		ev, fail := c.await(ctx, w, resend)
		if fail != "" {
			return false, fail
		}
		switch ev.Result {
		case 0: // ctx ended
			if open { // end the server's side of it
				segment(hdr.TCPFlagRST, w.seq+1+uint32(len(req)), 0, nil)
			}
			return false, probeTimeout(t)
		case lcore.ProbeRefused:
			if open {
				return false, "connection reset by the server (through lbd)"
			}
			return false, "connect: connection refused (through lbd)"
		case lcore.ProbeOpen:
			// The SYN-ACK, or its retransmission when the request was
			// lost: (re)send the request, acknowledging the server's SYN.
			if open && ev.Seq+1 != serverNext {
				continue
			}
			serverNext, open = ev.Seq+1, true
			c.probes.opened(w, serverNext, len(req))
			if !segment(hdr.TCPFlagACK|hdr.TCPFlagPSH, w.seq+1, serverNext, req) {
				segment(hdr.TCPFlagRST, w.seq+1, 0, nil)
				return false, probeRingFull
			}
		case lcore.ProbeData:
			if !open || ev.Seq != serverNext {
				return false, "answer out of order (through lbd)"
			}
			return httpProbeStatus(t, ev.Data[:ev.DataLen], ev.Flags)
		}
	}
}

// httpProbeRequest is the request an HTTP probe through lbd sends, whole
// in one segment: HTTP/1.0 as keepalived's HTTP_GET, so the server closes
// after its answer, with the Host header as the host path sends it.
func httpProbeRequest(t health.Target) []byte {
	c := t.Check.Effective()
	host := c.Host
	if host == "" {
		host = t.ProbeAddr().String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: dplb-health\r\nConnection: close\r\n", c.Method, c.Path, host)
	if c.Method == "POST" {
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}

// httpProbeStatus reads the status code from the start of an answer
// (data, with the segment's flags) and checks it against the check's
// expect_status.
func httpProbeStatus(t health.Target, data []byte, flags uint8) (bool, string) {
	c := t.Check.Effective()
	if len(data) == 0 && flags&hdr.TCPFlagFIN != 0 {
		return false, "connection closed without an answer (through lbd)"
	}
	// "HTTP/1.1 200", the version's minor digit any.
	if len(data) < 12 || !bytes.HasPrefix(data, []byte("HTTP/1.")) || data[8] != ' ' {
		return false, fmt.Sprintf("no HTTP status line at the answer's start: %q (through lbd)", data)
	}
	code, err := strconv.Atoi(string(data[9:12]))
	if err != nil || code < 100 || code > 599 {
		return false, fmt.Sprintf("no HTTP status code at the answer's start: %q (through lbd)", data)
	}
	if !c.StatusOK(code) {
		return false, fmt.Sprintf("HTTP status %d, want %s (through lbd)", code, c.ExpectStatus)
	}
	return true, ""
}

// ProbeUDP is the health.Checker for UDP checks with via: lbd: worker 0
// sends the check's datagram from the output port's address, and the
// server's reply (its first lcore.ProbeDataLen bytes searched for the
// check's expect) or a destination unreachable that quotes the probe
// decides.
func (c *Controller) ProbeUDP(ctx context.Context, t health.Target) (bool, string) {
	check := t.Check.Effective()
	k, w, done := c.probes.start(t, hdr.ProtoUDP, lcore.ProbePortFirst, lcore.ProbePorts)
	defer done()
	datagram := func() bool {
		return c.dp.SendCommand(0, lcore.Command{Kind: lcore.CmdProbeDatagram, IP: k.ip, IP6: k.ip6, DstPort: k.dstPort, SrcPort: k.srcPort,
			Payload: []byte(check.Send)})
	}
	ev, fail := c.exchange(ctx, w, datagram)
	if fail != "" {
		return false, fail
	}
	switch ev.Result {
	case lcore.ProbeData:
		if check.Expect != "" && !bytes.Contains(ev.Data[:ev.DataLen], []byte(check.Expect)) {
			return false, fmt.Sprintf("reply does not contain %q in its first %d bytes (through lbd)", check.Expect, lcore.ProbeDataLen)
		}
		return true, ""
	case lcore.ProbeRefused:
		return false, "port unreachable (through lbd)"
	}
	return false, fmt.Sprintf("no reply within %v (through lbd)", check.Timeout)
}

// ProbeICMP is the health.Checker for ICMP checks with via: lbd: worker
// 0 sends an echo request (ICMPv6 for an IPv6 server) from the output
// port's address, with an identifier from the probe range and a random
// sequence number, and the echo reply that carries both passes it.
func (c *Controller) ProbeICMP(ctx context.Context, t health.Target) (bool, string) {
	k, w, done := c.probes.start(t, hdr.ProtoICMP, lcore.ProbePortFirst, lcore.ProbePorts)
	defer done()
	echo := func() bool {
		return c.dp.SendCommand(0, lcore.Command{Kind: lcore.CmdProbeEcho, IP: k.ip, IP6: k.ip6, SrcPort: k.srcPort, Seq: w.seq & 0xffff})
	}
	ev, fail := c.exchange(ctx, w, echo)
	switch {
	case fail != "":
		return false, fail
	case ev.Result == lcore.ProbeData:
		return true, ""
	}
	return false, fmt.Sprintf("no echo reply within %v (through lbd)", t.Check.Effective().Timeout)
}

// checker probes through lbd the checks that ask for it (a check or its
// also checks), and from the host's stack the others.
func (c *Controller) checker(ctx context.Context, t health.Target) health.Result {
	return health.CheckVia(ctx, t, func(ctx context.Context, t health.Target) health.Result {
		return health.Outcome(c.probeThroughLBD(ctx, t))
	})
}

// probeThroughLBD probes a check with via: lbd.
func (c *Controller) probeThroughLBD(ctx context.Context, t health.Target) (bool, string) {
	switch t.Check.Effective().Type {
	case conf.HealthHTTP:
		return c.ProbeHTTP(ctx, t)
	case conf.HealthUDP:
		return c.ProbeUDP(ctx, t)
	case conf.HealthICMP:
		return c.ProbeICMP(ctx, t)
	}
	return c.ProbeTCP(ctx, t)
}
