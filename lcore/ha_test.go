package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// floatingGW is the address NAT real servers route through, held by the
// master of a pair.
var floatingGW = ip4(198, 51, 100, 254)

// withHA gives the rig's lan port a floating address and sets the state.
func withHA(r *rig, backup bool) {
	s := r.w.snap.WithHA(r.w.snap.Gen+1, r.w.snap.Sync, backup)
	s.Ports = append([]PortInfo(nil), s.Ports...)
	s.Ports[1].Floating = []uint32{floatingGW}
	r.w.snap = s
}

// askARP has the rig's worker hear an ARP request for target from sip on
// port and returns what it sent back on that port; the events the
// request raised are discarded.
func askARP(r *rig, port int, sip, target uint32) [][]byte {
	r.inject(port, arpFrame(hdr.ARPRequest, clientMAC, sip, target))
	r.w.poll()
	out := r.sent(port)
	for {
		if _, ok := r.w.Events().Pop(); !ok {
			return out
		}
	}
}

// TestBackupAnswersNoARPForVIPsOrFloating: a backup answers ARP for its
// own addresses only; a master also for the VIPs (client side) and the
// floating addresses.
func TestBackupAnswersNoARPForVIPsOrFloating(t *testing.T) {
	r := newRig(t, defaultNeigh())
	for _, tc := range []struct {
		name   string
		backup bool
		port   int
		sip    uint32
		target uint32
		answer bool
	}{
		{"master: VIP", false, 0, clientIP, vip, true},
		{"master: floating", false, 1, rs1, floatingGW, true},
		{"master: own address", false, 1, rs1, lanAddr, true},
		{"master: floating is not answered on another port", false, 0, clientIP, floatingGW, false},
		{"backup: VIP", true, 0, clientIP, vip, false},
		{"backup: floating", true, 1, rs1, floatingGW, false},
		{"backup: own address", true, 1, rs1, lanAddr, true},
		{"backup: own client-side address", true, 0, clientIP, wanAddr, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withHA(r, tc.backup)
			out := askARP(r, tc.port, tc.sip, tc.target)
			if !tc.answer {
				if len(out) != 0 {
					t.Fatalf("answered ARP for %x", tc.target)
				}
				return
			}
			if len(out) != 1 {
				t.Fatal("no ARP reply")
			}
			if a := hdr.ARP(hdr.Ethernet(out[0]).Payload()); a.Op() != hdr.ARPReply || a.SenderIP() != tc.target {
				t.Fatalf("bad reply %x", out[0])
			}
		})
	}
}

// TestBackupExpectsTheMastersAnnouncements: on a backup, the master's
// gratuitous ARP for a VIP or floating address is dropped unlearnt and not
// reported as a conflict; on a master it is a conflict.
func TestBackupExpectsTheMastersAnnouncements(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	peer := hdr.MAC{0x02, 0, 0, 0, 0, 0x99}
	withHA(r, true)
	r.inject(0, arpFrame(hdr.ARPRequest, peer, vip, vip))
	r.inject(1, arpFrame(hdr.ARPRequest, peer, floatingGW, floatingGW))
	w.poll()
	if ev, ok := w.Events().Pop(); ok {
		t.Fatalf("backup reported %+v", ev)
	}
	if w.cnt.own[DropARPNotOurs] != 2 || w.cnt.own[DropARPConflict] != 0 {
		t.Fatalf("arp_not_ours %d arp_conflict %d", w.cnt.own[DropARPNotOurs], w.cnt.own[DropARPConflict])
	}
	withHA(r, false)
	r.inject(1, arpFrame(hdr.ARPRequest, peer, floatingGW, floatingGW))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Kind != EvAddressConflict || ev.IP != floatingGW {
		t.Fatalf("master: %+v %v", ev, ok)
	}
}

// TestAnnounce: CmdAnnounce broadcasts one gratuitous ARP: a request
// whose sender and target addresses are the announced one, from the
// port's MAC.
func TestAnnounce(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withHA(r, false)
	w.Commands().Push(Command{Kind: CmdAnnounce, Port: 1, IP: floatingGW})
	w.Commands().Push(Command{Kind: CmdAnnounce, Port: 7, IP: floatingGW}) // no such port: nothing
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 || len(r.sent(0)) != 0 {
		t.Fatalf("%d frames on lan", len(out))
	}
	eth := hdr.Ethernet(out[0])
	a := hdr.ARP(eth.Payload())
	if len(out[0]) != arpFrameLen || eth.Dst() != hdr.BroadcastMAC || eth.Src() != lanMAC || eth.EtherType() != hdr.EtherTypeARP {
		t.Fatalf("bad Ethernet header %x", out[0])
	}
	if !a.IsValid() || a.Op() != hdr.ARPRequest || a.SenderMAC() != lanMAC || a.SenderIP() != floatingGW ||
		a.TargetIP() != floatingGW || a.TargetMAC() != (hdr.MAC{}) {
		t.Fatalf("bad gratuitous ARP %x", out[0])
	}
	if w.cnt.own[GratuitousARPs] != 1 {
		t.Fatalf("gratuitous_arps %d", w.cnt.own[GratuitousARPs])
	}
}

// TestTakeoverAnnouncesAtOnce: the snapshot that turns a backup into the
// master makes worker 0 broadcast a gratuitous ARP for the floating
// address and for every VIP on the port facing clients as it adopts the
// snapshot, before any command asks; a master's next snapshot announces
// nothing.
func TestTakeoverAnnouncesAtOnce(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withHA(r, true)
	master := w.snap.WithHA(w.snap.Gen+1, w.snap.Sync, false)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: master})
	w.runCommands(0)
	w.flush()
	lan, wan := r.sent(1), r.sent(0)
	if len(lan) != 1 || hdr.ARP(hdr.Ethernet(lan[0]).Payload()).SenderIP() != floatingGW {
		t.Fatalf("%d frames on lan, want the floating address's gratuitous ARP", len(lan))
	}
	announced := map[uint32]bool{}
	for _, f := range wan {
		a := hdr.ARP(hdr.Ethernet(f).Payload())
		if !a.IsValid() || a.Op() != hdr.ARPRequest || a.SenderIP() != a.TargetIP() || a.SenderMAC() != wanMAC {
			t.Fatalf("not a gratuitous ARP from the client port: %x", f)
		}
		announced[a.SenderIP()] = true
	}
	if len(announced) != len(master.vips) || !announced[vip] {
		t.Fatalf("announced %v on the client side, want every VIP %v", announced, master.vips)
	}
	if w.cnt.own[GratuitousARPs] != uint64(1+len(wan)) {
		t.Fatalf("gratuitous_arps %d", w.cnt.own[GratuitousARPs])
	}
	again := master.WithHA(master.Gen+1, master.Sync, false)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: again})
	w.runCommands(0)
	w.flush()
	if n := len(r.sent(0)) + len(r.sent(1)); n != 0 {
		t.Fatalf("a master's next snapshot sent %d frames", n)
	}
}

// TestNAT64LocalAddressARPOnMasterOnly: a NAT64 service's IPv4 local
// address is answered in ARP as a FullNAT one is, by a master alone and on
// the port whose subnet holds it (the servers' replies must reach the
// master, not a backup).
func TestNAT64LocalAddressARPOnMasterOnly(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	for _, tc := range []struct {
		name   string
		backup bool
		port   int
		sip    uint32
		answer bool
	}{
		{"master: server side", false, 1, rs1, true},
		{"master: client side", false, 0, clientIP, false},
		{"backup: server side", true, 1, rs1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.snap = w.snap.WithHA(w.snap.Gen+1, w.snap.Sync, tc.backup)
			out := askARP(r, tc.port, tc.sip, lip64)
			if !tc.answer {
				if len(out) != 0 {
					t.Fatalf("answered ARP for the NAT64 local address")
				}
				return
			}
			if len(out) != 1 {
				t.Fatal("no ARP reply for the NAT64 local address")
			}
			if a := hdr.ARP(hdr.Ethernet(out[0]).Payload()); a.Op() != hdr.ARPReply || a.SenderIP() != lip64 || a.SenderMAC() != lanMAC {
				t.Fatalf("bad reply %x", out[0])
			}
		})
	}
}

// TestTakeoverAnnouncesLocalAddresses: the first round at takeover also
// moves a FullNAT service's local address, on the servers' port only, so
// the servers' replies reach the new master without waiting for the
// controller's rounds.
func TestTakeoverAnnouncesLocalAddresses(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withFullNAT(t, r, false)
	withHA(r, true)
	master := w.snap.WithHA(w.snap.Gen+1, w.snap.Sync, false)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: master})
	w.runCommands(0)
	w.flush()
	lan := map[uint32]bool{}
	for _, f := range r.sent(1) {
		lan[hdr.ARP(hdr.Ethernet(f).Payload()).SenderIP()] = true
	}
	if !lan[lip1] || !lan[floatingGW] || len(lan) != 2 {
		t.Fatalf("announced %v on the servers' side, want the floating and the local address", lan)
	}
	for _, f := range r.sent(0) {
		if hdr.ARP(hdr.Ethernet(f).Payload()).SenderIP() == lip1 {
			t.Fatal("the local address announced on the client side")
		}
	}
}
