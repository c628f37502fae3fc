package ctl

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// Connections to servers this director does not have. A peer's sync
// records, or a handover from the lbd before this one, may name a real
// server that a configured service here does not list: one the master's
// operator added with lbctl and not on this node, or one removed from the
// configuration before a restart. IPVS enters such a synced connection
// without a destination and forwards it by the connection's own
// method; a connection that drops would break the one rule round two
// holds to (only a real server's death may end an established
// connection). So the controller adopts the server before the workers
// install the records: it gets an id and is published as draining, as a
// server removed here is, in its service's lcore.Service.Draining. The
// workers enter its connections with the record's method; the
// schedulers never see it, so no new connection goes to it; once no
// connection counts on its id, the id is reclaimed. Persistence
// templates are not carried to it: a client's next connection is
// scheduled among the servers configured here. A record of a service
// not configured here adopts its server all the same: the service is
// then published as a removed one (vipdrain.go), when its VIP is one this
// node could configure (adoptableService).

// adoptHold keeps an adopted server's id from reclaim while the workers
// install its connections and publish their gauges.
const adoptHold = 10 * time.Second

// adoptPeerServers adopts the servers that recs name but that this
// director has neither configured nor draining, in services configured
// here or adoptable ones, and publishes them before the records are
// installed.
func (c *Controller) adoptPeerServers(recs []lcore.SyncConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var services map[lcore.ServiceKey]bool
	var adopt []destKey
	for i := range recs {
		k, ok := recordServer(&recs[i])
		if !ok {
			continue
		}
		if _, known := c.ids.lookup(k); known || slices.Contains(adopt, k) {
			continue
		}
		if services == nil {
			services = make(map[lcore.ServiceKey]bool, len(c.services))
			for j := range c.services {
				services[c.services[j].key] = true
			}
		}
		if services[k.svc] || c.adoptableService(k.svc) {
			adopt = append(adopt, k)
		}
	}
	if len(adopt) == 0 {
		return
	}
	u, err := c.buildAdopting(c.serviceConfs(), c.timeouts, adopt)
	if err == nil {
		err = c.publish(u)
	}
	if err != nil {
		// Every record naming them would try again: say it once a while.
		if now := time.Now(); now.Sub(c.adoptRefused) >= adoptHold {
			c.adoptRefused = now
			c.log.Error("connections to real servers not configured here are refused: the servers could not be adopted", zap.Error(err))
		}
		return
	}
	until := time.Now().Add(adoptHold)
	names := make([]string, 0, len(adopt))
	for _, k := range adopt {
		if id, ok := c.ids.lookup(k); ok {
			if c.adoptHeld == nil {
				c.adoptHeld = map[uint32]time.Time{}
			}
			c.adoptHeld[id] = until
		}
		names = append(names, k.String())
	}
	c.log.Info("connections handed over or synced to real servers not configured here go on: "+
		"the servers are kept as draining until those end, and take no new connection",
		zap.Strings("servers", names))
}

// recordServer is the (service, real server) pair a connection record
// names; false for a template, an FTP data connection (whose server is
// its FTP service's, on another port) or a SNAT connection.
func recordServer(r *lcore.SyncConn) (destKey, bool) {
	if r.Template || r.FTPData || r.Fwd > fwd.FullNAT || r.IsSNAT() { // a SNAT connection's "server" is a host beyond lbd
		return destKey{}, false
	}
	k := destKey{port: r.RPort}
	switch {
	case !r.IPv6:
		k.svc = lcore.ServiceKey{VIP: r.VIP, Port: r.VPort, Proto: r.Proto}
		k.addr = r.RIP
	case r.Fwd == fwd.FullNAT: // NAT64: an IPv4 server
		k.svc = lcore.ServiceKey{VIP6: r.Six.VIP, Port: r.VPort, Proto: r.Proto}
		k.addr = r.RIP
	default:
		k.svc = lcore.ServiceKey{VIP6: r.Six.VIP, Port: r.VPort, Proto: r.Proto}
		k.addr6 = r.Six.RIP
	}
	return k, k.addr != 0 || !k.addr6.IsUnspecified()
}

// withDraining lists in each service the draining servers of its key,
// and returns dps with a Removed service for each key that has draining
// servers but is no longer configured.
func withDraining(dps []lcore.Service, ids *destIDs) []lcore.Service {
	if len(ids.draining) == 0 {
		return dps
	}
	at := make(map[lcore.ServiceKey]int, len(dps))
	for i := range dps {
		at[dps[i].Key] = i
	}
	var removed []lcore.ServiceKey
	for _, k := range ids.draining {
		if _, ok := at[k.svc]; !ok {
			at[k.svc] = -1
			removed = append(removed, k.svc)
		}
	}
	// Services no longer configured, kept while their servers drain
	// (vipdrain.go), after the configured ones, in a stable order.
	slices.SortFunc(removed, compareServiceKeys)
	for _, k := range removed {
		at[k] = len(dps)
		dps = append(dps, lcore.Service{Key: k, Removed: true})
	}
	for id, k := range ids.draining {
		i := at[k.svc]
		dps[i].Draining = append(dps[i].Draining, sched.Dest{ID: id, Addr: k.addr, Addr6: k.addr6, Port: k.port})
	}
	for i := range dps {
		slices.SortFunc(dps[i].Draining, func(a, b sched.Dest) int { return cmp.Compare(a.ID, b.ID) })
	}
	return dps
}

// compareServiceKeys orders keys by family, address, protocol and port.
func compareServiceKeys(a, b lcore.ServiceKey) int {
	return cmp.Or(addrOfKey(a.VIP, a.VIP6).Compare(addrOfKey(b.VIP, b.VIP6)), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port))
}

// String is the pair as the log names it: "tcp 203.0.113.1:80 ->
// 198.51.100.9:80".
func (k destKey) String() string {
	proto := "udp"
	if k.svc.Proto == hdr.ProtoTCP {
		proto = "tcp"
	}
	return fmt.Sprintf("%s %s -> %s", proto, netip.AddrPortFrom(addrOfKey(k.svc.VIP, k.svc.VIP6), k.svc.Port),
		netip.AddrPortFrom(addrOfKey(k.addr, k.addr6), k.port))
}
