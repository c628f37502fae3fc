package lcore

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

var (
	vipAddr6 = hdr.Addr6From(netip.MustParseAddr("2001:db8:1::10"))
	rs1Addr6 = hdr.Addr6From(netip.MustParseAddr("2001:db8:2::11"))
)

// udp6Frame is an Ethernet/IPv6/UDP frame with n bytes of payload and a
// valid UDP checksum.
func udp6Frame(srcMAC, dstMAC hdr.MAC, src hdr.Addr6, sport uint16, dst hdr.Addr6, dport uint16, n int) []byte {
	b := make([]byte, 14+40+8+n)
	eth := hdr.Ethernet(b)
	eth.SetSrc(srcMAC)
	eth.SetDst(dstMAC)
	eth.SetEtherType(hdr.EtherTypeIPv6)
	hdr.IPv6(b[14:]).Encode(uint16(8+n), hdr.ProtoUDP, 64, src, dst)
	u := b[54:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+n))
	for i := range u[8:] {
		u[8+i] = byte(i*7 + int(sport))
	}
	binary.BigEndian.PutUint16(u[6:], hdr.TransportChecksum6(src, dst, hdr.ProtoUDP, u))
	return b
}

// fragment6Frames cuts the IPv6 packet of a frame without extension
// headers into fragments of at most mtu bytes, each with a fragment
// header of identification id, as a sender's kernel does.
func fragment6Frames(f []byte, mtu int, id uint32) [][]byte {
	ip := hdr.IPv6(f[14:])
	next, data := ip.NextHeader(), ip.Payload()
	step := (mtu - 40 - 8) &^ 7
	var out [][]byte
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		b := make([]byte, 14+40+8+end-off)
		copy(b, f[:14+40])
		fip := hdr.IPv6(b[14:])
		fip.SetNextHeader(hdr.ExtFragment)
		fip.SetPayloadLength(uint16(8 + end - off))
		fh := b[54:62]
		fh[0] = next
		fo := uint16(off)
		if end < len(data) {
			fo |= 1
		}
		binary.BigEndian.PutUint16(fh[2:], fo)
		binary.BigEndian.PutUint32(fh[4:], id)
		copy(b[62:], data[off:end])
		out = append(out, b)
	}
	return out
}

// walk6 walks a frame's IPv6 header, failing the test if it does not pass.
func walk6(t *testing.T, f []byte) (hdr.IPv6, hdr.Ext6) {
	t.Helper()
	ip := hdr.IPv6(f[14:])
	if !ip.IsValid(len(ip)) {
		t.Fatalf("invalid IPv6 header: %x", f[:54])
	}
	x, v := ip.WalkExt()
	if v != hdr.ExtOK || !x.Fragment {
		t.Fatalf("walk %v fragment %v", v, x.Fragment)
	}
	return ip, x
}

// TestCheckFragment6: IPv6 fragments are classified, and the malformed
// ones refused, under IPv4's rules.
func TestCheckFragment6(t *testing.T) {
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 4000), 1500, 7)
	if len(frags) != 3 {
		t.Fatalf("%d fragments", len(frags))
	}
	set := func(f []byte, fo uint16, plen int) []byte {
		g := append([]byte(nil), f...)
		binary.BigEndian.PutUint16(g[54+2:], fo)
		if plen >= 0 {
			binary.BigEndian.PutUint16(g[14+4:], uint16(plen))
			g = g[:54+plen]
		}
		return g
	}
	tcp := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 80, 64)
	hdr.IPv6(tcp[14:]).SetNextHeader(hdr.ProtoTCP)
	tcp[54+12] = 5 << 4 // a 20-byte TCP header
	tcpFrags := fragment6Frames(tcp, 80, 9)
	icmpFrag := append([]byte(nil), frags[0]...)
	icmpFrag[54] = hdr.ProtoICMPv6
	optsFrag := append([]byte(nil), frags[1]...) // a later one: the walk stops at its fragment header
	optsFrag[54] = hdr.ExtDestOpts
	for _, tc := range []struct {
		name string
		f    []byte
		frag uint8
		why  Stat
	}{
		{"first", frags[0], fragFirst, 0},
		{"middle", frags[1], fragLater, 0},
		{"last", frags[2], fragLater, 0},
		{"atomic", set(frags[0], 0, -1), fragNone, 0},
		{"ICMPv6 fragment", icmpFrag, fragNone, DropFragment},
		{"options after the fragment header", optsFrag, fragNone, DropFragment},
		{"misaligned middle", set(frags[1], 1448|1, 8+1001), fragNone, DropBadFragment},
		{"tiny UDP first", set(frags[0], 1, 8+0), fragNone, DropBadFragment},
		{"tiny TCP first", set(tcpFrags[0], 1, 8+16), fragNone, DropBadFragment},
		{"TCP at offset 8", set(tcpFrags[1], 8|1, -1), fragNone, DropBadFragment},
		{"past 65535 bytes", set(frags[2], 65000, -1), fragNone, DropFragOversize},
		{"last byte at 65535", set(frags[2], (0xffff-uint16(len(frags[2])-62))&^7, -1), fragLater, 0},
	} {
		ip, x := walk6(t, tc.f)
		frag, why := checkFragment6(ip, x)
		if frag != tc.frag || why != tc.why {
			t.Errorf("%s: frag %d drop %q, want %d %q", tc.name, frag, why.Name(), tc.frag, tc.why.Name())
		}
	}
}

// TestFragTableIPv6: IPv6 datagrams share the table with IPv4 ones; every
// fragment of one finds its entry, the geometry makes it whole at its
// last byte, and datagrams whose folded keys are equal stay apart.
func TestFragTableIPv6(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 4000), 1500, 0x01020304)
	var a fragAddrs6
	var first *fragEntry
	for i, f := range frags {
		ip, x := walk6(t, f)
		k := fragKey6(ip, x, &a)
		if !k.v6 || k.id != 0x01020304 || k.proto != hdr.ProtoUDP || a != (fragAddrs6{clientAddr6, vipAddr6}) {
			t.Fatalf("fragment %d: key %+v addresses %v", i, k, a)
		}
		w.frags.cur = a
		e, why := w.findFrag(k)
		if e == nil {
			t.Fatalf("fragment %d: %s", i, why.Name())
		}
		if first == nil {
			first = e
		} else if e != first {
			t.Fatalf("fragment %d found another entry", i)
		}
		if whole := e.account(fragGeometry6(ip, x)); whole != (i == len(frags)-1) {
			t.Fatalf("fragment %d: whole %v", i, whole)
		}
	}
	// An IPv4 datagram whose key equals the IPv6 one's but for v6, and
	// an IPv6 one with the same folds and other addresses, get their own.
	ip, x := walk6(t, frags[0])
	k := fragKey6(ip, x, &a)
	k4 := k
	k4.v6 = false
	other := fragAddrs6{rs1Addr6, vipAddr6}
	e4, _ := w.findFrag(k4)
	w.frags.cur = other
	e6, _ := w.findFrag(k)
	if e4 == nil || e6 == nil || e4 == first || e6 == first || e4 == e6 {
		t.Fatal("datagrams with equal folded keys share an entry")
	}
	w.frags.cur = a
	if e, _ := w.findFrag(k); e != first {
		t.Fatal("the first datagram's entry was lost")
	}
}
