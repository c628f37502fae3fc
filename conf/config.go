// Package conf holds the configuration of the lbd daemon: one struct with a
// documented field per line, its defaults, its validation and its loading
// from YAML and the environment. viper is used here and nowhere else.
//
// Every field's comment gives its meaning, its default and whether a change
// takes effect on reload ("reload: yes") or needs a restart of lbd
// ("reload: restart").
package conf

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Config is the whole configuration of lbd.
type Config struct {
	EAL       EAL       `mapstructure:"eal"`       // DPDK environment abstraction layer; reload: restart
	Dataplane Dataplane `mapstructure:"dataplane"` // worker lcores, pools and tables; reload: restart
	Ports     []Port    `mapstructure:"ports"`     // network ports, at least one; reload: restart
	Services  []Service `mapstructure:"services"`  // virtual services and their real servers; default none; reload: yes
	Timeouts  Timeouts  `mapstructure:"timeouts"`  // connection idle timeouts; reload: yes
	Neighbour Neighbour `mapstructure:"neighbour"` // ARP table aging; reload: restart
	Control   Control   `mapstructure:"control"`   // control socket for lbctl; reload: restart
	Metrics   Metrics   `mapstructure:"metrics"`   // Prometheus endpoint; reload: restart
	Web       Web       `mapstructure:"web"`       // browser console over HTTPS; reload: restart
	Log       Log       `mapstructure:"log"`       // logging; level reload: yes, format reload: restart
	HA        HA        `mapstructure:"ha"`        // active/backup pair state (see HA); reload: restart
	Sync      Sync      `mapstructure:"sync"`      // connection sync between directors (see Sync); reload: restart
	Restart   Restart   `mapstructure:"restart"`   // handing connections over across a restart; reload: restart
	BGP       BGP       `mapstructure:"bgp"`       // announcing the VIPs to routers for scale-out (see BGP); reload: restart
	SNAT      []SNAT    `mapstructure:"snat"`      // the real servers' own connections out through lbd (see SNAT); default none; reload: restart
}

// SNAT is a rule for the connections real servers open themselves through
// lbd, their gateway in VS/NAT (DPVS's SNAT mode; a Linux director's
// kernel masquerades them): a TCP or UDP packet from Source that no
// connection, no service and none of lbd's own addresses takes leaves
// from one of Addresses and a port of it (about 64 thousand connections
// at a time per address), its destination unchanged, and the answers go
// back to the server. lbd answers ARP for the addresses.
type SNAT struct {
	Source    string   `mapstructure:"source"`    // the servers' network, an IPv4 prefix ("198.51.100.0/24"); rules' sources must not overlap; required; reload: restart
	Addresses []string `mapstructure:"addresses"` // the IPv4 addresses they leave from, each on a client-facing port's subnet and none of lbd's other addresses (a port's, a VIP, a local address, another rule's); at least one; reload: restart
	Protocols []string `mapstructure:"protocols"` // of "tcp", "udp" and "icmp" (the servers' pings: echo requests); default all three; reload: restart
}

// SNATProtocols are the rule's protocols, all three when it names none.
func (s SNAT) SNATProtocols() []string {
	if len(s.Protocols) == 0 {
		return []string{"tcp", "udp", "icmp"}
	}
	return s.Protocols
}

// Restart configures how a stopping lbd hands its connections (and the
// listing's counters) to the next one across a plain restart (SIGTERM,
// then a new start). An upgrade (lbctl upgrade, SIGUSR2) hands them over
// in memory whatever these say.
type Restart struct {
	StateFile string        `mapstructure:"state_file"` // file a stopping lbd writes its connection table to and a starting lbd loads (then deletes), absolute path, "" = off; default ""; reload: restart
	MaxAge    time.Duration `mapstructure:"max_age"`    // a state file older than this is refused (its connections may have moved on), 1s..1h; default 60s; reload: restart
	PullWait  time.Duration `mapstructure:"pull_wait"`  // with sync.backup on and no handover, how long a starting lbd waits for its sync peers' whole table (a bulk request) before it forwards, 0 = it does not ask, 0..60s; default 5s; reload: restart
}

// HA is this lbd's place in an active/backup pair of directors. keepalived
// (VRRP) decides the state at run time with lbctl --ha-state; this is the
// state lbd starts in.
type HA struct {
	State string `mapstructure:"state"` // "master" answers ARP for the VIPs and the ports' floating addresses, "backup" for neither (it still forwards what reaches it); "" in Go literals: master; default "master"; reload: restart (lbctl --ha-state changes it at run time, and a reload keeps the running state)
}

// Values of HA.State.
const (
	HAMaster = "master"
	HABackup = "backup"
)

// IsBackup reports whether lbd starts as the backup of a pair.
func (h HA) IsBackup() bool { return h.State == HABackup }

// EAL configures the DPDK environment abstraction layer.
type EAL struct {
	FilePrefix string   `mapstructure:"file_prefix"` // prefix of DPDK's runtime and hugepage files, [A-Za-z0-9_-]+; default "dplb"; reload: restart
	MemoryMB   int      `mapstructure:"memory_mb"`   // memory DPDK reserves at start, in MiB, 64..1048576; default 512; reload: restart
	HugePages  bool     `mapstructure:"huge_pages"`  // use hugepages; false runs DPDK with --no-huge (tests, demos); default true; reload: restart
	MainCPU    int      `mapstructure:"main_cpu"`    // CPU of the EAL main lcore (control plane), >= 0; default 0; reload: restart
	ExtraArgs  []string `mapstructure:"extra_args"`  // appended verbatim to the EAL argument list; default empty; reload: restart
}

// Dataplane configures the packet-processing lcores and their resources.
type Dataplane struct {
	Workers       []int         `mapstructure:"workers"`         // CPUs of the worker lcores, one lcore each, 1..64 entries, each >= 0, may repeat; default [0]; reload: restart
	Burst         int           `mapstructure:"burst"`           // packets per RX/TX burst, 1..512; default 32; reload: restart
	Mbufs         int           `mapstructure:"mbufs"`           // mbufs in the packet pool, 1023..16777215; default 16383; reload: restart
	MbufCache     int           `mapstructure:"mbuf_cache"`      // per-lcore mempool cache, 0..512 and <= mbufs/1.5; default 256; reload: restart
	RxDescriptors int           `mapstructure:"rx_descriptors"`  // RX ring size per queue, power of two in 64..16384; default 1024; reload: restart
	TxDescriptors int           `mapstructure:"tx_descriptors"`  // TX ring size per queue, power of two in 64..16384; default 1024; reload: restart
	ConnTableSize int           `mapstructure:"conn_table_size"` // connections per lcore, 1024..67108864; default 1048576; reload: restart
	IdleSleep     time.Duration `mapstructure:"idle_sleep"`      // sleep between polls of an idle lcore, 0 = pure polling, 0..10ms; default 0; reload: restart
	Defense       Defense       `mapstructure:"defense"`         // how each lcore's connection table resists floods (see Defense); reload: restart
	Fragments     Fragments     `mapstructure:"fragments"`       // the bounds of each lcore's IP fragment state (see Fragments); reload: restart
	SteeringKey   string        `mapstructure:"steering_key"`    // Toeplitz key of connection ownership and the NICs' RSS, 40 bytes as 80 hex digits (':' or ' ' between bytes allowed), not all zero; "" = drawn at random at each boot; default ""; reload: restart
}

// SteeringKeyLen is the length of dataplane.steering_key in bytes.
const SteeringKeyLen = 40

// ParseSteeringKey reads a steering key: 80 hex digits, ':' or ' '
// between bytes allowed, not all zero. "" gives nil (a key drawn at boot).
func ParseSteeringKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	clean := strings.NewReplacer(":", "", " ", "").Replace(s)
	k, err := hex.DecodeString(clean)
	if err != nil {
		return nil, fmt.Errorf("is not hex: %v", err)
	}
	if len(k) != SteeringKeyLen {
		return nil, fmt.Errorf("has %d bytes, want %d (%d hex digits)", len(k), SteeringKeyLen, 2*SteeringKeyLen)
	}
	for _, b := range k {
		if b != 0 {
			return k, nil
		}
	}
	return nil, fmt.Errorf("is all zero (every client would hash to one lcore)")
}

// Defense keeps a connection table usable under a flood of flows that
// never become connections (spoofed SYNs, one-packet UDP), after IPVS's
// drop_entry and secure_tcp. An embryonic entry is TCP before the
// handshake completes or UDP never answered (one-way services: never sent
// a second packet). A connection past its handshake that carried a packet
// within idle_after is never evicted.
type Defense struct {
	DropEntry  int           `mapstructure:"drop_entry"`  // percent of an lcore's table at or above which each new connection first evicts an embryonic (older than 200ms), finished or idle entry, oldest first, 0 = off, 0..100; default 90; reload: restart
	Secure     int           `mapstructure:"secure"`      // percent of an lcore's table at or above which embryonic entries get syn_timeout / udp_timeout instead of timeouts.syn / timeouts.udp, 0 = off, 0..100; default 75; reload: restart
	IdleAfter  time.Duration `mapstructure:"idle_after"`  // under drop_entry, a connection with no packet for this long may be evicted in any state, 1s..720h; default 60s; reload: restart
	SYNTimeout time.Duration `mapstructure:"syn_timeout"` // timeout of embryonic TCP entries under secure, 1s..720h; default 10s; reload: restart
	UDPTimeout time.Duration `mapstructure:"udp_timeout"` // timeout of embryonic UDP entries under secure, 1s..720h; default 10s; reload: restart
}

// Fragments bounds what each lcore remembers of fragmented datagrams:
// fragments are forwarded one by one along their first fragment's
// connection, and later fragments that arrive before their first wait.
type Fragments struct {
	Datagrams int           `mapstructure:"datagrams"` // datagrams each lcore remembers at once (a new one beyond is dropped, fragment_table_full), 16..1048576; default 4096; reload: restart
	Held      int           `mapstructure:"held"`      // fragments each lcore holds while their datagram's first fragment is missing (beyond: fragment_held_full), 0..65536, times the lcores below dataplane.mbufs / 2; default 256; reload: restart
	Timeout   time.Duration `mapstructure:"timeout"`   // a datagram is forgotten this long after its first fragment reached the lcore, and what it held dropped (fragment_timeout), 100ms..60s; default 5s; reload: restart
}

// DefaultFragments are the fragment bounds lbd runs with unless configured.
func DefaultFragments() Fragments {
	return Fragments{Datagrams: 4096, Held: 256, Timeout: 5 * time.Second}
}

// Port is one DPDK port and its IPv4 interface.
type Port struct {
	Name        string `mapstructure:"name"`        // unique name, [a-z0-9_-]{1,15}; required; reload: restart
	Device      string `mapstructure:"device"`      // unique PCI address ("0000:03:00.0") or DPDK vdev string ("net_af_packet0,iface=veth0"); required; reload: restart
	Address     string `mapstructure:"address"`     // the port's own IPv4 address with prefix length ("198.51.100.1/24"); required; reload: restart
	Address6    string `mapstructure:"address6"`    // the port's own IPv6 address with prefix length ("2001:db8::1/64"), beside the IPv4 one: lbd answers neighbour solicitations and echo requests for it; global unicast, not link-local; default none; reload: restart
	Gateway     string `mapstructure:"gateway"`     // next hop for destinations off every port's subnet, inside Address's prefix, on at most one port; default none; reload: restart
	Gateway6    string `mapstructure:"gateway6"`    // IPv6 next hop for IPv6 destinations off every port's IPv6 subnet, inside Address6's prefix (needs address6), on at most one port; default none; reload: restart
	Role        string `mapstructure:"role"`        // "client" (faces clients, answers ARP for VIPs), "server" (faces real servers) or "both"; default "both"; reload: restart
	MTU         int    `mapstructure:"mtu"`         // MTU to set, 68..9702, 0 = leave the device's; default 0; reload: restart
	Promiscuous bool   `mapstructure:"promiscuous"` // put the port in promiscuous mode; default false; reload: restart
	// KNI names a kernel interface for the port (DPVS's KNI): lbd makes
	// a TAP interface of that name in its network namespace, persistent
	// (it outlives lbd, so routes added on it stay; the next lbd takes
	// it up again), with the port's MAC, MTU (at most 2034, what an mbuf holds)
	// and addresses (address6 without duplicate address detection), up.
	// What reaches the port for its own addresses and lbd does not take
	// (TCP and UDP but its probes', echo replies and ICMP errors not of
	// its probes or connections, the ARP replies and neighbour
	// advertisements it learns from) goes to the kernel through it, and
	// what the kernel sends on it leaves through the port: ssh, BGP, ping
	// or the host's health checks over the dataplane port. A Linux
	// interface name, 1..15 of A-Z a-z 0-9 _ . -, unique; default none;
	// reload: restart
	KNI string `mapstructure:"kni"`
	// Floating are addresses that belong to whichever lbd of a pair is
	// master (e.g. the gateway NAT real servers route through): IPv4 ones
	// inside Address's prefix, answered in ARP and announced by
	// gratuitous ARP on takeover; IPv6 ones inside Address6's prefix,
	// answered in neighbour discovery and announced by unsolicited NA on
	// takeover; by the master only; unique, not the port's address(6),
	// gateway(6), network or broadcast address, nor a VIP; default none;
	// reload: restart
	Floating []string `mapstructure:"floating"`
	// Routes are static routes through next hops on this port's subnet:
	// destinations in Prefix (real servers in other networks, VS/TUN's
	// above all, or clients) go by Via instead of the gateway. IPv4
	// prefixes with a Via inside Address's prefix, IPv6 ones with a Via
	// inside Address6's; the longest prefix wins, a port's own subnet
	// before any route; at most MaxRoutes of each family in all;
	// default none; reload: restart
	Routes []Route `mapstructure:"routes"`
}

// Route is a static route (Port.Routes).
type Route struct {
	Prefix string `mapstructure:"prefix"` // destination network, "10.0.0.0/8" or "fd00:9::/48", without host bits, not /0 (that is the gateway); required
	Via    string `mapstructure:"via"`    // next hop on the port's subnet, in the prefix's family; required
}

// MaxRoutes bounds the static routes of each family: a packet to an
// off-link destination is matched against them one by one.
const MaxRoutes = 32

// RouteNet returns the route's prefix and next hop; ok false when either
// is invalid.
func (r Route) RouteNet() (pfx netip.Prefix, via netip.Addr, ok bool) {
	pfx, err := netip.ParsePrefix(r.Prefix)
	if err != nil {
		return pfx, via, false
	}
	via, err = netip.ParseAddr(r.Via)
	return pfx, via, err == nil
}

// Service is a virtual service: a (protocol, VIP, port) balanced over real servers.
type Service struct {
	Protocol    string        `mapstructure:"protocol"`      // "tcp" or "udp"; required; reload: yes
	VIP         string        `mapstructure:"vip"`           // virtual IPv4 or IPv6 address (its servers of the same version: no NAT64); required; reload: yes
	Port        int           `mapstructure:"port"`          // virtual port, 1..65535, or 0: every port of the VIP without a service of its own (IPVS's port-zero service; needs persistence; its servers' port is 0: the client's kept); required; reload: yes
	Scheduler   string        `mapstructure:"scheduler"`     // name of a registered scheduler (ipvsadm -s); default "rr"; reload: yes
	SchedFlags  []string      `mapstructure:"sched_flags"`   // scheduler flags (ipvsadm -b): sh-fallback, sh-port, mh-fallback, mh-port; default none; reload: yes
	MHTableSize int           `mapstructure:"mh_table_size"` // size of the mh scheduler's Maglev table, a prime in 251..131071 (0 in Go literals: the default); default 65537; reload: yes
	Persistence time.Duration `mapstructure:"persistence"`   // persistent service (ipvsadm -p): a client (network) keeps its real server while its template lives, 0 = off, else 1s..720h; default 0; reload: yes
	Netmask     string        `mapstructure:"netmask"`       // persistence granularity (ipvsadm -M), a contiguous IPv4 netmask; default "255.255.255.255"; reload: yes
	// PersistencePrefix is an IPv6 service's persistence granularity
	// (lbctl -M 64): the client addresses' prefix length, 1..128 (0: 128);
	// IPv6 services only; default 0; reload: yes
	PersistencePrefix int          `mapstructure:"persistence_prefix"`
	SloppyTCP         bool         `mapstructure:"sloppy_tcp"`   // also create connections on TCP packets other than SYN (mid-flow pickup, IPVS's sloppy_tcp); default false; reload: yes
	OnePacket         bool         `mapstructure:"one_packet"`   // udp: schedule every datagram on its own and keep no connection (IPVS's one-packet scheduling, ipvsadm --ops: DNS, syslog); dr and tun servers only; default false; reload: yes
	QUIC              bool         `mapstructure:"quic"`         // udp: a new flow goes to the server its QUIC destination connection ID names (DPVS's encoding of the server's address, and port, after the ID's first octet), so that a QUIC connection follows its client to a new address or port; other flows are scheduled; not with persistence; default false; reload: yes
	Helper            string       `mapstructure:"helper"`       // application helper: "" none, "ftp" (IPVS's ip_vs_ftp: PORT/EPRT and 227/229 translated, data connections expected; over IPv6 EPRT and 229; tcp, every server nat); default ""; reload: yes (connections opened before keep what they had)
	Servers           []RealServer `mapstructure:"servers"`      // real servers; empty drops and counts new connections; default none; reload: yes
	Health            HealthCheck  `mapstructure:"health"`       // health check of every server (see HealthCheck); default DefaultHealthCheck(), type none; reload: yes
	SorryServer       string       `mapstructure:"sorry_server"` // address:port in the VIP's family, [address]:port for IPv6 (reached by nat), that gets new connections while every server is down (or the quorum is lost), "" = drop them; default ""; reload: yes
	// Quorum is keepalived's: the least total weight of the servers not
	// down with which the service runs as it should. Below it (less
	// Hysteresis) the quorum is lost: the sorry server, if any, takes the
	// new connections instead of the servers left (theirs go on); it is
	// gained again at Quorum plus Hysteresis. 0..1000000 (0 means 1);
	// default 1 (lost when every server is down); reload: yes
	Quorum int `mapstructure:"quorum"`
	// Hysteresis is keepalived's flap dampener around Quorum: 0..quorum-1;
	// default 0; reload: yes
	Hysteresis int      `mapstructure:"hysteresis"`
	Feedback   Feedback `mapstructure:"feedback"` // dynamic weight feedback from the servers' load (see Feedback); default DefaultFeedback(), type none; reload: yes
	// LocalAddresses are the service's FullNAT local addresses (DPVS's
	// laddr): connections to its fullnat servers leave from one of them.
	// Each is an IPv4 address inside a server-facing port's prefix, or,
	// for an IPv6 service's IPv6 fullnat servers (FNAT66), an IPv6 one
	// inside a server-facing port's address6 prefix; none a port's
	// address, gateway, VIP, floating address or another service's local
	// address; one of the server's family required when a server is
	// fullnat (an IPv6 service's IPv4 servers are NAT64, from IPv4 ones);
	// lbd answers ARP (neighbour solicitations) for them; default none;
	// reload: yes
	LocalAddresses []string `mapstructure:"local_addresses"`
	// ProxyProtocol puts a PROXY protocol v2 header (the client's and the
	// VIP's address and port, IPv6 ones for an IPv6 service's NAT64 and
	// FNAT66 servers) before the first byte the client sends on each connection
	// to a fullnat server, and adjusts sequence numbers
	// for it; tcp only; the servers must expect it; default false; reload: yes
	ProxyProtocol bool `mapstructure:"proxy_protocol"`
	// TOA puts DPVS's TCP option address (option 254: the client's port
	// and IPv4 address, or its IPv6 address for an IPv6 service's NAT64
	// and FNAT66 servers) in the segments that complete each connection's handshake
	// with a fullnat server, for the toa kernel module on the servers to
	// report as the peer's address (with synproxy, in the ACK lbd
	// completes the servers' handshakes with); tcp, not with
	// proxy_protocol; default false;
	// reload: yes (connections opened before keep what they had)
	TOA bool `mapstructure:"toa"`
	// UOA puts DPVS's UDP option of address (option 31: the client's port
	// and IPv4 address, or its IPv6 address for an IPv6 service's NAT64
	// servers) in the first 3 datagrams of each connection to a fullnat
	// server, for the uoa kernel module on the servers to report: "ipo" as
	// an IPv4 option (servers without the module ignore it; IPv4
	// services only), "opp" in DPVS's option protocol header (IP protocol
	// 248: only servers with the module take those datagrams; DPVS's
	// default; an IPv6 service's NAT64 and FNAT66 servers take opp only);
	// udp only; default "" (none); reload: yes (connections opened before
	// keep what they had)
	UOA string `mapstructure:"uoa"`
	// SynProxy answers clients' SYNs with SYN cookies and opens a
	// connection to a real server only for an ACK that proves one (a
	// spoofed SYN flood makes no entry and reaches no server); tcp only,
	// nat and fullnat servers only; default false; reload: yes
	SynProxy bool `mapstructure:"synproxy"`
	// Blocklist names clients that get no new connection to the service
	// (DPVS's blklst, lbctl --add-blklst): addresses or prefixes
	// ("192.0.2.7", "198.51.100.0/24") in the VIP's family, at most
	// MaxClientList; their SYNs (or first datagrams) are dropped and
	// counted as client_blocked, before any SYN cookie; connections they
	// already have go on; default none; reload: yes
	Blocklist []string `mapstructure:"blocklist"`
	// Allowlist, when not empty, is the only clients that get new
	// connections (DPVS's whtlst, lbctl --add-whtlst); the others' are
	// dropped and counted as client_not_allowed; a client in both lists
	// is blocked; the same form and limit as blocklist; default none
	// (every client); reload: yes
	Allowlist []string `mapstructure:"allowlist"`
}

// MaxWeight is the highest weight of a real server (IPVS's).
const MaxWeight = 65535

// RealServer is one destination of a service.
type RealServer struct {
	Address string       `mapstructure:"address"`         // IPv4 or IPv6 address (the VIP's version); nat and dr servers on a port's subnet, tun servers on a port's subnet or beyond its gateway; required; reload: yes
	Port    int          `mapstructure:"port"`            // 1..65535 (nat and fullnat only: dr and tun keep the service's port), 0 for a port-zero service's (the client's port kept); default the service's port; reload: yes
	Weight  int          `mapstructure:"weight"`          // 0..65535, 0 = quiescent (no new connections); default 1; reload: yes
	Forward string       `mapstructure:"forward"`         // forwarding method: "nat" (ipvsadm -m), "dr" (-g), "tun" (-i) or "fullnat" (lbctl --fullnat; needs the service's local_addresses); default "nat"; reload: yes
	Upper   int          `mapstructure:"upper_threshold"` // no new connections while the server has this many (ipvsadm -x), 0 = no limit, 0..1000000; default 0; reload: yes
	Lower   int          `mapstructure:"lower_threshold"` // new connections again below this many (ipvsadm -y), 0 = 3/4 of upper_threshold, 0..upper_threshold; default 0; reload: yes
	Health  *HealthCheck `mapstructure:"health"`          // this server's own health check: its keys replace the service's, the others inherit them (Load merges); default nil = the service's; reload: yes
}

// Timeouts are the connection idle timeouts, as ipvsadm --set; each 1s..720h (30 days).
type Timeouts struct {
	TCP    time.Duration `mapstructure:"tcp"`     // TCP ESTABLISHED; default 900s; reload: yes
	TCPFin time.Duration `mapstructure:"tcp_fin"` // TCP FIN_WAIT; default 60s; reload: yes
	UDP    time.Duration `mapstructure:"udp"`     // UDP; default 300s; reload: yes
	SYN    time.Duration `mapstructure:"syn"`     // TCP SYN_SENT/SYN_RECV; default 60s; reload: yes
}

// Neighbour configures the ARP table.
type Neighbour struct {
	ReachableTime time.Duration `mapstructure:"reachable_time"` // an entry not confirmed for this long is re-resolved, 1s..1h; default 30s; reload: restart
	StaleTime     time.Duration `mapstructure:"stale_time"`     // an entry not confirmed for this long is removed, > reachable_time and <= 24h; default 300s; reload: restart
}

// Control configures the Unix socket lbctl talks to.
type Control struct {
	Socket     string `mapstructure:"socket"`      // absolute path of the socket, at most 107 bytes; default "/run/dplb/lbd.sock"; reload: restart
	SocketMode uint32 `mapstructure:"socket_mode"` // permission bits of the socket, octal (0600, "0600", 0o600), 0..0777; default 0600; reload: restart
	Group      string `mapstructure:"group"`       // group whose members may use the socket besides root, checked by lbd at start; default none; reload: restart
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Listen string `mapstructure:"listen"` // host:port to serve /metrics on, "" disables; default "127.0.0.1:9180"; reload: restart
}

// Log configures logging.
type Log struct {
	Level  string `mapstructure:"level"`  // debug, info, warn or error; default "info"; reload: yes
	Format string `mapstructure:"format"` // json or console; default "console"; reload: restart
}

// Values of Port.Role.
const (
	RoleClient = "client"
	RoleServer = "server"
	RoleBoth   = "both"
)

// Defaults of list-element fields, applied by Load and Parse when absent.
const (
	defaultRole      = RoleBoth
	defaultScheduler = "rr"
	defaultWeight    = 1
	defaultForward   = "nat"
	defaultNetmask   = "255.255.255.255"
	defaultMHTable   = 65537
)

// SchedFlags are the scheduler flags a service may carry (ipvsadm -b).
var SchedFlags = []string{"sh-fallback", "sh-port", "mh-fallback", "mh-port"}

// Default returns the configuration with every default applied and no
// ports or services.
func Default() Config {
	return Config{
		EAL: EAL{
			FilePrefix: "dplb",
			MemoryMB:   512,
			HugePages:  true,
			MainCPU:    0,
		},
		Dataplane: Dataplane{
			Workers:       []int{0},
			Burst:         32,
			Mbufs:         16383,
			MbufCache:     256,
			RxDescriptors: 1024,
			TxDescriptors: 1024,
			ConnTableSize: 1 << 20,
			IdleSleep:     0,
			Defense:       DefaultDefense(),
			Fragments:     DefaultFragments(),
		},
		Timeouts: Timeouts{
			TCP:    900 * time.Second,
			TCPFin: 60 * time.Second,
			UDP:    300 * time.Second,
			SYN:    60 * time.Second,
		},
		Neighbour: Neighbour{
			ReachableTime: 30 * time.Second,
			StaleTime:     300 * time.Second,
		},
		Control: Control{
			Socket:     "/run/dplb/lbd.sock",
			SocketMode: 0o600,
		},
		Metrics: Metrics{
			Listen: "127.0.0.1:9180",
		},
		Web: Web{
			TLSDir:          defaultWebTLSDir,
			SessionLifetime: defaultWebSession,
		},
		Log: Log{
			Level:  "info",
			Format: "console",
		},
		Restart: Restart{
			MaxAge:   60 * time.Second,
			PullWait: 5 * time.Second,
		},
		HA:   HA{State: HAMaster},
		Sync: DefaultSync(),
		BGP:  DefaultBGP(),
	}
}

// DefaultDefense is the table defense lbd runs with unless configured.
func DefaultDefense() Defense {
	return Defense{DropEntry: 90, Secure: 75, IdleAfter: 60 * time.Second, SYNTimeout: 10 * time.Second, UDPTimeout: 10 * time.Second}
}

// Prefix returns the port's address with its prefix length, as written
// (not masked: Prefix().Addr() is the port's own address). It is the zero
// Prefix if Address is invalid, which Validate rules out.
func (p Port) Prefix() netip.Prefix {
	pfx, err := netip.ParsePrefix(p.Address)
	if err != nil {
		return netip.Prefix{}
	}
	return pfx
}

// Prefix6 returns the port's IPv6 address and prefix; ok false without one.
func (p Port) Prefix6() (netip.Prefix, bool) {
	pfx, err := netip.ParsePrefix(p.Address6)
	return pfx, err == nil && pfx.Addr().Is6()
}

// GatewayAddr returns the port's gateway and whether it has a valid one.
func (p Port) GatewayAddr() (netip.Addr, bool) {
	if p.Gateway == "" {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(p.Gateway)
	if err != nil {
		return netip.Addr{}, false
	}
	return a, true
}

// Gateway6Addr returns the port's IPv6 gateway and whether it has a valid one.
func (p Port) Gateway6Addr() (netip.Addr, bool) {
	a, err := netip.ParseAddr(p.Gateway6)
	return a, err == nil && a.Is6()
}

// FloatingAddrs returns the port's valid IPv4 floating addresses.
func (p Port) FloatingAddrs() []netip.Addr { return p.floating(netip.Addr.Is4) }

// FloatingAddrs6 returns the port's valid IPv6 floating addresses.
func (p Port) FloatingAddrs6() []netip.Addr {
	return p.floating(func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() })
}

func (p Port) floating(family func(netip.Addr) bool) []netip.Addr {
	var out []netip.Addr
	for _, f := range p.Floating {
		if a, err := netip.ParseAddr(f); err == nil && family(a) {
			out = append(out, a)
		}
	}
	return out
}

// FacesClients reports whether the port's role is client or both.
func (p Port) FacesClients() bool { return p.Role == RoleClient || p.Role == RoleBoth }

// FacesServers reports whether the port's role is server or both.
func (p Port) FacesServers() bool { return p.Role == RoleServer || p.Role == RoleBoth }

// pciRE matches a PCI address, DDDD:BB:DD.F or BB:DD.F.
var pciRE = regexp.MustCompile(`^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$`)

// IsPCI reports whether the device is a PCI address (DDDD:BB:DD.F or
// BB:DD.F, optionally followed by ",key=value" device arguments) rather
// than a vdev string.
func (p Port) IsPCI() bool { return pciRE.MatchString(p.DeviceName()) }

// DeviceName returns the device without its arguments: the part of Device
// before the first comma, which is the vdev name or the PCI address.
func (p Port) DeviceName() string {
	name, _, _ := strings.Cut(p.Device, ",")
	return name
}

// QuorumWeight is the service's quorum (0 in a struct literal means 1).
func (s Service) QuorumWeight() int {
	return max(s.Quorum, 1)
}

// MHTable is the Maglev table size (0 in a struct literal means the default).
func (s Service) MHTable() int {
	if s.MHTableSize == 0 {
		return defaultMHTable
	}
	return s.MHTableSize
}

// NetmaskBits is the persistence netmask's prefix length (32 by default,
// and for an empty Netmask in a struct literal).
func (s Service) NetmaskBits() int {
	m, err := netip.ParseAddr(s.Netmask)
	if err != nil {
		return 32
	}
	b := m.As4()
	bits := 0
	for _, x := range b {
		for i := 7; i >= 0 && x&(1<<i) != 0; i-- {
			bits++
		}
	}
	return bits
}

// HasFlag reports whether the service carries a scheduler flag.
func (s Service) HasFlag(f string) bool { return slices.Contains(s.SchedFlags, f) }

// VIPAddr returns the service's VIP, the zero Addr if invalid (which
// Validate rules out).
func (s Service) VIPAddr() netip.Addr {
	a, err := netip.ParseAddr(s.VIP)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// Addr returns the real server's address, the zero Addr if invalid (which
// Validate rules out).
func (r RealServer) Addr() netip.Addr {
	a, err := netip.ParseAddr(r.Address)
	if err != nil {
		return netip.Addr{}
	}
	return a
}
