package lcore

import (
	"encoding/binary"
	"math/rand"
	"strconv"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// ftpRig is the single-worker rig with the FTP helper on VIP:21 (rs2:21)
// and an established control connection from the client's port 40100.
func ftpRig(t testing.TB) *rig { return ftpRigWith(t, vip, rs2) }

// ftpRigWith is ftpRig with the FTP service on VIP v and real server rs
// (with rs2's MAC).
func ftpRigWith(t testing.TB, v, rs uint32) *rig {
	r := ftpServiceRig(t, v, rs)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, v, 21, hdr.TCPFlagSYN, 100, 0, nil, ""))
	r.w.poll()
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs, 21, clientIP, 40100, hdr.TCPFlagSYN|hdr.TCPFlagACK, 5000, 101, nil, ""))
	r.w.poll()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, v, 21, hdr.TCPFlagACK, 101, 5001, nil, ""))
	r.w.poll()
	if n := len(r.sent(0)) + len(r.sent(1)); n != 3 {
		t.Fatalf("handshake: %d frames forwarded, want 3", n)
	}
	return r
}

// ftpServiceRig is the single-worker rig with the FTP helper on VIP v:21
// (real server rs:21, with rs2's MAC) and no connection yet.
func ftpServiceRig(t testing.TB, v, rs uint32) *rig {
	neigh := defaultNeigh()
	neigh[rs] = rs2MAC
	r := newRig(t, neigh)
	svcs := append([]Service(nil), r.w.snap.Services...)
	for i := range svcs {
		if svcs[i].Key.Port == 21 {
			d := []sched.Dest{{ID: 2, Addr: rs, Port: 21, Weight: 1}}
			s, _ := sched.New("rr", d, sched.Options{})
			svcs[i] = Service{Key: ServiceKey{VIP: v, Port: 21, Proto: hdr.ProtoTCP}, Scheduler: "rr",
				Dests: d, Scheds: []sched.Scheduler{s}, Helper: HelperFTP}
		}
	}
	next := NewSnapshot(2, r.w.snap.Ports, svcs, r.w.snap.Neigh, r.w.snap.Timeouts)
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: next})
	r.w.runCommands(0)
	return r
}

// one returns the single frame a port sent, checked.
func oneTCP(t *testing.T, r *rig, port int) (hdr.IPv4, hdr.TCP) {
	t.Helper()
	out := r.sent(port)
	if len(out) != 1 {
		t.Fatalf("port %d sent %d frames, want 1 (stats %v)", port, len(out), r.w.cnt.own)
	}
	_, ip, tcp := checkTCP(t, out[0])
	return ip, tcp
}

// TestFTPPassive: the server's 227 names rs2; the client gets the VIP
// instead, and every later number of the server's stream is shifted by
// the longer text (and the client's acknowledgements and SACK edges
// shifted back); the client's data connection to VIP:port reaches rs2's
// port.
func TestFTPPassive(t *testing.T) {
	r := ftpRig(t)
	w := r.w
	const reply = "227 Entering Passive Mode (198,51,100,12,195,80).\r\n"
	const want = "227 Entering Passive Mode (203,0,113,100,195,80).\r\n"
	diff := uint32(len(want) - len(reply))
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, reply))
	w.poll()
	ip, tcp := oneTCP(t, r, 0)
	if got := string(tcp.Payload()); got != want || ip.Src() != vip || tcp.Seq() != 5001 {
		t.Fatalf("227 reached the client as %q from %x seq %d", got, ip.Src(), tcp.Seq())
	}
	// A retransmission of the 227 is rewritten alike and shifts nothing more.
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, reply))
	w.poll()
	if _, tcp = oneTCP(t, r, 0); string(tcp.Payload()) != want || tcp.Seq() != 5001 {
		t.Fatalf("retransmitted 227: %q seq %d", tcp.Payload(), tcp.Seq())
	}
	// The server's next bytes are numbered after the longer 227.
	next := 5001 + uint32(len(reply))
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, next, 101, nil, "150 Here it comes.\r\n"))
	w.poll()
	if _, tcp = oneTCP(t, r, 0); tcp.Seq() != next+diff {
		t.Fatalf("next server segment seq %d, want %d", tcp.Seq(), next+diff)
	}
	// The client acknowledges in its numbering, with a SACK block; the
	// server gets its own.
	sack := make([]byte, 12)
	sack[0], sack[1], sack[2], sack[3] = 1, 1, 5, 10
	binary.BigEndian.PutUint32(sack[4:], next+diff+20)
	binary.BigEndian.PutUint32(sack[8:], next+diff+40)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK, 101, next+diff, sack, ""))
	w.poll()
	_, tcp = oneTCP(t, r, 1)
	if tcp.Ack() != next {
		t.Fatalf("client's ack reached the server as %d, want %d", tcp.Ack(), next)
	}
	if l, rr := binary.BigEndian.Uint32(tcp[24:]), binary.BigEndian.Uint32(tcp[28:]); l != next+20 || rr != next+40 {
		t.Fatalf("SACK block %d-%d, want %d-%d", l, rr, next+20, next+40)
	}
	// The data connection: client:40200 -> VIP:50000 goes to rs2:50000.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40200, vip, 50000, hdr.TCPFlagSYN, 7000, 0, nil, ""))
	w.poll()
	ip, tcp = oneTCP(t, r, 1)
	if ip.Dst() != rs2 || tcp.DstPort() != 50000 {
		t.Fatalf("data connection went to %x:%d, want rs2:50000", ip.Dst(), tcp.DstPort())
	}
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 50000, clientIP, 40200, hdr.TCPFlagSYN|hdr.TCPFlagACK, 9000, 7001, nil, ""))
	w.poll()
	if ip, tcp = oneTCP(t, r, 0); ip.Src() != vip || tcp.SrcPort() != 50000 {
		t.Fatalf("data reply left as %x:%d", ip.Src(), tcp.SrcPort())
	}
	// The expectation was used once: another client port is no one's.
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40201, vip, 50000, hdr.TCPFlagSYN, 7000, 0, nil, ""))
	w.poll()
	if w.cnt.own[DropNoService] != 1 {
		t.Fatalf("a second connection to the data port: no_service %d", w.cnt.own[DropNoService])
	}
	if st := w.cnt.own; st[FTPRewritten] != 2 || st[FTPExpected] != 2 || st[FTPDataConns] != 1 {
		t.Fatalf("rewritten %d expected %d data %d", st[FTPRewritten], st[FTPExpected], st[FTPDataConns])
	}
}

// TestFTPActive: the client's PORT is passed as it is, and the server's
// connection from port 20 to the client's port leaves from VIP:20; EPRT
// and 229 work alike.
func TestFTPActive(t *testing.T) {
	r := ftpRig(t)
	w := r.w
	cmd := "PORT 203,0,113,7,156,64\r\n" // port 40000
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK|hdr.TCPFlagPSH, 101, 5001, nil, cmd))
	w.poll()
	if _, tcp := oneTCP(t, r, 1); string(tcp.Payload()) != cmd {
		t.Fatalf("PORT reached the server as %q", tcp.Payload())
	}
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 20, clientIP, 40000, hdr.TCPFlagSYN, 3000, 0, nil, ""))
	w.poll()
	ip, tcp := oneTCP(t, r, 0)
	if ip.Src() != vip || tcp.SrcPort() != 20 || ip.Dst() != clientIP || tcp.DstPort() != 40000 {
		t.Fatalf("active data SYN left as %x:%d -> %x:%d", ip.Src(), tcp.SrcPort(), ip.Dst(), tcp.DstPort())
	}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40000, vip, 20, hdr.TCPFlagSYN|hdr.TCPFlagACK, 8000, 3001, nil, ""))
	w.poll()
	if ip, tcp = oneTCP(t, r, 1); ip.Dst() != rs2 || tcp.DstPort() != 20 {
		t.Fatalf("client's SYN-ACK went to %x:%d", ip.Dst(), tcp.DstPort())
	}

	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK|hdr.TCPFlagPSH, 101+uint32(len(cmd)), 5001, nil, "eprt |1|203.0.113.7|40001|\r\n"))
	w.poll()
	oneTCP(t, r, 1)
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 20, clientIP, 40001, hdr.TCPFlagSYN, 3000, 0, nil, ""))
	w.poll()
	if ip, _ = oneTCP(t, r, 0); ip.Src() != vip {
		t.Fatal("EPRT's data connection did not leave from the VIP")
	}

	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, "229 Entering Extended Passive Mode (|||50001|)\r\n"))
	w.poll()
	oneTCP(t, r, 0)
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40300, vip, 50001, hdr.TCPFlagSYN, 7000, 0, nil, ""))
	w.poll()
	if ip, tcp = oneTCP(t, r, 1); ip.Dst() != rs2 || tcp.DstPort() != 50001 {
		t.Fatalf("229's data connection went to %x:%d", ip.Dst(), tcp.DstPort())
	}
	if w.cnt.own[FTPDataConns] != 3 {
		t.Fatalf("data connections %d, want 3", w.cnt.own[FTPDataConns])
	}
}

// TestFTPUnparsed: what the helper cannot read, or that names another
// host, is dropped and counted.
func TestFTPUnparsed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fromRS  bool
		payload string
	}{
		{"227 without numbers", true, "227 Entering Passive Mode.\r\n"},
		{"227 out of range", true, "227 Entering Passive Mode (198,51,100,12,300,80).\r\n"},
		{"227 naming another host", true, "227 Entering Passive Mode (192,0,2,1,195,80).\r\n"},
		{"227 cut short", true, "227 Entering Passive Mode (198,51,100,12,195,80)"},
		{"229 without a port", true, "229 Entering Extended Passive Mode (|||x|)\r\n"},
		{"PORT to a third host", false, "PORT 192,0,2,9,156,64\r\n"},
		{"EPRT for IPv6", false, "EPRT |2|2001:db8::1|40000|\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ftpRig(t)
			if tc.fromRS {
				r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, tc.payload))
			} else {
				r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK|hdr.TCPFlagPSH, 101, 5001, nil, tc.payload))
			}
			r.w.poll()
			if n := len(r.sent(0)) + len(r.sent(1)); n != 0 || r.w.cnt.own[DropFTPUnparsed] != 1 {
				t.Fatalf("sent %d, ftp_unparsed %d", n, r.w.cnt.own[DropFTPUnparsed])
			}
		})
	}
}

// TestFTPTableMatchesAMap: the side table agrees with a map through random
// adds and removes (backward-shift deletion keeps every run reachable).
func TestFTPTableMatchesAMap(t *testing.T) {
	ft := &ftpTable{slots: make([]ftpState, 64)}
	model := map[uint32]bool{}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		id := uint32(rng.Intn(100))
		if model[id] {
			ft.remove(id)
			delete(model, id)
		} else if len(model) < 32 {
			if !ft.add(id) {
				t.Fatal("add refused below half full")
			}
			model[id] = true
		}
		for j := uint32(0); j < 100; j++ {
			if (ft.get(j) != nil) != model[j] {
				t.Fatalf("step %d: id %d present %v, want %v", i, j, ft.get(j) != nil, model[j])
			}
		}
	}
}

// TestFTPPathDoesNotAllocate: rewriting 227s allocates nothing.
func TestFTPPathDoesNotAllocate(t *testing.T) {
	r := ftpRig(t)
	const reply = "227 Entering Passive Mode (198,51,100,12,195,80).\r\n"
	allocs := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001+uint32(i*len(reply)), 101, nil, reply)
	})
	if allocs != 0 {
		t.Fatalf("the FTP helper allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[FTPRewritten] < 100 {
		t.Fatalf("only %d rewritten", r.w.cnt.own[FTPRewritten])
	}
}

// TestFTPDataOnAnyWorker: on two workers, the data connections a control
// connection announces reach their real server whichever worker owns
// them (the expectations are shared).
func TestFTPDataOnAnyWorker(t *testing.T) {
	r := newMultiRig(t, false)
	svc := service2(ServiceKey{VIP: vip, Port: 21, Proto: hdr.ProtoTCP}, sched.Dest{ID: 0, Addr: rs1, Port: 21, Weight: 1})
	svc.Helper = HelperFTP
	r.apply(nil, svc)
	r.inject(0, 0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagSYN, 100, 0, nil, ""))
	r.pollBoth()
	r.inject(1, 1, tcpSeg(rs1MAC, lanMAC, rs1, 21, clientIP, 40100, hdr.TCPFlagSYN|hdr.TCPFlagACK, 5000, 101, nil, ""))
	r.pollBoth()
	r.inject(0, 1, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK, 101, 5001, nil, ""))
	r.pollBoth()
	if n := len(r.sentAll(0)) + len(r.sentAll(1)); n != 3 {
		t.Fatalf("handshake: %d frames, want 3", n)
	}
	owners := [2]int{}
	seq := uint32(5001)
	for i := 0; i < 8; i++ {
		port := uint16(50000 + i)
		reply := "227 Entering Passive Mode (198,51,100,11," + itoa(int(port>>8)) + "," + itoa(int(port&0xff)) + ").\r\n"
		r.inject(1, i%2, tcpSeg(rs1MAC, lanMAC, rs1, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, seq, 101, nil, reply))
		seq += uint32(len(reply))
		r.pollBoth()
		if out := r.sentAll(0); len(out) != 1 {
			t.Fatalf("227 %d: %d frames to the client", i, len(out))
		}
		cport := uint16(41000 + i)
		owners[Owner(clientIP, cport, 2)]++
		r.inject(0, (i+1)%2, tcpSeg(clientMAC, wanMAC, clientIP, cport, vip, port, hdr.TCPFlagSYN, 7000, 0, nil, ""))
		r.pollBoth()
		out := r.sentAll(1)
		if len(out) != 1 {
			t.Fatalf("data connection %d: %d frames to the servers", i, len(out))
		}
		if _, ip, tcp := checkTCP(t, out[0]); ip.Dst() != rs1 || tcp.DstPort() != port {
			t.Fatalf("data connection %d went to %x:%d", i, ip.Dst(), tcp.DstPort())
		}
	}
	if owners[0] == 0 || owners[1] == 0 {
		t.Fatalf("the data connections' owners %v: want both workers", owners)
	}
}

func itoa(v int) string { return strconv.Itoa(v) }

// TestFTPRewriteChangesLength: a 227 whose address text is shorter or
// longer as the VIP moves the rest of the segment and the numbers of the
// server's later bytes by the difference, both ways.
func TestFTPRewriteChangesLength(t *testing.T) {
	for _, tc := range []struct {
		name     string
		v, rs    uint32
		from, to string
	}{
		{"shorter", ip4(203, 0, 113, 5), rs2, "198,51,100,12", "203,0,113,5"},
		{"longer", vip, ip4(198, 51, 100, 5), "198,51,100,5", "203,0,113,100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ftpRigWith(t, tc.v, tc.rs)
			reply := "227 Entering Passive Mode (" + tc.from + ",195,80).\r\n"
			want := "227 Entering Passive Mode (" + tc.to + ",195,80).\r\n"
			diff := uint32(len(want) - len(reply))
			r.inject(1, tcpSeg(rs2MAC, lanMAC, tc.rs, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, reply))
			r.w.poll()
			ip, tcp := oneTCP(t, r, 0)
			if string(tcp.Payload()) != want || int(ip.TotalLength()) != 40+len(want) {
				t.Fatalf("227 reached the client as %q (total length %d)", tcp.Payload(), ip.TotalLength())
			}
			next := 5001 + uint32(len(reply))
			r.inject(1, tcpSeg(rs2MAC, lanMAC, tc.rs, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, next, 101, nil, "150 ok\r\n"))
			r.w.poll()
			if _, tcp = oneTCP(t, r, 0); tcp.Seq() != next+diff {
				t.Fatalf("next seq %d, want %d", tcp.Seq(), next+diff)
			}
			r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, tc.v, 21, hdr.TCPFlagACK, 101, next+diff+8, nil, ""))
			r.w.poll()
			if _, tcp = oneTCP(t, r, 1); tcp.Ack() != next+8 {
				t.Fatalf("client's ack reached the server as %d, want %d", tcp.Ack(), next+8)
			}
			// The data connection to the new VIP's port reaches the server.
			r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40200, tc.v, 50000, hdr.TCPFlagSYN, 7000, 0, nil, ""))
			r.w.poll()
			if ip, _ = oneTCP(t, r, 1); ip.Dst() != tc.rs {
				t.Fatalf("data connection went to %x", ip.Dst())
			}
		})
	}
}

// FuzzFTP feeds arbitrary control-connection data to the helper, both
// ways: whatever it reads, the worker must neither panic nor keep an mbuf.
func FuzzFTP(f *testing.F) {
	for _, seed := range []string{
		"227 Entering Passive Mode (198,51,100,12,195,80).\r\n",
		"229 Entering Extended Passive Mode (|||50001|)\r\n",
		"PORT 203,0,113,7,156,64\r\n",
		"EPRT |1|203.0.113.7|40001|\r\n",
		"227 (", "EPRT |", "PORT ,,,,,\r\n",
	} {
		f.Add(seed, false, uint32(101))
		f.Add(seed, true, uint32(5001))
	}
	r := ftpRig(f)
	f.Fuzz(func(t *testing.T, payload string, fromServer bool, seq uint32) {
		if len(payload) > 1400 {
			return
		}
		r.t = t
		if fromServer {
			r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, seq, 101, nil, payload))
		} else {
			r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 40100, vip, 21, hdr.TCPFlagACK|hdr.TCPFlagPSH, seq, 5001, nil, payload))
		}
		r.w.poll()
		for _, f := range append(r.sent(0), r.sent(1)...) {
			checkTCP(t, f)
		}
		if n := r.pool.InUse(); n != 0 {
			t.Fatalf("%d mbufs held", n)
		}
	})
}

// TestFTPCorrupt227PassedOnBad: a 227 whose TCP checksum is already wrong
// on arrival is not rewritten (a rewrite would give it a fresh, valid
// checksum): it reaches the client unchanged and still bad, shifts
// nothing, and its good retransmission is rewritten as usual.
func TestFTPCorrupt227PassedOnBad(t *testing.T) {
	r := ftpRig(t)
	const reply = "227 Entering Passive Mode (198,51,100,12,195,80).\r\n"
	const want = "227 Entering Passive Mode (203,0,113,100,195,80).\r\n"
	bad := tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, reply)
	bad[hdr.EthernetLen+20+16] ^= 0x40 // the TCP checksum's first byte
	r.inject(1, bad)
	r.w.poll()
	out := r.sent(0)
	if len(out) != 1 {
		t.Fatalf("%d frames to the client, want 1", len(out))
	}
	ip := hdr.IPv4(hdr.Ethernet(out[0]).Payload())
	tcp := hdr.TCP(ip.Payload())
	if string(tcp.Payload()) != reply || tcp.Checksum() == hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, ip.Payload()) {
		t.Fatalf("corrupt 227 left as %q with a valid checksum %v", tcp.Payload(),
			tcp.Checksum() == hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, ip.Payload()))
	}
	if r.w.cnt.own[FTPRewritten] != 0 || r.w.cnt.own[FTPExpected] != 0 {
		t.Fatalf("rewritten %d expected %d", r.w.cnt.own[FTPRewritten], r.w.cnt.own[FTPExpected])
	}
	r.inject(1, tcpSeg(rs2MAC, lanMAC, rs2, 21, clientIP, 40100, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 101, nil, reply))
	r.w.poll()
	if _, tcp := oneTCP(t, r, 0); string(tcp.Payload()) != want || tcp.Seq() != 5001 {
		t.Fatalf("retransmitted 227: %q seq %d", tcp.Payload(), tcp.Seq())
	}
}
