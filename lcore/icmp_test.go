package lcore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// TestTunnelFragNeeded: a DF packet too big for the tunnel is answered with
// ICMP "fragmentation needed" carrying the MTU minus the outer header.
func TestTunnelFragNeeded(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	big := withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1500-40))))
	r.inject(0, big)
	w.poll()
	if n := len(r.sent(1)); n != 0 {
		t.Fatalf("a too-big packet was tunnelled (%d)", n)
	}
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("no ICMP back to the client (stats %v)", w.cnt.own)
	}
	eth := hdr.Ethernet(out[0])
	rip := hdr.IPv4(eth.Payload())
	if eth.Dst() != clientMAC || eth.Src() != wanMAC || !rip.IsChecksumValid() || rip.Protocol() != hdr.ProtoICMP ||
		rip.Src() != wanAddr || rip.Dst() != clientIP {
		t.Fatalf("bad ICMP packet %x", out[0])
	}
	icmp := hdr.ICMP(rip.Payload())
	if icmp.Type() != hdr.ICMPDestUnreachable || icmp.Code() != hdr.ICMPCodeFragNeeded || icmp.MTU() != 1480 ||
		icmp.Checksum() != recomputeICMP(icmp) {
		t.Fatalf("bad ICMP %x", icmp)
	}
	if !bytes.Equal(icmp.Payload(), big[14:14+28]) {
		t.Fatalf("quoted %x, want the original header and 8 bytes", icmp.Payload())
	}
}

func recomputeICMP(icmp hdr.ICMP) uint16 {
	c := append(hdr.ICMP(nil), icmp...)
	c.SetChecksum(0)
	return hdr.ICMPChecksum(c)
}

func echoFrame(dst uint32) []byte {
	l4 := make([]byte, 8+4)
	icmp := hdr.ICMP(l4)
	icmp.SetType(hdr.ICMPEchoRequest)
	icmp.SetID(7)
	icmp.SetSeq(1)
	copy(l4[8:], "ping")
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(clientMAC, wanMAC, clientIP, dst, hdr.ProtoICMP, false, l4)
}

func TestEchoToVIP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	for _, dst := range []uint32{vip, wanAddr} {
		r.inject(0, echoFrame(dst))
		w.poll()
		out := r.sent(0)
		if len(out) != 1 {
			t.Fatalf("no echo reply from %x", dst)
		}
		ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
		icmp := hdr.ICMP(ip.Payload())
		if !ip.IsChecksumValid() || ip.Src() != dst || ip.Dst() != clientIP || icmp.Type() != hdr.ICMPEchoReply ||
			icmp.ID() != 7 || string(icmp.Payload()) != "ping" || icmp.Checksum() != recomputeICMP(icmp) {
			t.Fatalf("bad echo reply %x", out[0])
		}
		if hdr.Ethernet(out[0]).Dst() != clientMAC {
			t.Fatal("echo reply not sent back to the sender")
		}
	}
	r.inject(0, echoFrame(ip4(203, 0, 113, 77)))
	w.poll()
	if len(r.sent(0)) != 0 || w.cnt.own[DropNoConn] != 1 {
		t.Fatal("answered an echo for someone else")
	}
}

// icmpErrorFrame quotes a packet (its IP header and first 8 bytes).
func icmpErrorFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, typ, code uint8, quotedFrame []byte) []byte {
	q := quotedFrame[14 : 14+28]
	l4 := make([]byte, 8+len(q))
	icmp := hdr.ICMP(l4)
	icmp.SetType(typ)
	icmp.SetCode(code)
	copy(l4[8:], q)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(srcMAC, dstMAC, src, dst, hdr.ProtoICMP, false, l4)
}

func TestICMPErrorsNAT(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true))
	w.poll()
	toRS := r.sent(1)[0]

	// rs1 says "port unreachable" about the datagram we sent it: the
	// client must hear it from the VIP, quoting client -> VIP:53.
	r.inject(1, icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3, toRS))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("error from the server not delivered (stats %v)", w.cnt.own)
	}
	ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	icmp := hdr.ICMP(ip.Payload())
	q := hdr.IPv4(icmp.Payload())
	if !ip.IsChecksumValid() || ip.Src() != vip || ip.Dst() != clientIP || icmp.Checksum() != recomputeICMP(icmp) {
		t.Fatalf("outer %x", out[0])
	}
	if q.Src() != clientIP || q.Dst() != vip || binary.BigEndian.Uint16(q[22:]) != 53 || !q.IsChecksumValid() {
		t.Fatalf("quoted packet not translated: %x", q)
	}
	if got, want := binary.BigEndian.Uint16(q[26:]), udpChecksumOf(t, udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true)); got != want {
		t.Fatalf("quoted UDP checksum %#x, want the original's %#x", got, want)
	}

	// The client says "unreachable" about the reply it got from the VIP:
	// rs1 must hear it quoting rs1:5353 -> client.
	r.inject(1, udpFrame(rs1MAC, lanMAC, rs1, 5353, clientIP, 40000, "a", true))
	w.poll()
	toClient := r.sent(0)[0]
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, clientIP, vip, hdr.ICMPDestUnreachable, 3, toClient))
	w.poll()
	out = r.sent(1)
	if len(out) != 1 {
		t.Fatal("error from the client not delivered")
	}
	ip = hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	icmp = hdr.ICMP(ip.Payload())
	q = hdr.IPv4(icmp.Payload())
	if ip.Dst() != rs1 || !ip.IsChecksumValid() || icmp.Checksum() != recomputeICMP(icmp) ||
		q.Src() != rs1 || binary.BigEndian.Uint16(q[20:]) != 5353 || !q.IsChecksumValid() {
		t.Fatalf("client's error not translated: %x", out[0])
	}
	if w.cnt.own[ICMPErrors] != 2 {
		t.Fatalf("icmp_errors = %d", w.cnt.own[ICMPErrors])
	}
	// An error about no connection is dropped.
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, clientIP, vip, hdr.ICMPDestUnreachable, 3,
		udpFrame(wanMAC, clientMAC, vip, 53, clientIP, 49999, "x", true)))
	w.poll()
	if len(r.sent(0))+len(r.sent(1)) != 0 {
		t.Fatal("an unrelated ICMP error was forwarded")
	}
}

func udpChecksumOf(t *testing.T, f []byte) uint16 {
	t.Helper()
	return hdr.UDP(hdr.IPv4(f[14:]).Payload()).Checksum()
}
