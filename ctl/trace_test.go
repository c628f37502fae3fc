package ctl

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/dplb/dplb/ctl/api"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// Trace is answered by the owning worker in the real dataplane (lcore's
// trace tests, e2e's TestLbctlTrace); here the fake answers what a worker
// would, and the test checks what the control plane makes of it.
func (f *fakeDataplane) Trace(fl lcore.TraceFlow) (lcore.TraceResult, error) {
	f.traced = append(f.traced, fl)
	return f.traceRes, nil
}

func TestTraceOp(t *testing.T) {
	o, c, f := newTestOps(t)
	snap := c.Snapshot()
	rs1, rs2 := sched.Dest{Addr: ip(t, "198.51.100.11"), Port: 80, Weight: 1}, sched.Dest{Addr: ip(t, "198.51.100.12"), Port: 8000}
	dests := []lcore.TraceDest{{Dest: rs1, Active: 3}, {Dest: rs2}}

	t.Run("new connection", func(t *testing.T) {
		f.traced = nil
		f.traceRes = lcore.TraceResult{Worker: 1, Owner: 1, Gen: snap.Gen, TableLen: 7, TableCap: 1024, HasService: true, Scheduler: "wlc",
			Dests: dests, Pick: 0, PickBy: "scheduler", PickPredicted: true, OutPort: 1, NextHop: rs1.Addr, NextHopKnown: true, TemplateDest: -1}
		r := do(o, rule(t, "trace -t 203.0.113.100:80 --client 203.0.113.7:40000"))
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		want := lcore.TraceFlow{Proto: hdr.ProtoTCP, Client: ip(t, "203.0.113.7"), ClientPort: 40000, VIP: ip(t, "203.0.113.100"), VPort: 80}
		if len(f.traced) != 1 || f.traced[0] != want {
			t.Fatalf("asked the dataplane %+v, want %+v", f.traced, want)
		}
		tr := r.Trace
		if tr.Flow != "TCP 203.0.113.7:40000 -> 203.0.113.100:80" || tr.Steering.Owner != 1 || tr.Steering.Workers != 2 ||
			tr.Steering.Port != "wan" || tr.Steering.RSS != "software" || tr.Steering.Key != "per-boot" ||
			tr.Steering.Hash != lcore.SteeringHash(want.Client, want.ClientPort) {
			t.Fatalf("trace %+v", tr)
		}
		if tr.Conn != nil || tr.Decision == nil || tr.Decision.Destination != "198.51.100.11:80" || tr.Verdict.To != "198.51.100.11:80" ||
			tr.Verdict.Port != "lan" || tr.Verdict.Method != "Masq" || tr.Service.Servers[1].State != "quiescent (weight 0): no new connections" {
			t.Fatalf("trace %+v", tr)
		}
		var b bytes.Buffer
		if err := api.WriteTrace(&b, tr); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"Owner     lcore 1 of 2", "-> 198.51.100.11:80", "a new connection would go to 198.51.100.11:80 (dry run by the scheduler on lcore 1, nothing changed)",
			"Verdict   forward to 198.51.100.11:80 (Masq) out of port lan", "not_syn"} {
			if !strings.Contains(b.String(), s) {
				t.Errorf("text lacks %q:\n%s", s, b.String())
			}
		}
	})
	t.Run("reply of a connection", func(t *testing.T) {
		f.traced = nil
		f.traceRes = lcore.TraceResult{Worker: 0, Gen: snap.Gen, HasService: true, Scheduler: "rr", Dests: dests, HasConn: true, ConnDir: conn.Reply,
			Conn: lcore.ConnInfo{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, ClientIP: ip(t, "203.0.113.7"), ClientPort: 40000,
				VIP: ip(t, "203.0.113.100"), VPort: 80, RIP: rs1.Addr, RPort: 80, Expires: 899e9},
			Pick: -1, TemplateDest: -1, OutPort: 0, NextHop: ip(t, "203.0.113.7"), NextHopKnown: true}
		r := do(o, rule(t, "trace -t 203.0.113.100:80 --client 203.0.113.7:40000 --reply 198.51.100.11:80"))
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		if fl := f.traced[0]; !fl.Reply || fl.RIP != rs1.Addr || fl.RPort != 80 {
			t.Fatalf("asked %+v", fl)
		}
		tr := r.Trace
		if tr.Flow != "TCP 198.51.100.11:80 -> 203.0.113.7:40000" || tr.Steering.Port != "lan" || tr.Conn == nil ||
			tr.Conn.State != "ESTABLISHED" || tr.Conn.ExpiresSecs != 899 || tr.Conn.Direction != "server to client" ||
			tr.Decision != nil || tr.Verdict.To != "203.0.113.7:40000" || tr.Verdict.Port != "wan" {
			t.Fatalf("trace %+v conn %+v verdict %+v", tr, tr.Conn, tr.Verdict)
		}
	})
	t.Run("reply of a NAT64 connection", func(t *testing.T) {
		f.traced = nil
		client6, vip6 := netip.MustParseAddr("2001:db8::7"), netip.MustParseAddr("2001:db8::100")
		f.traceRes = lcore.TraceResult{Worker: 0, Gen: snap.Gen, HasConn: true, ConnDir: conn.Reply,
			Conn: lcore.ConnInfo{Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, IPv6: true,
				Client6: hdr.Addr6From(client6), ClientPort: 40000, VIP6: hdr.Addr6From(vip6), VPort: 80, RIP: rs1.Addr, RPort: 80,
				LIP: ip(t, "198.51.100.200"), LPort: 2049, Expires: 899e9},
			Pick: -1, TemplateDest: -1, OutPort: 0}
		r := do(o, rule(t, "trace -t [2001:db8::100]:80 --client [2001:db8::7]:40000 --reply 198.51.100.11:80"))
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		if fl := f.traced[0]; !fl.Reply || !fl.IPv6 || fl.RIP != rs1.Addr || !fl.RIP6.IsUnspecified() || fl.RPort != 80 {
			t.Fatalf("asked %+v", fl)
		}
		tr := r.Trace
		if tr.Flow != "TCP 198.51.100.11:80 -> [2001:db8::7]:40000" || tr.Steering.Port != "lan" || tr.Conn == nil ||
			tr.Conn.Local != "198.51.100.200:2049" || tr.Conn.Destination != "198.51.100.11:80" || tr.Conn.Direction != "server to client" {
			t.Fatalf("trace %+v conn %+v", tr, tr.Conn)
		}
		var b bytes.Buffer
		if err := api.WriteTrace(&b, tr); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "from the local address 198.51.100.200:2049") {
			t.Errorf("text lacks the local address:\n%s", b.String())
		}
		r = do(o, rule(t, "trace -t 203.0.113.100:80 --client 203.0.113.7:40000 --reply [fd00::11]:80"))
		if !strings.Contains(r.Error, "--reply") {
			t.Errorf("an IPv6 server of an IPv4 VIP: error %q", r.Error)
		}
	})
	t.Run("SYN proxy", func(t *testing.T) {
		f.traceRes = lcore.TraceResult{Worker: 1, Owner: 1, Gen: snap.Gen, HasService: true, Scheduler: "rr", SynProxy: true,
			Dests: dests, Pick: 0, PickBy: "scheduler", PickPredicted: true, OutPort: 1, NextHop: rs1.Addr, NextHopKnown: true, TemplateDest: -1}
		r := do(o, rule(t, "trace -t 203.0.113.100:80 --client 203.0.113.7:40001"))
		if r.Error != "" || !r.Trace.Service.SynProxy || !strings.Contains(r.Trace.Verdict.Note, "cookie") {
			t.Fatalf("response %+v", r)
		}
		var b bytes.Buffer
		if err := api.WriteTrace(&b, r.Trace); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"-s rr --synproxy", "this connection opens when the client's ACK proves the cookie"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("text lacks %q:\n%s", want, b.String())
			}
		}
	})
	t.Run("drop", func(t *testing.T) {
		f.traceRes = lcore.TraceResult{Gen: snap.Gen, Pick: -1, TemplateDest: -1, OutPort: -1, Drop: lcore.DropNoService}
		r := do(o, rule(t, "trace -u 203.0.113.100:53 --client 203.0.113.7:5000"))
		if r.Error != "" || r.Trace.Service != nil || r.Trace.Verdict.Drop != "no_service" || !strings.Contains(r.Trace.Verdict.Why, "no service") {
			t.Fatalf("response %+v", r)
		}
	})
	t.Run("refusals name the option", func(t *testing.T) {
		for _, tc := range []struct{ req api.Request }{
			{api.Request{Op: api.OpTrace, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 80}, Client: "203.0.113.7"}},
			{api.Request{Op: api.OpTrace, Service: &api.ServiceSpec{Protocol: "tcp", VIP: "203.0.113.100", Port: 80}, Client: "203.0.113.7:1", Reply: "x"}},
			{api.Request{Op: api.OpTrace, Client: "203.0.113.7:1"}},
		} {
			r := do(o, tc.req)
			if r.Error == "" || !(strings.Contains(r.Error, "--client") || strings.Contains(r.Error, "--reply") || strings.Contains(r.Error, "-t|-u")) {
				t.Errorf("%+v: error %q", tc.req, r.Error)
			}
		}
	})
	if n := len(do(o, api.Request{Op: api.OpEdits}).Edits); n != 0 {
		t.Fatalf("traces logged as %d edits", n)
	}
}

func ip(t *testing.T, s string) uint32 {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return ipv4(a)
}

// TestTraceToKernel: a packet to a port's own address that lbd drops as
// to_local goes to the kernel on a port with a kernel interface (kni),
// and the trace says so, naming it; without one it is a drop.
func TestTraceToKernel(t *testing.T) {
	o, c, f := newTestOps(t)
	f.traceRes = lcore.TraceResult{Drop: lcore.DropToLocal, Pick: -1, TemplateDest: -1, OutPort: -1}
	trace := func() api.TraceVerdict {
		t.Helper()
		r := do(o, rule(t, "trace -t 198.51.100.1:22 --client 198.51.100.11:40000"))
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		return r.Trace.Verdict
	}
	if v := trace(); v.Drop != "to_local" || v.Kernel != "" {
		t.Errorf("without a kni: %+v, want a to_local drop", v)
	}
	c.mu.Lock()
	c.cfg.Ports[1].KNI = "dplb-lan"
	c.mu.Unlock()
	v := trace()
	if v.Drop != "" || v.Kernel != "dplb-lan" || v.Port != "lan" {
		t.Fatalf("with a kni on port lan: %+v, want to the kernel through dplb-lan", v)
	}
	var b bytes.Buffer
	if err := api.WriteTrace(&b, &api.Trace{Verdict: v}); err != nil {
		t.Fatal(err)
	}
	if want := "to the kernel through dplb-lan, port lan's kernel interface (kni)"; !strings.Contains(b.String(), want) {
		t.Errorf("text lacks %q:\n%s", want, b.String())
	}
}
