package ctl

import (
	"maps"
	"time"

	"github.com/dplb/dplb/lcore/hdr"
)

// The neighbour table maps next-hop addresses to MAC addresses. The
// control plane owns it: lcores report what ARP packets show (and which
// next hops they lacked), the table decides whom to ask, and each change
// reaches the lcores as a new snapshot.
// neighTableOf is the table for one address family, K the dataplane's
// form of its addresses: neighTable (IPv4, ARP) and neighTable6 (IPv6,
// neighbour discovery) behave alike.
type neighTableOf[K comparable] struct {
	reachable time.Duration // re-resolve an entry not confirmed for this long
	stale     time.Duration // forget an entry not confirmed for this long
	entries   map[K]*neighEntry
	wanted    map[K]int       // addresses to keep resolved (servers, gateways) -> port
	misses    map[K]neighMiss // addresses the lcores lacked recently
}

type (
	neighTable  = neighTableOf[uint32]
	neighTable6 = neighTableOf[hdr.Addr6]
)

type neighEntry struct {
	mac       hdr.MAC
	port      int
	confirmed time.Time
	requested time.Time
}

type neighMiss struct {
	port      int
	since     time.Time
	requested time.Time
}

const (
	arpRetry    = time.Second     // at most one request per address per second
	missForget  = 5 * time.Second // stop asking for an address nobody answers for
	neighMaxLen = 65536           // bound on entries learnt from traffic
)

func newNeighTable(reachable, stale time.Duration) *neighTable {
	return newNeighTableOf[uint32](reachable, stale)
}

func newNeighTableOf[K comparable](reachable, stale time.Duration) *neighTableOf[K] {
	return &neighTableOf[K]{
		reachable: reachable, stale: stale,
		entries: map[K]*neighEntry{}, wanted: map[K]int{}, misses: map[K]neighMiss{},
	}
}

// learn records an address seen in ARP; it reports whether the
// dataplane's view changes.
func (n *neighTableOf[K]) learn(ip K, mac hdr.MAC, port int, now time.Time) bool {
	delete(n.misses, ip)
	if e, ok := n.entries[ip]; ok {
		changed := e.mac != mac || e.port != port
		e.mac, e.port, e.confirmed = mac, port, now
		return changed
	}
	if len(n.entries) >= neighMaxLen {
		return false
	}
	n.entries[ip] = &neighEntry{mac: mac, port: port, confirmed: now}
	return true
}

// miss records that an lcore had no MAC for ip.
func (n *neighTableOf[K]) miss(ip K, port int, now time.Time) {
	if _, ok := n.entries[ip]; ok {
		return
	}
	if _, ok := n.misses[ip]; !ok && len(n.misses) < neighMaxLen {
		n.misses[ip] = neighMiss{port: port, since: now}
	}
}

// neighRequest asks one port to resolve one address (an ARP request, a
// neighbour solicitation).
type neighRequest[K comparable] struct {
	port int
	ip   K
}

type arpRequest = neighRequest[uint32]

// tick ages the table and says which addresses to ask for; changed reports
// whether entries were removed.
func (n *neighTableOf[K]) tick(now time.Time) (reqs []neighRequest[K], changed bool) {
	for ip, e := range n.entries {
		age := now.Sub(e.confirmed)
		switch {
		case age > n.stale:
			delete(n.entries, ip)
			changed = true
		case age > n.reachable && now.Sub(e.requested) >= arpRetry:
			e.requested = now
			reqs = append(reqs, neighRequest[K]{port: e.port, ip: ip})
		}
	}
	for ip, port := range n.wanted {
		if _, ok := n.entries[ip]; ok {
			continue
		}
		m := n.misses[ip]
		if now.Sub(m.requested) >= arpRetry {
			n.misses[ip] = neighMiss{port: port, since: now, requested: now}
			reqs = append(reqs, neighRequest[K]{port: port, ip: ip})
		}
	}
	for ip, m := range n.misses {
		if _, want := n.wanted[ip]; want {
			continue
		}
		if now.Sub(m.since) > missForget {
			delete(n.misses, ip)
			continue
		}
		if now.Sub(m.requested) >= arpRetry {
			m.requested = now
			n.misses[ip] = m
			reqs = append(reqs, neighRequest[K]{port: m.port, ip: ip})
		}
	}
	return reqs, changed
}

// macs is the table as the lcores see it.
func (n *neighTableOf[K]) macs() map[K]hdr.MAC {
	out := make(map[K]hdr.MAC, len(n.entries))
	for ip, e := range n.entries {
		out[ip] = e.mac
	}
	return out
}

// setWanted replaces the set of addresses kept resolved.
func (n *neighTableOf[K]) setWanted(w map[K]int) { n.wanted = maps.Clone(w) }

// conflictLog limits the log of address conflicts (hosts that claim one of
// lbd's addresses or VIPs in ARP; the lcores count every one, arp_conflict)
// to one line a minute per address, so a flood cannot fill the log.
type conflictLog struct {
	last map[uint32]time.Time
}

const conflictLogEvery = time.Minute

// due reports whether a conflict about ip is to be logged now.
func (l *conflictLog) due(ip uint32, now time.Time) bool {
	if l.last == nil {
		l.last = map[uint32]time.Time{}
	}
	if t, ok := l.last[ip]; ok && now.Sub(t) < conflictLogEvery {
		return false
	}
	if len(l.last) >= neighMaxLen { // a bound, whatever the flood claims
		clear(l.last)
	}
	l.last[ip] = now
	return true
}
