package ctl

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestPeerServersAdopted: records naming a server a configured service
// here does not have make it a draining server of that service before
// they are installed, kept until its connections end; a record of a
// service not configured here makes that service a Removed one with the
// server draining (vipdrain.go), unless its VIP is one this node could
// not configure (its own port's address); templates and configured
// servers adopt nothing.
func TestPeerServersAdopted(t *testing.T) {
	c, f := newHAController(t, "backup", 2)
	a := func(s string) uint32 { return ipv4(netip.MustParseAddr(s)) }
	rec := func(vip, rip string, cport uint16) lcore.SyncConn {
		return lcore.SyncConn{ClientIP: a("203.0.113.7"), ClientPort: cport, VIP: a(vip), RIP: a(rip), VPort: 80, RPort: 80,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	}
	var snapAtInstall *lcore.Snapshot
	f.install = func(w int, b *lcore.SyncBatch) {
		snapAtInstall = f.published[len(f.published)-1]
		b.Installed = uint32(len(b.Records))
		b.MarkDone()
	}
	template := rec("203.0.113.100", "198.51.100.14", 0)
	template.Template = true
	recs := []lcore.SyncConn{
		rec("203.0.113.100", "198.51.100.11", 4000), // configured
		rec("203.0.113.100", "198.51.100.13", 4001), // the master's alone
		rec("203.0.113.100", "198.51.100.13", 4002),
		rec("203.0.113.101", "198.51.100.15", 4003), // no such service here
		rec("203.0.113.1", "198.51.100.16", 4004),   // a port's address: never a VIP
		template,
	}
	published := len(f.published)
	c.InstallSynced(recs)
	if len(f.published) != published+1 {
		t.Fatalf("%d snapshots published for the adoption, want 1", len(f.published)-published)
	}
	svcKey := lcore.ServiceKey{VIP: a("203.0.113.100"), Port: 80, Proto: hdr.ProtoTCP}
	draining := func(s *lcore.Snapshot) []string {
		var out []string
		for _, svc := range s.Services {
			for _, d := range svc.Draining {
				out = append(out, netip.AddrPortFrom(addrOf(svc.Key.VIP), svc.Key.Port).String()+" -> "+
					netip.AddrPortFrom(addrOf(d.Addr), d.Port).String())
				if svc.Removed != (svc.Key != svcKey) {
					t.Errorf("service %+v: removed %v", svc.Key, svc.Removed)
				}
			}
		}
		return out
	}
	if got := draining(snapAtInstall); !slices.Equal(got, []string{"203.0.113.100:80 -> 198.51.100.13:80", "203.0.113.101:80 -> 198.51.100.15:80"}) {
		t.Fatalf("the snapshot the records were installed in drains %v, want the master's server and the service here has not", got)
	}
	if !snapAtInstall.IsVIP(a("203.0.113.101")) {
		t.Error("the VIP of the service adopted from the records is not answered")
	}
	c.mu.Lock()
	for id, k := range c.ids.draining {
		if k.svc.VIP == a("203.0.113.101") {
			c.adoptHeld[id] = time.Now().Add(-time.Second) // let it go at the next reclaim
		}
	}
	c.mu.Unlock()
	k := destKey{svc: svcKey, addr: a("198.51.100.13"), port: 80}
	id, ok := c.ids.lookup(k)
	if !ok || c.ids.draining[id] != k {
		t.Fatalf("the adopted server has no draining id (%d, %v)", id, ok)
	}
	if _, ok := c.wantedNeighbours()[a("198.51.100.13")]; !ok {
		t.Error("the adopted server's address is not kept resolved")
	}
	// Its records again: nothing more to publish.
	c.InstallSynced(recs)
	if len(f.published) != published+1 {
		t.Fatal("a known draining server was adopted again")
	}

	// Held while its connections are installed, then kept while the
	// lcores count one, and reclaimed after.
	c.mu.Lock()
	c.republish()
	if got := draining(c.snap); len(got) != 1 {
		t.Errorf("within its hold the adopted server was reclaimed: %v", got)
	}
	c.adoptHeld[id] = time.Now().Add(-time.Second)
	f.dest[id] = lcore.DestStats{lcore.DestActive: 1}
	c.republish()
	if got := draining(c.snap); len(got) != 1 {
		t.Errorf("with a connection counted the adopted server was reclaimed: %v", got)
	}
	delete(f.dest, id)
	c.republish()
	c.mu.Unlock()
	if got := draining(c.snap); len(got) != 0 {
		t.Errorf("with no connection left the server still drains: %v", got)
	}
	if _, ok := c.ids.lookup(k); ok {
		t.Error("the adopted server's id was not reclaimed")
	}
}

// TestRecordServer: the pair a record names, by family and method.
func TestRecordServer(t *testing.T) {
	nat64 := lcore.SyncConn{IPv6: true, Six: conn.Addrs6{VIP: vip6}, RIP: 0xC633640B, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, Fwd: fwd.FullNAT}
	nat66 := lcore.SyncConn{IPv6: true, Six: conn.Addrs6{VIP: vip6, RIP: rip6}, VPort: 80, RPort: 8080, Proto: hdr.ProtoUDP, Fwd: fwd.NAT}
	for _, tc := range []struct {
		r    lcore.SyncConn
		want string
	}{
		{lcore.SyncConn{VIP: 0xCB007164, RIP: 0xC633640B, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, Fwd: fwd.DR}, "tcp 203.0.113.100:80 -> 198.51.100.11:8080"},
		{nat64, "tcp [2001:db8:1::100]:80 -> 198.51.100.11:8080"},
		{nat66, "udp [2001:db8:1::100]:80 -> [fd00:1::11]:8080"},
		{lcore.SyncConn{VIP: 0xCB007164, RIP: 0xC633640B, Template: true}, ""},
		{lcore.SyncConn{VIP: 0xCB007164, RIP: 0xC633640B, FTPData: true, ServicePort: 21}, ""},
		{lcore.SyncConn{VIP: 0xCB007164, VPort: 80, RPort: 80}, ""},
	} {
		k, ok := recordServer(&tc.r)
		if got := k.String(); ok != (tc.want != "") || ok && got != tc.want {
			t.Errorf("recordServer(%+v) = %q, %v; want %q", tc.r, got, ok, tc.want)
		}
	}
}
