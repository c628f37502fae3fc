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
	const status = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
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
