package lcore

import (
	"math/bits"
	"slices"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// MaxDests bounds the ids of (service, real server) pairs: per-lcore
// counters are flat arrays indexed by them.
const MaxDests = 1 << 14

// Snapshot is everything an lcore needs to forward, built by the control
// plane and never changed after it is handed over (the lcore's own
// scheduler instances, Service.Scheds[worker], are the one exception: each
// belongs to exactly one lcore). A new configuration or neighbour entry
// means a new Snapshot.
type Snapshot struct {
	Gen      uint64                // increases with every snapshot; lcores acknowledge it
	Ports    []PortInfo            // indexed like the workers' port lists
	Services []Service             // indexed by the values of serviceIndex
	Neigh    map[uint32]hdr.MAC    // next-hop IPv4 -> MAC, resolved by ARP
	Neigh6   map[hdr.Addr6]hdr.MAC // next-hop IPv6 -> MAC, resolved by neighbour discovery (nil: none)
	Timeouts conn.Timeouts         // per-state connection timeouts
	// Counted are the ids whose counters the workers publish: the
	// services' real servers (NewSnapshot), and those the control plane
	// still watches, removed but with connections draining. The publish
	// job's cost follows them, not every id ever made.
	Counted []uint32
	// ResetDests are ids given to new (service, server) pairs, maybe
	// reused: a worker zeroes their counters when it switches to this
	// snapshot, so a new pair does not inherit an old one's counts. The
	// control plane reuses an id only once no connection uses it.
	ResetDests []uint32

	// ExpireDests marks real servers (by Dest.ID) whose connections are
	// ended at their next packet: a failed server whose health check says
	// on_failure: expire (IPVS's expire_nodest_conn).
	ExpireDests [MaxDests / 64]uint64

	// Sync says which connections the workers copy to their sync rings
	// for the peer directors (sync.go); off: none.
	Sync SyncParams
	// Backup: this director is the standby of a pair. It answers ARP
	// neither for the VIPs nor for the ports' floating addresses (the
	// master does), and still forwards what reaches it.
	Backup bool

	// hasFTP: some service has the FTP helper, so a SYN nothing else
	// takes is looked for among the expected data connections.
	hasFTP bool
	// hasSynProxy: some service has the SYN proxy (workers keep spare
	// mbufs for it, synhold.go).
	hasSynProxy bool

	serviceIndex serviceIndex         // by ServiceKey.packed, for every new connection's lookup (svcindex.go)
	anyPort      bool                 // some IPv4 service has port 0 (every port of its VIP)
	removed      map[ServiceKey]int32 // the Removed services, IPv4 and IPv6: for records only
	vips         map[uint32]bool
	six          snapshot6       // the IPv6 services' indexes (snapshot6.go)
	lips         map[uint32]bool // every service's LocalAddrs
	snat         []int32         // the SNAT rules' services, in order
	gatewayPort  int             // port whose gateway reaches everything off-link, or -1
	routes       []portRoute     // the ports' static routes, longest prefix first
}

// StaticRoute is a route through a next hop on the port's subnet:
// destinations with dst&Mask == Net go to Via.
type StaticRoute struct {
	Net, Mask, Via uint32
}

// StaticRoute6 is an IPv6 StaticRoute.
type StaticRoute6 struct {
	Net, Mask, Via hdr.Addr6
}

// portRoute is a StaticRoute with its port.
type portRoute struct {
	port int
	StaticRoute
}

// PortInfo is a port's layer-2/3 identity.
type PortInfo struct {
	Name         string
	MAC          hdr.MAC
	Addr         uint32    // the port's own IPv4 address
	Addr6        hdr.Addr6 // its IPv6 address (neighbour discovery, echo), or zero
	Net, Mask    uint32    // its subnet
	Net6, Mask6  hdr.Addr6 // its IPv6 subnet (Addr6's prefix), or zero
	Gateway      uint32    // next hop for off-link destinations, or 0
	Gateway6     hdr.Addr6 // next hop for off-link IPv6 destinations, or zero
	FacesClients bool      // answers ARP for VIPs
	RSS          uint8     // how the NIC spreads packets over the queues: RSSSoftware or RSSAlignedEndpoint
	MTU          uint16    // largest IP packet the port sends (VS/TUN checks it)
	CsumOffload  bool      // the NIC computes IPv4, TCP and UDP checksums on TX
	// Floating are addresses in the port's subnet that belong to whichever
	// director of a pair is master (the gateway NAT real servers route
	// through): answered in ARP by the master only.
	Floating []uint32
	// Floating6 are the IPv6 ones, in the port's IPv6 subnet: answered in
	// neighbour discovery and announced by unsolicited NA by the master
	// only.
	Floating6 []hdr.Addr6
	// Routes and Routes6 are the static routes through next hops on the
	// port's subnets (conf.Port.Routes), before the gateway.
	Routes  []StaticRoute
	Routes6 []StaticRoute6
}

// How a port's NIC spreads packets over the lcores' queues, as the
// control plane sets it up at start (the lcores check every packet's
// owner whatever the NIC did).
const (
	// RSSSoftware: any spread; the lcores hand packets to their owners.
	RSSSoftware uint8 = iota
	// RSSAlignedEndpoint: client ports hash the source address and port,
	// server ports the destination's, with the steering key (RSSKey), so
	// the NIC delivers both directions of a connection to its owner.
	RSSAlignedEndpoint
)

// ServiceKey identifies a virtual service: by VIP for IPv4, by VIP6 (VIP
// 0) for IPv6.
type ServiceKey struct {
	VIP   uint32
	Port  uint16
	Proto uint8
	VIP6  hdr.Addr6
}

// IsIPv6 reports whether the key is an IPv6 service's.
func (k ServiceKey) IsIPv6() bool { return !k.VIP6.IsUnspecified() }

// packed is an IPv4 key as one word, the IPv4 index's key: the packet
// path hashes 8 bytes, not ServiceKey's 24, and a struct key with padding
// would take the map's generic hash, several times slower than its 64-bit
// fast path.
func (k ServiceKey) packed() uint64 {
	return uint64(k.VIP)<<32 | uint64(k.Port)<<8 | uint64(k.Proto)
}

// Service is a virtual service and its real servers.
type Service struct {
	Key       ServiceKey
	Scheduler string
	SloppyTCP bool // open TCP connections on any packet, not only a SYN
	// OnePacket schedules every datagram on its own (IPVS's one-packet
	// scheduling, ipvsadm --ops): its connection ends once the datagram
	// is sent (onepacket.go). UDP, DR and TUN servers only (conf checks).
	OnePacket bool
	// Helper is an application helper for the service's connections:
	// 0 none, HelperFTP (ftp.go; VS/NAT, TCP).
	Helper uint8
	// Persistence (ns; 0: off) keeps a client network (its address
	// masked by PersistMask) on one real server: ipvsadm -p and -M.
	Persistence int64
	PersistMask uint32
	// PersistMask6 is an IPv6 service's persistence prefix as a mask.
	PersistMask6 hdr.Addr6

	// LocalAddrs are the service's FullNAT local addresses (LIPs): a
	// FullNAT server's connections leave from one of them.
	LocalAddrs []uint32
	// LocalAddrs6 are an IPv6 service's IPv6 ones, for its IPv6 FullNAT
	// servers (FNAT66, fullnat6.go).
	LocalAddrs6 []hdr.Addr6
	// ProxyProtocol: FullNAT TCP connections carry a PROXY protocol v2
	// header with the client's address at the start of their stream.
	ProxyProtocol bool
	// TOA: FullNAT TCP connections carry DPVS's TCP option address (the
	// client's address and port) in the segments that complete their
	// handshake with the server (toa.go).
	TOA bool
	// UOA: FullNAT UDP connections carry DPVS's UDP option of address
	// (the client's address and port) in their first datagrams to the
	// server, as an IPv4 option or in an option protocol header (uoa.go).
	UOA uint8
	// QUIC: a new flow goes to the server its QUIC destination
	// connection ID names, if it names one of Dests (quic.go); UDP.
	QUIC bool
	// SynProxy: lbd answers the clients' SYNs with SYN cookies and opens
	// the connection to the server only for an ACK that proves one
	// (synproxy.go); NAT and FullNAT servers only.
	SynProxy bool
	// Clients are its blocklist and allowlist; nil: every client.
	Clients *ClientACL

	Dests  []sched.Dest
	Scheds []sched.Scheduler // one per worker, indexed by worker id
	// Draining are real servers of the service that are not among Dests
	// but whose connections may live on: removed ones, and those a
	// peer's records named that were never configured here (ctl adopts
	// them, as IPVS enters a synced connection without a destination).
	// Never scheduled; a synced or handed-over connection to one is
	// installed with the record's forwarding method (ID, Addr, Addr6
	// and Port are set, Fwd is not).
	Draining []sched.Dest
	// SNAT, when set, makes the service an outbound rule (DPVS's SNAT
	// mode, snat.go): a packet of its protocol (TCP, UDP, or an ICMP
	// echo request) from the rule's source network that finds no
	// connection, no service and is not for lbd opens a FullNAT
	// connection to its own destination, from one of LocalAddrs.
	// Such a service is in no index a packet looks services up in (its
	// Key is the source network, port 0), and its one Dest (address 0:
	// the packet's destination) is never scheduled.
	SNAT *SNATRule
	// Removed: a service no longer configured (or never configured here:
	// a peer's records named it) whose Draining servers' connections go
	// on. It has no Dests, no schedulers and nothing else; new
	// connections never find it (it is in none of the indexes a packet
	// looks services up in: they are dropped as no_service), but its VIP
	// is still a VIP (ARP, neighbour discovery, echo, a new master's
	// announcements) and synced and handed-over connections to its
	// draining servers are installed. The control plane keeps it while
	// they drain.
	Removed bool
}

// NewSnapshot indexes services and ports for the per-packet lookups.
func NewSnapshot(gen uint64, ports []PortInfo, services []Service, neigh map[uint32]hdr.MAC, t conn.Timeouts) *Snapshot {
	s := &Snapshot{
		Gen: gen, Ports: ports, Services: services, Neigh: neigh, Timeouts: t,
		serviceIndex: newServiceIndex(len(services)),
		vips:         make(map[uint32]bool),
		lips:         make(map[uint32]bool),
		gatewayPort:  -1,
	}
	for i := range services {
		svc := &services[i]
		for _, d := range svc.Dests {
			s.Counted = append(s.Counted, d.ID)
		}
		s.hasFTP = s.hasFTP || svc.Helper == HelperFTP
		s.hasSynProxy = s.hasSynProxy || svc.SynProxy
		if svc.Removed {
			s.addRemoved(svc.Key, int32(i))
			continue
		}
		if svc.SNAT != nil {
			s.snat = append(s.snat, int32(i))
			for _, a := range svc.LocalAddrs {
				s.lips[a] = true
			}
			continue
		}
		if svc.Key.IsIPv6() {
			s.six.add(svc.Key, int32(i))
			for _, a := range svc.LocalAddrs { // NAT64's
				s.lips[a] = true
			}
			for _, a := range svc.LocalAddrs6 { // FNAT66's
				s.six.lips[a] = true
			}
			continue
		}
		s.serviceIndex.add(svc.Key.packed(), int32(i))
		s.anyPort = s.anyPort || svc.Key.Port == 0
		s.vips[svc.Key.VIP] = true
		for _, a := range svc.LocalAddrs {
			s.lips[a] = true
		}
	}
	s.six.gatewayPort = -1
	for i, p := range ports {
		if p.Gateway != 0 && s.gatewayPort < 0 {
			s.gatewayPort = i
		}
		if !p.Gateway6.IsUnspecified() && s.six.gatewayPort < 0 {
			s.six.gatewayPort = i
		}
		for _, r := range p.Routes {
			s.routes = append(s.routes, portRoute{i, r})
		}
		for _, r := range p.Routes6 {
			s.six.routes = append(s.six.routes, portRoute6{i, r})
		}
	}
	// The longest prefix first: the first route that matches wins.
	slices.SortStableFunc(s.routes, func(a, b portRoute) int { return bits.OnesCount32(b.Mask) - bits.OnesCount32(a.Mask) })
	slices.SortStableFunc(s.six.routes, func(a, b portRoute6) int { return ones6(&b.Mask) - ones6(&a.Mask) })
	if s.Neigh == nil {
		s.Neigh = map[uint32]hdr.MAC{}
	}
	return s
}

// WithNeighbours returns a copy of s with another neighbour table; the
// services (and their scheduler state) are shared. The copy resets no
// counters: the workers did that when they took s.
func (s *Snapshot) WithNeighbours(gen uint64, neigh map[uint32]hdr.MAC) *Snapshot {
	c := *s
	c.Gen = gen
	c.Neigh = neigh
	c.ResetDests = nil
	return &c
}

// WithHA returns a copy of s with other sync rules and HA state; like
// WithNeighbours, the services are shared and no counters are reset.
func (s *Snapshot) WithHA(gen uint64, sync SyncParams, backup bool) *Snapshot {
	c := *s
	c.Gen = gen
	c.Sync, c.Backup = sync, backup
	c.ResetDests = nil
	return &c
}

// service finds the virtual service of a destination: the one of its
// port, else its VIP's port-zero service (IPVS's catch-all: every port
// of the VIP, persistent). A snapshot without port-zero services looks
// once.
func (s *Snapshot) service(vip uint32, port uint16, proto uint8) (int32, bool) {
	i, ok := s.serviceIndex.get(ServiceKey{VIP: vip, Port: port, Proto: proto}.packed())
	if !ok && s.anyPort {
		i, ok = s.serviceIndex.get(ServiceKey{VIP: vip, Proto: proto}.packed())
	}
	return i, ok
}

// addRemoved indexes Removed service i for records, and keeps its VIP.
func (s *Snapshot) addRemoved(k ServiceKey, i int32) {
	if s.removed == nil {
		s.removed = map[ServiceKey]int32{}
	}
	s.removed[k] = i
	if !k.IsIPv6() {
		s.vips[k.VIP] = true
		return
	}
	if s.six.vips == nil {
		s.six.vips = map[hdr.Addr6]bool{}
	}
	s.six.vips[k.VIP6] = true
}

// recordService finds the service a synced or handed-over connection
// names, a Removed one too.
func (s *Snapshot) recordService(k ServiceKey) (int32, bool) {
	var si int32
	var ok bool
	if k.IsIPv6() {
		si, ok = s.service6(&k.VIP6, k.Port, k.Proto)
	} else {
		si, ok = s.service(k.VIP, k.Port, k.Proto)
	}
	if !ok {
		si, ok = s.removed[k]
	}
	if !ok { // a removed port-zero service's
		k.Port = 0
		si, ok = s.removed[k]
	}
	return si, ok
}

// IsVIP reports whether addr is the address of some virtual service.
func (s *Snapshot) IsVIP(addr uint32) bool { return s.vips[addr] }

// KeepLIPs adds local addresses no service lists any more but that
// connections may still use (removed, draining): lbd goes on answering
// ARP for them. Call it before the snapshot is published.
func (s *Snapshot) KeepLIPs(addrs []uint32) {
	for _, a := range addrs {
		s.lips[a] = true
	}
}

// KeepLIPs6 is KeepLIPs for IPv6 local addresses (FNAT66's): lbd goes on
// answering neighbour solicitations for them.
func (s *Snapshot) KeepLIPs6(addrs []hdr.Addr6) {
	for _, a := range addrs {
		if s.six.lips == nil {
			s.six.lips = map[hdr.Addr6]bool{}
		}
		s.six.lips[a] = true
	}
}

// IsLIP reports whether addr is a FullNAT local address lbd answers ARP
// for: a service's, a draining one, or one taken over from a dead peer.
func (s *Snapshot) IsLIP(addr uint32) bool { return s.lips[addr] }

// isLocal reports whether addr is one of the ports' own addresses,
// floating ones included.
func (s *Snapshot) isLocal(addr uint32) bool {
	for i := range s.Ports {
		if s.Ports[i].Addr == addr || s.Ports[i].isFloating(addr) {
			return true
		}
	}
	return false
}

// isFloating reports whether addr is one of the port's floating addresses.
func (p *PortInfo) isFloating(addr uint32) bool {
	for _, f := range p.Floating {
		if f == addr {
			return true
		}
	}
	return false
}

// isFloating reports whether addr is a floating address of some port.
func (s *Snapshot) isFloating(addr uint32) bool {
	for i := range s.Ports {
		if s.Ports[i].isFloating(addr) {
			return true
		}
	}
	return false
}

// Route picks the output port and next hop for a destination: the port
// whose subnet holds it, else the port with a gateway.
func (s *Snapshot) Route(dst uint32) (port int, nextHop uint32, ok bool) {
	for i := range s.Ports {
		if dst&s.Ports[i].Mask == s.Ports[i].Net {
			return i, dst, true
		}
	}
	for i := range s.routes {
		if r := &s.routes[i]; dst&r.Mask == r.Net {
			return r.port, r.Via, true
		}
	}
	if s.gatewayPort >= 0 {
		return s.gatewayPort, s.Ports[s.gatewayPort].Gateway, true
	}
	return -1, 0, false
}

// destIndex finds a real server of the service by id, or -1.
func (s *Service) destIndex(id uint32) int {
	for i := range s.Dests {
		if s.Dests[i].ID == id {
			return i
		}
	}
	return -1
}

// DestExpired reports whether connections to a real server must end.
func (s *Snapshot) DestExpired(id uint32) bool {
	return id < MaxDests && s.ExpireDests[id/64]&(1<<(id%64)) != 0
}

// ExpireDest marks a real server's connections to be ended.
func (s *Snapshot) ExpireDest(id uint32) {
	if id < MaxDests {
		s.ExpireDests[id/64] |= 1 << (id % 64)
	}
}
