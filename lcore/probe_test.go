package lcore

import (
	"bytes"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

// httpRequest is what an HTTP probe sends once the handshake is done.
const httpRequest = "GET /health HTTP/1.0\r\nHost: rs1\r\n\r\n"

// TestHTTPProbeThroughLBD: an HTTP probe's connection (a source port of
// the upper half of the probe range) is driven by the control plane: the
// server's SYN-ACK is reported with its sequence number and not reset;
// the request leaves in one segment from the port's address; the server's
// ACK of it is not reported; its first data is reported with the start of
// the answer and reset, as is a FIN without data; an answer from the
// client side is not believed; no mbuf is kept.
func TestHTTPProbeThroughLBD(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	const sport, isn, serverISN = HTTPProbePortFirst + 3, 1000, 5000
	w.Commands().Push(Command{Kind: CmdProbe, IP: rs1, DstPort: 8080, SrcPort: sport, Seq: isn})
	w.runCommands(0)
	w.flush()
	if out := r.sent(1); len(out) != 1 {
		t.Fatal("no SYN sent")
	}
	answer := func(port int, flags uint8, seq, ack uint32, data string) {
		mac := []hdr.MAC{clientMAC, rs1MAC}[port]
		r.inject(port, tcpSeg(mac, []hdr.MAC{wanMAC, lanMAC}[port], rs1, 8080, lanAddr, sport, flags, seq, ack, nil, data))
		w.poll()
	}
	answer(1, hdr.TCPFlagSYN|hdr.TCPFlagACK, serverISN, isn+1, "")
	ev, ok := w.Events().Pop()
	if !ok || ev.Result != ProbeOpen || ev.Seq != serverISN || ev.Ack != isn+1 || ev.IP != rs1 || ev.SrcPort != sport {
		t.Fatalf("SYN-ACK event %+v %v", ev, ok)
	}
	if out := r.sent(1); len(out) != 0 {
		t.Fatalf("the HTTP probe's SYN-ACK was answered: %x", out)
	}

	w.Commands().Push(Command{Kind: CmdProbeSegment, IP: rs1, DstPort: 8080, SrcPort: sport,
		Flags: hdr.TCPFlagACK | hdr.TCPFlagPSH, Seq: isn + 1, Ack: serverISN + 1, Payload: []byte(httpRequest)})
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("no request sent")
	}
	eth, ip, tcp := checkTCP(t, out[0])
	if eth.Dst() != rs1MAC || ip.Src() != lanAddr || ip.Dst() != rs1 || tcp.SrcPort() != sport || tcp.DstPort() != 8080 ||
		tcp.Flags() != hdr.TCPFlagACK|hdr.TCPFlagPSH || tcp.Seq() != isn+1 || tcp.Ack() != serverISN+1 ||
		string(tcp.Payload()) != httpRequest {
		t.Fatalf("bad request segment %x", out[0])
	}

	next := uint32(isn + 1 + len(httpRequest))
	answer(1, hdr.TCPFlagACK, serverISN+1, next, "")
	if ev, ok := w.Events().Pop(); ok {
		t.Fatalf("the server's bare ACK was reported: %+v", ev)
	}
	const status = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"
	answer(1, hdr.TCPFlagACK|hdr.TCPFlagPSH, serverISN+1, next, status)
	ev, ok = w.Events().Pop()
	if !ok || ev.Result != ProbeData || ev.Seq != serverISN+1 || ev.Ack != next || int(ev.DataLen) != ProbeDataLen ||
		!bytes.Equal(ev.Data[:ev.DataLen], []byte(status[:ProbeDataLen])) {
		t.Fatalf("answer event %+v %v", ev, ok)
	}
	rst := r.sent(1)
	if len(rst) != 1 {
		t.Fatal("no RST after the answer")
	}
	if _, ip, tcp := checkTCP(t, rst[0]); ip.Dst() != rs1 || tcp.Flags() != hdr.TCPFlagRST || tcp.Seq() != next || tcp.DstPort() != 8080 {
		t.Fatalf("bad RST %x", rst[0])
	}
	answer(1, hdr.TCPFlagACK|hdr.TCPFlagFIN, serverISN+1, next, "")
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeData || ev.DataLen != 0 || ev.Flags&hdr.TCPFlagFIN == 0 {
		t.Fatalf("FIN event %+v %v", ev, ok)
	}
	if len(r.sent(1)) != 1 {
		t.Fatal("no RST after the FIN")
	}
	answer(0, hdr.TCPFlagACK|hdr.TCPFlagPSH, serverISN+1, next, status) // from the client side
	if ev, ok := w.Events().Pop(); ok {
		t.Fatalf("an answer from the wrong port was believed: %+v", ev)
	}
	if w.cnt.own[DropProbeSpoofed] != 1 || len(r.sent(0)) != 0 || len(r.sent(1)) != 0 || w.table.Len() != 0 {
		t.Fatalf("spoofed %d, table %d", w.cnt.own[DropProbeSpoofed], w.table.Len())
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use", n)
	}
}

// TestHTTPProbeThroughLBD6 is TestHTTPProbeThroughLBD's exchange with an
// IPv6 server, and a segment too long to send reported as not sent.
func TestHTTPProbeThroughLBD6(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	r.sent(0) // the ports' neighbour advertisements
	r.sent(1)
	const sport, isn, serverISN = HTTPProbePortFirst + 4, 7000, 9000
	w.Commands().Push(Command{Kind: CmdProbe, IP6: rs61, DstPort: 8080, SrcPort: sport, Seq: isn})
	w.runCommands(0)
	w.flush()
	if out := tcp6Frames(r.sent(1)); len(out) != 1 {
		t.Fatal("no SYN sent")
	}
	answer := func(flags uint8, seq, ack uint32, data string) {
		r.inject(1, tcpOpts6(rs1MAC, lanMAC, rs61, 8080, lanAddr6, sport, flags, seq, ack, nil, data))
		w.poll()
	}
	answer(hdr.TCPFlagSYN|hdr.TCPFlagACK, serverISN, isn+1, "")
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeOpen || ev.Seq != serverISN || ev.IP6 != rs61 {
		t.Fatalf("SYN-ACK event %+v %v", ev, ok)
	}
	if out := tcp6Frames(r.sent(1)); len(out) != 0 {
		t.Fatal("the HTTP probe's SYN-ACK was answered")
	}
	w.Commands().Push(Command{Kind: CmdProbeSegment, IP6: rs61, DstPort: 8080, SrcPort: sport,
		Flags: hdr.TCPFlagACK | hdr.TCPFlagPSH, Seq: isn + 1, Ack: serverISN + 1, Payload: []byte(httpRequest)})
	w.runCommands(0)
	w.flush()
	out := tcp6Frames(r.sent(1))
	if len(out) != 1 {
		t.Fatal("no request sent")
	}
	_, ip, l4 := check6(t, out[0])
	if tcp := hdr.TCP(l4); ip.Src() != lanAddr6 || ip.Dst() != rs61 || tcp.Seq() != isn+1 || tcp.Ack() != serverISN+1 ||
		string(tcp.Payload()) != httpRequest {
		t.Fatalf("bad request segment %x", out[0])
	}
	next := uint32(isn + 1 + len(httpRequest))
	answer(hdr.TCPFlagACK|hdr.TCPFlagPSH, serverISN+1, next, "HTTP/1.1 200 OK\r\n\r\n")
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeData || string(ev.Data[:ev.DataLen]) != "HTTP/1.1 200 OK\r\n\r\n" {
		t.Fatalf("answer event %+v %v", ev, ok)
	}
	rst := tcp6Frames(r.sent(1))
	if len(rst) != 1 {
		t.Fatal("no RST after the answer")
	}
	if _, _, l4 := check6(t, rst[0]); hdr.TCP(l4).Flags() != hdr.TCPFlagRST || hdr.TCP(l4).Seq() != next {
		t.Fatalf("bad RST %x", rst[0])
	}
	w.Commands().Push(Command{Kind: CmdProbeSegment, IP6: rs61, DstPort: 8080, SrcPort: sport,
		Flags: hdr.TCPFlagACK, Seq: next, Ack: serverISN + 1, Payload: make([]byte, MaxProbePayload+1)})
	w.runCommands(0)
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeNotSent {
		t.Fatalf("a segment too long to send: %+v %v", ev, ok)
	}
	w.flush()
	r.drain(0) // neighbour advertisements of the first commands job
	if out := tcp6Frames(r.sent(1)); len(out) != 0 {
		t.Fatalf("%d segments sent after the answer", len(out))
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use", n)
	}
}

// TestUDPProbeThroughLBD: a UDP probe leaves as a datagram from the port's
// address; the server's reply is reported with the start of its data, a
// port unreachable that quotes the probe as refused; neither is believed
// from the client side; no connection, no mbuf kept.
func TestUDPProbeThroughLBD(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	const sport = ProbePortFirst + 11
	w.Commands().Push(Command{Kind: CmdProbeDatagram, IP: rs1, DstPort: 53, SrcPort: sport, Payload: []byte("query")})
	w.runCommands(0)
	w.flush()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatal("no probe sent")
	}
	eth := hdr.Ethernet(out[0])
	ip := hdr.IPv4(eth.Payload())
	udp := hdr.UDP(ip.Payload())
	if eth.Dst() != rs1MAC || !ip.IsValid(len(ip)) || !ip.IsChecksumValid() || ip.Src() != lanAddr || ip.Dst() != rs1 ||
		ip.Protocol() != hdr.ProtoUDP || udp.SrcPort() != sport || udp.DstPort() != 53 || string(udp.Payload()) != "query" ||
		udp.Checksum() != hdr.TransportChecksum(lanAddr, rs1, hdr.ProtoUDP, udp) {
		t.Fatalf("bad probe %x", out[0])
	}
	reply := udpFrame(rs1MAC, lanMAC, rs1, 53, lanAddr, sport, "answer", true)
	r.inject(1, reply)
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Proto != hdr.ProtoUDP || ev.Result != ProbeData || ev.IP != rs1 || ev.DstPort != 53 ||
		ev.SrcPort != sport || string(ev.Data[:ev.DataLen]) != "answer" {
		t.Fatalf("reply event %+v %v", ev, ok)
	}
	r.inject(1, icmpErrorFrame(rs1MAC, lanMAC, rs1, lanAddr, hdr.ICMPDestUnreachable, 3, out[0]))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Proto != hdr.ProtoUDP || ev.Result != ProbeRefused || ev.IP != rs1 || ev.DstPort != 53 || ev.SrcPort != sport {
		t.Fatalf("unreachable event %+v %v", ev, ok)
	}
	r.inject(0, udpFrame(clientMAC, wanMAC, rs1, 53, lanAddr, sport, "answer", true)) // from the client side
	r.inject(0, icmpErrorFrame(clientMAC, wanMAC, rs1, lanAddr, hdr.ICMPDestUnreachable, 3, out[0]))
	w.poll()
	if ev, ok := w.Events().Pop(); ok {
		t.Fatalf("an answer from the wrong port was believed: %+v", ev)
	}
	if w.cnt.own[DropProbeSpoofed] != 2 || len(r.sent(0)) != 0 || len(r.sent(1)) != 0 || w.table.Len() != 0 {
		t.Fatalf("spoofed %d, table %d", w.cnt.own[DropProbeSpoofed], w.table.Len())
	}
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use", n)
	}
}

// TestUDPProbeThroughLBD6 is TestUDPProbeThroughLBD with an IPv6 server.
func TestUDPProbeThroughLBD6(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	const sport = ProbePortFirst + 12
	w.Commands().Push(Command{Kind: CmdProbeDatagram, IP6: rs61, DstPort: 53, SrcPort: sport, Payload: []byte("query")})
	w.runCommands(0)
	w.flush()
	r.drain(0) // the ports' neighbour advertisements
	var probe []byte
	for _, f := range r.sent(1) {
		if hdr.Ethernet(f).EtherType() == hdr.EtherTypeIPv6 && hdr.IPv6(f[14:]).NextHeader() == hdr.ProtoUDP {
			probe = f
		}
	}
	if probe == nil {
		t.Fatal("no probe sent")
	}
	_, ip, l4 := check6(t, probe)
	if udp := hdr.UDP(l4); ip.Src() != lanAddr6 || ip.Dst() != rs61 || udp.SrcPort() != sport || udp.DstPort() != 53 || string(udp.Payload()) != "query" {
		t.Fatalf("bad probe %x", probe)
	}
	r.inject(1, l4Frame6(rs1MAC, lanMAC, hdr.ProtoUDP, rs61, 53, lanAddr6, sport, 0, "answer"))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Proto != hdr.ProtoUDP || ev.Result != ProbeData || ev.IP6 != rs61 || ev.IP != 0 ||
		ev.DstPort != 53 || ev.SrcPort != sport || string(ev.Data[:ev.DataLen]) != "answer" {
		t.Fatalf("reply event %+v %v", ev, ok)
	}
	r.inject(1, icmp6Error(rs61, lanAddr6, hdr.ICMPv6DestUnreachable, 4, 0, probe, 0))
	w.poll()
	if ev, ok := w.Events().Pop(); !ok || ev.Result != ProbeRefused || ev.IP6 != rs61 || ev.DstPort != 53 || ev.SrcPort != sport {
		t.Fatalf("unreachable event %+v %v (counters %v)", ev, ok, w.cnt.own)
	}
	r.drain(0)
	r.drain(1)
	if n := r.pool.InUse(); n != 0 || w.table.Len() != 0 {
		t.Fatalf("%d mbufs in use, table %d", n, w.table.Len())
	}
}

// echoAnswer turns the echo request frame req (from us) into the echo
// reply the probed host sends back, from mac to ours.
func echoAnswer(req []byte, mac, ours hdr.MAC) []byte {
	out := append([]byte(nil), req...)
	eth := hdr.Ethernet(out)
	eth.SetSrc(mac)
	eth.SetDst(ours)
	if eth.EtherType() == hdr.EtherTypeIPv6 {
		ip := hdr.IPv6(eth.Payload())
		src, dst := ip.Src(), ip.Dst()
		ip.SetSrc(dst)
		ip.SetDst(src)
		icmp := hdr.ICMP(ip.Payload())
		icmp.SetType(hdr.ICMPv6EchoReply)
		icmp.SetChecksum(0)
		icmp.SetChecksum(hdr.TransportChecksum6(dst, src, hdr.ProtoICMPv6, icmp))
		return out
	}
	ip := hdr.IPv4(eth.Payload())
	src, dst := ip.Src(), ip.Dst()
	ip.SetSrcWithChecksumUpdate(dst)
	ip.SetDstWithChecksumUpdate(src)
	icmp := hdr.ICMP(ip.Payload())
	icmp.SetType(hdr.ICMPEchoReply)
	icmp.SetChecksum(0)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	return out
}

// TestEchoProbeThroughLBD: an ICMP probe leaves as an echo request from
// the port's address with the probe's identifier and sequence number; the
// echo reply is reported with them, over IPv4 and IPv6; one from the
// client side is not believed, and an echo reply that answers no probe
// of ours is dropped as before.
func TestEchoProbeThroughLBD(t *testing.T) {
	r := rigSvc6(t)
	w := r.w
	for _, six := range []bool{false, true} {
		cmd := Command{Kind: CmdProbeEcho, IP: rs1, SrcPort: ProbePortFirst + 21, Seq: 0x1234}
		if six {
			cmd.IP, cmd.IP6 = 0, rs61
		}
		w.Commands().Push(cmd)
		w.runCommands(0)
		w.flush()
		r.drain(0)
		var req []byte
		for _, f := range r.sent(1) {
			if et := hdr.Ethernet(f).EtherType(); et == hdr.EtherTypeIPv4 || et == hdr.EtherTypeIPv6 && hdr.IPv6(f[14:]).NextHeader() == hdr.ProtoICMPv6 &&
				hdr.ICMP(f[54:]).Type() == hdr.ICMPv6EchoRequest {
				req = f
			}
		}
		if req == nil {
			t.Fatalf("six %v: no echo request sent", six)
		}
		if six {
			ip := hdr.IPv6(req[14:])
			icmp := hdr.ICMP(ip.Payload())
			zeroed := append(hdr.ICMP(nil), icmp...)
			zeroed.SetChecksum(0)
			if !ip.IsValid(len(ip)) || ip.Src() != lanAddr6 || ip.Dst() != rs61 || icmp.ID() != ProbePortFirst+21 || icmp.Seq() != 0x1234 ||
				icmp.Checksum() != hdr.TransportChecksum6(lanAddr6, rs61, hdr.ProtoICMPv6, zeroed) {
				t.Fatalf("bad echo request %x", req)
			}
		} else {
			ip := hdr.IPv4(req[14:])
			icmp := hdr.ICMP(ip.Payload())
			if !ip.IsChecksumValid() || ip.Src() != lanAddr || ip.Dst() != rs1 || ip.Protocol() != hdr.ProtoICMP ||
				icmp.Type() != hdr.ICMPEchoRequest || icmp.ID() != ProbePortFirst+21 || icmp.Seq() != 0x1234 || hdr.ICMPChecksum(icmp) != icmp.Checksum() {
				t.Fatalf("bad echo request %x", req)
			}
		}
		r.inject(1, echoAnswer(req, rs1MAC, lanMAC))
		r.inject(0, echoAnswer(req, clientMAC, wanMAC)) // from the client side
		w.poll()
		ev, ok := w.Events().Pop()
		if !ok || ev.Proto != hdr.ProtoICMP || ev.Result != ProbeData || ev.SrcPort != ProbePortFirst+21 || ev.Ack != 0x1234 ||
			six && ev.IP6 != rs61 || !six && ev.IP != rs1 {
			t.Fatalf("six %v: echo reply event %+v %v", six, ev, ok)
		}
		if ev, ok := w.Events().Pop(); ok {
			t.Fatalf("six %v: an echo reply from the wrong port was believed: %+v", six, ev)
		}
	}
	if w.cnt.own[DropProbeSpoofed] != 2 {
		t.Fatalf("spoofed %d", w.cnt.own[DropProbeSpoofed])
	}
	// An echo reply to a port address with another identifier: no probe's,
	// to_local (the kernel's, where the port has a kernel interface).
	stray := echoFrame(lanAddr)
	icmp := hdr.ICMP(hdr.IPv4(stray[14:]).Payload())
	icmp.SetType(hdr.ICMPEchoReply)
	icmp.SetChecksum(0)
	icmp.SetChecksum(hdr.ICMPChecksum(icmp))
	r.inject(0, stray)
	w.poll()
	if _, ok := w.Events().Pop(); ok || w.cnt.own[DropToLocal] != 1 {
		t.Fatalf("a stray echo reply: to_local %d", w.cnt.own[DropToLocal])
	}
	r.drain(0)
	r.drain(1)
	if n := r.pool.InUse(); n != 0 {
		t.Fatalf("%d mbufs in use", n)
	}
}
