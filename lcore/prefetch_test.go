package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// TestLookupStageForeseesPicks: what the lookup stage foretells of an rr
// scheduler's picks (to prefetch the one reply cell each SYN's new
// connection will probe) is, for every SYN of a burst, the real server
// the SYN then gets, with another service's SYNs in between; foretelling
// changes no pick.
func TestLookupStageForeseesPicks(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	type syn struct {
		dst   uint32
		sport uint16
	}
	var burst []syn
	for i := range 7 {
		burst = append(burst, syn{vip, uint16(40000 + i)})
		if i%3 == 1 {
			burst = append(burst, syn{vipDR, uint16(41000 + i)})
		}
	}
	w.foreseen = 0
	want := map[uint16]uint32{} // client port -> foretold real server, vip:80's SYNs
	for _, s := range burst {
		si, ok := w.snap.service(s.dst, 80, hdr.ProtoTCP)
		if !ok {
			t.Fatalf("no service %x:80", s.dst)
		}
		svc := &w.snap.Services[si]
		idx, ok := w.foresee(si, svc)
		if !ok {
			t.Fatalf("SYN to %x:80 from port %d: rr's pick not foretold", s.dst, s.sport)
		}
		if s.dst == vip {
			want[s.sport] = svc.Dests[idx].Addr
		}
	}

	for _, s := range burst {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, s.sport, s.dst, 80, hdr.TCPFlagSYN, ""))
	}
	w.poll()
	if sent := r.sent(1); len(sent) != len(burst) {
		t.Fatalf("%d SYNs forwarded of %d (drops %v)", len(sent), len(burst), dropsOf(w))
	}
	servers := map[uint32]int{}
	for sport, rip := range want {
		id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, sport, vip, 80)
		if !ok {
			t.Fatalf("no connection from port %d", sport)
		}
		if got := w.table.Get(id).RIP; got != rip {
			t.Errorf("port %d: real server %x, foretold %x", sport, got, rip)
		}
		servers[rip]++
	}
	if servers[rs1] != 4 || servers[rs2] != 3 {
		t.Errorf("foretold picks %v: want 4 to rs1 and 3 to rs2 (rr in turn)", servers)
	}
}
