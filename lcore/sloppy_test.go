package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// Scale-out: several directors behind ECMP, each scheduling on its own.
// With mh and sloppy_tcp, a flow that ECMP moves to another director
// mid-stream (its next packet an ACK, no SYN) is picked up there and
// sent to the real server the first director chose: mh is a function of
// the flow and the server list, the same on every director.

// withMHDR adds to the rig's worker a VS/DR mh service on vipDR:443 over
// rs1 and rs2 hashing the client port too (mh-port: the test has one
// client address), sloppy or not.
func withMHDR(t *testing.T, r *rig, sloppy bool) {
	t.Helper()
	dests := []sched.Dest{{ID: 10, Addr: rs1, Port: 443, Weight: 1, Fwd: fwd.DR}, {ID: 11, Addr: rs2, Port: 443, Weight: 1, Fwd: fwd.DR}}
	mh, err := sched.New("mh", dests, sched.Options{MHTableSize: 251, Flags: sched.FlagPort})
	if err != nil {
		t.Fatal(err)
	}
	s := r.w.snap
	svcs := append(append([]Service(nil), s.Services...), Service{Key: ServiceKey{VIP: vipDR, Port: 443, Proto: hdr.ProtoTCP},
		Scheduler: "mh", Dests: dests, Scheds: []sched.Scheduler{mh}, SloppyTCP: sloppy})
	r.w.snap = NewSnapshot(s.Gen+1, s.Ports, svcs, defaultNeigh(), conn.DefaultTimeouts())
}

// drServer sends one frame through r and names the real server it went to.
func drServer(t *testing.T, r *rig, frame []byte) hdr.MAC {
	t.Helper()
	r.inject(0, frame)
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		return hdr.MAC{}
	}
	return hdr.Ethernet(out[0]).Dst()
}

func TestSloppyMHKeepsMovedFlowsOnTheirServer(t *testing.T) {
	first, second := newRig(t, defaultNeigh()), newRig(t, defaultNeigh())
	withMHDR(t, first, true)
	withMHDR(t, second, true)
	seen := map[hdr.MAC]int{}
	const flows = 64
	for i := range flows {
		port := uint16(20000 + i)
		chosen := drServer(t, first, tcpFrame(clientMAC, wanMAC, clientIP, port, vipDR, 443, hdr.TCPFlagSYN, ""))
		if chosen != rs1MAC && chosen != rs2MAC {
			t.Fatalf("flow %d: the first director did not forward the SYN", i)
		}
		seen[chosen]++
		// ECMP moves the flow: its next packet reaches the second director.
		moved := drServer(t, second, tcpFrame(clientMAC, wanMAC, clientIP, port, vipDR, 443, hdr.TCPFlagACK, "data"))
		if moved != chosen {
			t.Fatalf("flow %d: moved to the second director, sent to %v, the first chose %v", i, moved, chosen)
		}
		id, _, ok := second.w.table.Lookup(hdr.ProtoTCP, clientIP, port, vipDR, 443)
		if !ok || second.w.table.Get(id).State != conn.StateEstablished {
			t.Fatalf("flow %d: the second director holds no ESTABLISHED entry for the picked-up flow", i)
		}
	}
	if seen[rs1MAC] == 0 || seen[rs2MAC] == 0 {
		t.Errorf("mh sent every flow to one server: %v", seen)
	}
	if n := second.w.cnt.own[DropNotSYN]; n != 0 {
		t.Errorf("the second director dropped %d packets as not_syn", n)
	}
}

func TestStrictMHDropsMovedFlows(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withMHDR(t, r, false)
	if got := drServer(t, r, tcpFrame(clientMAC, wanMAC, clientIP, 20000, vipDR, 443, hdr.TCPFlagACK, "data")); got != (hdr.MAC{}) {
		t.Fatalf("a mid-flow ACK without sloppy_tcp was forwarded to %v", got)
	}
	if r.w.cnt.own[DropNotSYN] != 1 {
		t.Errorf("not_syn = %d, want 1", r.w.cnt.own[DropNotSYN])
	}
}

func TestSloppyPickupDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withMHDR(t, r, true)
	// A new client port each burst: every packet is a pickup.
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpFrame(clientMAC, wanMAC, clientIP, uint16(30000+i), vipDR, 443, hdr.TCPFlagACK, "data")
	})
	if allocs != 0 {
		t.Errorf("a sloppy pickup allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Errorf("only %d flows were picked up", r.w.cnt.own[NewConns])
	}
}
