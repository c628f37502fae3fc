package lcore

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/spsc"
)

// newKernelRig is a rig whose lan port (1) has a kernel interface: the
// test reads the worker's ring to it and writes the kernel's frames.
func newKernelRig(t *testing.T) (*rig, *KernelRing, *KernelRing) {
	r := newRig(t, defaultNeigh())
	out, _ := spsc.New[*mbuf.Mbuf](4)
	in, _ := spsc.New[*mbuf.Mbuf](64)
	r.w.cfg.Ports[1].Kernel = true
	r.w.cfg.Kernel = KernelIO{Out: out, In: in}
	t.Cleanup(func() { // before the rig's leak check
		for _, q := range []*KernelRing{out, in} {
			for m, ok := q.Pop(); ok; m, ok = q.Pop() {
				m.Free()
			}
		}
	})
	return r, out, in
}

// takeKernel takes what the worker handed the kernel (copies, freed), each
// with the port its mbuf names.
func takeKernel(out *KernelRing) (frames [][]byte, ports []uint16) {
	for m, ok := out.Pop(); ok; m, ok = out.Pop() {
		frames = append(frames, append([]byte(nil), m.Data()...))
		ports = append(ports, m.Port())
		m.Free()
	}
	return frames, ports
}

func echoReplyFrame(srcMAC, dstMAC hdr.MAC, src, dst uint32, id uint16) []byte {
	return echoOfType(hdr.ICMPEchoReply, srcMAC, dstMAC, src, dst, id, "pong")
}

// echoOfType is an ICMP echo message of type typ, sequence number 1.
func echoOfType(typ uint8, srcMAC, dstMAC hdr.MAC, src, dst uint32, id uint16, data string) []byte {
	l4 := make([]byte, 8+len(data))
	icmp := hdr.ICMP(l4)
	icmp.SetType(typ)
	icmp.SetID(id)
	icmp.SetSeq(1)
	copy(l4[8:], data)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return ipFrame(srcMAC, dstMAC, src, dst, hdr.ProtoICMP, false, l4)
}

// TestKernelGetsWhatIsLocal: what reaches the lan port for its own
// address and lbd does not take goes to the kernel's ring untouched;
// the wan port, without a kernel interface, still drops it (to_local).
func TestKernelGetsWhatIsLocal(t *testing.T) {
	r, out, _ := newKernelRig(t)
	w := r.w
	ssh := tcpFrame(rs1MAC, lanMAC, rs1, 40000, lanAddr, 22, hdr.TCPFlagSYN, "")
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"a TCP SYN to the port's address", ssh},
		{"a UDP datagram to it", udpFrame(rs1MAC, lanMAC, rs1, 179, lanAddr, 5353, "bgp?", true)},
		{"the kernel's ping answered", echoReplyFrame(rs1MAC, lanMAC, rs1, lanAddr, 4242)},
		{"an ICMP error about the kernel's traffic", icmpErrorFrame(rs1MAC, lanMAC, rs1, lanAddr, hdr.ICMPDestUnreachable, 3,
			udpFrame(lanMAC, rs1MAC, lanAddr, 33000, rs1, 53, "q", true))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.cnt.own[ToKernel]
			r.inject(1, tc.frame)
			w.poll()
			frames, ports := takeKernel(out)
			if len(frames) != 1 || !bytes.Equal(frames[0], tc.frame) || ports[0] != 1 {
				t.Fatalf("the kernel got %d frames (ports %v), want the one sent as it came", len(frames), ports)
			}
			if w.cnt.own[ToKernel] != before+1 || w.cnt.own[DropToLocal] != 0 {
				t.Fatalf("to_kernel %d (want %d), to_local %d", w.cnt.own[ToKernel], before+1, w.cnt.own[DropToLocal])
			}
		})
	}
	if len(r.sent(1)) != 0 {
		t.Fatal("lbd answered what the kernel is to")
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, wanAddr, 22, hdr.TCPFlagSYN, ""))
	w.poll()
	if frames, _ := takeKernel(out); len(frames) != 0 || w.cnt.own[DropToLocal] != 1 {
		t.Fatalf("a port without a kernel interface: %d to the kernel, to_local %d", len(frames), w.cnt.own[DropToLocal])
	}
	// lbd's own business stays lbd's: an echo request is answered, a
	// probe's answer is a probe's.
	r.inject(1, ipFrame(rs1MAC, lanMAC, rs1, lanAddr, hdr.ProtoICMP, false, echoFrame(lanAddr)[34:]))
	r.inject(1, echoReplyFrame(rs1MAC, lanMAC, rs1, lanAddr, ProbePortFirst))
	w.poll()
	if frames, _ := takeKernel(out); len(frames) != 0 || len(r.sent(1)) != 1 || w.cnt.own[ProbeAnswers] != 1 {
		t.Fatalf("echo request and probe answer: %d to the kernel, probe_answers %d", len(frames), w.cnt.own[ProbeAnswers])
	}
	// A full ring drops (kernel_full), nothing leaks.
	for range out.Cap() + 2 {
		r.inject(1, ssh)
	}
	w.poll()
	if got := out.Len(); got != out.Cap() || w.cnt.own[DropKernelFull] != 2 {
		t.Fatalf("ring %d of %d, kernel_full %d (want 2)", got, out.Cap(), w.cnt.own[DropKernelFull])
	}
}

// TestKernelARP: an ARP reply to the port's address is learnt and then
// the kernel's (it resolves its own neighbours); a request for it lbd
// answers itself.
func TestKernelARP(t *testing.T) {
	r, out, _ := newKernelRig(t)
	w := r.w
	reply := arpFrame(hdr.ARPReply, rs2MAC, rs2, lanAddr)
	r.inject(1, reply)
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Kind != EvNeighbour || ev.IP != rs2 {
		t.Fatalf("reply not learnt: %+v", ev)
	}
	if frames, _ := takeKernel(out); len(frames) != 1 || !bytes.Equal(frames[0], reply) || w.cnt.own[ARPReceived] != 1 {
		t.Fatalf("the kernel got %d frames, arp_received %d", len(frames), w.cnt.own[ARPReceived])
	}
	r.inject(1, arpFrame(hdr.ARPRequest, rs2MAC, rs2, lanAddr))
	w.poll()
	if frames, _ := takeKernel(out); len(frames) != 0 || len(r.sent(1)) != 1 {
		t.Fatal("a request for the port's address is not lbd's to answer")
	}
	// A neighbour advertisement unicast to the port is the kernel's too;
	// one to all nodes is not.
	self, rs := hdr.Addr6From(netip.MustParseAddr("2001:db8:2::1")), hdr.Addr6From(netip.MustParseAddr("2001:db8:2::11"))
	w.snap.Ports[1].Addr6 = self
	msg := make([]byte, hdr.NDLen+hdr.NDOptLen)
	hdr.ND(msg).EncodeND(hdr.ICMPv6NeighAdvert, hdr.NAFlagSolicited, rs, hdr.NDOptTargetLL, rs2MAC)
	na := icmp6Frame(rs2MAC, lanMAC, rs, self, 255, msg)
	r.inject(1, na)
	r.inject(1, icmp6Frame(rs2MAC, hdr.AllNodes.MulticastMAC(), rs, hdr.AllNodes, 255, msg))
	w.poll()
	if frames, _ := takeKernel(out); len(frames) != 1 || !bytes.Equal(frames[0], na) || w.cnt.own[NDReceived] != 2 {
		t.Fatalf("the kernel got %d frames, nd_received %d", len(frames), w.cnt.own[NDReceived])
	}
}

// TestKernelFramesLeave: what the kernel writes leaves through its port
// as it was written, by worker 0's kernel job.
func TestKernelFramesLeave(t *testing.T) {
	r, _, in := newKernelRig(t)
	w := r.w
	frame := tcpFrame(lanMAC, rs1MAC, lanAddr, 22, rs1, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, "")
	for range 2 {
		m, err := mbuf.Alloc(r.pool)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := m.Append(len(frame))
		copy(b, frame)
		m.SetPort(1)
		in.Push(m)
	}
	w.runKernel(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 2 || !bytes.Equal(out[0], frame) || w.cnt.own[FromKernel] != 2 {
		t.Fatalf("sent %d frames, from_kernel %d", len(out), w.cnt.own[FromKernel])
	}
}

// TestKernelPathDoesNotAllocate: handing a packet to the kernel, and
// sending the kernel's, allocate nothing.
func TestKernelPathDoesNotAllocate(t *testing.T) {
	r, out, in := newKernelRig(t)
	w := r.w
	frame := tcpFrame(rs1MAC, lanMAC, rs1, 40000, lanAddr, 22, hdr.TCPFlagACK, "")
	allocs := testing.AllocsPerRun(100, func() {
		r.inject(1, frame)
		w.poll()
		m, ok := out.Pop()
		if !ok {
			t.Fatal("nothing for the kernel")
		}
		in.Push(m) // the kernel's frame, sent back out
		w.runKernel(0)
		w.flush()
		n := r.tx[1].SCDequeueBurst(r.objs)
		for _, p := range r.objs[:n] {
			mbuf.FromPointer(p).Free()
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per packet", allocs)
	}
}

// TestKernelGetsFragments: a datagram to the port's own address in
// fragments reaches the kernel whole, the later fragments after the
// first (which had the ports), IPv4 and IPv6: the kernel reassembles.
func TestKernelGetsFragments(t *testing.T) {
	r, out, _ := newKernelRig(t)
	w := r.w
	ports := append([]PortInfo(nil), w.snap.Ports...)
	m64 := Mask6(64)
	ports[1].Addr6, ports[1].Mask6, ports[1].Net6 = lanAddr6, m64, masked6(&lanAddr6, &m64)
	next := NewSnapshot(w.snap.Gen+1, ports, w.snap.Services, w.snap.Neigh, w.snap.Timeouts)
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	w.runCommands(0)
	for name, frags := range map[string][][]byte{
		"IPv4": fragmentFrame(bigUDP(rs1MAC, lanMAC, rs1, 5000, lanAddr, 5353, 3000, 77), 1200),
		"IPv6": fragment6Frames(udp6Frame(rs1MAC, lanMAC, rs61, 5000, lanAddr6, 5353, 3000), 1280, 77),
	} {
		t.Run(name, func(t *testing.T) {
			if len(frags) != 3 {
				t.Fatalf("%d fragments, want 3", len(frags))
			}
			before := w.cnt.own[ToKernel]
			for _, f := range frags {
				r.inject(1, f)
				w.poll()
			}
			got, _ := takeKernel(out)
			if len(got) != len(frags) || w.cnt.own[ToKernel] != before+3 {
				t.Fatalf("the kernel got %d of the %d fragments (to_kernel +%d, no_conn %d)", len(got), len(frags), w.cnt.own[ToKernel]-before, w.cnt.own[DropNoConn])
			}
			for i := range got {
				if !bytes.Equal(got[i], frags[i]) {
					t.Errorf("fragment %d changed on its way to the kernel", i)
				}
			}
		})
	}
}
