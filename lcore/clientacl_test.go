package lcore

import (
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore/hdr"
)

func prefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func TestClientACLMatchesPrefixes(t *testing.T) {
	if NewClientACL(nil, nil) != nil {
		t.Fatal("empty lists made a filter: every new connection would pay for nothing")
	}
	acl := NewClientACL(prefixes(t, "203.0.113.7/32", "198.51.100.0/24", "2001:db8:1::7/128", "2001:db8:9::/48"), nil)
	for _, c := range []struct {
		addr string
		want Stat
	}{
		{"203.0.113.7", DropClientBlocked}, {"203.0.113.8", 0}, {"198.51.100.200", DropClientBlocked},
		{"198.51.101.1", 0}, {"2001:db8:1::7", DropClientBlocked}, {"2001:db8:1::8", 0},
		{"2001:db8:9:ffff::1", DropClientBlocked}, {"2001:db8:a::1", 0},
	} {
		a := netip.MustParseAddr(c.addr)
		var got Stat
		if a.Is4() {
			got = acl.admits(ipv4Of(a))
		} else {
			a6 := hdr.Addr6(a.As16())
			got = acl.admits6(&a6)
		}
		if got != c.want {
			t.Errorf("%s: %v, want %v", c.addr, statNames[got], statNames[c.want])
		}
	}
	// An allowlist lets in only what it names; the blocklist wins over it.
	acl = NewClientACL(prefixes(t, "10.1.2.3/32"), prefixes(t, "10.0.0.0/8", "192.0.2.0/25"))
	for addr, want := range map[string]Stat{"10.9.9.9": 0, "10.1.2.3": DropClientBlocked, "192.0.2.127": 0, "192.0.2.128": DropClientNotAllowed, "172.16.0.1": DropClientNotAllowed} {
		if got := acl.admits(ipv4Of(netip.MustParseAddr(addr))); got != want {
			t.Errorf("%s: %v, want %v", addr, statNames[got], statNames[want])
		}
	}
	all := NewClientACL(prefixes(t, "0.0.0.0/0", "::/0"), nil)
	a6 := clientAddr6
	if all.admits(clientIP) != DropClientBlocked || all.admits6(&a6) != DropClientBlocked {
		t.Error("a /0 prefix did not match every client")
	}
}

func TestClientACLDoesNotAllocate(t *testing.T) {
	acl := NewClientACL(prefixes(t, "203.0.113.0/24", "2001:db8:1::/64"), prefixes(t, "198.51.100.7/32", "2001:db8:2::/48"))
	a6 := clientAddr6
	if n := testing.AllocsPerRun(100, func() { _, _ = acl.admits(clientIP), acl.admits6(&a6) }); n != 0 {
		t.Errorf("a check allocates %.0f times", n)
	}
}

// withClients publishes r's snapshot again with acl as the lists of the
// service key.
func withClients(t *testing.T, r *rig, key ServiceKey, acl *ClientACL) {
	t.Helper()
	old := r.w.snap
	svcs := append([]Service(nil), old.Services...)
	found := false
	for i := range svcs {
		if svcs[i].Key == key {
			svcs[i].Clients, found = acl, true
		}
	}
	if !found {
		t.Fatalf("no service %v", key)
	}
	snap := NewSnapshot(old.Gen+1, old.Ports, svcs, old.Neigh, old.Timeouts)
	snap.Neigh6 = old.Neigh6
	r.w.Commands().Push(Command{Kind: CmdSnapshot, Snap: snap})
	r.w.runCommands(0)
	r.w.poll()
	r.drain(0)
	r.drain(1) // what a new snapshot announces (IPv6: unsolicited NAs)
}

func TestClientListsGateNewConnectionsOnly(t *testing.T) {
	r := newRig(t, defaultNeigh())
	key := ServiceKey{VIP: vip, Port: 80, Proto: hdr.ProtoTCP}
	other := ip4(203, 0, 113, 8)
	send := func(src uint32, port uint16, flags uint8, payload string) int {
		r.inject(0, tcpFrame(clientMAC, wanMAC, src, port, vip, 80, flags, payload))
		r.w.poll()
		return len(r.sent(1))
	}
	// A connection opened before the client is blocked goes on.
	if send(clientIP, 40000, hdr.TCPFlagSYN, "") != 1 {
		t.Fatal("the SYN of an unlisted client was not forwarded")
	}
	withClients(t, r, key, NewClientACL(prefixes(t, "203.0.113.7/32"), nil))
	if send(clientIP, 40000, hdr.TCPFlagACK, "established") != 1 {
		t.Fatal("blocking the client broke its established connection")
	}
	if send(clientIP, 40001, hdr.TCPFlagSYN, "") != 0 || r.w.cnt.own[DropClientBlocked] != 1 {
		t.Fatalf("a blocked client's SYN: client_blocked %d", r.w.cnt.own[DropClientBlocked])
	}
	if _, _, ok := r.w.table.Lookup(hdr.ProtoTCP, clientIP, 40001, vip, 80); ok {
		t.Fatal("a blocked client's SYN made an entry")
	}
	if send(other, 40002, hdr.TCPFlagSYN, "") != 1 {
		t.Fatal("another client was kept out by the blocklist")
	}
	// An allowlist naming only the other client keeps this one out.
	withClients(t, r, key, NewClientACL(nil, prefixes(t, "203.0.113.8/32")))
	if send(clientIP, 40003, hdr.TCPFlagSYN, "") != 0 || r.w.cnt.own[DropClientNotAllowed] != 1 {
		t.Fatalf("a client off the allowlist: client_not_allowed %d", r.w.cnt.own[DropClientNotAllowed])
	}
	if send(other, 40004, hdr.TCPFlagSYN, "") != 1 {
		t.Fatal("the allowlisted client's SYN was not forwarded")
	}
	// The lists are per service: the DR service on another VIP is open.
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40005, vipDR, 80, hdr.TCPFlagSYN, ""))
	r.w.poll()
	if len(r.sent(1)) != 1 {
		t.Fatal("another service's clients were filtered")
	}
	// Lifting the lists lets the client in again.
	withClients(t, r, key, nil)
	if send(clientIP, 40006, hdr.TCPFlagSYN, "") != 1 {
		t.Fatal("the client stayed out once the lists were gone")
	}
}

func TestClientListsBeforeTheSynCookie(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, 0) // NAT
	withClients(t, r, ServiceKey{VIP: vipSP, Port: 80, Proto: hdr.ProtoTCP}, NewClientACL(prefixes(t, "203.0.113.0/24"), nil))
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 41000, vipSP, 80, hdr.TCPFlagSYN, 1000, 0, synOpts, ""))
	r.w.poll()
	if n := len(r.sent(0)); n != 0 || r.w.cnt.own[DropClientBlocked] != 1 || r.w.cnt.own[SynCookiesSent] != 0 {
		t.Fatalf("a blocked client's SYN to a SYN proxy: %d answers, client_blocked %d, cookies %d", n,
			r.w.cnt.own[DropClientBlocked], r.w.cnt.own[SynCookiesSent])
	}
}

func TestClientListsIPv6(t *testing.T) {
	r := rigSvc6(t)
	other := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::8"))
	withClients(t, r, ServiceKey{VIP6: vip6, Port: 80, Proto: hdr.ProtoTCP}, NewClientACL(prefixes(t, "2001:db8:1::7/128"), nil))
	send := func(src hdr.Addr6, port uint16) int {
		r.inject(0, l4Frame6(clientMAC, wanMAC, hdr.ProtoTCP, src, port, vip6, 80, hdr.TCPFlagSYN, ""))
		r.w.poll()
		return len(r.sent(1))
	}
	if send(clientAddr6, 42000) != 0 || r.w.cnt.own[DropClientBlocked] != 1 {
		t.Fatalf("a blocked IPv6 client's SYN: client_blocked %d", r.w.cnt.own[DropClientBlocked])
	}
	if send(other, 42001) != 1 {
		t.Fatal("another IPv6 client was kept out")
	}
	withClients(t, r, ServiceKey{VIP6: vip6, Port: 80, Proto: hdr.ProtoTCP}, NewClientACL(nil, prefixes(t, "2001:db8:2::/48")))
	if send(other, 42002) != 0 || r.w.cnt.own[DropClientNotAllowed] != 1 {
		t.Fatalf("an IPv6 client off the allowlist: client_not_allowed %d", r.w.cnt.own[DropClientNotAllowed])
	}
}
