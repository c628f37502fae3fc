package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withPortZero gives r's worker a persistent port-zero service on vip
// (IPVS's -t VIP:0 -p: every port of the VIP without a service of its
// own), to rs1 and rs2 on port 0 (the client's port kept), ids 9 and 10.
func withPortZero(t *testing.T, r *rig) {
	t.Helper()
	old := r.w.snap
	d := []sched.Dest{{ID: 9, Addr: rs1, Weight: 1}, {ID: 10, Addr: rs2, Weight: 1}}
	rr, _ := sched.New("rr", d, sched.Options{})
	svcs := append(append([]Service(nil), old.Services...), Service{
		Key: ServiceKey{VIP: vip, Port: 0, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: d,
		Scheds: []sched.Scheduler{rr}, Persistence: int64(300 * time.Second), PersistMask: 0xFFFFFFFF})
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)})
	r.w.runCommands(0)
}

// connectPort sends a SYN from client:sport to vip:port and returns the
// address and port it was forwarded to.
func connectPort(t *testing.T, r *rig, client uint32, sport, port uint16) (uint32, uint16) {
	t.Helper()
	r.inject(0, tcpFrame(clientMAC, wanMAC, client, sport, vip, port, hdr.TCPFlagSYN, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("SYN from %x:%d to port %d not forwarded (stats %v)", client, sport, port, r.w.cnt.own)
	}
	_, ip, tcp := checkTCP(t, out[0])
	return ip.Dst(), tcp.DstPort()
}

// TestPortZeroService: a VIP's port-zero persistent service takes the
// ports that have no service of their own, keeps each one's number on
// the real server, sends one client to one server whatever the port
// (a template on port 0) and translates the server's answers back; the
// ports with services keep theirs.
func TestPortZeroService(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 39999, vip, 9000, hdr.TCPFlagSYN, ""))
	w.poll()
	if out := r.sent(1); len(out) != 0 || w.cnt.own[DropNoService] != 1 {
		t.Fatalf("before the port-zero service: %d forwarded, no_service %d", len(out), w.cnt.own[DropNoService])
	}
	withPortZero(t, r)

	other := ip4(203, 0, 113, 8)
	first, port := connectPort(t, r, clientIP, 40000, 9000)
	if port != 9000 {
		t.Fatalf("port 9000 reached the server's port %d, want 9000", port)
	}
	second, _ := connectPort(t, r, other, 50000, 9000)
	if first == second {
		t.Fatalf("rr sent both clients to %x", first)
	}
	for i, p := range []uint16{9443, 22, 65535, 1} {
		got, gotPort := connectPort(t, r, clientIP, 40001+uint16(i), p)
		if got != first || gotPort != p {
			t.Fatalf("client to port %d went to %x:%d, want %x:%d (its template's server, the port kept)", p, got, gotPort, first, p)
		}
	}
	if got, _ := connectPort(t, r, other, 50001, 7777); got != second {
		t.Fatalf("second client moved to %x", got)
	}
	if tmpl := templateOf(t, w, clientIP, 0); tmpl == nil || tmpl.controls.Load() != 5 {
		t.Fatalf("the client's port-0 template controls %v connections, want 5", tmpl)
	}
	if tmpl := templateOf(t, w, clientIP, 9000); tmpl != nil {
		t.Fatal("a template on the connection's own port: every port would schedule anew")
	}

	// Port 80 has a service of its own: its servers and ports.
	if _, p := connectPort(t, r, clientIP, 41000, 80); p != 80 && p != 8000 {
		t.Fatalf("port 80 went to port %d, not its service's", p)
	}

	// The server's answer from port 9443 goes back from vip:9443.
	mac := rs1MAC
	if first == rs2 {
		mac = rs2MAC
	}
	r.inject(1, tcpFrame(mac, lanMAC, first, 9443, clientIP, 40001, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("the server's SYN-ACK was not forwarded (stats %v)", w.cnt.own)
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Src() != vip || tcp.SrcPort() != 9443 || ip.Dst() != clientIP || tcp.DstPort() != 40001 {
		t.Fatalf("answer %x:%d -> %x:%d, want vip:9443 -> client:40001", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}

	// UDP has no port-zero service: refused as before.
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 40100, vip, 9000, "x", true))
	w.poll()
	if out := r.sent(1); len(out) != 0 {
		t.Fatal("a UDP datagram took the TCP port-zero service")
	}
}

// TestPortZeroService6: an IPv6 VIP's port-zero persistent service, the
// same: the ports without a service of their own, kept on the server,
// one server for a client's /64 on every port.
func TestPortZeroService6(t *testing.T) {
	r := rigSvc6(t)
	old := r.w.snap
	d := []sched.Dest{{ID: 20, Addr6: rs61, Weight: 1}, {ID: 21, Addr6: rs62, Weight: 1}}
	rr, _ := sched.New("rr", d, sched.Options{})
	svcs := append(append([]Service(nil), old.Services...), Service{
		Key: ServiceKey{VIP6: vip6DR, Proto: hdr.ProtoTCP}, Scheduler: "rr", Dests: d, Scheds: []sched.Scheduler{rr},
		Persistence: int64(300 * time.Second), PersistMask: ^uint32(0), PersistMask6: Mask6(64)})
	snap := NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)
	snap.Neigh6 = old.Neigh6
	r.w.snap = snap
	r.w.learnVIPs(snap)

	var first hdr.Addr6
	for i, port := range []uint16{9000, 9443, 22, 80, 9000} {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, clientAddr6, uint16(42000+i), vip6DR, port, hdr.TCPFlagSYN, ""))
		r.w.poll()
		out := r.sent(1)
		if len(out) != 1 {
			t.Fatalf("SYN to port %d: sent %d (drops %v)", port, len(out), dropsOf(r.w))
		}
		_, ip, l4 := check6(t, out[0])
		if port == 80 { // vip6DR:80 has its own service: DR to rs61:80
			if ip.Dst() != vip6DR || port6(l4, 2) != 80 {
				t.Fatalf("port 80 went to %s:%d, not its own DR service", ip.Dst(), port6(l4, 2))
			}
			continue
		}
		if port6(l4, 2) != port {
			t.Fatalf("port %d reached the server's port %d", port, port6(l4, 2))
		}
		if i == 0 {
			first = ip.Dst()
		} else if ip.Dst() != first {
			t.Fatalf("port %d went to %s, the client's first port to %s", port, ip.Dst(), first)
		}
	}
}

// TestSyncedPortZeroConnection: a peer's record of a connection to a
// port-zero service (its own port on the VIP and the server) is
// installed here and forwards the client's next segment to that port; a
// record whose server port differs from its VIP port names no server of
// the service.
func TestSyncedPortZeroConnection(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withPortZero(t, r)
	w := r.w
	rec := SyncConn{ClientIP: clientIP, ClientPort: 40000, VIP: vip, RIP: rs2, VPort: 9000, RPort: 9000,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished}
	wrong := rec
	wrong.ClientPort, wrong.RPort = 40001, 9001
	// The peer's template (port 0, server port 0) comes first and the
	// connection holds it, as it would a template on its own port.
	tmpl := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs2, Proto: hdr.ProtoTCP, Template: true}
	if b := install(t, w, tmpl, rec, wrong); b.Installed != 2 || b.NoDest != 1 {
		t.Fatalf("batch %+v, want the template and one connection installed and one with no server", b)
	}
	if id, _, ok := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 9000); !ok || w.table.Get(id).Template == 0 {
		t.Fatal("the synced connection does not hold the port-0 template")
	}
	if got, port := connectPort(t, r, clientIP, 40002, 7777); got != rs2 || port != 7777 {
		t.Fatalf("a new connection to port 7777 went to %x:%d, want the template's rs2:7777", got, port)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 9000, hdr.TCPFlagACK, "x"))
	w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("the synced connection's segment was not forwarded (stats %v)", w.cnt.own)
	}
	if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs2 || tcp.DstPort() != 9000 {
		t.Fatalf("forwarded to %x:%d, want rs2:9000", ip.Dst(), tcp.DstPort())
	}
}

// TestPortZeroPathDoesNotAllocate: new connections through a port-zero
// service's lookup, template and server port allocate nothing.
func TestPortZeroPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withPortZero(t, r)
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vip, uint16(9000+i%7), hdr.TCPFlagSYN, "")
	})
	if allocs != 0 {
		t.Fatalf("the port-zero path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[NewConns] < 100 {
		t.Fatalf("only %d connections were made (stats %v)", r.w.cnt.own[NewConns], r.w.cnt.own)
	}
}
