package lcore

import (
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// drops sums a worker's drop counters.
func drops(w *Worker) uint64 {
	var n uint64
	for s := firstDrop; s < numStats; s++ {
		n += w.cnt.own[s]
	}
	return n
}

// TestConsumedIsNotADrop: packets meant for the dataplane itself (an ARP
// reply, a server's answer to a probe) are counted as what consumed them,
// never under a drop reason, and their mbufs are freed.
func TestConsumedIsNotADrop(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	arp := make([]byte, 60)
	eth := hdr.Ethernet(arp)
	eth.SetDst(wanMAC)
	eth.SetSrc(clientMAC)
	eth.SetEtherType(hdr.EtherTypeARP)
	hdr.ARP(eth.Payload()).SetReply(clientMAC, clientIP, wanMAC, wanAddr)
	r.inject(0, arp)
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 8080, lanAddr, ProbePortFirst+1, hdr.TCPFlagRST|hdr.TCPFlagACK, ""))
	w.poll()
	if w.cnt.own[ARPReceived] != 1 || w.cnt.own[ProbeAnswers] != 1 {
		t.Fatalf("arp_received %d, probe_answers %d, want 1 each", w.cnt.own[ARPReceived], w.cnt.own[ProbeAnswers])
	}
	if n := drops(w); n != 0 {
		t.Fatalf("%d consumed packets counted as drops", n)
	}
	if len(r.sent(0))+len(r.sent(1)) != 0 || r.pool.InUse() != 0 {
		t.Fatal("a consumed packet was sent or kept")
	}
}

// TestAllocFailureIsCounted: when the pool is empty, the packets a worker
// makes (an ARP request, a probe) are counted as allocation failures, not
// as lost events; a probe still reports that it was not sent.
func TestAllocFailureIsCounted(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	var held []*mbuf.Mbuf
	for {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			break
		}
		held = append(held, m)
	}
	defer func() {
		for _, m := range held {
			m.Free()
		}
	}()
	w.Commands().Push(Command{Kind: CmdARPRequest, Port: 1, IP: rs2})
	w.Commands().Push(Command{Kind: CmdProbe, IP: rs1, DstPort: 80, SrcPort: ProbePortFirst})
	w.runCommands(0)
	if w.cnt.own[MbufAllocFailed] != 2 || w.cnt.own[EventsLost] != 0 {
		t.Fatalf("mbuf_alloc_failed %d events_lost %d, want 2 and 0", w.cnt.own[MbufAllocFailed], w.cnt.own[EventsLost])
	}
	if ev, ok := w.Events().Pop(); !ok || ev.Kind != EvProbe || ev.Result != ProbeNotSent {
		t.Fatalf("probe event %+v %v", ev, ok)
	}
}

// TestICMPErrorPathDoesNotAllocate: parsing an ICMP error, finding its
// connection and translating it for the client allocates nothing.
func TestICMPErrorPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	frame := icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, r.sent(1)[0])
	if allocs := r.allocsPerBurst(1, 0, func(int) []byte { return frame }); allocs != 0 {
		t.Fatalf("the ICMP error path allocates %.1f times per burst", allocs)
	}
	if w.cnt.own[ICMPErrors] < 100 {
		t.Fatalf("only %d errors delivered", w.cnt.own[ICMPErrors])
	}
}

func TestMessageNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{CmdSnapshot.String(), "snapshot"}, {CmdProbe.String(), "probe"}, {CommandKind(99).String(), "command(99)"},
		{EvNeighbourMiss.String(), "neighbour_miss"}, {EventKind(0).String(), "event(0)"},
		{ProbeOpen.String(), "open"}, {ProbeNotSent.String(), "not_sent"}, {ProbeResult(7).String(), "probe_result(7)"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
