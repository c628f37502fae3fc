package lcore

import (
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
)

// checkFragmentAddrs fails unless every fragment goes src -> dst with a
// good IPv4 header checksum.
func checkFragmentAddrs(t *testing.T, frames [][]byte, src, dst uint32) {
	t.Helper()
	for i, f := range frames {
		ip := hdr.IPv4(hdr.Ethernet(f).Payload())
		if ip.Src() != src || ip.Dst() != dst || !ip.IsChecksumValid() {
			t.Fatalf("fragment %d (offset %d): %x -> %x checksum ok %v, want %x -> %x",
				i, ip.FragmentOffset(), ip.Src(), ip.Dst(), ip.IsChecksumValid(), src, dst)
		}
	}
}

// passAll injects frames on port in, polls, and returns what port out
// sent, failing unless it is as many frames.
func (r *rig) passAll(t *testing.T, in, out int, frames [][]byte) [][]byte {
	t.Helper()
	for _, f := range frames {
		r.inject(in, f)
	}
	r.w.poll()
	sent := r.sent(out)
	if len(sent) != len(frames) {
		t.Fatalf("port %d sent %d frames of %d (drops %v)", out, len(sent), len(frames), dropsOf(r.w))
	}
	return sent
}

// TestFragmentsFullNATBothWays: every fragment of a FullNAT datagram
// leaves LIP -> RIP, the later ones too (they once left with the client's
// addresses), and the server's fragmented answer returns VIP -> client;
// the first fragment's transport checksum, updated for the whole datagram,
// is not handed to the NIC even when it found the fragment's checksum
// "good" and the port offloads.
func TestFragmentsFullNATBothWays(t *testing.T) {
	r := newRigWith(t, defaultNeigh(), true)
	withFullNATUDP(r)
	w := r.w
	frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 40000, vipFN, 53, 4000, 21), 1500)
	if len(frags) != 3 {
		t.Fatalf("%d fragments", len(frags))
	}
	r.inject(0, frags[2]) // overtakes the first: held
	r.injectFlags(0, frags[0], mbuf.RxIPCksumGood|mbuf.RxL4CksumGood)
	r.inject(0, frags[1])
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("lan sent %d fragments, want 3 (drops %v)", len(out), dropsOf(w))
	}
	checkFragmentAddrs(t, out, lip1, rs2)
	lport := hdr.UDP(hdr.IPv4(hdr.Ethernet(out[0]).Payload()).Payload()).SrcPort()
	checkReassembledUDP(t, out, lip1, lport, rs2, 5353, 4000)
	if w.cnt.own[CsumOffloaded] != 0 {
		t.Fatal("a fragment's checksum was left to the NIC")
	}

	out = r.passAll(t, 1, 0, fragmentFrame(bigUDP(rs2MAC, lanMAC, rs2, 5353, lip1, lport, 4000, 22), 1500))
	checkFragmentAddrs(t, out, vipFN, clientIP)
	checkReassembledUDP(t, out, vipFN, 53, clientIP, 40000, 4000)
	if st := w.cnt.own; st[Fragments] != 6 || st[NewConns] != 1 {
		t.Fatalf("fragments %d new conns %d", st[Fragments], st[NewConns])
	}
}

// TestFragmentsFullNATShifted: the PROXY v2 header would go into the
// first fragment of the client's first data and shift every later one by
// 28 bytes, which no rewrite of a later fragment can follow: the whole
// datagram is dropped, counted fragment_shifted, rather than sent
// corrupt. Later segments in fragments take only sequence numbers moved
// in the first fragment's TCP header, and pass.
func TestFragmentsFullNATShifted(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, true)
	w := r.w
	const isn = 7000
	lport := openFullNAT(t, r, 40010, isn, 500)

	data := string(make([]byte, 3000))
	frags := fragmentFrame(tcpSeg(clientMAC, wanMAC, clientIP, 40010, vipFN, 80, hdr.TCPFlagACK, isn+1, 501, nil, data), 1500)
	r.inject(0, frags[1]) // held, then dropped behind the first
	r.inject(0, frags[0])
	r.inject(0, frags[2])
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[DropFragShifted] != 3 || w.cnt.own[ProxyHeaders] != 0 {
		t.Fatalf("sent %d fragments of the first data; fragment_shifted %d, proxy_headers %d (drops %v)",
			n, w.cnt.own[DropFragShifted], w.cnt.own[ProxyHeaders], dropsOf(w))
	}

	// The client sends its first bytes again in a small segment: the
	// header goes in.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40010, vipFN, 80, hdr.TCPFlagACK, isn+1, 501, nil, "hello"))
	w.poll()
	if _, _, tcp := checkTCP(t, one(t, r, 1)); len(tcp.Payload()) != proxyV2Len+5 {
		t.Fatalf("first data: %d bytes", len(tcp.Payload()))
	}
	// The next segment, fragmented, has its seq moved in the first fragment.
	next := isn + 1 + 5
	out := r.passAll(t, 0, 1, fragmentFrame(tcpSeg(clientMAC, wanMAC, clientIP, 40010, vipFN, 80, hdr.TCPFlagACK, uint32(next), 501, nil, data), 1500))
	checkFragmentAddrs(t, out, lip1, rs1)
	s, d, l4 := reassemble(t, out)
	seg := hdr.TCP(l4)
	if seg.Seq() != uint32(next+proxyV2Len) || seg.SrcPort() != lport || seg.DstPort() != 8081 || len(seg.Payload()) != 3000 {
		t.Fatalf("segment seq %d (want %d) %d -> %d, %d bytes", seg.Seq(), next+proxyV2Len, seg.SrcPort(), seg.DstPort(), len(seg.Payload()))
	}
	if want := hdr.TransportChecksum(s, d, hdr.ProtoTCP, l4); seg.Checksum() != want {
		t.Fatalf("TCP checksum %#04x, full recomputation gives %#04x", seg.Checksum(), want)
	}
	if w.cnt.own[DropFragShifted] != 3 {
		t.Fatalf("fragment_shifted %d", w.cnt.own[DropFragShifted])
	}
}
