package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// tunnel6 wraps a frame's IPv6 packet in an outer IPv6 header from src
// to dst, as VS/TUN over IPv6 sends it.
func tunnel6(f []byte, src, dst hdr.Addr6) []byte {
	b := make([]byte, len(f)+40)
	copy(b, f[:14])
	hdr.IPv6(b[14:]).Encode(uint16(len(f)-14), hdr.ProtoIPv6, 64, src, dst)
	copy(b[54:], f[14:])
	return b
}

// TestUntunnelICMPv6: a router's Packet Too Big about our IPv6-in-IPv6
// packet becomes one from the VIP to the client quoting the inner
// packet, cut to fit 1280 bytes, with a right checksum.
func TestUntunnelICMPv6(t *testing.T) {
	r := rig6(t)
	inner := udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vipAddr6, 53, 1400)
	tun := tunnel6(inner, wanAddr6, rs1Addr6)
	for _, quoteLen := range []int{0, 1232, 200} {
		f := icmp6Error(routerAddr6, wanAddr6, hdr.ICMPv6PacketTooBig, 0, 1400, tun, quoteLen)
		var d desc
		parse(&d, r.mbufOf(f), 1)
		q, why := parseQuote6(hdr.ICMP(d.l4Bytes6()))
		if why != 0 || q.outer == nil {
			t.Fatalf("quote of %d: %s, outer %v", quoteLen, why.Name(), q.outer != nil)
		}
		if why := untunnelICMPv6(&d, q, 1400-tunnel6HeaderLen, vipAddr6, clientAddr6); why != 0 {
			t.Fatalf("quote of %d: %s", quoteLen, why.Name())
		}
		out := append([]byte(nil), d.m.Data()...)
		d.m.Free()
		ip := hdr.IPv6(out[14:])
		if !ip.IsValid(len(ip)) || ip.Src() != vipAddr6 || ip.Dst() != clientAddr6 || ip.NextHeader() != hdr.ProtoICMPv6 || len(ip) > 1280 {
			t.Fatalf("quote of %d: %v -> %v, %d bytes", quoteLen, ip.Src(), ip.Dst(), len(ip))
		}
		icmp := hdr.ICMP(ip.Payload())
		if icmp.Type() != hdr.ICMPv6PacketTooBig || binary.BigEndian.Uint32(icmp[4:]) != 1360 {
			t.Fatalf("type %d MTU %d", icmp.Type(), binary.BigEndian.Uint32(icmp[4:]))
		}
		if c := hdr.TransportChecksum6(ip.Src(), ip.Dst(), hdr.ProtoICMPv6, icmp); c != icmp.Checksum() {
			t.Fatalf("checksum %#04x, want %#04x", icmp.Checksum(), c)
		}
		want := len(q.ip)
		if !bytes.Equal(icmp[8:], inner[14:14+min(want, 1232)]) || !bytes.Equal(out[:14], f[:14]) {
			t.Fatalf("quote of %d: the inner packet is not quoted (%d bytes)", quoteLen, len(icmp)-8)
		}
	}
}

// TestPathMTUs6: a learnt MTU applies to its server only, is raised to
// 1280, and expires.
func TestPathMTUs6(t *testing.T) {
	var p pathMTUs6
	if got := p.learn(&rs1Addr6, 1000, 0); got != minMTU6 {
		t.Fatalf("learnt %d from a report of 1000", got)
	}
	p.learn(&rs1Addr6, 1400, 0)
	if got := p.get(&rs1Addr6, 1500, 1); got != 1400 {
		t.Fatalf("MTU %d, want 1400", got)
	}
	if got := p.get(&vipAddr6, 1500, 1); got != 1500 {
		t.Fatalf("another server's MTU %d", got)
	}
	if got := p.get(&rs1Addr6, 1500, pathMTUExpiry+1); got != 1500 {
		t.Fatalf("MTU %d after expiry", got)
	}
}
