package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// FuzzHandle6 is FuzzHandle on a worker with IPv6 services (NAT66, DR,
// TUN, NAT64), seeded with what reaches IPv6's edges: fragments, ICMPv6
// errors about NAT66 and IPv6-in-IPv6 packets, packets too big for the
// tunnel or with their hop limit running out, and NAT64 fragments and
// ICMP errors both ways, and SYN-proxied services (NAT66, NAT64 with
// PROXY v2). Whatever the bytes, no panic, and no mbuf kept but the later
// fragments held for their first and the segments held for a server yet
// to answer.
func FuzzHandle6(f *testing.F) {
	tooBig := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1460)))
	expiring := l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6, 80, hdr.TCPFlagSYN, "")
	hdr.IPv6(expiring[14:]).SetHopLimit(1)
	frags := fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 3000), 1500, 5)
	for _, seed := range [][]byte{
		udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 10),
		frags[0], frags[1], frags[2],
		fragment6Frames(udp6Frame(rs1MAC, lanMAC, rs61, 5353, clientAddr6, 41000, 3000), 1500, 6)[1],
		icmp6Error(routerAddr6, clientAddr6, hdr.ICMPv6PacketTooBig, 0, 1280,
			udp6Frame(lanMAC, rs1MAC, clientAddr6, 41000, rs61, 5353, 1400), 0),
		fromClient(icmp6Error(clientAddr6, vip6, hdr.ICMPv6DestUnreachable, 4, 0,
			udp6Frame(wanMAC, clientMAC, vip6, 53, clientAddr6, 41000, 60), 0)),
		icmp6Error(routerAddr6, lanAddr6, hdr.ICMPv6PacketTooBig, 0, 1300,
			tunnel6(l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, "x"), lanAddr6, rs62), 0),
		tooBig, expiring,
		l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40002, vip6DR, 80, hdr.TCPFlagSYN, ""),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 5300, 0, "q"),
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	r := rigSvc6(f)
	// Connections for the seeds' errors and later fragments to find.
	r.inject(0, udp6Frame(clientMAC, wanMAC, clientAddr6, 41000, vip6, 53, 10))
	r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6TUN, 80, hdr.TCPFlagSYN, "x"))
	r.w.poll()
	r.drain(0)
	r.drain(1)
	// A NAT64 connection, and its fragments both ways.
	r.inject(0, udp6Frame(clientMAC, wanMAC, clientAddr6, 5001, vip6, 5300, 10))
	r.w.poll()
	var lport uint16
	for _, out := range r.sent(1) {
		lport = hdr.UDP(hdr.IPv4(hdr.Ethernet(out).Payload()).Payload()).SrcPort()
	}
	seeds64 := append(fragment6Frames(udp6Frame(clientMAC, wanMAC, clientAddr6, 5001, vip6, 5300, 3000), 1500, 7),
		fragmentFrame(bigUDP(rs1MAC, lanMAC, rs1, 53, lip64, lport, 3000, 8), 1472)...)
	seeds64 = append(seeds64,
		icmp4Error(router4, lip64, hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 576,
			udpFrame(lanMAC, rs1MAC, lip64, lport, rs1, 53, string(make([]byte, 1000)), true), 0),
		fromClient(icmp6Error(routerAddr6, vip6, hdr.ICMPv6PacketTooBig, 0, 1280,
			l4Frame6(wanMAC, clientMAC, hdr.ProtoUDP, vip6, 5300, clientAddr6, 5001, 0, string(make([]byte, 1300))), 1280-48)))
	for _, seed := range seeds64 {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	// SYN-proxied services, NAT66 (vip6:8443) and NAT64 with PROXY v2
	// (vip6:8444), and a handshake through each, so that mutations of its
	// segments reach past the cookie: the proven ACK, data held for the
	// server, the server's SYN-ACK and the spliced sequence numbers.
	withSynProxy6(f, r)
	withProxied6(f, r, 8444, sched.Dest{ID: 21, Addr: rs1, Port: 80, Weight: 1, Fwd: fwd.FullNAT}, true)
	for _, port := range []uint16{8443, 8444} {
		syn := tcpOpts6(clientMAC, wanMAC, clientAddr6, 42000, vip6, port, hdr.TCPFlagSYN, 1000, 0, synOpts, "")
		r.inject(0, syn)
		r.w.poll()
		var cookie uint32
		for _, out := range r.sent(0) {
			cookie = hdr.TCP(hdr.IPv6(hdr.Ethernet(out).Payload()).Payload()).Seq()
		}
		r.drain(1)
		ack := tcpOpts6(clientMAC, wanMAC, clientAddr6, 42000, vip6, port, hdr.TCPFlagACK, 1001, cookie+1, nil, "")
		data := tcpOpts6(clientMAC, wanMAC, clientAddr6, 42000, vip6, port, hdr.TCPFlagACK|hdr.TCPFlagPSH, 1001, cookie+1, nil, "GET /")
		for _, seed := range [][]byte{syn, ack, data} {
			f.Add(seed, false)
		}
		r.inject(0, ack)
		r.w.poll()
		toServer := r.sent(1)
		if cookie == 0 || len(toServer) != 1 {
			f.Fatalf("port %d: cookie %d, %d SYNs to the server after the ACK", port, cookie, len(toServer))
		}
		for _, out := range toServer { // the server's SYN-ACK to the SYN it got
			var synAck []byte
			if port == 8443 {
				tcp := hdr.TCP(hdr.IPv6(hdr.Ethernet(out).Payload()).Payload())
				synAck = tcpOpts6(rs1MAC, lanMAC, rs61, 8443, clientAddr6, 42000, hdr.TCPFlagSYN|hdr.TCPFlagACK, 5000, tcp.Seq()+1, synOpts, "")
			} else {
				ip := hdr.IPv4(hdr.Ethernet(out).Payload())
				tcp := hdr.TCP(ip.Payload())
				synAck = tcpSeg(rs1MAC, lanMAC, rs1, 80, ip.Src(), tcp.SrcPort(), hdr.TCPFlagSYN|hdr.TCPFlagACK, 5000, tcp.Seq()+1, synOpts, "")
			}
			f.Add(synAck, true)
			r.inject(1, synAck)
			r.w.poll()
		}
		r.drain(0)
		r.drain(1)
	}
	f.Fuzz(func(t *testing.T, frame []byte, fromServer bool) {
		if len(frame) == 0 || len(frame) > 1600 {
			return
		}
		port := 0
		if fromServer {
			port = 1
		}
		r.t = t
		r.inject(port, frame)
		r.w.poll()
		r.drain(0)
		r.drain(1)
		held := r.w.heldFragments()  // fragments waiting for their first one
		for _, h := range r.w.held { // segments a SYN proxy keeps for a server yet to answer
			if h.m != nil {
				held++
			}
		}
		if n := r.pool.InUse(); n != held {
			nz := map[string]uint64{}
			for i, v := range r.w.cnt.own {
				if v != 0 {
					nz[Stat(i).Name()] = v
				}
			}
			t.Fatalf("%d mbufs in use, %d of them held, after a frame of %d bytes (%x); counters %v", n, held, len(frame), frame, nz)
		}
		for _, ok := r.w.Events().Pop(); ok; _, ok = r.w.Events().Pop() {
		}
	})
}
