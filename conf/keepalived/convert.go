package keepalived

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dplb/dplb/conf"
)

// Warning is a keyword of keepalived.conf that the services do not carry
// over as keepalived meant it: dropped, or changed in meaning.
type Warning struct {
	Pos     Pos
	Keyword string
	Msg     string
}

func (w Warning) String() string { return fmt.Sprintf("%s: %s: %s", w.Pos, w.Keyword, w.Msg) }

// Result is what Convert makes of keepalived.conf.
type Result struct {
	Services []conf.Service // every default filled in, as conf.Load returns them
	Origins  []Origin       // where each service's virtual_server (and group entry) is
	SNAT     []conf.SNAT    // DPVS's SNAT match services as lbd's rules (snat.go)
	Warnings []Warning      // in the order of the files' lines
	VRRP     *Pos           // the first vrrp_instance, nil without one: keepalived's own job
}

// keepalived's defaults.
const (
	defaultDelayLoop   = 60 * time.Second
	defaultTimeout     = 5 * time.Second
	defaultPersistence = 360 * time.Second
	defaultScheduler   = "wlc"
	defaultHTTPStatus  = "200-299"
)

// lbd's bounds a converted value must keep within, besides the health
// checks' (conf.MinHealthInterval and the rest).
const (
	maxWeight  = 65535
	maxUpper   = 1000000
	maxPersist = 720 * time.Hour
)

// globalDefs points at lbd's own settings for global_defs' LVS keywords,
// which this conversion (services only) does not write: lvs_timeouts
// are lbd.yaml's timeouts, lvs_sync_daemon its sync section.
func (c *converter) globalDefs(n *Node) {
	for _, s := range n.Block {
		a := s.Args()
		switch s.Keyword() {
		case "lvs_timeouts":
			names := map[string]string{"tcp": "tcp", "tcpfin": "tcp_fin", "udp": "udp"}
			var set []string
			for i := 0; i+1 < len(a); i += 2 {
				secs, err := strconv.ParseUint(a[i+1], 10, 32)
				if name := names[a[i]]; name != "" && err == nil && secs > 0 {
					set = append(set, fmt.Sprintf("%s: %ds", name, secs))
				}
			}
			if len(set) == 0 {
				c.warn(s, "%q names no timeout lbd knows: dropped", strings.Join(a, " "))
				break
			}
			c.warn(s, "not written here (services only): set timeouts: {%s} in lbd.yaml", strings.Join(set, ", "))
		case "lvs_sync_daemon":
			c.warn(s, "not written here (services only): lbd syncs its connections itself, over a management interface: see the sync section of lbd.yaml (master, backup, mcast_interface, syncid, port)")
		case "lvs_flush", "lvs_flush_onstop":
			c.warn(s, "lbd starts with the configuration's services and ends with them: dropped")
		}
	}
}

// schedulers are keepalived's, every one of them lbd's too.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos"}

// ignoredRoots are the top-level blocks that are not LVS: left alone.
var ignoredRoots = []string{
	"global_defs", "static_ipaddress", "static_routes", "static_rules",
	"linkbeat_interfaces", "linkbeat_use_polling", "garp_group",
	"track_group", "net_namespace", "net_namespace_ipvs",
	"namespace_with_ipsets", "instance", "use_pid_dir", "child_wait_time",
	"interface_up_down_delays",
}

// Load reads and converts the keepalived.conf at path.
func Load(path string) (Result, error) {
	nodes, err := ParseFile(path)
	if err != nil {
		return Result{}, err
	}
	return Convert(nodes), nil
}

// converter gathers the result and its warnings.
type converter struct {
	res        Result
	ssl        *Node // the SSL block (SSL_GET's client certificate)
	sslUsed    bool
	vsGroups   map[string][]vsEntry   // virtual_server_group's entries by name
	addrGroups map[string]*addrGroup  // DPVS's address groups by keyword and name
	pending    []pending              // the services, before their local addresses
	trackFiles map[string]trackFile   // track_file blocks by name, for FILE_CHECK
	bfds       map[string]bfdInstance // bfd_instance blocks by name, for BFD_CHECK
}

// pending is a converted service waiting for its share of its
// local_address_group, which depends on every service that uses it.
type pending struct {
	svc    conf.Service
	origin Origin
	n      *Node
	laddr  string // the local_address_group of its fullnat servers, "" for none
}

// warn notes what n loses, once: a virtual_server's setting inherited by
// every server would otherwise be named for each.
func (c *converter) warn(n *Node, format string, args ...any) {
	w := Warning{Pos: n.Pos, Keyword: n.Keyword(), Msg: fmt.Sprintf(format, args...)}
	if !slices.Contains(c.res.Warnings, w) {
		c.res.Warnings = append(c.res.Warnings, w)
	}
}

// Convert turns keepalived.conf's statements into services.
func Convert(nodes []*Node) Result {
	c := &converter{}
	c.groups(nodes)
	c.readTrackFiles(nodes)
	c.readBFDs(nodes)
	for _, n := range nodes {
		switch kw := n.Keyword(); {
		case kw == "virtual_server":
			c.virtualServer(n)
		case kw == "track_file":
			// Read first, by readTrackFiles.
		case kw == "bfd_instance":
			// Read first, by readBFDs.
		case isGroup(kw):
			// Read first, by groups.
		case kw == "zone":
			c.warn(n, "LVS FullNAT's zones have no lbd equivalent (a service's local addresses are its own): ignored")
		case kw == "tunnel_group":
			c.warn(n, "lbd makes no tunnel devices (its tun servers need none): dropped")
		case kw == "vrrp_instance":
			if c.res.VRRP == nil {
				p := n.Pos
				c.res.VRRP = &p
			}
		case kw == "SSL":
			c.ssl = n
		case kw == "global_defs":
			c.globalDefs(n)
		case strings.HasPrefix(kw, "vrrp_"), slices.Contains(ignoredRoots, kw):
		case strings.HasPrefix(kw, "$"), strings.HasPrefix(kw, "@"):
			c.warn(n, "keepalived's parameters and conditional lines are not expanded: dropped")
		default:
			c.warn(n, "unknown keyword: dropped")
		}
	}
	c.localAddresses()
	if c.ssl != nil && c.sslUsed && len(c.ssl.Block) > 0 {
		c.warn(c.ssl, "lbd's https checks present no client certificate and verify no server's (tls_skip_verify: true): dropped")
	}
	slices.SortStableFunc(c.res.Warnings, func(a, b Warning) int { return a.Pos.seq - b.Pos.seq })
	return c.res
}

// inherited are the check settings a virtual_server hands to its real
// servers, and a real_server to its check; nil where keepalived's default
// applies.
type inherited struct {
	delayLoop, timeout, retry, retryDelay, alpha, host *Node
}

// over returns in with the settings n's block writes replacing its own.
func (in inherited) over(block []*Node) inherited {
	for _, s := range block {
		switch s.Keyword() {
		case "delay_loop":
			in.delayLoop = s
		case "connect_timeout":
			in.timeout = s
		case "retry":
			in.retry = s
		case "delay_before_retry":
			in.retryDelay = s
		case "alpha":
			in.alpha = s
		case "virtualhost":
			in.host = s
		}
	}
	return in
}

// virtualServer converts a virtual_server: one service, or one for each
// address and port of its group, each with the whole body.
func (c *converter) virtualServer(n *Node) {
	args := n.Args()
	switch {
	case len(args) >= 1 && args[0] == "match":
		c.snatMatch(n)
		return
	case len(args) >= 1 && args[0] == "fwmark":
		c.warn(n, "lbd has no fwmark services (they balance by address and port): virtual server skipped")
		return
	case len(args) >= 1 && args[0] == "group":
		if len(args) != 2 {
			c.warn(n, "%q is not a group name: skipped", strings.Join(args[1:], " "))
			return
		}
		entries, ok := c.vsGroups[args[1]]
		switch {
		case !ok:
			c.warn(n, "no virtual_server_group %s: skipped", args[1])
		case len(entries) == 0:
			c.warn(n, "virtual_server_group %s has no address and port lbd balances: skipped", args[1])
		}
		for _, e := range entries {
			c.service(n, e.vip, e.port, Origin{Pos: n.Pos, Group: args[1], Entry: e.entry})
		}
		return
	case len(args) == 1 || len(args) == 2 && isZeros(args[1]):
		vip, err := netip.ParseAddr(args[0])
		if err != nil || vip.Zone() != "" {
			c.warn(n, "%q is not an IP address: skipped", args[0])
			return
		}
		c.service(n, vip.Unmap(), 0, Origin{Pos: n.Pos}) // every port (IPVS's port-zero service)
		return
	case len(args) != 2:
		c.warn(n, "%q is not an address and a port: skipped", strings.Join(args, " "))
		return
	}
	vip, err := netip.ParseAddr(args[0])
	if err != nil || vip.Zone() != "" {
		c.warn(n, "%q is not an IP address: skipped", args[0])
		return
	}
	vip = vip.Unmap()
	port, ok := parsePort(args[1])
	if !ok {
		c.warn(n, "%q is not a port in 1..65535: skipped", args[1])
		return
	}
	c.service(n, vip, port, Origin{Pos: n.Pos})
}

// service converts a virtual_server's body for one VIP and port.
func (c *converter) service(n *Node, vip netip.Addr, port int, origin Origin) {
	svc := conf.Service{
		Protocol:    "tcp",
		VIP:         vip.String(),
		Port:        port,
		Scheduler:   defaultScheduler,
		MHTableSize: 65537,
		Netmask:     "255.255.255.255",
		Health:      conf.DefaultHealthCheck(),
		Feedback:    conf.DefaultFeedback(),
	}
	forward := "nat"
	var flags, servers []*Node
	var sorry, sorryMethod, granularity, synProxy, proxyProtocol, ops, quic, hysteresis, alpha *Node
	groups := map[string]*Node{} // DPVS's address groups named, by keyword
	weight := 1
	for _, s := range n.Block {
		a := s.Args()
		switch s.Keyword() {
		case "protocol":
			switch {
			case len(a) == 1 && strings.EqualFold(a[0], "TCP"):
				svc.Protocol = "tcp"
			case len(a) == 1 && strings.EqualFold(a[0], "UDP"):
				svc.Protocol = "udp"
			case len(a) == 1 && strings.EqualFold(a[0], "SCTP"):
				c.warn(s, "lbd balances TCP and UDP only: virtual server skipped")
				return
			default:
				c.warn(s, "%q is not TCP or UDP: tcp kept", strings.Join(a, " "))
			}
		case "lb_algo", "lvs_sched":
			switch {
			case len(a) == 1 && slices.Contains(schedulers, a[0]):
				svc.Scheduler = a[0]
			case len(a) == 1 && a[0] == "conhash":
				// DPVS's consistent hash of the client's address: lbd's
				// is Maglev's, which moves as few clients when a server
				// comes or goes.
				svc.Scheduler = "mh"
				c.warn(s, "DPVS's conhash is lbd's mh (Maglev consistent hashing of the client's address): the same clients stay together, on other servers than DPVS chose")
			default:
				c.warn(s, "%q is not a scheduler: %s kept", strings.Join(a, " "), svc.Scheduler)
			}
		case "lb_kind", "lvs_method":
			if f, ok := c.method(s); ok {
				forward = f
			}
		case "persistence_timeout":
			if len(a) == 0 {
				svc.Persistence = defaultPersistence
				break
			}
			secs, err := strconv.ParseUint(a[0], 10, 32)
			switch {
			case err != nil || secs == 0:
				c.warn(s, "%q is not a number of seconds: dropped", a[0])
			case time.Duration(secs)*time.Second > maxPersist:
				c.warn(s, "%ss is more than lbd's 720h: 720h", a[0])
				svc.Persistence = maxPersist
			default:
				svc.Persistence = time.Duration(secs) * time.Second
			}
		case "persistence_granularity":
			granularity = s
			if svc.Persistence == 0 {
				svc.Persistence = defaultPersistence
			}
		case "persistence_engine":
			c.warn(s, "lbd has no persistence engines (keepalived's sip): dropped")
		case "sorry_server":
			sorry = s
		case "sorry_server_lvs_method":
			sorryMethod = s
		case "real_server":
			servers = append(servers, s)
		case "weight":
			if w, ok := c.weight(s); ok {
				weight = w
			}
		case "flag-1", "flag-2", "flag-3", "sh-port", "sh-fallback", "mh-port", "mh-fallback":
			flags = append(flags, s)
		case "ops":
			ops = s
		case "alpha":
			alpha = s
		case "quorum":
			if q, ok := c.count(s, "quorum", 1, maxQuorum); ok {
				svc.Quorum = q
			}
		case "hysteresis":
			if h, ok := c.count(s, "hysteresis", 0, maxQuorum); ok {
				svc.Hysteresis, hysteresis = h, s
			}
		case "quorum_up", "quorum_down":
			c.warn(s, "lbd runs no quorum scripts: dropped")
		case "smtp_alert":
			if enabled(a) {
				c.warn(s, "lbd sends no mail (its events and metrics say when a server goes down): dropped")
			}
		case "delay_loop", "connect_timeout", "retry", "delay_before_retry", "virtualhost":
			// Inherited by the servers' checks, below.
		case "warmup", "ha_suspend", "omega", "inhibit_on_failure", "ip_family", "hashed", "snmp_name", "sorry_server_inhibit":
			// No effect on what lbd does (see the package comment).
		case "laddr_group_name", "daddr_group_name", "waddr_group_name":
			groups[s.Keyword()] = s
		case "syn_proxy":
			synProxy = s
		case "proxy_protocol":
			proxyProtocol = s
		case "zone":
			c.warn(s, "LVS FullNAT's zones have no lbd equivalent (a service's local addresses are its own): ignored")
		case "vip_bind_dev":
			c.warn(s, "lbd answers for the VIPs on its client-facing ports (role client or both), bound to no device: dropped")
		case "establish_timeout":
			c.warn(s, "lbd's idle timeouts are every service's (timeouts: tcp, udp): dropped")
		case "bps", "limit_proportion":
			c.warn(s, "lbd does not limit a service's traffic: dropped")
		case "hash_target":
			c.warn(s, "lbd steers packets to its lcores by its own hash: dropped")
		case "src-range", "dst-range", "iif", "oif":
			c.warn(s, "a match's keyword (virtual_server match NAME, a SNAT rule in lbd) in a virtual server of an address: dropped")
		case "nat_mask":
			c.warn(s, "no lbd equivalent: dropped")
		case "expire_quiescent_conn":
			c.warn(s, "lbd keeps the connections of a server whose weight is 0 until they end: dropped")
		case "quic":
			quic = s
		default:
			c.warn(s, "unknown keyword: dropped")
		}
	}
	if svc.Hysteresis >= svc.QuorumWeight() {
		// keepalived then never loses the quorum but with no server left.
		c.warn(hysteresis, "%d is not below the quorum %d (lbd's rule): %d", svc.Hysteresis, svc.QuorumWeight(), svc.QuorumWeight()-1)
		svc.Hysteresis = svc.QuorumWeight() - 1
	}
	if port == 0 && svc.Persistence == 0 {
		c.warn(n, "a service of every port (port 0) needs persistence_timeout, as ipvsadm's: skipped")
		return
	}
	in := inherited{}.over(n.Block)
	c.flags(&svc, flags)
	if granularity != nil {
		c.granularity(&svc, vip, granularity)
	}

	if len(servers) == 0 {
		c.warn(n, "no real_server: keepalived ignores it; skipped")
		return
	}
	var checks []*conf.HealthCheck
	seen := map[netip.AddrPort]bool{}
	for _, s := range servers {
		rs, h, ok := c.realServer(s, vip, port, forward, weight, in)
		if !ok {
			continue
		}
		ap := netip.AddrPortFrom(rs.Addr(), uint16(rs.Port))
		if seen[ap] {
			c.warn(s, "%s is already a server of this virtual server: skipped", ap)
			continue
		}
		seen[ap] = true
		svc.Servers = append(svc.Servers, rs)
		checks = append(checks, h)
	}
	if len(svc.Servers) == 0 {
		c.warn(n, "no real_server left: skipped")
		return
	}
	if alpha != nil && enabled(alpha.Args()) && !slices.ContainsFunc(checks, func(h *conf.HealthCheck) bool { return h != nil }) {
		// keepalived's alpha, the checks' start_down (inherited): a
		// server without a check has nothing to pass.
		c.warn(alpha, "no real_server has a check to pass: dropped")
	}
	shared := checks[0] != nil
	for _, h := range checks[1:] {
		shared = shared && h != nil && reflect.DeepEqual(*h, *checks[0])
	}
	if shared {
		svc.Health = *checks[0]
	} else {
		for i, h := range checks {
			svc.Servers[i].Health = h
		}
	}
	if sorry != nil {
		c.sorry(&svc, vip, forward, sorry, sorryMethod)
	}
	if synProxy != nil {
		c.synProxy(&svc, synProxy)
	}
	if ops != nil {
		c.onePacket(&svc, ops)
	}
	if quic != nil {
		// DPVS's: a new flow goes to the server its QUIC connection ID
		// names, in DPVS's encoding, which lbd reads as it is.
		switch {
		case svc.Protocol != "udp":
			c.warn(quic, "QUIC runs over UDP: dropped on a %s service", svc.Protocol)
		case svc.Persistence != 0:
			c.warn(quic, "not with persistence_timeout (DPVS ignores it there too): dropped")
		default:
			svc.QUIC = true
		}
	}
	if proxyProtocol != nil {
		c.proxyProtocol(&svc, proxyProtocol)
	}
	// DPVS puts its TCP option address in every FullNAT TCP handshake,
	// for the toa module of servers that read it (ignored by others).
	svc.TOA = svc.Protocol == "tcp" && !svc.ProxyProtocol && slices.ContainsFunc(svc.Servers, isFullNAT)
	// And, by default (uoa_mode opp, uoa_max_trail 3 in dpvs.conf, which
	// this file does not show), its UDP option of address in the first
	// datagrams of every FullNAT UDP connection, which only servers with
	// its uoa module take.
	if svc.Protocol == "udp" && slices.ContainsFunc(svc.Servers, isFullNAT) {
		svc.UOA = "opp"
		c.warn(n, "uoa: opp as DPVS's default (servers need its uoa module): set uoa: ipo if dpvs.conf says uoa_mode ipo, remove it if uoa_max_trail 0")
	}
	for _, kw := range []string{"daddr_group_name", "waddr_group_name"} {
		if s := groups[kw]; s != nil {
			list := &svc.Blocklist
			if kw == "waddr_group_name" {
				list = &svc.Allowlist
			}
			*list = c.clientList(s, vip)
		}
	}
	p := pending{svc: svc, origin: origin, n: n}
	if s := groups["laddr_group_name"]; s != nil {
		name := firstArg(s.Args())
		switch {
		case c.addrGroups["local_address_group "+name] == nil:
			c.warn(s, "no local_address_group %s: dropped", name)
		case slices.ContainsFunc(svc.Servers, isFullNAT):
			p.laddr = name
		}
		// Without fullnat servers DPVS leaves them unused too.
	}
	for _, q := range c.pending {
		if q.svc.Protocol == svc.Protocol && q.svc.VIP == svc.VIP && q.svc.Port == svc.Port {
			c.warn(n, "%s %s is already the %s: skipped", svc.Protocol, netip.AddrPortFrom(vip, uint16(port)), q.origin)
			return
		}
	}
	c.pending = append(c.pending, p)
}

func isFullNAT(r conf.RealServer) bool { return r.Forward == "fullnat" }

// synProxy reads syn_proxy: lbd's synproxy, which answers SYNs for tcp
// services whose servers reply through it.
func (c *converter) synProxy(svc *conf.Service, s *Node) {
	if svc.Protocol != "tcp" {
		c.warn(s, "lbd's synproxy is for tcp services: dropped")
		return
	}
	for _, r := range svc.Servers {
		if r.Forward == "dr" || r.Forward == "tun" {
			c.warn(s, "lbd's synproxy is for nat and fullnat servers (a %s server's replies bypass it): dropped", r.Forward)
			return
		}
	}
	svc.SynProxy = true
}

// proxyProtocol reads DPVS's proxy_protocol: lbd writes version 2 to
// fullnat servers.
func (c *converter) proxyProtocol(svc *conf.Service, s *Node) {
	switch v := firstArg(s.Args()); {
	case v == "disable" || v == "none" || v == "":
	case v != "v2":
		c.warn(s, "lbd writes the PROXY protocol's version 2 only, not %s: dropped", v)
	case svc.Protocol != "tcp":
		c.warn(s, "lbd writes the PROXY protocol on tcp services: dropped")
	case !slices.ContainsFunc(svc.Servers, isFullNAT):
		c.warn(s, "lbd writes the PROXY protocol to fullnat servers only: dropped")
	default:
		svc.ProxyProtocol = true
	}
}

// clientList reads daddr_group_name or waddr_group_name: the group's
// addresses in the VIP's family.
func (c *converter) clientList(s *Node, vip netip.Addr) []string {
	kind := addrGroupOf[s.Keyword()]
	name := firstArg(s.Args())
	g := c.addrGroups[kind+" "+name]
	if g == nil {
		c.warn(s, "no %s %s: dropped", kind, name)
		return nil
	}
	var out []string
	other := 0
	for _, a := range g.addrs {
		if a.Is4() != vip.Is4() {
			other++
			continue
		}
		out = append(out, a.String())
	}
	if other > 0 {
		c.warn(s, "lbd's lists hold addresses in the VIP's family (%s): %d of %s %s's dropped", vip, other, kind, name)
	}
	return out
}

// localAddresses gives the fullnat services their local_address_group's
// addresses, and keeps those that have some. lbd's pools never overlap
// (a local port belongs to one connection): a group that serves several
// services is split among them, in order, each getting an equal share.
func (c *converter) localAddresses() {
	var names []string
	users := map[string][]int{}
	for i, p := range c.pending {
		if p.laddr == "" {
			continue
		}
		if users[p.laddr] == nil {
			names = append(names, p.laddr)
		}
		users[p.laddr] = append(users[p.laddr], i)
	}
	taken := map[netip.Addr]string{}
	for _, name := range names {
		g := c.addrGroups["local_address_group "+name]
		var addrs []netip.Addr
		for _, a := range g.addrs {
			if other, ok := taken[a]; ok {
				c.warn(g.n, "%s is local_address_group %s's too, and lbd's local addresses are one service's: left to it", a, other)
				continue
			}
			taken[a] = name
			addrs = append(addrs, a)
		}
		k := len(users[name])
		if k > 1 {
			c.warn(g.n, "%d services use it, and a local address of lbd's serves one service (pools never overlap): its %d address(es) split among them", k, len(addrs))
		}
		// IPv4 addresses go to every user (an IPv6 service's for its
		// NAT64 servers), IPv6 ones to the IPv6 services (FNAT66).
		var v4, v6 []netip.Addr
		for _, a := range addrs {
			if a.Is4() {
				v4 = append(v4, a)
			} else {
				v6 = append(v6, a)
			}
		}
		six := slices.DeleteFunc(slices.Clone(users[name]), func(i int) bool { return !c.pending[i].svc.VIPAddr().Is6() })
		if len(v6) > 0 && len(six) == 0 {
			c.warn(g.n, "no IPv6 service uses it: its %d IPv6 address(es) dropped", len(v6))
		}
		c.splitLocalAddresses(v4, users[name])
		c.splitLocalAddresses(v6, six)
	}
	for i := range c.pending {
		c.dropFullNATWithoutLocal(&c.pending[i])
	}
	for _, p := range c.pending {
		if len(p.svc.LocalAddresses) == 0 && slices.ContainsFunc(p.svc.Servers, isFullNAT) {
			// lbd refuses fullnat servers without local addresses: the
			// output must load as it is.
			ap := netip.AddrPortFrom(p.svc.VIPAddr(), uint16(p.svc.Port))
			if p.laddr == "" {
				c.warn(p.n, "%s %s: lbd needs local_addresses for fullnat servers (laddr_group_name): skipped", p.svc.Protocol, ap)
			} else {
				c.warn(p.n, "%s %s: no address of local_address_group %s is left for it (lbd needs local_addresses for fullnat servers): skipped", p.svc.Protocol, ap, p.laddr)
			}
			continue
		}
		c.res.Services = append(c.res.Services, p.svc)
		c.res.Origins = append(c.res.Origins, p.origin)
	}
}

// splitLocalAddresses gives services (pending indices) equal shares of
// addrs, in order; rounded up: with fewer addresses than services, the
// first services get one each.
func (c *converter) splitLocalAddresses(addrs []netip.Addr, services []int) {
	n, k := len(addrs), len(services)
	for j, i := range services {
		for _, a := range addrs[(j*n+k-1)/k : ((j+1)*n+k-1)/k] {
			c.pending[i].svc.LocalAddresses = append(c.pending[i].svc.LocalAddresses, a.String())
		}
	}
}

// dropFullNATWithoutLocal drops the fullnat servers of a service that
// has local addresses, but none of the server's family (lbd refuses
// them); one without any is skipped whole by the caller.
func (c *converter) dropFullNATWithoutLocal(p *pending) {
	if len(p.svc.LocalAddresses) == 0 {
		return
	}
	has := map[bool]bool{}
	for _, l := range p.svc.LocalAddresses {
		has[netip.MustParseAddr(l).Is6()] = true
	}
	p.svc.Servers = slices.DeleteFunc(p.svc.Servers, func(r conf.RealServer) bool {
		a, err := netip.ParseAddr(r.Address)
		if err != nil || !isFullNAT(r) || has[a.Is6()] {
			return false
		}
		c.warn(p.n, "%s: fullnat server %s needs a local address of its family, and the service's local_address_group gave it none: skipped", p.svc.VIP, a)
		return true
	})
}

// method reads lb_kind or lvs_method: the forward of its servers.
func (c *converter) method(s *Node) (string, bool) {
	a := s.Args()
	if len(a) == 0 {
		c.warn(s, "no method: dropped")
		return "", false
	}
	var f string
	switch strings.ToUpper(a[0]) {
	case "NAT":
		f = "nat"
	case "DR":
		f = "dr"
	case "TUN":
		f = "tun"
	case "FNAT":
		f = "fullnat" // DPVS's and LVS FullNAT's
	default:
		c.warn(s, "%q is not NAT, DR, TUN or FNAT: dropped", a[0])
		return "", false
	}
	for i := 1; i+1 < len(a); i++ {
		if a[i] == "type" && a[i+1] != "ipip" {
			c.warn(s, "lbd tunnels in IPIP only, not %s: tun (ipip)", a[i+1])
		}
	}
	return f, true
}

// maxQuorum is lbd's largest quorum and hysteresis (services[].quorum).
const maxQuorum = 1000000

// count reads s's one argument, a whole number what in lo..hi; out of
// range it is clamped, with a warning.
func (c *converter) count(s *Node, what string, lo, hi int) (int, bool) {
	n, err := strconv.Atoi(firstArg(s.Args()))
	switch {
	case err != nil || len(s.Args()) != 1:
		c.warn(s, "%q is not a %s: dropped", strings.Join(s.Args(), " "), what)
		return 0, false
	case n < lo:
		c.warn(s, "%d is less than lbd's %d: %d", n, lo, lo)
		return lo, true
	case n > hi:
		c.warn(s, "%d is more than lbd's %d: %d", n, hi, hi)
		return hi, true
	}
	return n, true
}

func (c *converter) weight(s *Node) (int, bool) {
	a := s.Args()
	w, err := strconv.ParseUint(firstArg(a), 10, 32)
	switch {
	case err != nil:
		c.warn(s, "%q is not a weight: dropped", firstArg(a))
		return 0, false
	case w > maxWeight:
		c.warn(s, "%d is more than lbd's %d: %d", w, maxWeight, maxWeight)
		return maxWeight, true
	}
	return int(w), true
}

// flags turns the scheduler flag keywords into the sched_flags of an sh
// or mh service: flag-1 is IPVS's fallback flag, flag-2 its port flag.
func (c *converter) flags(svc *conf.Service, flags []*Node) {
	for _, s := range flags {
		var what string
		switch s.Keyword() {
		case "flag-1", "sh-fallback", "mh-fallback":
			what = "fallback"
		case "flag-2", "sh-port", "mh-port":
			what = "port"
		default:
			c.warn(s, "no scheduler of lbd's uses IPVS's third flag: dropped")
			continue
		}
		if svc.Scheduler != "sh" && svc.Scheduler != "mh" {
			c.warn(s, "only the sh and mh schedulers take flags, not %s: dropped", svc.Scheduler)
			continue
		}
		f := svc.Scheduler + "-" + what
		if !slices.Contains(svc.SchedFlags, f) {
			svc.SchedFlags = append(svc.SchedFlags, f)
		}
	}
}

// granularity reads persistence_granularity: an IPv4 netmask, an IPv6
// prefix length.
func (c *converter) granularity(svc *conf.Service, vip netip.Addr, s *Node) {
	v := firstArg(s.Args())
	if vip.Is6() {
		bits, err := strconv.Atoi(v)
		if err != nil || bits < 1 || bits > 128 {
			c.warn(s, "%q is not an IPv6 prefix length in 1..128: dropped", v)
			return
		}
		if bits != 128 {
			svc.PersistencePrefix = bits
		}
		return
	}
	m, err := netip.ParseAddr(v)
	if err != nil || !m.Is4() {
		c.warn(s, "%q is not an IPv4 netmask: dropped", v)
		return
	}
	b := m.As4()
	mask := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if mask != 0 && (^mask)&(^mask+1) != 0 {
		c.warn(s, "%s is not a contiguous netmask, which lbd wants: dropped", v)
		return
	}
	svc.Netmask = m.String()
}

// sorry reads sorry_server: lbd reaches it by nat, in the VIP's family,
// and on the service's port for dr and tun (as keepalived resets it).
func (c *converter) sorry(svc *conf.Service, vip netip.Addr, forward string, s, method *Node) {
	a := s.Args()
	addr, err := netip.ParseAddr(firstArg(a))
	if err != nil || addr.Zone() != "" {
		c.warn(s, "%q is not an IP address: dropped", firstArg(a))
		return
	}
	addr = addr.Unmap()
	if addr.Is4() != vip.Is4() {
		c.warn(s, "%s is not in the VIP's family, as lbd reaches it by nat: dropped", addr)
		return
	}
	if method != nil {
		if f, ok := c.method(method); ok {
			forward = f
		}
	}
	port := svc.Port
	if len(a) >= 2 && !isZeros(a[1]) && (forward == "nat" || forward == "fullnat") {
		p, ok := parsePort(a[1])
		if !ok {
			c.warn(s, "%q is not a port in 1..65535: dropped", a[1])
			return
		}
		port = p
	}
	if forward != "nat" {
		at := s
		if method != nil {
			at = method
		}
		c.warn(at, "lbd reaches the sorry server by nat, not %s: its replies must come back through lbd", forward)
	}
	svc.SorryServer = netip.AddrPortFrom(addr, uint16(port)).String()
}

// onePacket converts ops: lbd's one_packet, for udp services whose
// servers all answer the clients themselves.
func (c *converter) onePacket(svc *conf.Service, n *Node) {
	switch {
	case svc.Protocol != "udp":
		c.warn(n, "lbd schedules every datagram on its own for udp services only: dropped")
	case slices.ContainsFunc(svc.Servers, func(r conf.RealServer) bool { return r.Forward != "dr" && r.Forward != "tun" }):
		c.warn(n, "lbd's one-packet scheduling keeps no connection, so its servers must be dr or tun (a nat server's answers could not be translated back): dropped")
	default:
		svc.OnePacket = true
	}
}

// realServer converts a real_server and its check (nil without one).
func (c *converter) realServer(n *Node, vip netip.Addr, vport int, forward string, weight int, in inherited) (conf.RealServer, *conf.HealthCheck, bool) {
	a := n.Args()
	if len(a) == 0 || len(a) > 2 {
		c.warn(n, "%q is not an address and a port: skipped", strings.Join(a, " "))
		return conf.RealServer{}, nil, false
	}
	addr, err := netip.ParseAddr(a[0])
	if err != nil || addr.Zone() != "" {
		c.warn(n, "%q is not an IP address: skipped", a[0])
		return conf.RealServer{}, nil, false
	}
	addr = addr.Unmap()
	port := vport
	if len(a) == 2 && !isZeros(a[1]) {
		p, ok := parsePort(a[1])
		if !ok {
			c.warn(n, "%q is not a port in 1..65535: skipped", a[1])
			return conf.RealServer{}, nil, false
		}
		port = p
		if vport == 0 {
			c.warn(n, "a service of every port sends each connection to the client's port, as IPVS: port %d dropped", p)
			port = 0
		}
	}
	rs := conf.RealServer{Address: addr.String(), Port: port, Weight: weight, Forward: forward}
	var checks []*Node
	var lower *Node
	for _, s := range n.Block {
		args := s.Args()
		switch s.Keyword() {
		case "weight":
			if w, ok := c.weight(s); ok {
				rs.Weight = w
			}
		case "lvs_method":
			if f, ok := c.method(s); ok {
				rs.Forward = f
			}
		case "uthreshold":
			if u, err := strconv.ParseUint(firstArg(args), 10, 32); err != nil || u > maxUpper {
				c.warn(s, "%q is not a connection count in 0..%d: dropped", firstArg(args), maxUpper)
			} else {
				rs.Upper = int(u)
			}
		case "lthreshold":
			if l, err := strconv.ParseUint(firstArg(args), 10, 32); err != nil || l > maxUpper {
				c.warn(s, "%q is not a connection count in 0..%d: dropped", firstArg(args), maxUpper)
			} else {
				rs.Lower, lower = int(l), s
			}
		case "notify_up", "notify_down":
			c.warn(s, "lbd runs no scripts when a server changes state (its events say so): dropped")
		case "smtp_alert":
			if enabled(args) {
				c.warn(s, "lbd sends no mail (its events and metrics say when a server goes down): dropped")
			}
		case "delay_loop", "connect_timeout", "retry", "delay_before_retry", "alpha", "virtualhost":
			// Inherited by the check, below.
		case "warmup", "inhibit_on_failure", "snmp_name":
		case "TCP_CHECK", "HTTP_GET", "SSL_GET", "UDP_CHECK", "PING_CHECK", "MISC_CHECK",
			"DNS_CHECK", "SMTP_CHECK", "BFD_CHECK", "FILE_CHECK":
			checks = append(checks, s)
		default:
			c.warn(s, "unknown keyword: dropped")
		}
	}
	switch {
	case addr.Is4() && vip.Is6() && rs.Forward == "fullnat":
		// NAT64, from IPv4 local addresses.
	case addr.Is4() != vip.Is4():
		c.warn(n, "%s is not in the family of the VIP %s: skipped", addr, vip)
		return conf.RealServer{}, nil, false
	}
	if rs.Forward == "dr" || rs.Forward == "tun" {
		// dr and tun leave the port as it is: keepalived resets the
		// server's to the service's, but its check probes the one written.
		rs.Port = vport
	}
	// IPVS uses lthreshold only with a uthreshold, which lbd checks.
	if rs.Upper != 0 && rs.Lower > rs.Upper {
		c.warn(lower, "%d is above uthreshold %d: dropped", rs.Lower, rs.Upper)
	}
	if rs.Upper == 0 || rs.Lower > rs.Upper {
		rs.Lower = 0
	}

	in = in.over(n.Block)
	type converted struct {
		h conf.HealthCheck
		n *Node
	}
	var done []converted
	for _, s := range checks {
		t := target{vip: vip, vport: vport, addr: addr, port: port, forward: rs.Forward}
		if h, ok := c.check(s, t, in); ok {
			done = append(done, converted{h, s})
		}
	}
	// A bfd check, polled every 200ms, is the main check only of a server
	// without another: the others' probes are not sent that often.
	slices.SortStableFunc(done, func(a, b converted) int {
		aBFD, bBFD := a.h.Type == conf.HealthBFD, b.h.Type == conf.HealthBFD
		switch {
		case aBFD == bBFD:
			return 0
		case aBFD:
			return 1
		}
		return -1
	})
	var kept *conf.HealthCheck
	var keptAt *Node
	for _, d := range done {
		if kept == nil {
			kept, keptAt = &d.h, d.n
			continue
		}
		kept.Also = append(kept.Also, c.alsoCheck(d.n, keptAt, *kept, d.h))
	}
	if kept != nil {
		c.fitAlso(keptAt, kept)
	}
	return rs, kept, true
}

// alsoCheck makes h, a server's check after its first (keepalived wants
// every checker of a server up), one of the first's also checks: its type,
// its type's settings and its timeout; its timing and the server's
// settings are the first's.
func (c *converter) alsoCheck(n, first *Node, main, h conf.HealthCheck) conf.HealthCheck {
	switch {
	case h.Type == conf.HealthBFD && main.Type != conf.HealthBFD:
		// keepalived acts on the session's state at once.
		c.warn(n, "lbd reads the session's state with the server's other checks, every %s (the %s's, line %d): not at once", fmtDuration(main.Interval), first.Keyword(), first.Pos.Line)
	case h.Interval != main.Interval || h.Fall != main.Fall || h.RetryInterval != main.RetryInterval:
		c.warn(n, "lbd probes a server's checks together, at the %s's (line %d) delay_loop, retry and delay_before_retry", first.Keyword(), first.Pos.Line)
	}
	if h.WeightFromExit {
		c.warn(n, "misc_dynamic: only a server's first check sets its weight in lbd: dropped")
	}
	d := conf.DefaultHealthCheck()
	h.Interval, h.Rise, h.Fall, h.RetryInterval = d.Interval, d.Rise, d.Fall, d.RetryInterval
	h.StartDown, h.WeightFromExit, h.OnFailure, h.SlowStart, h.Passive = false, false, d.OnFailure, 0, false
	return h
}

// fitAlso keeps a check and its also checks, which lbd probes one after
// the other, within the interval: keepalived runs them side by side.
func (c *converter) fitAlso(n *Node, h *conf.HealthCheck) {
	if len(h.Also) == 0 || h.ProbeTimeout() < h.Interval {
		return
	}
	each := (h.Interval / time.Duration(len(h.Also)+2)).Truncate(10 * time.Millisecond)
	c.warn(n, "lbd probes a server's %d checks one after the other within the %s interval: each times out after %s", len(h.Also)+1, fmtDuration(h.Interval), fmtDuration(each))
	h.Timeout = each
	for i := range h.Also {
		h.Also[i].Timeout = each
	}
}

// target is the server a check probes.
type target struct {
	vip, addr   netip.Addr
	vport, port int // port as written (a dr server's check probes it)
	forward     string
}

// check converts one check block; false when lbd cannot run it.
func (c *converter) check(n *Node, t target, in inherited) (conf.HealthCheck, bool) {
	h := conf.DefaultHealthCheck()
	h.Rise = 1 // one success brings a keepalived server back
	retry := 1
	switch n.Keyword() {
	case "TCP_CHECK":
		h.Type = conf.HealthTCP
	case "HTTP_GET":
		h.Type = conf.HealthHTTP
	case "SSL_GET":
		h.Type = conf.HealthHTTPS
		c.sslUsed = true
	case "UDP_CHECK":
		h.Type = conf.HealthUDP
	case "PING_CHECK":
		h.Type = conf.HealthICMP
	case "MISC_CHECK":
		h.Type = conf.HealthExec
		retry = 0
	case "DNS_CHECK":
		h.Type = conf.HealthDNS
	case "SMTP_CHECK":
		h.Type = conf.HealthSMTP
	case "BFD_CHECK":
		return c.bfdCheck(n, t, in)
	case "FILE_CHECK":
		return c.fileCheck(n)
	}
	block := n.Block
	if h.Type == conf.HealthSMTP {
		block = c.smtpHost(block)
	}
	in = in.over(block)
	if h.Type == conf.HealthExec {
		in.timeout = nil // a script has misc_timeout, not connect_timeout
	}
	var urls []*Node
	var connectIP, sni, send, expect *Node
	var command []string
	for _, s := range block {
		a := s.Args()
		switch s.Keyword() {
		case "connect_port":
			p, ok := parsePort(firstArg(a))
			if !ok {
				c.warn(s, "%q is not a port in 1..65535: dropped", firstArg(a))
				break
			}
			h.Port = p
		case "connect_ip":
			connectIP = s
		case "bindto":
			src, err := netip.ParseAddr(firstArg(a))
			switch {
			case err != nil:
				c.warn(s, "%q is not an IP address: dropped", firstArg(a))
			case !src.Unmap().Is4():
				c.warn(s, "lbd's probes take an IPv4 source only: dropped, the kernel chooses")
			default:
				h.Source = src.Unmap().String()
			}
		case "bind_port", "bind_if", "fwmark":
			c.warn(s, "lbd's probes cannot set it: dropped")
		case "nb_get_retry", "nb_sock_retry": // nb_sock_retry: LVS FullNAT's TCP_CHECK
			in.retry = s
		case "type": // DNS_CHECK's query type
			if typ := strings.ToUpper(firstArg(a)); h.Type == conf.HealthDNS && slices.Contains(conf.DNSTypes, typ) {
				h.DNSType = typ
			} else {
				c.warn(s, "%q is not a query type lbd asks (%s): SOA", firstArg(a), strings.Join(conf.DNSTypes, ", "))
			}
		case "name": // DNS_CHECK's query name
			if h.Type == conf.HealthDNS && firstArg(a) != "" {
				h.DNSName = firstArg(a)
			}
		case "misc_timeout":
			in.timeout = s
		case "helo_name":
			if conf.CheckHeloName("helo_name", firstArg(a)) != nil {
				c.warn(s, "%q is not a domain name: dropped, lbd says its host's name", firstArg(a))
			} else {
				h.HeloName = firstArg(a)
			}

		case "url":
			urls = append(urls, s)
		case "sni_name":
			sni = s
		case "payload":
			send = s
		case "require_reply":
			expect = s
		case "min_reply_length", "max_reply_length":
			c.warn(s, "lbd's udp check does not measure the reply: dropped")
		case "misc_path":
			command = c.argv(s)
		case "misc_dynamic":
			h.WeightFromExit = h.Type == conf.HealthExec
		case "user":
			c.warn(s, "lbd runs the command as its own user: dropped")
		case "connect_timeout", "retry", "delay_loop", "delay_before_retry", "alpha", "virtualhost":
			// Read through in.
		case "warmup", "log_all_failures", "http_protocol", "fast_recovery", "enable_sni", "tls_compliant":
		default:
			c.warn(s, "unknown keyword: dropped")
		}
	}

	h.Interval = c.interval(in.delayLoop)
	h.Timeout = c.timeout(n, in.timeout, h.Interval)
	if in.retry != nil {
		r, err := strconv.ParseUint(firstArg(in.retry.Args()), 10, 32)
		switch {
		case err != nil:
			c.warn(in.retry, "%q is not a number: dropped", firstArg(in.retry.Args()))
		case r+1 > conf.MaxHealthCount:
			c.warn(in.retry, "lbd takes a server out after at most %d failures: fall %d", conf.MaxHealthCount, conf.MaxHealthCount)
			retry = conf.MaxHealthCount - 1
		default:
			retry = int(r)
		}
	}
	// keepalived's retry counts the probes after the first failure, which
	// come delay_before_retry apart (1s by default).
	h.Fall = retry + 1
	if h.Fall > 1 {
		h.RetryInterval = time.Second
		if in.retryDelay != nil {
			if d, ok := c.seconds(in.retryDelay); ok {
				h.RetryInterval = min(max(d, conf.MinHealthInterval), conf.MaxHealthInterval)
			}
		}
	}
	h.StartDown = in.alpha != nil && enabled(in.alpha.Args())

	if connectIP != nil {
		ip, err := netip.ParseAddr(firstArg(connectIP.Args()))
		switch {
		case err != nil:
			c.warn(connectIP, "%q is not an IP address: dropped", firstArg(connectIP.Args()))
		case ip.Unmap() == t.addr:
		case ip.Unmap() == t.vip && (t.forward == "dr" || t.forward == "tun"):
			h.Target = conf.HealthTargetVIP
		default:
			c.warn(connectIP, "lbd probes the server's address (or, for dr and tun, the VIP): dropped")
		}
	}
	// Port 0 probes the server's port, which is the service's for dr and
	// tun: keepalived probes the one written.
	probed := t.port
	if t.forward == "dr" || t.forward == "tun" {
		probed = t.vport
	}
	switch {
	case h.Port == probed:
		h.Port = 0
	case h.Port == 0 && probed != t.port:
		h.Port = t.port
	}
	if h.Port == 0 && t.port == 0 && h.Type != conf.HealthICMP && h.Type != conf.HealthExec {
		c.warn(n, "a server of a service of every port has no port to probe without connect_port: the server is left unchecked (type none)")
		return h, false
	}

	switch h.Type {
	case conf.HealthHTTP, conf.HealthHTTPS:
		if !c.http(&h, n, urls, in.host) {
			return h, false
		}
		if sni != nil && firstArg(sni.Args()) != h.Host {
			c.warn(sni, "lbd's https checks send the host (%q, \"\" is the address) as the TLS server name: dropped", h.Host)
		}
	case conf.HealthUDP:
		return h, c.udp(&h, n, send, expect)
	case conf.HealthExec:
		if command == nil {
			c.warn(n, "no misc_path: the server is left unchecked (type none)")
			return h, false
		}
		if !filepath.IsAbs(command[0]) {
			c.warn(n, "lbd runs a command by its absolute path, not %q: the server is left unchecked (type none)", command[0])
			return h, false
		}
		h.Command = command
	}
	return h, true
}

// interval reads delay_loop (keepalived's default 60s) within lbd's bounds.
func (c *converter) interval(at *Node) time.Duration {
	if at == nil {
		return defaultDelayLoop
	}
	d, ok := c.seconds(at)
	switch {
	case !ok:
		return defaultDelayLoop
	case d < conf.MinHealthInterval:
		c.warn(at, "lbd probes at most every %s: %s", fmtDuration(conf.MinHealthInterval), fmtDuration(conf.MinHealthInterval))
		return conf.MinHealthInterval
	case d > conf.MaxHealthInterval:
		c.warn(at, "lbd probes at least every %s: %s", fmtDuration(conf.MaxHealthInterval), fmtDuration(conf.MaxHealthInterval))
		return conf.MaxHealthInterval
	}
	return d
}

// timeout reads connect_timeout or misc_timeout (keepalived's defaults:
// 5s, and for a script the interval), less than the interval as lbd wants.
func (c *converter) timeout(n, at *Node, interval time.Duration) time.Duration {
	d := defaultTimeout
	if n.Keyword() == "MISC_CHECK" {
		d = interval
	}
	if at != nil {
		if at.Keyword() == "misc_timeout" {
			s, err := strconv.ParseUint(firstArg(at.Args()), 10, 32)
			if err == nil && s > 0 {
				d = time.Duration(s) * time.Second
			} else {
				c.warn(at, "%q is not a number of seconds: dropped", firstArg(at.Args()))
			}
		} else if v, ok := c.seconds(at); ok {
			d = v
		}
	}
	if d < interval {
		if d < conf.MinHealthTimeout {
			c.warn(at, "lbd waits at least %s: %s", fmtDuration(conf.MinHealthTimeout), fmtDuration(conf.MinHealthTimeout))
			d = conf.MinHealthTimeout
		}
		return d
	}
	less := interval - min(interval/10, time.Second)
	switch {
	case at != nil:
		c.warn(at, "lbd wants a timeout less than the interval (delay_loop %s): %s", fmtDuration(interval), fmtDuration(less))
	case n.Keyword() != "MISC_CHECK":
		c.warn(n, "keepalived's connect_timeout, 5s, is not less than delay_loop %s, as lbd wants: timeout %s", fmtDuration(interval), fmtDuration(less))
	}
	return less
}

// http fills in an HTTP check from its url blocks, each of which must
// pass as keepalived wants: the first url's path, status codes, digest and
// regex are the check's, every other url is one of its extra_urls with
// its own.
func (c *converter) http(h *conf.HealthCheck, n *Node, urls []*Node, hostAt *Node) bool {
	first := true
	for _, u := range urls {
		var path, status, host, digest *Node
		var x conf.HealthURL
		for _, s := range u.Block {
			a := s.Args()
			switch s.Keyword() {
			case "path":
				path = s
			case "status_code":
				status = s
			case "virtualhost":
				host = s
			case "digest":
				digest = s
			case "regex":
				switch {
				case len(a) == 1 && !strings.ContainsAny(a[0], `\.^$|?*+()[]{}`):
					x.ExpectBody = a[0]
				case len(a) == 1 && compiles(a[0]):
					x.ExpectRegex = a[0]
				default:
					c.warn(s, "not a regular expression Go's RE2 takes (PCRE's backreferences and lookarounds are not): dropped")
				}
			case "regex_no_match":
				c.warn(s, "lbd's http checks want the body to contain expect_body, never not to: dropped")
			case "regex_options", "regex_stack", "regex_min_offset", "regex_max_offset", "tls_compliant":
			default:
				c.warn(s, "unknown keyword: dropped")
			}
		}
		if path == nil {
			c.warn(u, "no path: keepalived ignores the url")
			continue
		}
		x.Path = firstArg(path.Args())
		if !strings.HasPrefix(x.Path, "/") || strings.ContainsAny(x.Path, " \t\r\n") {
			if !first {
				c.warn(path, "%q is not a request path: the url is dropped", x.Path)
				continue
			}
			c.warn(path, "%q is not a request path: / instead", x.Path)
			x.Path = "/"
		}
		if digest != nil {
			d := firstArg(digest.Args())
			if b, err := hex.DecodeString(d); err == nil && len(b) == md5.Size {
				x.ExpectDigest = strings.ToLower(d)
			} else {
				c.warn(digest, "%q is not an MD5 digest (32 hex digits): dropped", d)
			}
		}
		x.ExpectStatus = defaultHTTPStatus
		if status != nil {
			var codes [600]bool
			if addStatus(&codes, strings.Join(status.Args(), ",")) {
				x.ExpectStatus = statusRanges(&codes)
			} else {
				c.warn(status, "%q is not a list of status codes and ranges in 100..599: %s", strings.Join(status.Args(), " "), defaultHTTPStatus)
			}
		}
		if first {
			first = false
			h.Path, h.ExpectStatus, h.ExpectBody, h.ExpectRegex, h.ExpectDigest = x.Path, x.ExpectStatus, x.ExpectBody, x.ExpectRegex, x.ExpectDigest
			if host != nil {
				hostAt = host
			}
			continue
		}
		if host != nil && (hostAt == nil || firstArg(host.Args()) != firstArg(hostAt.Args())) {
			c.warn(host, "lbd's check sends one Host header, the first url's or the check's: dropped")
		}
		if x.ExpectStatus == h.ExpectStatus {
			x.ExpectStatus = "" // the check's
		}
		h.ExtraURLs = append(h.ExtraURLs, x)
	}
	if first {
		c.warn(n, "no url with a path: keepalived ignores the check; the server is left unchecked (type none)")
		return false
	}
	if hostAt != nil {
		v := firstArg(hostAt.Args())
		if v == "" || strings.ContainsAny(v, " \t\r\n/") {
			c.warn(hostAt, "%q is not a host name: dropped", v)
		} else {
			h.Host = v
		}
	}
	return true
}

// compiles reports whether a keepalived regex is one Go's regexp takes.
func compiles(re string) bool {
	_, err := regexp.Compile(re)
	return err == nil
}

// udp fills in a UDP check: lbd sends payload and, with require_reply,
// looks for its bytes in the reply.
func (c *converter) udp(h *conf.HealthCheck, n, send, expect *Node) bool {
	if send == nil {
		c.warn(n, "no payload (keepalived sends random bytes): lbd's udp check needs one to send; the server is left unchecked (type none)")
		return false
	}
	payload, wild, ok := hexBytes(strings.Join(send.Args(), " "))
	if !ok || wild || !utf8.Valid(payload) {
		c.warn(send, "lbd sends text (UTF-8) and this is not: the server is left unchecked (type none)")
		return false
	}
	h.Send = string(payload)
	if expect == nil {
		c.warn(n, "keepalived's check passes when nothing answers (only an ICMP port unreachable fails it); lbd's fails without a reply: a server that never answers will be taken out")
		return true
	}
	if len(expect.Args()) == 0 {
		return true
	}
	reply, wild, ok := hexBytes(strings.Join(expect.Args(), " "))
	switch {
	case !ok || !utf8.Valid(reply):
		c.warn(expect, "lbd looks for text (UTF-8) in the reply and this is not: any reply passes")
	case wild:
		c.warn(expect, "lbd looks for the exact bytes in the reply, without X wildcards: any reply passes")
	default:
		// keepalived compares the reply's start; lbd looks anywhere in it.
		h.Expect = string(reply)
	}
	return true
}

// smtpHost flattens an SMTP_CHECK's host blocks, keepalived's older way
// to say where it connects: the first one's settings are the check's.
// lbd probes one address a check; the other hosts are dropped.
func (c *converter) smtpHost(block []*Node) []*Node {
	var out []*Node
	var host *Node
	for _, s := range block {
		switch {
		case s.Keyword() != "host":
			out = append(out, s)
		case host != nil:
			c.warn(s, "lbd probes one address a check, the host at line %d: dropped", host.Pos.Line)
		default:
			host = s
			out = append(out, s.Block...)
		}
	}
	return out
}

// argv splits misc_path as keepalived does: its first word (quotes
// removed already) split again at spaces, with '...' and "..." quoting and
// backslash escapes.
func (c *converter) argv(s *Node) []string {
	var out []string
	var b strings.Builder
	in := false
	var quote byte
	line := firstArg(s.Args())
	if strings.HasPrefix(line, "'") {
		// keepalived reads '...' here too; the grammar only "...".
		line = strings.Join(s.Args(), " ")
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == '\\' && i+1 < len(line):
			i++
			b.WriteByte(line[i])
			in = true
		case quote != 0 && ch == quote:
			quote = 0
		case quote != 0:
			b.WriteByte(ch)
		case ch == '\'' || ch == '"':
			quote = ch
			in = true
		case ch == ' ' || ch == '\t':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(ch)
			in = true
		}
	}
	if quote != 0 {
		c.warn(s, "unterminated quote: the server is left unchecked (type none)")
		return nil
	}
	if in {
		out = append(out, b.String())
	}
	if len(out) == 0 {
		return nil
	}
	if len(s.Args()) > 1 && !strings.HasPrefix(firstArg(s.Args()), "'") {
		c.warn(s, "keepalived runs %s without the words after it, and so does lbd: quote the whole command to pass them", out[0])
	}
	return out
}

// seconds reads a keepalived timer: seconds, with up to six decimals.
func (c *converter) seconds(s *Node) (time.Duration, bool) {
	v := firstArg(s.Args())
	whole, frac, _ := strings.Cut(v, ".")
	w, err := strconv.ParseUint(whole, 10, 32)
	if err != nil || len(frac) > 6 || strings.Trim(frac, "0123456789") != "" {
		c.warn(s, "%q is not a number of seconds: dropped", v)
		return 0, false
	}
	d := time.Duration(w) * time.Second
	if frac != "" {
		f, _ := strconv.Atoi(frac + strings.Repeat("0", 6-len(frac)))
		d += time.Duration(f) * time.Microsecond
	}
	if d == 0 {
		c.warn(s, "0 is not a time: dropped")
		return 0, false
	}
	return d, true
}

// hexBytes reads keepalived's hex strings: pairs of digits, a lone digit
// before a space or the end is one byte, spaces between; wild reports X
// (any four bits) digits.
func hexBytes(s string) (out []byte, wild, ok bool) {
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		hi, w1, ok1 := hexDigit(s[i])
		if !ok1 {
			return nil, false, false
		}
		i++
		v := hi
		if i < len(s) && s[i] != ' ' && s[i] != '\t' {
			lo, w2, ok2 := hexDigit(s[i])
			if !ok2 {
				return nil, false, false
			}
			i++
			v = hi<<4 | lo
			wild = wild || w2
		}
		wild = wild || w1
		out = append(out, v)
	}
	return out, wild, len(out) > 0
}

func hexDigit(c byte) (v byte, wild, ok bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', false, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, false, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, false, true
	case c == 'x' || c == 'X':
		return 0, true, true
	}
	return 0, false, false
}

// addStatus marks the codes of "200,301-302" (keepalived writes them
// space-separated: joined with commas here).
func addStatus(codes *[600]bool, s string) bool {
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return false
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				return false
			}
		}
		if a < 100 || b > 599 || a > b {
			return false
		}
		for i := a; i <= b; i++ {
			codes[i] = true
		}
	}
	return true
}

// statusRanges writes the marked codes as lbd's expect_status.
func statusRanges(codes *[600]bool) string {
	var parts []string
	for i := 100; i < 600; i++ {
		if !codes[i] {
			continue
		}
		j := i
		for j+1 < 600 && codes[j+1] {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(i))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", i, j))
		}
		i = j
	}
	return strings.Join(parts, ",")
}

func parsePort(s string) (int, bool) {
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 1 && p <= 65535
}

func isZeros(s string) bool { return s != "" && strings.Trim(s, "0") == "" }

func firstArg(a []string) string {
	if len(a) == 0 {
		return ""
	}
	return a[0]
}

// enabled reads keepalived's optional boolean: absent, true, on or yes.
func enabled(a []string) bool {
	return len(a) == 0 || a[0] == "true" || a[0] == "on" || a[0] == "yes"
}
