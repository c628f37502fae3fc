package lcore

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

var (
	wanAddr6    = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::1"))
	clientAddr6 = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::7"))
)

// rig6 is the single-worker rig whose wan port also has an IPv6 address.
func rig6(t *testing.T) *rig {
	r := newRig(t, defaultNeigh())
	r.w.snap.Ports[0].Addr6 = wanAddr6
	return r
}

// icmp6Frame builds Ethernet/IPv6/ICMPv6 with a valid checksum.
func icmp6Frame(srcMAC, dstMAC hdr.MAC, src, dst hdr.Addr6, hop uint8, msg []byte) []byte {
	b := make([]byte, 14+40+len(msg))
	eth := hdr.Ethernet(b)
	eth.SetSrc(srcMAC)
	eth.SetDst(dstMAC)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(b[14:]).Encode(uint16(len(msg)), hdr.ProtoICMPv6, hop, src, dst)
	m := b[54:]
	copy(m, msg)
	hdr.ICMP(m).SetChecksum(hdr.TransportChecksum6(src, dst, hdr.ProtoICMPv6, m))
	return b
}

func nsMsg(target hdr.Addr6, withOpt bool) []byte {
	m := make([]byte, hdr.NDLen+hdr.NDOptLen)
	hdr.ND(m).EncodeND(hdr.ICMPv6NeighSolicit, 0, target, hdr.NDOptSourceLL, clientMAC)
	if !withOpt {
		m = m[:hdr.NDLen]
	}
	return m
}

// checkNA parses a sent frame as an NA from the wan port and checks its
// checksum the slow way.
func checkNA(t *testing.T, f []byte) (hdr.Ethernet, hdr.IPv6, hdr.ND) {
	t.Helper()
	eth := hdr.Ethernet(f)
	ip := hdr.IPv6(eth.Payload())
	if eth.EtherType() != hdr.EtherTypeIPv6 || !ip.IsValid(len(ip)) || ip.NextHeader() != hdr.ProtoICMPv6 || ip.HopLimit() != 255 {
		t.Fatalf("not an ND packet: %x", f)
	}
	na := hdr.ND(ip.Payload())
	if !na.IsValid() || hdr.ICMP(na).Type() != hdr.ICMPv6NeighAdvert || na.Target() != wanAddr6 || ip.Src() != wanAddr6 {
		t.Fatalf("not our NA: %x", f)
	}
	if c := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, na); c != hdr.ICMP(na).Checksum() {
		t.Fatalf("NA checksum %#04x, want %#04x", hdr.ICMP(na).Checksum(), c)
	}
	if mac, ok := na.LinkAddr(hdr.NDOptTargetLL); !ok || mac != wanMAC {
		t.Fatalf("NA target link-layer address %v %v", mac, ok)
	}
	return eth, ip, na
}

// TestNDAnswersOwnAddress: an NS for the port's IPv6 address (to its
// solicited-node group) gets a solicited NA to the sender's link-layer
// address; lbd's other addresses and other hosts' are not answered.
func TestNDAnswersOwnAddress(t *testing.T) {
	r := rig6(t)
	sn := wanAddr6.SolicitedNode()
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(wanAddr6, true)))
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want the NA (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, na := checkNA(t, out[0])
	if eth.Dst() != clientMAC || eth.Src() != wanMAC || ip.Dst() != clientAddr6 || na.Flags() != hdr.NAFlagSolicited|hdr.NAFlagOverride {
		t.Errorf("NA to %v/%v flags %#x", eth.Dst(), ip.Dst(), na.Flags())
	}
	// Another target; a forwarded NS (hop limit 64); a bad checksum.
	other := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::99"))
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(other, true)))
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 64, nsMsg(wanAddr6, true)))
	bad := icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(wanAddr6, true))
	bad[len(bad)-1] ^= 1
	r.inject(0, bad)
	r.w.poll()
	if n := len(r.sent(0)); n != 0 || r.w.cnt.own[DropNDNotOurs] != 1 || r.w.cnt.own[DropBadND] != 2 {
		t.Fatalf("sent %d, nd_not_ours %d, bad_nd %d", n, r.w.cnt.own[DropNDNotOurs], r.w.cnt.own[DropBadND])
	}
}

// TestNDDuplicateAddressDetection: an NS from :: (another host probing
// our address) is answered to all nodes, not solicited (RFC 4861 7.2.4).
func TestNDDuplicateAddressDetection(t *testing.T) {
	r := rig6(t)
	sn := wanAddr6.SolicitedNode()
	r.inject(0, icmp6Frame(clientMAC, sn.MulticastMAC(), hdr.Addr6{}, sn, 255, nsMsg(wanAddr6, false)))
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want the NA (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip, na := checkNA(t, out[0])
	if eth.Dst() != hdr.AllNodes.MulticastMAC() || ip.Dst() != hdr.AllNodes || na.Flags() != hdr.NAFlagOverride {
		t.Errorf("DAD answer to %v/%v flags %#x", eth.Dst(), ip.Dst(), na.Flags())
	}
}

// TestUnsolicitedNA: worker 0 announces the ports' IPv6 addresses once,
// when it first runs its commands.
func TestUnsolicitedNA(t *testing.T) {
	r := rig6(t)
	r.w.runCommands(0)
	r.w.flush()
	out := r.sent(0)
	if len(out) != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("wan sent %d frames, want one NA; lan has no IPv6 address", len(out))
	}
	eth, ip, na := checkNA(t, out[0])
	if eth.Dst() != hdr.AllNodes.MulticastMAC() || ip.Dst() != hdr.AllNodes || na.Flags() != hdr.NAFlagOverride {
		t.Errorf("unsolicited NA to %v/%v flags %#x", eth.Dst(), ip.Dst(), na.Flags())
	}
	r.w.runCommands(0)
	r.w.flush()
	if n := len(r.sent(0)); n != 0 {
		t.Errorf("announced again: %d frames", n)
	}
}

// TestAnnounce6Command: CmdAnnounce6 (a port's link came back) has the
// worker send that port's unsolicited NAs again, and none for a port
// without an IPv6 address.
func TestAnnounce6Command(t *testing.T) {
	r := rig6(t)
	r.w.runCommands(0)
	r.w.flush()
	r.sent(0) // the start's NA
	for _, port := range []int{0, 1, 7} {
		if !r.w.Commands().Push(Command{Kind: CmdAnnounce6, Port: port}) {
			t.Fatal("command ring full")
		}
	}
	r.w.runCommands(0)
	r.w.flush()
	out := r.sent(0)
	if len(out) != 1 || len(r.sent(1)) != 0 {
		t.Fatalf("sent %d frames on wan and %d on lan, want wan's NA alone", len(out), len(r.sent(1)))
	}
	if _, ip, na := checkNA(t, out[0]); ip.Dst() != hdr.AllNodes || na.Flags() != hdr.NAFlagOverride {
		t.Errorf("NA to %v flags %#x", ip.Dst(), na.Flags())
	}
}

// TestEcho6: an echo request to the port's IPv6 address is answered with
// a valid checksum; one to another address is dropped.
func TestEcho6(t *testing.T) {
	r := rig6(t)
	echo := []byte{hdr.ICMPv6EchoRequest, 0, 0, 0, 0x12, 0x34, 0, 1, 'p', 'i', 'n', 'g', '!'}
	r.inject(0, icmp6Frame(clientMAC, wanMAC, clientAddr6, wanAddr6, 64, echo))
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want the reply (drops %v)", len(out), dropsOf(r.w))
	}
	ip := hdr.IPv6(out[0][14:])
	msg := ip.Payload()
	if hdr.Ethernet(out[0]).Dst() != clientMAC || ip.Src() != wanAddr6 || ip.Dst() != clientAddr6 || msg[0] != hdr.ICMPv6EchoReply || string(msg[8:]) != "ping!" {
		t.Fatalf("reply wrong: %x", out[0])
	}
	if c := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, msg); c != hdr.ICMP(msg).Checksum() {
		t.Errorf("reply checksum %#04x, want %#04x", hdr.ICMP(msg).Checksum(), c)
	}
	r.inject(0, icmp6Frame(clientMAC, wanMAC, clientAddr6, clientAddr6, 64, echo))
	r.w.poll()
	if n := len(r.sent(0)); n != 0 || r.w.cnt.own[DropNoConn] != 1 {
		t.Fatalf("echo to another address: sent %d, no_conn %d", n, r.w.cnt.own[DropNoConn])
	}
}

// TestIPv6Drops: what lbd does not serve over IPv6 yet, or will not walk,
// is dropped, counted and freed (the rig checks for leaks): TCP to a
// port's own address, UDP without its mandatory checksum, a fragment
// whose data is not a multiple of 8 bytes while more follow.
func TestIPv6Drops(t *testing.T) {
	r := rig6(t)
	tcp := make([]byte, 20)
	tcp[12] = 5 << 4
	mk := func(next uint8, payload []byte) []byte {
		b := make([]byte, 14+40+len(payload))
		eth := hdr.Ethernet(b)
		eth.SetSrc(clientMAC)
		eth.SetDst(wanMAC)
		eth.SetEtherType(hdr.EtherTypeIPv6)
		hdr.IPv6(b[14:]).Encode(uint16(len(payload)), next, 64, clientAddr6, wanAddr6)
		copy(b[54:], payload)
		return b
	}
	lying := mk(hdr.ProtoTCP, tcp)
	lying[14+4] = 0x10 // payload length past the frame
	for _, tc := range []struct {
		name  string
		frame []byte
		why   Stat
	}{
		{"TCP", mk(hdr.ProtoTCP, tcp), DropToLocal},
		{"UDP", mk(hdr.ProtoUDP, []byte{0, 1, 0, 2, 0, 8, 0, 0}), DropBadL4},
		{"misaligned fragment", mk(44, append([]byte{hdr.ProtoTCP, 0, 0, 1, 0, 0, 0, 9}, tcp...)), DropBadFragment},
		{"ESP", mk(50, make([]byte, 16)), DropIPv6ExtHeader},
		{"lying length", lying, DropBadIPv6},
		{"truncated options", mk(hdr.ExtDestOpts, []byte{6, 4, 0, 0}), DropBadIPv6},
		{"router advertisement", icmp6Frame(clientMAC, wanMAC, clientAddr6, wanAddr6, 255, make([]byte, 16)), DropICMPType},
	} {
		if tc.name == "router advertisement" {
			tc.frame[54] = 134
		}
		before := r.w.cnt.own[tc.why]
		r.inject(0, tc.frame)
		r.w.poll()
		if n := len(r.sent(0)) + len(r.sent(1)); n != 0 || r.w.cnt.own[tc.why] != before+1 {
			t.Errorf("%s: sent %d, %s counted %d times", tc.name, n, tc.why.Name(), r.w.cnt.own[tc.why]-before)
		}
	}
}

// TestIPv6PathDoesNotAllocate: answering NS and echo requests allocates
// nothing on the Go heap.
func TestIPv6PathDoesNotAllocate(t *testing.T) {
	r := rig6(t)
	sn := wanAddr6.SolicitedNode()
	ns := icmp6Frame(clientMAC, sn.MulticastMAC(), clientAddr6, sn, 255, nsMsg(wanAddr6, true))
	echo := icmp6Frame(clientMAC, wanMAC, clientAddr6, wanAddr6, 64, []byte{hdr.ICMPv6EchoRequest, 0, 0, 0, 0, 1, 0, 1})
	if allocs := r.allocsPerBurst(0, 0, func(i int) []byte {
		if i%2 == 0 {
			return ns
		}
		return echo
	}); allocs != 0 {
		t.Errorf("%.1f allocations per burst", allocs)
	}
	if r.w.cnt.own[NDAdverts] == 0 || r.w.cnt.own[ICMPv6EchoReplies] == 0 {
		t.Fatalf("nothing answered: %v", dropsOf(r.w))
	}
}

// TestFloating6: a port's IPv6 floating address (the NAT servers' IPv6
// gateway) is answered in neighbour discovery and announced by
// unsolicited NA by the master only, and never learnt as a neighbour
// from the other director's advertisements.
func TestFloating6(t *testing.T) {
	r := rigSvc6(t)
	gw6 := hdr.Addr6From(netip.MustParseAddr("fd00:1::fe"))
	r.w.snap.Ports[1].Floating6 = []hdr.Addr6{gw6}
	sn := gw6.SolicitedNode()
	solicit := func() [][]byte {
		r.inject(1, icmp6Frame(rs1MAC, sn.MulticastMAC(), rs61, sn, 255, nsMsg(gw6, true)))
		r.w.poll()
		return r.sent(1)
	}
	out := solicit()
	if len(out) != 1 {
		t.Fatalf("master sent %d frames for the floating gateway's NS, want its NA (drops %v)", len(out), dropsOf(r.w))
	}
	eth, ip := hdr.Ethernet(out[0]), hdr.IPv6(hdr.Ethernet(out[0]).Payload())
	na := hdr.ND(ip.Payload())
	if mac, ok := na.LinkAddr(hdr.NDOptTargetLL); hdr.ICMP(na).Type() != hdr.ICMPv6NeighAdvert || na.Target() != gw6 ||
		ip.Src() != gw6 || eth.Src() != lanMAC || !ok || mac != lanMAC {
		t.Fatalf("not the floating gateway's NA: %x", out[0])
	}
	announced := func() map[hdr.Addr6]bool {
		r.w.announce6()
		r.w.poll()
		got := map[hdr.Addr6]bool{}
		for _, f := range r.sent(1) {
			ip := hdr.IPv6(hdr.Ethernet(f).Payload())
			if na := hdr.ND(ip.Payload()); hdr.ICMP(na).Type() == hdr.ICMPv6NeighAdvert && na.Flags() == hdr.NAFlagOverride {
				got[na.Target()] = true
			}
		}
		return got
	}
	if got := announced(); !got[gw6] || !got[lanAddr6] || len(got) != 2 {
		t.Fatalf("master announced %v on the lan port, want its address and the floating gateway", got)
	}
	if r.w.learnable6(&r.w.snap.Ports[1], &gw6) {
		t.Fatal("the floating gateway is learnable as a neighbour")
	}

	r.w.snap.Backup = true
	if out := solicit(); len(out) != 0 {
		t.Fatalf("a backup answered the floating gateway's NS: %x", out)
	}
	if got := announced(); got[gw6] || !got[lanAddr6] {
		t.Fatalf("a backup announced %v on the lan port", got)
	}
}
