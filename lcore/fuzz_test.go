package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// FuzzHandle feeds arbitrary frames to a worker on either port: whatever
// the bytes, the worker must neither panic nor keep an mbuf (every packet
// is sent or dropped and counted) but the later fragments it holds for
// their first one.
func FuzzHandle(f *testing.F) {
	for _, seed := range [][]byte{
		tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, hdr.TCPFlagSYN, ""),
		tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, "x"),
		udpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 53, "q", true),
		echoFrame(vip),
		icmpErrorFrame(rs1MAC, lanMAC, rs1, clientIP, hdr.ICMPDestUnreachable, 3,
			udpFrame(clientMAC, wanMAC, clientIP, 40000, rs1, 5353, "q", true)),
		tcpFrame(clientMAC, wanMAC, clientIP, 40000, vipTUN, 80, hdr.TCPFlagSYN, string(make([]byte, 1460))),
		withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40001, vipTUN, 80, hdr.TCPFlagSYN, "")),
		routerError(ipFrame(lanMAC, rs2MAC, lanAddr, rs2, hdr.ProtoIPIP, true,
			withDF(tcpFrame(clientMAC, wanMAC, clientIP, 40001, vipTUN, 80, hdr.TCPFlagSYN, ""))[14:]),
			hdr.ICMPDestUnreachable, hdr.ICMPCodeFragNeeded, 1000, 548),
		fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 40002, vip, 53, 2000, 1), 1500)[0],
		fragmentFrame(bigUDP(clientMAC, wanMAC, clientIP, 40002, vip, 53, 2000, 2), 1500)[1],
		icmp6Frame(clientMAC, wanAddr6.SolicitedNode().MulticastMAC(), clientAddr6, wanAddr6.SolicitedNode(), 255, nsMsg(wanAddr6, true)),
		icmp6Frame(clientMAC, wanMAC, clientAddr6, wanAddr6, 64, []byte{hdr.ICMPv6EchoRequest, 0, 0, 0, 0, 1, 0, 1, 'x'}),
		tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagSYN, 1, 0, synOpts, ""),
		tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipFN, 80, hdr.TCPFlagACK, 2, 1, nil, "data"),
		tcpSeg(rs1MAC, lanMAC, rs1, 8081, lip1, 1025, hdr.TCPFlagACK, 1, 30, []byte{1, 1, 5, 10, 0, 0, 0, 40, 0, 0, 0, 50}, "x"),
		tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipSP, 80, hdr.TCPFlagSYN, 1, 0, synOpts, ""),
		tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipSP, 80, hdr.TCPFlagACK, 2, 12345, nil, "data"),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40000, vip6, 80, hdr.TCPFlagSYN, ""),
		l4Frame6(rs1MAC, lanMAC, hdr.ProtoTCP, rs61, 8080, clientAddr6, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, "x"),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5000, vip6, 53, 0, "q"),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40001, vip6TUN, 80, hdr.TCPFlagSYN, ""),
		tcpFrame(clientMAC, wanMAC, clientIP, 40003, vipDR, 80, hdr.TCPFlagSYN, ""),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40003, vip6DR, 80, hdr.TCPFlagSYN, ""),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40002, vip6, 8080, hdr.TCPFlagSYN, "nat64"),
		tcpFrame(rs1MAC, lanMAC, rs1, 80, lip64, 1025, hdr.TCPFlagSYN|hdr.TCPFlagACK, "nat64"),
		tcpSeg(rs1MAC, lanMAC, rs1, 8080, lanAddr, HTTPProbePortFirst, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 1040, nil, "HTTP/1.1 200 OK\r\n\r\n"),
		udpFrame(rs1MAC, lanMAC, rs1, 53, lanAddr, ProbePortFirst, "answer", true),
		icmpErrorFrame(rs1MAC, lanMAC, rs1, lanAddr, hdr.ICMPDestUnreachable, 3, udpFrame(lanMAC, rs1MAC, lanAddr, ProbePortFirst, rs1, 53, "q", true)),
		udpFrame(clientMAC, wanMAC, clientIP, 40004, vipFN, 53, "uoa", true),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5004, vip6, 5300, 0, "uoa"),
		tcpSeg6(clientMAC, wanMAC, clientAddr6, 40005, vip6, 9001, hdr.TCPFlagSYN, 1, 0, ""),
		tcpSeg6(clientMAC, wanMAC, clientAddr6, 40005, vip6, 9001, hdr.TCPFlagACK|hdr.TCPFlagPSH, 2, 1, "fnat66"),
		tcpSeg6(rs1MAC, lanMAC, rs61, 8080, lip6, 1025, hdr.TCPFlagSYN|hdr.TCPFlagACK, 1, 2, ""),
		tcpSeg6(clientMAC, wanMAC, clientAddr6, 40006, vip6, 9002, hdr.TCPFlagACK, 2, 2, ""),
		l4Frame6(clientMAC, wanMAC, hdr.ProtoUDP, clientAddr6, 5005, vip6, 9054, 0, "uoa6"),
		tcpFrame(rs1MAC, lanMAC, rs1, 33000, ip4(192, 0, 2, 9), 443, hdr.TCPFlagSYN, ""), // SNAT
		tcpFrame(clientMAC, wanMAC, ip4(192, 0, 2, 9), 443, snatAddr, 1025, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""),
		udpFrame(rs1MAC, lanMAC, rs1, 5353, ip4(192, 0, 2, 9), 53, "q", true),
		pingFrame(rs1MAC, lanMAC, rs1, clientIP, 77), // a SNAT'd ping, and an answer to one
		echoReplyFrame(clientMAC, wanMAC, clientIP, snatAddr, 1025),
		icmpErrorFrame(clientMAC, wanMAC, ip4(203, 0, 113, 254), snatAddr, hdr.ICMPTimeExceeded, 0, // about a SNAT'd ping
			pingFrame(wanMAC, clientMAC, snatAddr, clientIP, 1025)),
		{0xff, 0xff},
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	r := newRig(f, defaultNeigh())
	withFullNAT(f, r, true)
	// A FullNAT UDP service whose first datagrams get the UOA as an IPv4
	// option (the NAT64 one below gets it in an option protocol header).
	withFullNATService(f, r, func(s *Service) { s.Key.Proto, s.Key.Port, s.UOA = hdr.ProtoUDP, 53, UOAIPOption })
	withSynProxy(f, r, fwd.NAT)
	withSNAT(f, r)
	// The IPv6 seeds reach neighbour discovery and echo. Set after the
	// commands above ran: an unsolicited NA queued by them and never
	// polled out would stay in the TX batch.
	r.w.snap.Ports[0].Addr6 = wanAddr6
	withIPv6Services(r) // NAT66, DR, TUN and NAT64 for the IPv6 seeds
	withFNAT66Services(r)
	// Client lists: the DR services' clients are checked (and the
	// client of the seeds blocked), in place: the snapshot's services are
	// read at each new connection.
	for i := range r.w.snap.Services {
		switch s := &r.w.snap.Services[i]; s.Key {
		case ServiceKey{VIP: vipDR, Port: 80, Proto: hdr.ProtoTCP}:
			s.Clients = NewClientACL(prefixes(f, "203.0.113.0/25"), nil)
		case ServiceKey{VIP6: vip6DR, Port: 80, Proto: hdr.ProtoTCP}:
			s.Clients = NewClientACL(prefixes(f, "2001:db8:1::7/128"), prefixes(f, "2001:db8:1::/120"))
		case ServiceKey{VIP6: vip6, Port: 5300, Proto: hdr.ProtoUDP}:
			s.UOA = UOAOptionProtocol
		}
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
			t.Fatalf("%d mbufs in use, %d of them held, after a frame of %d bytes", n, held, len(frame))
		}
		for ev, ok := r.w.Events().Pop(); ok; ev, ok = r.w.Events().Pop() {
			_ = ev
		}
	})
}
