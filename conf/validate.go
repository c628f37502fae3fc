package conf

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is an invalid configuration value. Field is the key path as
// written in YAML, with list indices ("services[1].servers[0].weight").
type FieldError struct {
	Field string // key path, e.g. "ports[0].address"
	Msg   string // what is wrong, e.g. `"x" is not an IPv4 address`
	Err   error  // underlying cause, if any
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns the underlying cause, if any.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits checked by Validate.
const (
	maxWorkers       = 64
	maxTimeout       = 30 * 24 * time.Hour
	maxIdleSleep     = 10 * time.Millisecond
	maxReachableTime = time.Hour
	maxStaleTime     = 24 * time.Hour
	maxSocketPath    = 107 // sizeof(sockaddr_un.sun_path) - 1 on Linux
)

var (
	filePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	portNameRE   = regexp.MustCompile(`^[a-z0-9_-]{1,15}$`)
	vdevNameRE   = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// Validate checks every field and the rules between fields, and returns
// the first problem found as a *FieldError naming the field.
//
// schedulers lists the registered scheduler names; if it is nil, a
// service's scheduler is only required to be non-empty (Load and Parse
// validate this way; lbd validates again with the registry's names).
func (c *Config) Validate(schedulers []string) error {
	for _, check := range []func() error{
		c.EAL.validate,
		c.Dataplane.validate,
		c.validatePorts,
		func() error { return c.validateServices(schedulers) },
		c.Timeouts.validate,
		c.Neighbour.validate,
		c.Control.validate,
		c.Metrics.validate,
		c.Web.validate,
		c.Log.validate,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fieldErrorf(field, "%d is out of range %d..%d", v, lo, hi)
	}
	return nil
}

func checkDuration(field string, d, lo, hi time.Duration, rng string) error {
	if d < lo || d > hi {
		return fieldErrorf(field, "%s is out of range %s", d, rng)
	}
	return nil
}

func checkOneOf(field, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fieldErrorf(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

func (e EAL) validate() error {
	if e.FilePrefix == "" {
		return fieldErrorf("eal.file_prefix", "must not be empty")
	}
	if !filePrefixRE.MatchString(e.FilePrefix) {
		return fieldErrorf("eal.file_prefix", "%q has characters other than A-Z a-z 0-9 _ -", e.FilePrefix)
	}
	if err := checkRange("eal.memory_mb", e.MemoryMB, 64, 1048576); err != nil {
		return err
	}
	if e.MainCPU < 0 {
		return fieldErrorf("eal.main_cpu", "%d is negative", e.MainCPU)
	}
	for i, a := range e.ExtraArgs {
		if a == "" {
			return fieldErrorf(fmt.Sprintf("eal.extra_args[%d]", i), "must not be empty")
		}
	}
	return nil
}

func checkDescriptors(field string, n int) error {
	if err := checkRange(field, n, 64, 16384); err != nil {
		return err
	}
	if n&(n-1) != 0 {
		return fieldErrorf(field, "%d is not a power of two", n)
	}
	return nil
}

func (d Dataplane) validate() error {
	if n := len(d.Workers); n < 1 || n > maxWorkers {
		return fieldErrorf("dataplane.workers", "has %d entries, want 1..%d", n, maxWorkers)
	}
	for i, cpu := range d.Workers {
		if cpu < 0 {
			return fieldErrorf(fmt.Sprintf("dataplane.workers[%d]", i), "%d is negative", cpu)
		}
	}
	if _, err := ParseSteeringKey(d.SteeringKey); err != nil {
		return fieldErrorf("dataplane.steering_key", "%v", err)
	}
	if err := checkRange("dataplane.burst", d.Burst, 1, 512); err != nil {
		return err
	}
	if err := checkRange("dataplane.mbufs", d.Mbufs, 1023, 16777215); err != nil {
		return err
	}
	// DPDK also refuses a cache larger than mbufs/1.5; with at least 1023
	// mbufs that is at least 682, so the upper bound of 512 implies it.
	if err := checkRange("dataplane.mbuf_cache", d.MbufCache, 0, 512); err != nil {
		return err
	}
	if err := checkDescriptors("dataplane.rx_descriptors", d.RxDescriptors); err != nil {
		return err
	}
	if err := checkDescriptors("dataplane.tx_descriptors", d.TxDescriptors); err != nil {
		return err
	}
	if err := checkRange("dataplane.conn_table_size", d.ConnTableSize, 1024, 67108864); err != nil {
		return err
	}
	if err := checkDuration("dataplane.idle_sleep", d.IdleSleep, 0, maxIdleSleep, "0s..10ms"); err != nil {
		return err
	}
	return d.Defense.validate()
}

func (d Defense) validate() error {
	if err := checkRange("dataplane.defense.drop_entry", d.DropEntry, 0, 100); err != nil {
		return err
	}
	if err := checkRange("dataplane.defense.secure", d.Secure, 0, 100); err != nil {
		return err
	}
	for _, f := range []struct {
		field string
		v     time.Duration
	}{
		{"dataplane.defense.idle_after", d.IdleAfter},
		{"dataplane.defense.syn_timeout", d.SYNTimeout},
		{"dataplane.defense.udp_timeout", d.UDPTimeout},
	} {
		if err := checkDuration(f.field, f.v, time.Second, maxTimeout, "1s..720h (30 days)"); err != nil {
			return err
		}
	}
	return nil
}

// usable reports whether a is an IPv4 address a host can have.
func usable(a netip.Addr) bool {
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast() && !a.IsLoopback() &&
		a != netip.AddrFrom4([4]byte{255, 255, 255, 255})
}

// parseHost parses a required IPv4 host address.
func parseHost(field, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, fieldErrorf(field, "must not be empty")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fieldErrorf(field, "%q is not an IPv4 address", s)
	}
	if !usable(a) {
		return netip.Addr{}, fieldErrorf(field, "%s is not a unicast host address", a)
	}
	return a, nil
}

// deviceKey is the identity of a device for the uniqueness check: the
// device name, with PCI addresses in their long lower-case form.
func deviceKey(p Port) string {
	name := p.DeviceName()
	if p.IsPCI() {
		name = strings.ToLower(name)
		if strings.Count(name, ":") == 1 {
			name = "0000:" + name
		}
	}
	return name
}

func (p Port) validate(f string) error {
	if p.Name == "" {
		return fieldErrorf(f+".name", "must not be empty")
	}
	if !portNameRE.MatchString(p.Name) {
		return fieldErrorf(f+".name", "%q is not 1 to 15 characters of a-z 0-9 _ -", p.Name)
	}
	if p.Device == "" {
		return fieldErrorf(f+".device", "must not be empty")
	}
	if !p.IsPCI() && (!vdevNameRE.MatchString(p.DeviceName()) || strings.ContainsAny(p.Device, " \t\r\n")) {
		return fieldErrorf(f+".device", "%q is neither a PCI address (0000:03:00.0) nor a DPDK vdev string (net_af_packet0,iface=veth0)", p.Device)
	}
	if p.Address == "" {
		return fieldErrorf(f+".address", "must not be empty")
	}
	pfx, err := netip.ParsePrefix(p.Address)
	if err != nil {
		return fieldErrorf(f+".address", "%q is not an address with prefix length (want e.g. 198.51.100.1/24)", p.Address)
	}
	a := pfx.Addr()
	if !a.Is4() {
		return fieldErrorf(f+".address", "%q is not IPv4", p.Address)
	}
	if !usable(a) {
		return fieldErrorf(f+".address", "%s is not a unicast host address", a)
	}
	if pfx.Bits() == 0 {
		return fieldErrorf(f+".address", "prefix length /0 is not allowed, want 1..32")
	}
	if pfx.Bits() <= 30 {
		network := pfx.Masked().Addr()
		bcast := lastAddr(pfx)
		if a == network {
			return fieldErrorf(f+".address", "%s is the network address of %s", a, pfx.Masked())
		}
		if a == bcast {
			return fieldErrorf(f+".address", "%s is the broadcast address of %s", a, pfx.Masked())
		}
	}
	if p.Gateway != "" {
		gw, err := parseHost(f+".gateway", p.Gateway)
		if err != nil {
			return err
		}
		if !pfx.Contains(gw) {
			return fieldErrorf(f+".gateway", "%s is not inside %s", gw, pfx.Masked())
		}
		if gw == a {
			return fieldErrorf(f+".gateway", "%s is the port's own address", gw)
		}
	}
	if err := checkOneOf(f+".role", p.Role, RoleClient, RoleServer, RoleBoth); err != nil {
		return err
	}
	if p.MTU != 0 && (p.MTU < 68 || p.MTU > 9702) {
		return fieldErrorf(f+".mtu", "%d is out of range 68..9702 (or 0 to keep the device's MTU)", p.MTU)
	}
	return nil
}

// lastAddr returns the highest address of an IPv4 prefix.
func lastAddr(pfx netip.Prefix) netip.Addr {
	b := pfx.Masked().Addr().As4()
	host := ^uint32(0) >> pfx.Bits()
	for i := range 4 {
		b[i] |= byte(host >> (24 - 8*i))
	}
	return netip.AddrFrom4(b)
}

func (c *Config) validatePorts() error {
	if len(c.Ports) == 0 {
		return fieldErrorf("ports", "at least one port is required")
	}
	names := map[string]int{}
	devices := map[string]int{}
	gateway := -1
	clients := false
	for i, p := range c.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		if err := p.validate(f); err != nil {
			return err
		}
		if j, ok := names[p.Name]; ok {
			return fieldErrorf(f+".name", "%q is already used by ports[%d]", p.Name, j)
		}
		names[p.Name] = i
		key := deviceKey(p)
		if j, ok := devices[key]; ok {
			return fieldErrorf(f+".device", "device %q is already used by ports[%d]", key, j)
		}
		devices[key] = i
		for j, q := range c.Ports[:i] {
			if p.Prefix().Masked().Overlaps(q.Prefix().Masked()) {
				return fieldErrorf(f+".address", "%s overlaps ports[%d].address %s", p.Prefix().Masked(), j, q.Prefix().Masked())
			}
		}
		if p.Gateway != "" {
			if gateway >= 0 {
				return fieldErrorf(f+".gateway", "only one port may have a gateway, ports[%d] has one", gateway)
			}
			gateway = i
		}
		clients = clients || p.FacesClients()
	}
	if len(c.Services) > 0 && !clients {
		return fieldErrorf("ports", "no port has role client or both, but services need one to receive client traffic")
	}
	return nil
}

// portWithAddr returns the index of the port whose own address is a, or -1.
func (c *Config) portWithAddr(a netip.Addr) int {
	for i, p := range c.Ports {
		if p.Prefix().Addr() == a {
			return i
		}
	}
	return -1
}

// CheckSchedulers checks that every service names one of schedulers (the
// registry's names). Load and Parse validate everything else, so a program
// that knows the registry checks this alone instead of validating again.
func (c *Config) CheckSchedulers(schedulers []string) error {
	for i, s := range c.Services {
		if err := checkScheduler(fmt.Sprintf("services[%d]", i), s.Scheduler, schedulers); err != nil {
			return err
		}
	}
	return nil
}

func checkScheduler(service, name string, schedulers []string) error {
	if !slices.Contains(schedulers, name) {
		return fieldErrorf(service+".scheduler", "unknown scheduler %q (known: %s)", name, strings.Join(schedulers, ", "))
	}
	return nil
}

func (c *Config) validateServices(schedulers []string) error {
	type key struct {
		proto string
		addr  netip.AddrPort
	}
	seen := map[key]int{}
	for i, s := range c.Services {
		f := fmt.Sprintf("services[%d]", i)
		switch s.Protocol {
		case "tcp", "udp":
		case "":
			return fieldErrorf(f+".protocol", "must not be empty (want tcp or udp)")
		default:
			return fieldErrorf(f+".protocol", "%q is not one of tcp, udp", s.Protocol)
		}
		vip, err := parseHost(f+".vip", s.VIP)
		if err != nil {
			return err
		}
		if j := c.portWithAddr(vip); j >= 0 {
			return fieldErrorf(f+".vip", "%s is the address of ports[%d]", vip, j)
		}
		if err := checkRange(f+".port", s.Port, 1, 65535); err != nil {
			return err
		}
		switch {
		case s.Scheduler == "":
			return fieldErrorf(f+".scheduler", "must not be empty")
		case schedulers != nil:
			if err := checkScheduler(f, s.Scheduler, schedulers); err != nil {
				return err
			}
		}
		for j, fl := range s.SchedFlags {
			if !slices.Contains(SchedFlags, fl) {
				return fieldErrorf(fmt.Sprintf("%s.sched_flags[%d]", f, j), "unknown flag %q (known: %s)", fl, strings.Join(SchedFlags, ", "))
			}
		}
		if s.MHTableSize != 0 && (!isPrime(s.MHTableSize) || s.MHTableSize < 251 || s.MHTableSize > 131071) {
			return fieldErrorf(f+".mh_table_size", "%d is not a prime in 251..131071 (e.g. 65537)", s.MHTableSize)
		}
		if s.Persistence != 0 {
			if err := checkDuration(f+".persistence", s.Persistence, time.Second, maxTimeout, "0 (off) or 1s..720h"); err != nil {
				return err
			}
		}
		if s.Netmask != "" {
			if err := checkNetmask(f+".netmask", s.Netmask); err != nil {
				return err
			}
		}
		k := key{s.Protocol, netip.AddrPortFrom(vip, uint16(s.Port))}
		if j, ok := seen[k]; ok {
			return fieldErrorf(f, "%s %s is already defined by services[%d]", k.proto, k.addr, j)
		}
		seen[k] = i
		if err := c.validateHealth(f, s, vip); err != nil {
			return err
		}
		if err := s.Feedback.validate(f + ".feedback"); err != nil {
			return err
		}
		if err := c.validateServers(f, s, vip); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validateServers(f string, s Service, vip netip.Addr) error {
	seen := map[netip.AddrPort]int{}
	for i, r := range s.Servers {
		g := fmt.Sprintf("%s.servers[%d]", f, i)
		a, err := parseHost(g+".address", r.Address)
		if err != nil {
			return err
		}
		if a == vip {
			return fieldErrorf(g+".address", "%s is the service's VIP", a)
		}
		if j := c.portWithAddr(a); j >= 0 {
			return fieldErrorf(g+".address", "%s is the address of ports[%d]", a, j)
		}
		switch r.Forward {
		case "nat", "dr", "tun":
		default:
			return fieldErrorf(g+".forward", "%q is not one of nat, dr, tun", r.Forward)
		}
		if err := c.checkReachable(g+".address", a, r.Forward); err != nil {
			return err
		}
		if err := checkRange(g+".port", r.Port, 1, 65535); err != nil {
			return err
		}
		if err := checkRange(g+".weight", r.Weight, 0, 65535); err != nil {
			return err
		}
		if r.Forward != "nat" && r.Port != s.Port {
			return fieldErrorf(g+".port", "%d differs from the service's port %d: only nat rewrites ports (dr and tun forward the packet unchanged)", r.Port, s.Port)
		}
		if err := checkRange(g+".upper_threshold", r.Upper, 0, 1000000); err != nil {
			return err
		}
		if err := checkRange(g+".lower_threshold", r.Lower, 0, max(r.Upper, 0)); err != nil {
			if r.Upper == 0 && r.Lower != 0 {
				return fieldErrorf(g+".lower_threshold", "%d needs an upper_threshold", r.Lower)
			}
			return err
		}
		if err := validateServerHealth(f, g, s, r); err != nil {
			return err
		}
		ap := netip.AddrPortFrom(a, uint16(r.Port))
		if j, ok := seen[ap]; ok {
			return fieldErrorf(g, "%s is already listed as %s.servers[%d]", ap, f, j)
		}
		seen[ap] = i
	}
	return nil
}

func (t Timeouts) validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"timeouts.tcp", t.TCP},
		{"timeouts.tcp_fin", t.TCPFin},
		{"timeouts.udp", t.UDP},
		{"timeouts.syn", t.SYN},
	} {
		if err := checkDuration(d.field, d.v, time.Second, maxTimeout, "1s..720h (30 days)"); err != nil {
			return err
		}
	}
	return nil
}

func (n Neighbour) validate() error {
	if err := checkDuration("neighbour.reachable_time", n.ReachableTime, time.Second, maxReachableTime, "1s..1h"); err != nil {
		return err
	}
	if n.StaleTime <= n.ReachableTime {
		return fieldErrorf("neighbour.stale_time", "%s is not greater than neighbour.reachable_time %s", n.StaleTime, n.ReachableTime)
	}
	if n.StaleTime > maxStaleTime {
		return fieldErrorf("neighbour.stale_time", "%s is more than 24h", n.StaleTime)
	}
	return nil
}

func (c Control) validate() error {
	switch {
	case c.Socket == "":
		return fieldErrorf("control.socket", "must not be empty")
	case !filepath.IsAbs(c.Socket):
		return fieldErrorf("control.socket", "%q is not an absolute path", c.Socket)
	case len(c.Socket) > maxSocketPath:
		return fieldErrorf("control.socket", "%q is longer than %d bytes", c.Socket, maxSocketPath)
	}
	if c.SocketMode > 0o777 {
		return fieldErrorf("control.socket_mode", "%#o is out of range 0..0777 (write modes in octal, e.g. 0600)", c.SocketMode)
	}
	return nil
}

func (m Metrics) validate() error {
	if m.Listen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		return fieldErrorf("metrics.listen", "%q is not host:port (want e.g. 127.0.0.1:9180)", m.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fieldErrorf("metrics.listen", "port %q is not a number in 1..65535", port)
	}
	return nil
}

func (l Log) validate() error {
	if err := checkOneOf("log.level", l.Level, "debug", "info", "warn", "error"); err != nil {
		return err
	}
	return checkOneOf("log.format", l.Format, "json", "console")
}

// checkReachable says whether the load balancer can forward to a real
// server by the given method: nat and dr need the server on the subnet of
// a server-facing port (dr rewrites only the MAC); tun also reaches
// servers beyond a gateway.
func (c *Config) checkReachable(field string, a netip.Addr, forward string) error {
	var subnets []string
	gateway := false
	for _, p := range c.Ports {
		if _, ok := p.GatewayAddr(); ok {
			gateway = true
		}
		if p.FacesServers() {
			subnets = append(subnets, p.Prefix().Masked().String())
			if p.Prefix().Contains(a) {
				return nil
			}
		}
	}
	if forward == "tun" && gateway {
		return nil
	}
	if len(subnets) == 0 {
		return fieldErrorf(field, "%s is not on any server-facing port's subnet (no port has role server or both)", a)
	}
	return fieldErrorf(field, "%s is not on any server-facing port's subnet (%s)", a, strings.Join(subnets, ", "))
}

// checkNetmask accepts a contiguous IPv4 netmask such as 255.255.255.0.
func checkNetmask(field, s string) error {
	m, err := netip.ParseAddr(s)
	if err != nil || !m.Is4() {
		return fieldErrorf(field, "%q is not an IPv4 netmask (want e.g. 255.255.255.0)", s)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if v != 0 && (^v)&(^v+1) != 0 {
		return fieldErrorf(field, "%s is not a contiguous netmask", s)
	}
	return nil
}

func isPrime(n int) bool {
	if n < 2 {
		return false
	}
	for d := 2; d*d <= n; d++ {
		if n%d == 0 {
			return false
		}
	}
	return true
}
