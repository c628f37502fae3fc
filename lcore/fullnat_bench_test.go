package lcore

import (
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// BenchmarkFullNATPacket: a client packet of an established FullNAT
// connection with the PROXY header's sequence shift (both ends rewritten,
// seq moved). Compare its x-copy with BenchmarkNATPacket's.
func BenchmarkFullNATPacket(b *testing.B) {
	r := newRig(b, defaultNeigh())
	withFullNAT(b, r, true)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagSYN, 1, 0, nil, ""))
	r.w.poll()
	r.drain(1)
	benchFrame(b, r, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, 100, 1, nil, ""), 0, func(*mbuf.Mbuf) {})
	if r.w.table.Len() != 1 {
		b.Fatal("no connection")
	}
}

// BenchmarkSynCookie: a SYN to a SYN-proxied service answered in place
// with a cookie SYN-ACK (no entry). Compare its x-copy with
// BenchmarkNATNewConnection's.
func BenchmarkSynCookie(b *testing.B) {
	r := newRig(b, defaultNeigh())
	withSynProxy(b, r, fwd.NAT)
	benchFrame(b, r, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipSP, 80, hdr.TCPFlagSYN, 1, 0, synOpts, ""), 0, func(*mbuf.Mbuf) {})
	if r.w.cnt.own[SynCookiesSent] < uint64(b.N) || r.w.table.Len() != 0 {
		b.Fatalf("%d cookies for %d SYNs, %d entries", r.w.cnt.own[SynCookiesSent], b.N, r.w.table.Len())
	}
}

// BenchmarkSynCookie6: BenchmarkSynCookie for an IPv6 service (NAT66):
// the cookie's MAC over six words, the SYN-ACK's IPv6 header and its
// checksum summed whole. Compare with BenchmarkSynCookie's.
func BenchmarkSynCookie6(b *testing.B) {
	r := rigSvc6(b)
	withSynProxy6(b, r)
	benchFrame(b, r, tcpOpts6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 8443, hdr.TCPFlagSYN, 1, 0, synOpts, ""), 0, func(*mbuf.Mbuf) {})
	if r.w.cnt.own[SynCookiesSent] < uint64(b.N) || r.w.table.Len() != 0 {
		b.Fatalf("%d cookies for %d SYNs, %d entries", r.w.cnt.own[SynCookiesSent], b.N, r.w.table.Len())
	}
}
