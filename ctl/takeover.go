package ctl

import (
	"cmp"
	"context"
	"encoding/binary"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/hdr"
)

// Taking over a dead peer's FullNAT local addresses (scale-out).
//
// In a scale-out each director has local addresses of its own, and a
// server answers a FullNAT connection at the local address the connection
// was given: the director that made it. Connection sync carries every
// connection to every director, so when that director dies the others
// hold its connections, and the router moves the clients' packets to
// them (the BGP session died with it); but the servers' answers still go
// to its addresses, which nobody answers ARP for. So the directors' sync
// masters say hello every second (connsync's kind 7, listing their own
// local addresses), and a peer whose hellos stopped for
// sync.peer_dead_after, or that said it leaves (lbd stopping for good),
// is dead. Each of its addresses that no live director lists is taken
// over by one live director, the same one on every director: the one
// with the highest hash of the address and its boot id (every director
// sees the same live set, give or take a hello). The taker answers ARP
// for the address, announces it by gratuitous ARP, and so receives the
// servers' packets to it, which the synced connections translate. No new
// connection is given one of its ports: no service here lists it. When
// the peer says hello again (restarted, it pulled the tables first), the
// address goes back: the taker stops answering for it and the peer
// announces it as it starts (AnnounceLocalAddrs). Every director holds
// every connection, so the packets that still reach the taker meanwhile
// are translated too.
//
// A restart or an upgrade hands the peers' hellos on with the
// connections (seedPeers), so the next lbd knows a peer that died before
// it started and takes its addresses over again when it is the taker;
// an lbd that starts without a handover (after a crash) learns them
// from the peers' bulk dumps as it pulls their tables (connsync's kind
// 8).

// takeoverCheck is how often the peers' hellos are looked at.
const takeoverCheck = 250 * time.Millisecond

// peerHellos is what the takeover needs of the sync daemon.
type peerHellos interface {
	Boot() uint64
	Hellos() []connsync.PeerHello
}

// seedPeers gives the sync backup the peers' hellos the lbd before this
// one held, written then: a peer alive then gets deadAfter of patience
// from now (its next hello comes within a second); one dead or leaving
// then stays so, and its addresses are taken over again where this
// director is the taker (the handover brought its connections). It
// returns how many peers it seeded and how many of them are dead.
func seedPeers(d interface {
	SeedHellos([]connsync.PeerHello) int
}, peers []connsync.PeerHello, written, now time.Time, deadAfter time.Duration) (seeded, dead int) {
	if deadAfter <= 0 || len(peers) == 0 {
		return 0, 0
	}
	hs := slices.Clone(peers)
	for i := range hs {
		if !hs[i].Leaving && written.Sub(hs[i].At) <= deadAfter {
			hs[i].At = now
		} else {
			dead++
		}
	}
	return d.SeedHellos(hs), dead
}

// LocalAddrs are this director's own FullNAT local addresses, IPv4 and
// IPv6: every service's and the draining ones, not those taken over
// from a peer.
func (c *Controller) LocalAddrs() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownLIPs()
}

// ownLIPs is LocalAddrs, sorted; the caller holds mu.
func (c *Controller) ownLIPs() []netip.Addr {
	var out []netip.Addr
	for _, s := range c.snap.Services {
		for _, a := range s.LocalAddrs {
			out = append(out, addrOf(a))
		}
		for _, a := range s.LocalAddrs6 {
			out = append(out, a.Netip())
		}
	}
	out = append(out, slices.Collect(maps.Keys(c.lipDrain))...)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// takeoverLoop takes over and gives back peers' local addresses as their
// hellos come and stop, until ctx ends. deadAfter 0: never.
func (c *Controller) takeoverLoop(ctx context.Context, d peerHellos, deadAfter time.Duration) {
	if deadAfter <= 0 {
		return
	}
	t := time.NewTicker(takeoverCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		own := c.ownLIPs()
		c.mu.Unlock()
		c.setTakenOver(lipsToTake(d.Boot(), own, d.Hellos(), time.Now(), deadAfter))
	}
}

// lipsToTake is which dead peers' local addresses director self (its
// boot id) takes over, each with the peer it was: a peer is dead when it
// said it leaves or its newest hello is older than deadAfter; an address
// of a dead peer that this director or a live peer lists stays theirs;
// the others go to the live director that takes over (this one, or a
// live peer whose hellos say it does) with the highest takeoverRank.
func lipsToTake(self uint64, own []netip.Addr, hellos []connsync.PeerHello, now time.Time, deadAfter time.Duration) map[netip.Addr]netip.Addr {
	live := []uint64{self}
	claimed := map[netip.Addr]bool{}
	for _, a := range own {
		claimed[a] = true
	}
	var dead []connsync.PeerHello
	for _, h := range hellos {
		if h.Leaving || now.Sub(h.At) > deadAfter {
			dead = append(dead, h)
			continue
		}
		if h.TakesOver {
			live = append(live, h.Boot)
		}
		for _, a := range h.LIPs {
			claimed[a] = true
		}
	}
	out := map[netip.Addr]netip.Addr{}
	for _, h := range dead {
		for _, a := range h.LIPs {
			if claimed[a] {
				continue
			}
			best := slices.MaxFunc(live, func(x, y uint64) int {
				return cmp.Or(cmp.Compare(takeoverRank(a, x), takeoverRank(a, y)), cmp.Compare(x, y))
			})
			if best == self {
				out[a] = h.Peer
			}
		}
	}
	return out
}

// takeoverRank is director boot's rank for local address lip, the same
// on every director (rendezvous hashing: a director that leaves moves
// only the addresses it held): FNV-1a of both (the address's 4 or 16
// bytes, then the boot id's 8), then SplitMix64's finalizer, as FNV's
// last bytes barely stir the high bits and boot ids differ most in their
// last ones.
func takeoverRank(lip netip.Addr, boot uint64) uint64 {
	h := fnv.New64a()
	h.Write(lip.AsSlice())
	h.Write(binary.BigEndian.AppendUint64(nil, boot))
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// setTakenOver makes want the addresses taken over: a new snapshot
// (the workers answer ARP and neighbour solicitations for them and keep
// their ports from new connections), gratuitous ARP or unsolicited NAs
// for the new ones, and the steering entries their connections need
// here.
func (c *Controller) setTakenOver(want map[netip.Addr]netip.Addr) {
	c.mu.Lock()
	if maps.Equal(want, c.lipTaken) {
		c.mu.Unlock()
		return
	}
	prev := c.lipTaken
	c.lipTaken = want
	u, err := c.build(c.serviceConfs(), c.timeouts)
	if err == nil {
		err = c.publish(u)
	}
	if err != nil {
		c.lipTaken = prev // the next check tries again
		c.mu.Unlock()
		c.log.Error("local addresses not taken over nor given back: the snapshot was not published", zap.Error(err))
		return
	}
	var added []netip.Addr
	for a, peer := range want {
		if _, had := prev[a]; !had {
			added = append(added, a)
			c.log.Warn("sync peer dead: its local address taken over", zap.Stringer("peer", peer), zap.Stringer("address", a))
		}
	}
	for a, peer := range prev {
		if _, keep := want[a]; !keep {
			c.log.Info("local address given back: its director says hello again, or another took it", zap.Stringer("peer", peer), zap.Stringer("address", a))
		}
	}
	slices.SortFunc(added, netip.Addr.Compare)
	c.ha.takeovers.Add(uint64(len(added)))
	var targets []announceTarget
	for _, t := range c.announceTargets() {
		if slices.Contains(added, t.addr()) {
			targets = append(targets, t)
		}
	}
	for _, a := range added { // IPv6 ones: an unsolicited NA on the port whose subnet holds it
		for i := range c.snap.Ports {
			if a6 := hdr.Addr6From(a); a.Is6() && c.snap.Ports[i].OnLink6(&a6) {
				targets = append(targets, announceTarget{port: i, ip6: a6})
			}
		}
	}
	backup := c.ha.backup
	c.mu.Unlock()
	if len(added) == 0 {
		return
	}
	// Connections of another director whose local port another worker
	// owns here get their steering entry now that the port has a pool.
	for _, a := range added {
		f := lcore.ConnFilter{LIP6: hdr.Addr6From(a)}
		if a.Is4() {
			f = lcore.ConnFilter{LIP: ipv4(a)}
		}
		conns, _, err := c.dp.DumpConns(f, c.dumpLimit())
		if err != nil {
			c.log.Warn("taken-over local address: its connections not listed", zap.Stringer("address", a), zap.Error(err))
			continue
		}
		var recs []lcore.SyncConn
		for i := range conns {
			if r, ok := syncable(&conns[i]); ok && !r.Template {
				recs = append(recs, r)
			}
		}
		c.installRecords(recs, 2*time.Second)
	}
	if !backup {
		go c.announceRounds(targets)
	}
}

// AnnounceLocalAddrs has a master announce its own local addresses by
// gratuitous ARP (lbd starting): a peer that took them over while this
// director was away gives them back on its hello, and the servers send
// to this one at once.
func (c *Controller) AnnounceLocalAddrs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ha.backup {
		return
	}
	own := c.ownLIPs()
	var targets []announceTarget
	for _, t := range c.announceTargets() {
		if slices.Contains(own, t.addr()) {
			targets = append(targets, t)
		}
	}
	c.announce(targets)
}

// announceRounds sends announceRounds rounds of gratuitous ARP for
// targets, announceSpacing apart, while lbd is a master.
func (c *Controller) announceRounds(targets []announceTarget) {
	for round := 0; round < announceRounds; round++ {
		if round > 0 {
			time.Sleep(announceSpacing)
		}
		c.mu.Lock()
		if !c.ha.backup {
			c.announce(targets)
		}
		c.mu.Unlock()
	}
}
