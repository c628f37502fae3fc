package lcore

import (
	"sort"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// bigUDP is an Ethernet/IPv4/UDP frame with n bytes of payload, IP ID id,
// and a valid UDP checksum: a datagram to cut into fragments.
func bigUDP(srcMAC, dstMAC hdr.MAC, src uint32, sport uint16, dst uint32, dport uint16, n int, id uint16) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i*7 + int(id))
	}
	f := udpFrame(srcMAC, dstMAC, src, sport, dst, dport, string(payload), true)
	ip := hdr.IPv4(f[14:])
	ip.SetID(id)
	ip.SetChecksum(0)
	ip.SetChecksum(ip.CalculateChecksum())
	return f
}

// fragmentFrame cuts a frame's IPv4 datagram into fragments of at most
// mtu bytes, as a sender's kernel does.
func fragmentFrame(f []byte, mtu int) [][]byte {
	ip := hdr.IPv4(f[14:])
	hl := ip.HeaderLen()
	data := ip.Payload()
	step := (mtu - hl) &^ 7
	var out [][]byte
	for off := 0; off < len(data); off += step {
		end := min(off+step, len(data))
		b := make([]byte, 14+hl+end-off)
		copy(b, f[:14+hl])
		copy(b[14+hl:], data[off:end])
		fip := hdr.IPv4(b[14:])
		var flags uint8
		if end < len(data) {
			flags = hdr.IPv4FlagMoreFragments
		}
		fip.SetFlagsFragmentOffset(flags, uint16(off))
		fip.SetTotalLength(uint16(hl + end - off))
		fip.SetChecksum(0)
		fip.SetChecksum(fip.CalculateChecksum())
		out = append(out, b)
	}
	return out
}

// reassemble checks every fragment's header and joins the datagram's
// payload; it fails unless the fragments cover it exactly.
func reassemble(t *testing.T, frames [][]byte) (src, dst uint32, payload []byte) {
	t.Helper()
	type piece struct {
		off  int
		data []byte
		last bool
	}
	var ps []piece
	for _, f := range frames {
		ip := hdr.IPv4(hdr.Ethernet(f).Payload())
		if !ip.IsValid(len(ip)) || !ip.IsChecksumValid() {
			t.Fatalf("bad IPv4 header in a fragment: %x", f[:34])
		}
		if src, dst = ip.Src(), ip.Dst(); ip.TTL() != 63 {
			t.Fatalf("fragment TTL %d, want 63", ip.TTL())
		}
		ps = append(ps, piece{int(ip.FragmentOffset()), ip.Payload(), ip.Flags()&hdr.IPv4FlagMoreFragments == 0})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].off < ps[j].off })
	for i, p := range ps {
		if p.off != len(payload) || p.last != (i == len(ps)-1) {
			t.Fatalf("fragments do not make a datagram: piece at %d after %d bytes", p.off, len(payload))
		}
		payload = append(payload, p.data...)
	}
	return src, dst, payload
}

// checkReassembledUDP checks the joined datagram's ports and its UDP
// checksum by full recomputation.
func checkReassembledUDP(t *testing.T, frames [][]byte, src uint32, sport uint16, dst uint32, dport uint16, n int) {
	t.Helper()
	s, d, l4 := reassemble(t, frames)
	u := hdr.UDP(l4)
	if s != src || d != dst || u.SrcPort() != sport || u.DstPort() != dport || len(l4) != 8+n {
		t.Fatalf("datagram %x:%d -> %x:%d (%d bytes), want %x:%d -> %x:%d (%d)", s, u.SrcPort(), d, u.DstPort(), len(l4), src, sport, dst, dport, 8+n)
	}
	if want := hdr.TransportChecksum(s, d, hdr.ProtoUDP, l4); u.Checksum() != want {
		t.Fatalf("UDP checksum %#04x, full recomputation gives %#04x", u.Checksum(), want)
	}
}

// TestFragmentsNATBothWays: a 4000-byte datagram cut for a 1500 MTU goes
// to the real server through VS/NAT whatever the fragments' order (later
// ones wait for the first), and the server's fragmented reply comes back
// from the VIP, each time with both checksums right.
func TestFragmentsNATBothWays(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41000, vip, 53, 4000, 7), 1500)
	if len(frags) != 3 {
		t.Fatalf("%d fragments", len(frags))
	}
	// The last, then the middle: held; then the first releases them.
	r.inject(0, frags[2])
	r.inject(0, frags[1])
	w.poll()
	if n := len(r.sent(1)); n != 0 || w.cnt.own[FragmentsHeld] != 2 {
		t.Fatalf("sent %d before the first fragment; held %d", n, w.cnt.own[FragmentsHeld])
	}
	r.inject(0, frags[0])
	w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("lan sent %d fragments, want 3 (stats %v)", len(out), w.cnt.own)
	}
	checkReassembledUDP(t, out, clientIP, 41000, rs1, 5353, 4000)
	if hdr.IPv4(hdr.Ethernet(out[0]).Payload()).FragmentOffset() != 0 {
		t.Fatal("the first fragment did not leave first")
	}

	reply := fragmentFrame(bigUDP(rs1MAC, lanMAC, rs1, 5353, clientIP, 41000, 4000, 9), 1500)
	for _, f := range reply {
		r.inject(1, f)
	}
	w.poll()
	out = r.sent(0)
	if len(out) != 3 {
		t.Fatalf("wan sent %d fragments, want 3", len(out))
	}
	checkReassembledUDP(t, out, vip, 53, clientIP, 41000, 4000)
	if st := w.cnt.own; st[Fragments] != 6 || st[NewConns] != 1 {
		t.Fatalf("fragments %d new conns %d", st[Fragments], st[NewConns])
	}
	// Both datagrams were whole: nothing is remembered.
	for _, e := range w.frags.entries {
		if e.used {
			t.Fatalf("entry %+v left after a whole datagram", e.key)
		}
	}
}

// TestFragmentsDR: VS/DR passes every fragment on unchanged but for the
// MACs and the TTL.
func TestFragmentsDR(t *testing.T) {
	r := newRig(t, defaultNeigh())
	svc := r.w.snap.Services
	udpDR, _ := sched.New("rr", []sched.Dest{{ID: 7, Addr: rs1, Port: 53, Weight: 1, Fwd: fwd.DR}}, sched.Options{})
	next := NewSnapshot(2, r.w.snap.Ports, append(append([]Service(nil), svc...), Service{
		Key: ServiceKey{VIP: vipDR, Port: 53, Proto: hdr.ProtoUDP}, Scheduler: "rr",
		Dests: []sched.Dest{{ID: 7, Addr: rs1, Port: 53, Weight: 1, Fwd: fwd.DR}}, Scheds: []sched.Scheduler{udpDR},
	}), r.w.snap.Neigh, r.w.snap.Timeouts)
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	r.w.runCommands(0)
	frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41001, vipDR, 53, 4000, 11), 1500)
	for _, f := range frags {
		r.inject(0, f)
	}
	r.w.poll()
	out := r.sent(1)
	if len(out) != 3 {
		t.Fatalf("lan sent %d fragments, want 3", len(out))
	}
	for _, f := range out {
		if hdr.Ethernet(f).Dst() != rs1MAC {
			t.Fatal("a fragment did not go to rs1's MAC")
		}
	}
	checkReassembledUDP(t, out, clientIP, 41001, vipDR, 53, 4000)
}

// TestFragmentDrops: what is refused is counted under its reason and
// freed.
func TestFragmentDrops(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	refrag := func(f []byte, flags uint8, off uint16, tl int) []byte {
		ip := hdr.IPv4(f[14:])
		ip.SetFlagsFragmentOffset(flags, off)
		if tl > 0 {
			ip.SetTotalLength(uint16(tl))
		}
		ip.SetChecksum(0)
		ip.SetChecksum(ip.CalculateChecksum())
		return f
	}
	tiny := refrag(tcpFrame(clientMAC, wanMAC, clientIP, 40010, vip, 80, hdr.TCPFlagSYN, "12345678"), hdr.IPv4FlagMoreFragments, 0, 20+16)
	for _, tc := range []struct {
		name  string
		frame []byte
		why   Stat
	}{
		{"ICMP fragment", refrag(echoFrame(vip), hdr.IPv4FlagMoreFragments, 0, 0), DropFragment},
		{"tiny TCP first fragment", tiny, DropBadFragment},
		{"TCP at offset 8", refrag(tcpFrame(clientMAC, wanMAC, clientIP, 40011, vip, 80, hdr.TCPFlagACK, "12345678"), 0, 8, 0), DropBadFragment},
		{"misaligned middle", refrag(udpFrame(clientMAC, wanMAC, clientIP, 40012, vip, 53, "123", true), hdr.IPv4FlagMoreFragments, 0, 0), DropBadFragment},
		{"past 65535 bytes", refrag(udpFrame(clientMAC, wanMAC, clientIP, 40013, vip, 53, "12345678", true), 0, 65520, 0), DropFragOversize},
		{"first fragment to no service", refrag(bigUDP(clientMAC, wanMAC, clientIP, 40014, vip, 54, 1472, 1), hdr.IPv4FlagMoreFragments, 0, 0), DropNoService},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := w.cnt.own[tc.why]
			r.inject(0, tc.frame)
			w.poll()
			if got := w.cnt.own[tc.why] - before; got != 1 {
				t.Fatalf("%s counted %d times, want once", tc.why.Name(), got)
			}
			if n := len(r.sent(0)) + len(r.sent(1)); n != 0 {
				t.Fatalf("a dropped fragment was sent (%d frames)", n)
			}
			if n := r.pool.InUse(); n != 0 {
				t.Fatalf("%d mbufs held after the drop", n)
			}
		})
	}
}

// TestFragmentsHeldAreBounded: later fragments whose first never comes
// wait within the limits, and are dropped and freed when their datagram
// times out.
func TestFragmentsHeldAreBounded(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	w.frags = newFragTable(FragLimits{Datagrams: 8, Held: 4, Timeout: time.Second})
	later := func(id uint16) []byte {
		return fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41002, vip, 53, 2000, id), 1500)[1]
	}
	for id := uint16(1); id <= 6; id++ {
		r.inject(0, later(id))
	}
	w.poll()
	if w.cnt.own[FragmentsHeld] != 4 || w.cnt.own[DropFragHeldFull] != 2 {
		t.Fatalf("held %d, refused %d: want 4 and 2", w.cnt.own[FragmentsHeld], w.cnt.own[DropFragHeldFull])
	}
	if n := r.pool.InUse(); n != 4 {
		t.Fatalf("%d mbufs in use, want the 4 held", n)
	}
	// 8 datagrams fit (two buckets of four); a ninth in a full bucket is refused.
	refused := w.cnt.own[DropFragTableFull]
	for id := uint16(100); id < 140; id++ {
		first := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 41003, vip, 53, 2000, id), 1500)[0]
		r.inject(0, first)
		w.poll()
	}
	r.sent(1)
	if w.cnt.own[DropFragTableFull] == refused {
		t.Fatal("a full fragment table took every datagram")
	}
	w.now += int64(2 * time.Second)
	w.sweepFrags(len(w.frags.entries))
	w.flush()
	if w.cnt.own[DropFragTimeout] != 4 {
		t.Fatalf("fragment_timeout %d, want the 4 held", w.cnt.own[DropFragTimeout])
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use after the timeout", n)
	}
}

// TestFragmentsReachTheOwner: on two workers, with every fragment of a
// datagram arriving on a different queue (as a NIC hashing addresses and
// ports, or a mix, may spread them), each datagram reaches the owner of
// its client endpoint whole, in both directions.
func TestFragmentsReachTheOwner(t *testing.T) {
	r := newMultiRig(t, false)
	udp := service2(ServiceKey{VIP: vip, Port: 53, Proto: hdr.ProtoUDP},
		sched.Dest{ID: 0, Addr: rs1, Port: 5353, Weight: 1}, sched.Dest{ID: 1, Addr: rs2, Port: 5353, Weight: 1})
	r.apply(nil, udp)
	owners := [2]int{}
	for i := 0; i < 24; i++ {
		port := uint16(42000 + i)
		owners[Owner(clientIP, port, 2)]++
		frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, port, vip, 53, 4000, uint16(300+i)), 1500)
		for j, f := range frags {
			r.inject(0, (i+j)%2, f)
		}
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 3 {
			t.Fatalf("datagram %d: lan sent %d fragments, want 3", i, len(out))
		}
		_, rs, _ := reassemble(t, out)
		checkReassembledUDP(t, out, clientIP, port, rs, 5353, 4000)

		reply := fragmentFrame(bigUDP(rs1MAC, lanMAC, rs, 5353, clientIP, port, 4000, uint16(900+i)), 1500)
		for j, f := range reply {
			r.inject(1, (i+j+1)%2, f)
		}
		r.pollBoth()
		back := r.sentAll(0)
		if len(back) != 3 {
			t.Fatalf("datagram %d: wan sent %d reply fragments, want 3", i, len(back))
		}
		checkReassembledUDP(t, back, vip, 53, clientIP, port, 4000)
	}
	if owners[0] == 0 || owners[1] == 0 {
		t.Fatalf("every client port hashed to one worker: %v", owners)
	}
	checkFragmentsForwarded(t, r, 24, 24*6)
}

// checkFragmentsForwarded checks that the workers together opened conns
// connections and forwarded frags fragments, dropping none for want of a
// connection or of a first fragment.
func checkFragmentsForwarded(t *testing.T, r *multiRig, conns, frags uint64) {
	t.Helper()
	var c, f uint64
	for _, w := range r.w {
		c += w.cnt.own[NewConns]
		f += w.cnt.own[Fragments]
		if w.cnt.own[DropNoConn]+w.cnt.own[DropFragOrphan] != 0 {
			t.Fatalf("worker %d dropped fragments: %v", w.cfg.ID, dropsOf(w))
		}
	}
	if c != conns || f != frags {
		t.Fatalf("%d connections, %d fragments forwarded; want %d and %d", c, f, conns, frags)
	}
}

// TestFragmentPathDoesNotAllocate: held, released and forwarded fragments
// allocate nothing.
func TestFragmentPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		frags := fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 43000, vip, 53, 2000, uint16(i/2)), 1500)
		return frags[1-i%2] // the later fragment first: it waits for the first
	})
	if allocs != 0 {
		t.Fatalf("the fragment path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[Fragments] < 100 || r.w.cnt.own[FragmentsHeld] < 50 {
		t.Fatalf("fragments %d held %d", r.w.cnt.own[Fragments], r.w.cnt.own[FragmentsHeld])
	}
}

// heldFragments counts the fragments the worker holds.
func (w *Worker) heldFragments() int {
	n := 0
	for i := range w.frags.entries {
		if e := &w.frags.entries[i]; e.used {
			n += int(e.nheld)
		}
	}
	return n
}
