// Package ctl is dplb's control plane: it turns the configuration into
// snapshots for the lcores, owns the neighbour (ARP) table, serves lbctl's
// requests and exports metrics. It never blocks an lcore: everything
// reaches the dataplane as an immutable snapshot through the workers'
// command rings. It knows the lcores only through the Dataplane interface.
package ctl

import (
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// ipv4 is an address as the dataplane holds it: the big-endian value of
// its four bytes (0 for anything but an IPv4 address).
func ipv4(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// forwardMethod is the lcores' forwarding method (sched.Dest.Fwd).
type forwardMethod = fwd.Method

// forwardMethods maps the configuration's forward names.
var forwardMethods = map[string]forwardMethod{"nat": fwd.NAT, "dr": fwd.DR, "tun": fwd.TUN, "fullnat": fwd.FullNAT}

// forwardNames are ipvsadm's names of the methods, as -L prints them.
var forwardNames = map[forwardMethod]string{fwd.NAT: "Masq", fwd.DR: "Route", fwd.TUN: "Tunnel", fwd.FullNAT: "FullNat"}

// protocols maps the configuration's protocol names.
var protocols = map[string]uint8{"tcp": hdr.ProtoTCP, "udp": hdr.ProtoUDP}

// destKey names a (service, real server) pair: what the dataplane counts
// under one id.
type destKey struct {
	svc   lcore.ServiceKey
	addr  uint32
	port  uint16
	addr6 hdr.Addr6 // an IPv6 server's (addr 0)
}

// ipv6 is an IPv6 address as the dataplane holds it (zero for IPv4).
func ipv6(a netip.Addr) hdr.Addr6 {
	if !a.Is6() || a.Is4In6() {
		return hdr.Addr6{}
	}
	return hdr.Addr6From(a)
}

// addrOfKey is the address a key names, IPv4 or IPv6.
func addrOfKey(v4 uint32, v6 hdr.Addr6) netip.Addr {
	if !v6.IsUnspecified() {
		return v6.Netip()
	}
	return addrOf(v4)
}

// fold4 is an IPv6 server's stand-in for an IPv4 address where the
// schedulers order or hash servers by address (mh): the same on every
// director, unlike the connection table's keyed folds.
func fold4(a hdr.Addr6) uint32 {
	return binary.BigEndian.Uint32(a[0:]) ^ binary.BigEndian.Uint32(a[4:]) ^ binary.BigEndian.Uint32(a[8:]) ^ binary.BigEndian.Uint32(a[12:])
}

func serviceKey(s conf.Service) lcore.ServiceKey {
	return lcore.ServiceKey{VIP: ipv4(s.VIPAddr()), VIP6: ipv6(s.VIPAddr()), Port: uint16(s.Port), Proto: protocols[s.Protocol]}
}

func keyOf(s conf.Service, r conf.RealServer) destKey {
	return destKey{svc: serviceKey(s), addr: ipv4(r.Addr()), addr6: ipv6(r.Addr()), port: uint16(r.Port)}
}

// service is a virtual service as the controller runs it: its settings as
// configured and the real servers it owns.
type service struct {
	conf    conf.Service
	key     lcore.ServiceKey
	servers []server // as configured, in order
	// sorry stands in for the servers when all of them failed their
	// health checks; nil when none is configured.
	sorry       *server
	sorryActive bool // the sorry server is standing in
	quorumUp    bool // the servers not down weigh enough (weights.go)

	// As the lcores run it: the dests its schedulers were made with, and
	// one scheduler per worker, kept across snapshots while the dests
	// stay the same (rr's cursor, say, does not go back to the first).
	dests  []sched.Dest
	scheds []sched.Scheduler
}

// server is a real server of a service, or its sorry server.
type server struct {
	conf   conf.RealServer // the sorry server's: its address, NAT, weight 1
	key    destKey
	id     uint32 // the pair's id in the dataplane (its counters' index)
	health health.Key
	state  serverState // as the snapshot being built or running has it
}

// serverState is what the health checks make of a real server now.
type serverState struct {
	down    bool // failed its check: no new connections
	weight  int  // weight to schedule with (slow start ramps it)
	expire  bool // down, and its connections are to be ended
	counted int  // weight the quorum counts: the configured one, or the one its check set
}

// name is the service as logs and metrics name it: "tcp/VIP:port".
func (s *service) name() string {
	return health.ServiceName(s.conf.Protocol, netip.AddrPortFrom(s.conf.VIPAddr(), uint16(s.conf.Port)))
}

// newService builds a configured service's model, giving every (service,
// server) pair its id; field names the service in errors.
func newService(field string, sc conf.Service, ids *destIDs) (service, error) {
	s := service{conf: sc, key: serviceKey(sc)}
	vip := netip.AddrPortFrom(sc.VIPAddr(), uint16(sc.Port))
	name := health.ServiceName(sc.Protocol, vip)
	for _, rc := range sc.Servers {
		r := server{conf: rc, key: keyOf(sc, rc)}
		r.health = health.Key{Service: name, Addr: netip.AddrPortFrom(rc.Addr(), uint16(rc.Port))}
		var err error
		if r.id, err = ids.get(r.key); err != nil {
			return service{}, fmt.Errorf("%s: %w", field, err)
		}
		s.servers = append(s.servers, r)
	}
	if ap, ok := sc.SorryAddr(); ok {
		r := server{conf: conf.RealServer{Address: ap.Addr().String(), Port: int(ap.Port()), Weight: 1, Forward: "nat"},
			key: destKey{svc: s.key, addr: ipv4(ap.Addr()), addr6: ipv6(ap.Addr()), port: ap.Port()}}
		var err error
		if r.id, err = ids.get(r.key); err != nil {
			return service{}, fmt.Errorf("%s.sorry_server: %w", field, err)
		}
		s.sorry = &r
	}
	return s, nil
}

// dest is the server as the schedulers see it.
func (r *server) dest() sched.Dest {
	d := sched.Dest{
		ID: r.id, Addr: r.key.addr, Port: r.key.port, Weight: int32(r.state.weight), Fwd: forwardMethods[r.conf.Forward],
		Upper: uint32(r.conf.Upper), Lower: uint32(r.conf.Lower), Addr6: r.key.addr6,
	}
	if !d.Addr6.IsUnspecified() {
		d.Addr = fold4(d.Addr6)
	}
	return d
}

// lcoreService is the service as the dataplane runs it, with one
// scheduler instance per worker: prev's (the same service in the running
// model, or nil) when nothing the schedulers see changed, else new ones.
// field names the service in errors.
func (s *service) lcoreService(field string, workers int, prev *service) (lcore.Service, error) {
	ls := lcore.Service{
		Key: s.key, Scheduler: s.conf.Scheduler, SloppyTCP: s.conf.SloppyTCP, OnePacket: s.conf.OnePacket,
		Helper: helperOf(s.conf.Helper),
		// A shift by 32 gives 0 in Go: netmask 0.0.0.0 puts all clients in one network.
		Persistence: int64(s.conf.Persistence), PersistMask: ^uint32(0) << (32 - s.conf.NetmaskBits()),
		ProxyProtocol: s.conf.ProxyProtocol, SynProxy: s.conf.SynProxy, TOA: s.conf.TOA, UOA: uoaMode(s.conf.UOA), QUIC: s.conf.QUIC,
		Clients: lcore.NewClientACL(conf.ClientPrefixes(s.conf.Blocklist), conf.ClientPrefixes(s.conf.Allowlist)),
	}
	if s.key.IsIPv6() {
		// The lcores mask the IPv6 client by PersistMask6 and fold it.
		ls.PersistMask, ls.PersistMask6 = ^uint32(0), lcore.Mask6(s.conf.PersistPrefixBits())
	}
	for _, l := range s.conf.LocalAddresses {
		if a := netip.MustParseAddr(l); a.Is4() {
			ls.LocalAddrs = append(ls.LocalAddrs, ipv4(a))
		} else {
			ls.LocalAddrs6 = append(ls.LocalAddrs6, hdr.Addr6From(a))
		}
	}
	for i := range s.servers {
		ls.Dests = append(ls.Dests, s.servers[i].dest())
	}
	if s.sorryActive {
		ls.Dests = append(ls.Dests, s.sorry.dest())
	}
	s.dests = ls.Dests
	if prev != nil && prev.conf.Scheduler == s.conf.Scheduler && schedOptions(prev.conf) == schedOptions(s.conf) &&
		slices.Equal(prev.dests, s.dests) && len(prev.scheds) == workers {
		s.scheds = prev.scheds
	} else {
		s.scheds = make([]sched.Scheduler, workers)
		for w := range s.scheds {
			sc, err := sched.New(s.conf.Scheduler, s.dests, schedOptions(s.conf))
			if err != nil {
				return lcore.Service{}, fmt.Errorf("%s.scheduler: %w", field, err)
			}
			s.scheds[w] = sc
		}
	}
	ls.Scheds = s.scheds
	return ls, nil
}

// eachServer visits the servers, then the sorry server while it stands in.
func (s *service) eachServer(fn func(*server)) {
	for i := range s.servers {
		fn(&s.servers[i])
	}
	if s.sorryActive {
		fn(s.sorry)
	}
}

// destIDs hands out the ids of (service, real server) pairs, which index
// the lcores' counters. A pair keeps its id while it is configured, so its
// counters continue across updates, and after it is removed while
// connections (or persistence templates) may still use it: it drains, and
// comes back with its id if it is added again meanwhile. Once the
// lcores' gauges show nothing uses it (reclaim), the id is free for
// another pair, and the snapshot that hands it out resets its counters.
type destIDs struct {
	ids      map[destKey]uint32 // configured and draining pairs
	draining map[uint32]destKey
	free     []uint32
	next     uint32 // ids from here up were never handed out
	// fresh are the ids handed out since the last commit; the snapshot
	// resets their counters.
	fresh map[uint32]destKey
}

func (d destIDs) clone() destIDs {
	return destIDs{ids: maps.Clone(d.ids), draining: maps.Clone(d.draining), free: slices.Clone(d.free), next: d.next}
}

// lookup finds the id of a pair without making one.
func (d *destIDs) lookup(k destKey) (uint32, bool) {
	id, ok := d.ids[k]
	return id, ok
}

// get is the pair's id: its own (even draining), else a free one, else a
// new one.
func (d *destIDs) get(k destKey) (uint32, error) {
	if id, ok := d.ids[k]; ok {
		delete(d.draining, id)
		return id, nil
	}
	var id uint32
	switch n := len(d.free); {
	case n > 0:
		id, d.free = d.free[n-1], d.free[:n-1]
	case d.next < lcore.MaxDests:
		id = d.next
		d.next++
	default:
		return 0, fmt.Errorf("more than %d real servers in all (configured, and removed with connections still draining)", lcore.MaxDests)
	}
	if d.ids == nil {
		d.ids = map[destKey]uint32{}
	}
	if d.fresh == nil {
		d.fresh = map[uint32]destKey{}
	}
	d.ids[k], d.fresh[id] = id, k
	return id, nil
}

// drain settles the ids on the pairs a model has (used): they are
// configured, any other drains.
func (d *destIDs) drain(used map[destKey]bool) {
	for k, id := range d.ids {
		if used[k] {
			delete(d.draining, id)
			continue
		}
		if d.draining == nil {
			d.draining = map[uint32]destKey{}
		}
		d.draining[id] = k
	}
}

// reclaim frees the draining ids that inUse says no connection uses any
// more. Only ids removed by a published update may be passed here: the
// lcores published their gauges when they took it, so a 0 read now means
// no connection is left, and none can be made to a server no snapshot
// has. It reports whether it freed any.
func (d *destIDs) reclaim(inUse func(id uint32) bool) bool {
	freed := false
	for id, k := range d.draining {
		if !inUse(id) {
			delete(d.draining, id)
			delete(d.ids, k)
			d.free = append(d.free, id)
			freed = true
		}
	}
	return freed
}

// resets lists the ids handed out since the last commit.
func (d *destIDs) resets() []uint32 {
	return slices.Sorted(maps.Keys(d.fresh))
}

// drainingIDs lists the draining ids.
func (d *destIDs) drainingIDs() []uint32 {
	return slices.Sorted(maps.Keys(d.draining))
}

// portInfos describes the ports for the lcores: hw as the started devices
// tell it, addresses from the configuration.
func portInfos(ports []conf.Port, hw []lcore.PortInfo) []lcore.PortInfo {
	out := make([]lcore.PortInfo, len(ports))
	for i, p := range ports {
		pfx := p.Prefix()
		out[i] = hw[i]
		out[i].Name = p.Name
		out[i].Addr, out[i].Net = ipv4(pfx.Addr()), ipv4(pfx.Masked().Addr())
		out[i].Mask = ^uint32(0) << (32 - pfx.Bits())
		out[i].FacesClients = p.FacesClients()
		if p6, ok := p.Prefix6(); ok {
			out[i].Addr6 = hdr.Addr6From(p6.Addr())
			out[i].Net6, out[i].Mask6 = hdr.Addr6From(p6.Masked().Addr()), lcore.Mask6(p6.Bits())
		}
		if gw, ok := p.GatewayAddr(); ok {
			out[i].Gateway = ipv4(gw)
		}
		if gw, ok := p.Gateway6Addr(); ok {
			out[i].Gateway6 = hdr.Addr6From(gw)
		}
		out[i].Floating = nil // hw's slice is never shared
		for _, f := range p.FloatingAddrs() {
			out[i].Floating = append(out[i].Floating, ipv4(f))
		}
		out[i].Floating6 = nil
		for _, f := range p.FloatingAddrs6() {
			out[i].Floating6 = append(out[i].Floating6, hdr.Addr6From(f))
		}
		out[i].Routes, out[i].Routes6 = nil, nil
		for _, r := range p.Routes {
			pfx, via, ok := r.RouteNet()
			switch {
			case !ok: // refused by validation
			case pfx.Addr().Is4():
				out[i].Routes = append(out[i].Routes, lcore.StaticRoute{
					Net: ipv4(pfx.Addr()), Mask: ^uint32(0) << (32 - pfx.Bits()), Via: ipv4(via)})
			default:
				out[i].Routes6 = append(out[i].Routes6, lcore.StaticRoute6{
					Net: hdr.Addr6From(pfx.Addr()), Mask: lcore.Mask6(pfx.Bits()), Via: hdr.Addr6From(via)})
			}
		}
	}
	return out
}

// timeouts maps ipvsadm's three settings (and the SYN one) onto the states.
func timeouts(t conf.Timeouts) conn.Timeouts {
	ct := conn.DefaultTimeouts()
	ct.ByState[conn.StateEstablished] = t.TCP
	ct.ByState[conn.StateFinWait] = t.TCPFin
	ct.ByState[conn.StateUDP] = t.UDP
	for _, s := range []conn.State{conn.StateSynSent, conn.StateSynRecv, conn.StateSynAck} {
		ct.ByState[s] = t.SYN
	}
	return ct
}

// schedOptions maps a service's scheduler settings (ipvsadm -b) onto the
// scheduler's options.
func schedOptions(s conf.Service) sched.Options {
	o := sched.Options{MHTableSize: s.MHTable()}
	if s.HasFlag("sh-fallback") || s.HasFlag("mh-fallback") {
		o.Flags |= sched.FlagFallback
	}
	if s.HasFlag("sh-port") || s.HasFlag("mh-port") {
		o.Flags |= sched.FlagPort
	}
	return o
}

// helperOf is the dataplane's code of a validated service helper.
func helperOf(name string) uint8 {
	if name == "ftp" {
		return lcore.HelperFTP
	}
	return 0
}

// uoaMode is a service's uoa setting as the lcores take it.
func uoaMode(s string) uint8 {
	switch s {
	case "ipo":
		return lcore.UOAIPOption
	case "opp":
		return lcore.UOAOptionProtocol
	}
	return lcore.UOAOff
}
