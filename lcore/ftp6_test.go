package lcore

import (
	"testing"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// withFTP6 adds [vip6]:21, NAT66 with the FTP helper, to [rs62]:21.
func withFTP6(r *rig) {
	s := r.w.snap
	d := sched.Dest{ID: 20, Addr6: rs62, Port: 21, Weight: 1}
	rr, _ := sched.New("rr", []sched.Dest{d}, sched.Options{})
	svcs := append(append([]Service(nil), s.Services...), Service{Key: ServiceKey{VIP6: vip6, Port: 21, Proto: hdr.ProtoTCP},
		Scheduler: "rr", Dests: []sched.Dest{d}, Scheds: []sched.Scheduler{rr}, PersistMask: ^uint32(0), Helper: HelperFTP})
	snap := NewSnapshot(s.Gen+1, s.Ports, svcs, s.Neigh, conn.DefaultTimeouts())
	snap.Neigh6 = s.Neigh6
	r.w.snap = snap
	r.w.learnVIPs(snap)
}

// TestFTP6: over IPv6 the server's 229 announces the client's data
// connection to [VIP]:port, which goes to the server's port; the
// client's EPRT |2| announces the server's connection to the client,
// which reaches the client from [VIP]:20; nothing is rewritten. PORT,
// 227 and an EPRT naming another address are dropped as ftp_unparsed.
// The data connection syncs with its FTP service's port.
func TestFTP6(t *testing.T) {
	r := rigSvc6(t)
	withFTP6(r)
	withSync(r, SyncParams{On: true, Threshold: 1})
	w := r.w
	ctl := func(port int, payload string) []byte {
		if port == 0 {
			return tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 21, hdr.TCPFlagACK|hdr.TCPFlagPSH, 1001, 5001, payload)
		}
		return tcpSeg6(rs2MAC, lanMAC, rs62, 21, clientAddr6, 40000, hdr.TCPFlagACK|hdr.TCPFlagPSH, 5001, 1001, payload)
	}
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40000, vip6, 21, hdr.TCPFlagSYN, 1000, 0, ""))
	w.poll()
	if _, ip, l4 := check6(t, one(t, r, 1)); ip.Dst() != rs62 || port6(l4, 2) != 21 {
		t.Fatalf("control SYN to %s:%d", ip.Dst(), port6(l4, 2))
	}
	id, _, _ := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40000, &vip6, 21)
	if w.table.Get(id).Flags&flagFTP == 0 || w.ftp.get(id) == nil {
		t.Fatal("the control connection has no helper")
	}

	// Passive: 229 passes unchanged; the client's connection to
	// [VIP]:50001 goes to [rs62]:50001.
	reply := "229 Entering Extended Passive Mode (|||50001|)\r\n"
	r.inject(1, ctl(1, reply))
	w.poll()
	if _, ip, l4 := check6(t, one(t, r, 0)); ip.Src() != vip6 || string(hdr.TCP(l4).Payload()) != reply {
		t.Fatalf("229 reached the client from %s as %q", ip.Src(), hdr.TCP(l4).Payload())
	}
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40001, vip6, 50001, hdr.TCPFlagSYN, 2000, 0, ""))
	w.poll()
	if _, ip, l4 := check6(t, one(t, r, 1)); ip.Dst() != rs62 || port6(l4, 2) != 50001 || ip.Src() != clientAddr6 {
		t.Fatalf("passive data SYN to %s:%d", ip.Dst(), port6(l4, 2))
	}
	dataID, _, ok := w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40001, &vip6, 50001)
	if !ok || w.table.Get(dataID).Flags&flagFTPData == 0 || w.cnt.own[FTPDataConns] != 1 {
		t.Fatalf("no FTP data connection (ftp_data_conns %d)", w.cnt.own[FTPDataConns])
	}
	if p := w.ftpServicePort(w.table.Get(dataID)); p != 21 {
		t.Fatalf("the data connection's FTP service port is %d, want 21", p)
	}
	r.inject(1, tcpSeg6(rs2MAC, lanMAC, rs62, 50001, clientAddr6, 40001, hdr.TCPFlagSYN|hdr.TCPFlagACK, 7000, 2001, ""))
	w.poll()
	if _, ip, l4 := check6(t, one(t, r, 0)); ip.Src() != vip6 || port6(l4, 0) != 50001 {
		t.Fatalf("passive data SYN-ACK from %s:%d", ip.Src(), port6(l4, 0))
	}
	r.inject(0, tcpSeg6(clientMAC, wanMAC, clientAddr6, 40001, vip6, 50001, hdr.TCPFlagACK, 2001, 7001, ""))
	w.poll()
	one(t, r, 1)

	// Active: EPRT passes unchanged; the server's connection from port
	// 20 reaches the client from [VIP]:20.
	eprt := "EPRT |2|" + clientAddr6.Netip().String() + "|40100|\r\n"
	r.inject(0, ctl(0, eprt))
	w.poll()
	if _, _, l4 := check6(t, one(t, r, 1)); string(hdr.TCP(l4).Payload()) != eprt {
		t.Fatalf("EPRT reached the server as %q", hdr.TCP(l4).Payload())
	}
	r.inject(1, tcpSeg6(rs2MAC, lanMAC, rs62, 20, clientAddr6, 40100, hdr.TCPFlagSYN, 3000, 0, ""))
	w.poll()
	if _, ip, l4 := check6(t, one(t, r, 0)); ip.Src() != vip6 || port6(l4, 0) != 20 || port6(l4, 2) != 40100 {
		t.Fatalf("active data SYN from %s:%d to port %d", ip.Src(), port6(l4, 0), port6(l4, 2))
	}

	for _, bad := range []struct {
		port    int
		payload string
	}{
		{0, "PORT 192,0,2,1,4,1\r\n"},
		{0, "EPRT |2|2001:db8:1::99|40200|\r\n"}, // not the client's address
		{0, "EPRT |1|192.0.2.1|40200|\r\n"},
		{1, "227 Entering Passive Mode (198,51,100,12,195,81)\r\n"},
	} {
		before := w.cnt.own[DropFTPUnparsed]
		r.inject(bad.port, ctl(bad.port, bad.payload))
		w.poll()
		if w.cnt.own[DropFTPUnparsed] != before+1 || len(r.sent(0))+len(r.sent(1)) != 0 {
			t.Errorf("%q was not dropped as ftp_unparsed", bad.payload)
		}
	}

	// Sync: the data connection's record names its FTP service's port;
	// installed on a peer, it is a data connection of that service.
	var data *SyncConn
	recs := syncedRecords(w)
	for i := range recs {
		if recs[i].VPort == 50001 {
			data = &recs[i]
		}
	}
	if data == nil || !data.FTPData || data.ServicePort != 21 || !data.IPv6 {
		t.Fatalf("records %+v: none for the data connection with its service port", recs)
	}
	peer := rigSvc6(t)
	withFTP6(peer)
	ctlRec := SyncConn{ClientPort: 40000, VPort: 21, RPort: 21, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
		FTP: true, IPv6: true, Six: conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs62}}
	if b := install6(t, peer, *data, ctlRec); b.Installed != 2 {
		t.Fatalf("peer batch %+v", b)
	}
	pid, _, ok := peer.w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40001, &vip6, 50001)
	if !ok || peer.w.table.Get(pid).Flags&flagFTPData == 0 {
		t.Fatal("the peer has no FTP data connection")
	}
	cid, _, ok := peer.w.table.Lookup6(hdr.ProtoTCP, &clientAddr6, 40000, &vip6, 21)
	if !ok || peer.w.table.Get(cid).Flags&flagFTP == 0 || peer.w.ftp.get(cid) == nil {
		t.Fatal("the peer's control connection has no helper")
	}
}

// TestFTP6Handover: the handover's record of an IPv6 FTP connection (a
// listed connection's SyncConn) keeps its helper flag, or its data
// connection's service port, as sync's does.
func TestFTP6Handover(t *testing.T) {
	six := conn.Addrs6{Client: clientAddr6, VIP: vip6, RIP: rs62}
	for _, ci := range []ConnInfo{
		{Proto: hdr.ProtoTCP, Fwd: fwd.NAT, ClientPort: 40000, VPort: 21, RPort: 21, FTP: true,
			IPv6: true, Client6: six.Client, VIP6: six.VIP, RIP6: six.RIP},
		{Proto: hdr.ProtoTCP, Fwd: fwd.NAT, ClientPort: 40001, VPort: 50001, RPort: 50001, FTPData: true, ServicePort: 21,
			IPv6: true, Client6: six.Client, VIP6: six.VIP, RIP6: six.RIP},
	} {
		r := ci.SyncConn()
		if r.FTP != ci.FTP || r.FTPData != ci.FTPData || r.ServicePort != ci.ServicePort || !r.IPv6 || r.Six != six {
			t.Errorf("%+v became %+v", ci, r)
		}
	}
}
