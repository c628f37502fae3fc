package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// traceOn asks worker w about a flow through its command ring, as the
// control plane does.
func (r *multiRig) traceOn(t *testing.T, w int, f TraceFlow) TraceResult {
	t.Helper()
	req := &TraceRequest{TraceFlow: f}
	if !r.w[w].Commands().Push(Command{Kind: CmdTrace, Trace: req}) {
		t.Fatal("command ring full")
	}
	r.w[w].runCommands(0)
	if !req.Done() {
		t.Fatal("the worker did not answer the trace")
	}
	return req.Result
}

func TestTraceAnswersWhatTheOwnerWouldDo(t *testing.T) {
	r := newMultiRig(t, false)
	const port = 40100
	owner := Owner(clientIP, port, 2)
	flow := TraceFlow{Proto: hdr.ProtoTCP, Client: clientIP, ClientPort: port, VIP: vip, VPort: 80}

	// Before the connection: the service, and the server the SYN will get.
	before := r.traceOn(t, owner, flow)
	if before.Worker != owner || before.Owner != owner || before.HasConn || !before.HasService || before.Scheduler != "rr" {
		t.Fatalf("before: %+v", before)
	}
	if !before.PickPredicted || before.Pick < 0 || before.PickBy != "scheduler" || before.Drop != 0 || !before.NextHopKnown {
		t.Fatalf("before: pick %d by %q predicted %v drop %v", before.Pick, before.PickBy, before.PickPredicted, before.Drop.Name())
	}
	if again := r.traceOn(t, owner, flow); again.Pick != before.Pick {
		t.Fatalf("a second trace picks %d, the first %d: the trace moved the scheduler", again.Pick, before.Pick)
	}
	// The SYN goes where the trace said: tracing left the cursor alone.
	r.inject(0, owner, tcpFrame(clientMAC, wanMAC, clientIP, port, vip, 80, hdr.TCPFlagSYN, ""))
	r.pollBoth()
	out := r.sentAll(1)
	if len(out) != 1 {
		t.Fatal("SYN not forwarded")
	}
	_, ip, _ := checkTCP(t, out[0])
	if want := before.Dests[before.Pick].Addr; ip.Dst() != want {
		t.Fatalf("SYN went to %08x, the trace said %08x", ip.Dst(), want)
	}

	// With the connection: its entry, from both directions.
	with := r.traceOn(t, owner, flow)
	if !with.HasConn || with.ConnDir != conn.Original || with.Conn.State != conn.StateSynRecv || with.Conn.RIP != ip.Dst() ||
		with.Conn.Expires <= 0 || with.Drop != 0 || with.OutPort != 1 || with.TableLen != 1 {
		t.Fatalf("with the connection: %+v", with)
	}
	reply := flow
	reply.Reply, reply.RIP, reply.RPort = true, ip.Dst(), 80
	back := r.traceOn(t, owner, reply)
	if !back.HasConn || back.ConnDir != conn.Reply || back.Drop != 0 || back.OutPort != 0 || back.NextHop != clientIP {
		t.Fatalf("reply: %+v", back)
	}
	// The other worker does not hold it: ownership is what makes a trace
	// go to the owner.
	if other := r.traceOn(t, 1-owner, flow); other.HasConn || other.Owner != owner {
		t.Fatalf("the other worker: %+v", other)
	}

	// Drops, each with its reason.
	noSvc := flow
	noSvc.VPort = 81
	if got := r.traceOn(t, owner, noSvc); got.HasService || got.Drop != DropNoService {
		t.Fatalf("no service: drop %q", got.Drop.Name())
	}
	stray := reply
	stray.ClientPort = port + 1
	if got := r.traceOn(t, Owner(clientIP, port+1, 2), stray); got.HasConn || got.Drop != DropNoConn {
		t.Fatalf("reply without a connection: drop %q", got.Drop.Name())
	}
	// Every server quiescent: new connections have none, the existing one goes on.
	quiet := []sched.Dest{{ID: 0, Addr: rs1, Port: 80}, {ID: 1, Addr: rs2, Port: 80}}
	r.apply(nil, service2(ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP}, quiet...))
	fresh := flow
	fresh.ClientPort = port + 2
	if got := r.traceOn(t, Owner(clientIP, port+2, 2), fresh); got.Pick != -1 || !got.PickPredicted || got.Drop != DropNoDest {
		t.Fatalf("quiescent servers: pick %d drop %q", got.Pick, got.Drop.Name())
	}
	if got := r.traceOn(t, owner, flow); !got.HasConn || got.Drop != 0 {
		t.Fatalf("quiescent servers, existing connection: %+v", got)
	}
}

func TestTraceShowsThePersistenceTemplate(t *testing.T) {
	r := newMultiRig(t, true)
	const port = 40200
	owner := Owner(clientIP, port, 2)
	r.inject(0, owner, tcpFrame(clientMAC, wanMAC, clientIP, port, vip, 80, hdr.TCPFlagSYN, ""))
	r.pollBoth()
	out := r.sentAll(1)
	if len(out) != 1 {
		t.Fatal("SYN not forwarded")
	}
	_, ip, _ := checkTCP(t, out[0])
	// Another client of the same /24, on whichever worker owns it: the
	// shared template names the server.
	other := ip4(203, 0, 113, 9)
	w := Owner(other, 5000, 2)
	got := r.traceOn(t, w, TraceFlow{Proto: hdr.ProtoTCP, Client: other, ClientPort: 5000, VIP: vip, VPort: 80})
	if !got.HasTemplate || got.PickBy != "template" || got.Dests[got.Pick].Addr != ip.Dst() || got.TemplateExpires <= 0 {
		t.Fatalf("template: %+v", got)
	}
}

// A UDP flow on one worker: the pick, then the entry its first datagram
// made, in state UDP with the UDP timeout ahead.
func TestTraceUDP(t *testing.T) {
	r := newRig(t, defaultNeigh())
	flow := TraceFlow{Proto: hdr.ProtoUDP, Client: clientIP, ClientPort: 5000, VIP: vip, VPort: 53}
	ask := func() TraceResult {
		t.Helper()
		req := &TraceRequest{TraceFlow: flow}
		r.w.Commands().Push(Command{Kind: CmdTrace, Trace: req})
		r.w.runCommands(0)
		if !req.Done() {
			t.Fatal("no answer")
		}
		return req.Result
	}
	before := ask()
	if before.HasConn || before.Pick != 0 || before.Dests[0].Addr != rs1 || before.Drop != 0 {
		t.Fatalf("before: %+v", before)
	}
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 5000, vip, 53, "q", true))
	r.w.poll()
	if len(r.sent(1)) != 1 {
		t.Fatal("datagram not forwarded")
	}
	after := ask()
	if !after.HasConn || after.Conn.State != conn.StateUDP || after.Conn.RPort != 5353 || after.Conn.Expires <= 0 || after.Drop != 0 {
		t.Fatalf("after: %+v", after)
	}
}

// traceOne asks the rig's worker about a flow through its command ring.
func (r *rig) traceOne(t *testing.T, f TraceFlow) TraceResult {
	t.Helper()
	req := &TraceRequest{TraceFlow: f}
	if !r.w.Commands().Push(Command{Kind: CmdTrace, Trace: req}) {
		t.Fatal("command ring full")
	}
	r.w.runCommands(0)
	if !req.Done() {
		t.Fatal("the worker did not answer the trace")
	}
	return req.Result
}

// TestTraceLocalReply: a FullNAT server's reply, and a NAT64 server's
// IPv4 one, go to the local address and port: the trace of the reply
// named by the server finds the entry by that key (not as a one-way
// connection), names the local endpoint, and routes to the client.
func TestTraceLocalReply(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withFullNAT(t, r, false)
	lport := openFullNAT(t, r, 40300, 1, 2)
	got := r.traceOne(t, TraceFlow{Proto: hdr.ProtoTCP, Client: clientIP, ClientPort: 40300, VIP: vipFN, VPort: 80, Reply: true, RIP: rs1, RPort: 8081})
	if !got.HasConn || got.OneWayOnly || got.ConnDir != conn.Reply || got.Conn.LIP != lip1 || got.Conn.LPort != lport ||
		got.OutPort != 0 || got.Drop != 0 {
		t.Fatalf("FullNAT reply: %+v", got)
	}

	r6 := rigSvc6(t)
	r6.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40301, vip6, 8080, hdr.TCPFlagSYN, ""))
	r6.w.poll()
	_, _, syn := checkTCP(t, one(t, r6, 1))
	got = r6.traceOne(t, TraceFlow{Proto: hdr.ProtoTCP, IPv6: true, Client6: clientAddr6, ClientPort: 40301, VIP6: vip6, VPort: 8080,
		Reply: true, RIP: rs1, RPort: 80})
	if !got.HasConn || got.OneWayOnly || got.ConnDir != conn.Reply || got.Conn.LIP != lip64 || got.Conn.LPort != syn.SrcPort() ||
		got.OutPort != 0 || got.Drop != 0 {
		t.Fatalf("NAT64 reply: %+v", got)
	}
	// A DR connection's reply is still the one-way case.
	r6.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, 40302, vip6DR, 80, hdr.TCPFlagSYN, ""))
	r6.w.poll()
	r6.drain(1)
	got = r6.traceOne(t, TraceFlow{Proto: hdr.ProtoTCP, IPv6: true, Client6: clientAddr6, ClientPort: 40302, VIP6: vip6DR, VPort: 80,
		Reply: true, RIP6: rs61, RPort: 80})
	if got.HasConn || !got.OneWayOnly {
		t.Fatalf("DR reply: %+v", got)
	}
}
