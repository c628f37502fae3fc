// Package health watches real servers: active probes (TCP connect, HTTP,
// HTTPS, UDP, DNS, SMTP, ICMP echo, an external command, a file an
// operator writes, a BFD session) run by a Monitor with
// keepalived's rise/fall semantics, a slow-start weight ramp, a passive
// detector of connection attempts that never complete, and a Prometheus
// collector.
//
// Probes leave from the host's own network stack (net.Dialer and kernel
// sockets, normally through a management interface), optionally bound to
// the check's source address; they never go through the DPDK ports, so the
// real servers must be reachable from the host itself.
//
// The package decides nothing about scheduling: the controller reacts to
// the Changes the Monitor reports (a down server gets weight 0, see
// EffectiveWeight for slow start).
package health

import (
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"

	"github.com/dplb/dplb/conf"
)

// Target is one real server of one service, with the check that applies.
type Target struct {
	Service string           // the service, as ServiceName spells it, e.g. "tcp/192.0.2.100:80"
	Addr    netip.AddrPort   // the real server's address and port
	VIP     netip.AddrPort   // the service's VIP and port
	Check   conf.HealthCheck // the check; zero values mean the defaults (conf.HealthCheck.Effective)
}

// Key identifies a target: the Monitor keeps one state per key.
type Key struct {
	Service string
	Addr    netip.AddrPort
}

// Key returns the target's identity.
func (t Target) Key() Key { return Key{t.Service, t.Addr} }

// String returns "service server", e.g. "tcp/192.0.2.100:80 198.51.100.11:80".
func (k Key) String() string { return k.Service + " " + k.Addr.String() }

// ServiceName names a service in targets, logs and metrics: "tcp/VIP:port".
func ServiceName(protocol string, vip netip.AddrPort) string {
	return protocol + "/" + vip.String()
}

// ProbeAddr returns the address a probe goes to: the real server's (or,
// with target vip, the VIP), with the check's port if it sets one.
func (t Target) ProbeAddr() netip.AddrPort {
	c := t.Check.Effective()
	ap := t.Addr
	if c.Target == conf.HealthTargetVIP {
		ap = t.VIP
	}
	if c.Port != 0 {
		ap = netip.AddrPortFrom(ap.Addr(), uint16(c.Port))
	}
	return ap
}

// Targets returns the targets of every real server whose check is enabled
// (type other than none), in configuration order.
func Targets(svcs []conf.Service) []Target {
	var out []Target
	for _, s := range svcs {
		vip := netip.AddrPortFrom(s.VIPAddr(), uint16(s.Port))
		name := ServiceName(s.Protocol, vip)
		for _, r := range s.Servers {
			c := s.HealthFor(r)
			if !c.Enabled() {
				continue
			}
			out = append(out, Target{Service: name, Addr: netip.AddrPortFrom(r.Addr(), uint16(r.Port)), VIP: vip, Check: c})
		}
	}
	return out
}

// equal reports whether two targets are the same, check included.
// (Reflection is fine here: it runs on Update, not per packet, and
// keeps up with fields added to conf.HealthCheck.)
func (t Target) equal(u Target) bool {
	if !slices.Equal(t.Check.Command, u.Check.Command) {
		return false
	}
	t.Check.Command, u.Check.Command = nil, nil
	return reflect.DeepEqual(t, u)
}

func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.Service, b.Service); c != 0 {
		return c
	}
	return a.Addr.Compare(b.Addr)
}

func (t Target) String() string {
	return fmt.Sprintf("%s %s (%s)", t.Service, t.Addr, t.Check.Effective().Type)
}
