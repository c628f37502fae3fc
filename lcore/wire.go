package lcore

import (
	"time"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// What lbd does not believe from the wire: frames for other stations (a
// port in promiscuous mode hears them), and a TTL that runs out here.

// forUs reports whether a frame's destination MAC is the port's own, or a
// group address (broadcast, multicast) every station receives.
func forUs(dst, port hdr.MAC) bool { return dst[0]&1 != 0 || dst == port }

// checkDstMAC marks a received frame sent to another station's MAC as
// invalid, so it is dropped (not_our_mac) where it arrived.
func (w *Worker) checkDstMAC(d *desc) {
	if d.class == classInvalid && d.verdict == DropBadEthernet {
		return
	}
	if !forUs(d.eth().Dst(), w.snap.Ports[d.in].MAC) {
		d.invalid(DropNotOurMAC)
	}
}

// ICMP time exceeded is rate-limited per worker by a token bucket, as
// Linux limits the ICMP it sends (icmp_msgs_per_sec, icmp_msgs_burst): a
// flood of TTL 1 packets must not become a flood of answers.
const (
	timeExceededPerSec = 1000
	timeExceededBurst  = 50
	timeExceededCost   = int64(time.Second) / timeExceededPerSec // credit per answer, in ns
)

// tokenBucket holds credit in nanoseconds of the worker's clock: it fills
// at one nanosecond per nanosecond, up to burst answers' worth.
type tokenBucket struct {
	credit, last int64
	started      bool
}

// take spends one token if there is one at time now.
func (b *tokenBucket) take(now, cost int64, burst int) bool {
	limit := cost * int64(burst)
	if !b.started {
		b.credit, b.last, b.started = limit, now, true
	}
	if now > b.last {
		b.credit = min(b.credit+now-b.last, limit)
		b.last = now
	}
	if b.credit < cost {
		return false
	}
	b.credit -= cost
	return true
}

// ttlExpired checks the TTL of a packet lbd is about to forward: expired
// true when it runs out here (1 or 0), and e is then the packet's exit, an
// ICMP time exceeded for its sender or a drop. A packet that goes on has
// its TTL decremented by its forwarding method (decTTL), after the checks
// that may answer it with the packet quoted as it arrived.
func (w *Worker) ttlExpired(d *desc) (e exit, expired bool) {
	if d.ip().TTL() > 1 {
		return exit{}, false
	}
	if d.class != classFlow || !w.ttlBucket.take(w.now, timeExceededCost, timeExceededBurst) {
		return drop(DropTTLExpired), true // never an ICMP error about an ICMP error
	}
	return w.timeExceeded(d), true
}

// decTTL decrements the TTL of a packet that ttlExpired let through, the
// IPv4 header checksum updated incrementally.
func decTTL(ip hdr.IPv4) { ip.DecTTLWithChecksumUpdate() }

// timeExceeded turns a packet into an ICMP time exceeded (type 11 code 0)
// for its sender, in place.
func (w *Worker) timeExceeded(d *desc) exit {
	return w.icmpToSender(d, hdr.ICMPTimeExceeded, hdr.ICMPCodeTTLExceeded, 0, ICMPTimeExceeded)
}

// l4ChecksumGood reports whether the NIC checked the packet's TCP or UDP
// checksum and found it good: only then may the NIC write a fresh one
// (offload), or a corrupt segment would leave with a valid checksum.
func l4ChecksumGood(m *mbuf.Mbuf) bool {
	const mask = mbuf.RxL4CksumGood | mbuf.RxL4CksumBad
	return m.OlFlags()&mask == mbuf.RxL4CksumGood
}
