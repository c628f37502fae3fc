package conf

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// BGP configures scale-out: lbd announces each VIP as a /32 (an IPv6 one
// as a /128) to its BGP
// peers (the routers in front of N active directors, which spread flows
// over them with ECMP) while it is healthy for that VIP. The sessions run
// over the host's kernel stack (a management interface), not a dataplane
// port; the next hop announced is the dataplane address the routers must
// send the VIP's traffic to. Off while asn is 0.
type BGP struct {
	ASN            int            `mapstructure:"asn"`             // this director's AS number, 1..4294967295, 0 = BGP off; default 0; reload: restart
	RouterID       string         `mapstructure:"router_id"`       // BGP identifier, an IPv4 address unique among the routers' peers, required with asn; default ""; reload: restart
	ListenPort     int            `mapstructure:"listen_port"`     // TCP port to accept sessions on, -1 = do not listen (lbd dials its peers), -1..65535; default -1; reload: restart
	NextHop        string         `mapstructure:"next_hop"`        // next hop announced with every IPv4 VIP, the dataplane address the routers reach lbd by; "" = the address of the first client-facing port; default ""; reload: restart
	NextHop6       string         `mapstructure:"next_hop6"`       // next hop announced with every IPv6 VIP (a /128, in MP-BGP over the same sessions), a global IPv6 address; "" = the address6 of the first client-facing port that has one; with neither, IPv6 VIPs are withheld; default ""; reload: restart
	Peers          []BGPPeer      `mapstructure:"peers"`           // the routers to announce to, at least one with asn; reload: restart
	Communities    []string       `mapstructure:"communities"`     // standard communities ("65000:100") sent with every VIP; default none; reload: restart
	VIPCommunities []BGPVIPExtras `mapstructure:"vip_communities"` // communities sent with one VIP only, in addition to communities; default none; reload: restart
	// RequireLiveServer: a VIP is announced only while one of its
	// services has a real server up with a weight above 0 (a sorry server
	// standing in does not count); false announces it whenever lbd
	// forwards and is not drained. Default true; reload: restart
	RequireLiveServer bool          `mapstructure:"require_live_server"`
	ShutdownGrace     time.Duration `mapstructure:"shutdown_grace"` // on SIGTERM, lbd withdraws every VIP and keeps forwarding this long (the routers move new flows away, existing ones finish) before it stops, 0..10m; default 5s; reload: restart
}

// BGPPeer is one router lbd keeps a BGP session with.
type BGPPeer struct {
	Address      string        `mapstructure:"address"`       // the router's IPv4 address, unique; required; reload: restart
	ASN          int           `mapstructure:"asn"`           // the router's AS number, 1..4294967295 (equal to bgp.asn: iBGP); required; reload: restart
	Port         int           `mapstructure:"port"`          // the router's BGP port, 0 = 179, 0..65535; default 0; reload: restart
	LocalAddress string        `mapstructure:"local_address"` // IPv4 address to dial from, "" = the kernel's choice; default ""; reload: restart
	Password     string        `mapstructure:"password"`      // TCP MD5 signature key (RFC 2385), "" = none, at most 80 characters; default ""; reload: restart
	HoldTime     time.Duration `mapstructure:"hold_time"`     // proposed hold time, 0 = 90s, whole seconds, 3s..65535s; default 0; reload: restart
	Keepalive    time.Duration `mapstructure:"keepalive"`     // keepalive interval, 0 = a third of the hold time, whole seconds below the hold time; default 0; reload: restart
}

// BGPVIPExtras are the communities one VIP is announced with.
type BGPVIPExtras struct {
	VIP         string   `mapstructure:"vip"`         // a VIP of the services; required; reload: restart
	Communities []string `mapstructure:"communities"` // standard communities ("65000:100"); reload: restart
}

// Defaults the BGP peers' zero values stand for.
const (
	DefaultBGPPort     = 179
	DefaultBGPHoldTime = 90 * time.Second
)

// DefaultBGP is BGP off, with the defaults of its settings.
func DefaultBGP() BGP {
	return BGP{ListenPort: -1, RequireLiveServer: true, ShutdownGrace: 5 * time.Second}
}

// Enabled reports whether lbd runs BGP.
func (b BGP) Enabled() bool { return b.ASN != 0 }

// PeerPort is the port lbd dials p on.
func (p BGPPeer) PeerPort() int {
	if p.Port == 0 {
		return DefaultBGPPort
	}
	return p.Port
}

// Timers are p's hold time and keepalive interval, defaults applied.
func (p BGPPeer) Timers() (hold, keepalive time.Duration) {
	hold = p.HoldTime
	if hold == 0 {
		hold = DefaultBGPHoldTime
	}
	keepalive = p.Keepalive
	if keepalive == 0 {
		keepalive = (hold / 3).Truncate(time.Second)
	}
	return hold, keepalive
}

// ParseCommunity reads a standard community, "ASN:value" with both parts
// in 0..65535, as the 32-bit value BGP carries.
func ParseCommunity(s string) (uint32, error) {
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("%q is not a community (want ASN:value, e.g. 65000:100)", s)
	}
	a, err1 := strconv.ParseUint(hi, 10, 16)
	v, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not a community (both parts 0..65535)", s)
	}
	return uint32(a)<<16 | uint32(v), nil
}

// CommunitiesOf returns the communities vip is announced with.
func (b BGP) CommunitiesOf(vip netip.Addr) []uint32 {
	var out []uint32
	add := func(list []string) {
		for _, s := range list {
			if c, err := ParseCommunity(s); err == nil {
				out = append(out, c)
			}
		}
	}
	add(b.Communities)
	for _, e := range b.VIPCommunities {
		if a, err := netip.ParseAddr(e.VIP); err == nil && a == vip {
			add(e.Communities)
		}
	}
	return out
}

const maxASN = 1<<32 - 1

func (c *Config) validateBGP() error {
	b := c.BGP
	if err := checkRange("bgp.listen_port", b.ListenPort, -1, 65535); err != nil {
		return err
	}
	if err := checkDuration("bgp.shutdown_grace", b.ShutdownGrace, 0, 10*time.Minute, "0..10m"); err != nil {
		return err
	}
	if !b.Enabled() {
		if len(b.Peers) > 0 {
			return fieldErrorf("bgp.asn", "is 0 (BGP off) but bgp.peers lists routers: set this director's AS number")
		}
		return nil
	}
	if b.ASN < 0 || b.ASN > maxASN {
		return fieldErrorf("bgp.asn", "%d is not an AS number (1..4294967295)", b.ASN)
	}
	if id, err := netip.ParseAddr(b.RouterID); err != nil || !id.Is4() || id.IsUnspecified() {
		return fieldErrorf("bgp.router_id", "%q is not an IPv4 address (required with bgp.asn)", b.RouterID)
	}
	if b.NextHop != "" {
		if a, err := netip.ParseAddr(b.NextHop); err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast() {
			return fieldErrorf("bgp.next_hop", "%q is not a unicast IPv4 address", b.NextHop)
		}
	} else if _, ok := c.BGPNextHop(); !ok {
		return fieldErrorf("bgp.next_hop", "is not set and no port faces clients: name the dataplane address the routers send the VIPs' traffic to")
	}
	if b.NextHop6 != "" {
		if a, err := netip.ParseAddr(b.NextHop6); err != nil || !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() {
			return fieldErrorf("bgp.next_hop6", "%q is not a global unicast IPv6 address", b.NextHop6)
		}
	}
	if len(b.Peers) == 0 {
		return fieldErrorf("bgp.peers", "is empty: name at least one router to announce the VIPs to")
	}
	seen := map[netip.Addr]bool{}
	for i, p := range b.Peers {
		f := fmt.Sprintf("bgp.peers[%d]", i)
		a, err := netip.ParseAddr(p.Address)
		switch {
		case err != nil || !a.Is4() || a.IsUnspecified() || a.IsMulticast():
			return fieldErrorf(f+".address", "%q is not a unicast IPv4 address", p.Address)
		case seen[a]:
			return fieldErrorf(f+".address", "%s is listed twice", p.Address)
		}
		seen[a] = true
		if p.ASN < 1 || p.ASN > maxASN {
			return fieldErrorf(f+".asn", "%d is not an AS number (1..4294967295)", p.ASN)
		}
		if err := checkRange(f+".port", p.Port, 0, 65535); err != nil {
			return err
		}
		if p.LocalAddress != "" {
			if l, err := netip.ParseAddr(p.LocalAddress); err != nil || !l.Is4() || l.IsUnspecified() {
				return fieldErrorf(f+".local_address", "%q is not a unicast IPv4 address", p.LocalAddress)
			}
		}
		if len(p.Password) > 80 {
			return fieldErrorf(f+".password", "has %d characters, at most 80 (TCP MD5 keys)", len(p.Password))
		}
		if p.HoldTime != 0 && (p.HoldTime < 3*time.Second || p.HoldTime > 65535*time.Second || p.HoldTime%time.Second != 0) {
			return fieldErrorf(f+".hold_time", "%v is not whole seconds in 3s..65535s (or 0 for 90s)", p.HoldTime)
		}
		hold, _ := p.Timers()
		if p.Keepalive != 0 && (p.Keepalive < time.Second || p.Keepalive%time.Second != 0 || p.Keepalive >= hold) {
			return fieldErrorf(f+".keepalive", "%v is not whole seconds, at least 1s and below the hold time %v (or 0 for a third of it)", p.Keepalive, hold)
		}
	}
	for i, s := range b.Communities {
		if _, err := ParseCommunity(s); err != nil {
			return fieldErrorf(fmt.Sprintf("bgp.communities[%d]", i), "%v", err)
		}
	}
	vips := map[netip.Addr]bool{}
	for _, s := range c.Services {
		vips[s.VIPAddr()] = true
	}
	for i, e := range b.VIPCommunities {
		f := fmt.Sprintf("bgp.vip_communities[%d]", i)
		a, err := netip.ParseAddr(e.VIP)
		if err != nil || !vips[a] {
			return fieldErrorf(f+".vip", "%q is not the VIP of a service", e.VIP)
		}
		for j, s := range e.Communities {
			if _, err := ParseCommunity(s); err != nil {
				return fieldErrorf(fmt.Sprintf("%s.communities[%d]", f, j), "%v", err)
			}
		}
	}
	return nil
}

// BGPNextHop6 is the next hop lbd announces its IPv6 VIPs with:
// bgp.next_hop6, else the IPv6 address of the first client-facing port
// that has one; false when there is none (IPv6 VIPs are then withheld).
func (c *Config) BGPNextHop6() (netip.Addr, bool) {
	if a, err := netip.ParseAddr(c.BGP.NextHop6); err == nil {
		return a, true
	}
	for _, p := range c.Ports {
		if p6, ok := p.Prefix6(); ok && p.FacesClients() {
			return p6.Addr(), true
		}
	}
	return netip.Addr{}, false
}

// BGPNextHop is the next hop lbd announces its VIPs with: bgp.next_hop,
// else the address of the first port that faces clients.
func (c *Config) BGPNextHop() (netip.Addr, bool) {
	if a, err := netip.ParseAddr(c.BGP.NextHop); err == nil {
		return a, true
	}
	for _, p := range c.Ports {
		if p.FacesClients() && p.Prefix().IsValid() {
			return p.Prefix().Addr(), true
		}
	}
	return netip.Addr{}, false
}
