package lcore

import (
	"math/bits"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// snapshot6 indexes a snapshot's IPv6 services, apart from IPv4's so
// that an IPv4 lookup hashes what it always did.
type snapshot6 struct {
	services    map[ServiceKey]int32
	vips        map[hdr.Addr6]bool
	anyPort     bool               // some service has port 0 (every port of its VIP)
	gatewayPort int                // port whose Gateway6 reaches everything off-link, or -1
	routes      []portRoute6       // the ports' static IPv6 routes, longest prefix first
	lips        map[hdr.Addr6]bool // every service's LocalAddrs6 (FNAT66)
}

// portRoute6 is a StaticRoute6 with its port.
type portRoute6 struct {
	port int
	StaticRoute6
}

// ones6 is the length of an IPv6 mask.
func ones6(m *hdr.Addr6) int {
	n := 0
	for _, b := range m {
		n += bits.OnesCount8(b)
	}
	return n
}

// inNet6 reports whether a&mask == net.
func inNet6(a, net, mask *hdr.Addr6) bool {
	for i := range a {
		if a[i]&mask[i] != net[i] {
			return false
		}
	}
	return true
}

func (s *snapshot6) add(k ServiceKey, i int32) {
	if s.services == nil {
		s.services = map[ServiceKey]int32{}
		s.vips = map[hdr.Addr6]bool{}
		s.lips = map[hdr.Addr6]bool{}
	}
	s.services[k] = i
	s.anyPort = s.anyPort || k.Port == 0
	s.vips[k.VIP6] = true
}

// HasIPv6 reports whether some service, a Removed one too, has an IPv6
// VIP.
func (s *Snapshot) HasIPv6() bool { return len(s.six.vips) != 0 }

// service6 finds the IPv6 virtual service of a destination.
func (s *Snapshot) service6(vip *hdr.Addr6, port uint16, proto uint8) (int32, bool) {
	i, ok := s.six.services[ServiceKey{VIP6: *vip, Port: port, Proto: proto}]
	if !ok && s.six.anyPort { // the VIP's port-zero service, as service's
		i, ok = s.six.services[ServiceKey{VIP6: *vip, Proto: proto}]
	}
	return i, ok
}

// IsVIP6 reports whether a is the address of some IPv6 virtual service.
func (s *Snapshot) IsVIP6(a hdr.Addr6) bool { return s.six.vips[a] }

// IsLIP6 reports whether a is an IPv6 FullNAT local address lbd answers
// neighbour solicitations for.
func (s *Snapshot) IsLIP6(a hdr.Addr6) bool { return s.six.lips[a] }

// OnLink6 reports whether a is in the port's IPv6 subnet.
func (p *PortInfo) OnLink6(a *hdr.Addr6) bool {
	return !p.Addr6.IsUnspecified() && inNet6(a, &p.Net6, &p.Mask6)
}

// Route6 picks the output port and next hop for an IPv6 destination: the
// port whose subnet holds it, else the port with an IPv6 gateway.
func (s *Snapshot) Route6(dst *hdr.Addr6) (port int, nextHop hdr.Addr6, ok bool) {
	for i := range s.Ports {
		if s.Ports[i].OnLink6(dst) {
			return i, *dst, true
		}
	}
	for i := range s.six.routes {
		if r := &s.six.routes[i]; inNet6(dst, &r.Net, &r.Mask) {
			return r.port, r.Via, true
		}
	}
	if g := s.six.gatewayPort; g >= 0 {
		return g, s.Ports[g].Gateway6, true
	}
	return -1, hdr.Addr6{}, false
}

// Mask6 is the mask of an IPv6 prefix length.
func Mask6(bits int) hdr.Addr6 {
	var m hdr.Addr6
	for i := range m {
		switch {
		case bits >= 8:
			m[i] = 0xff
			bits -= 8
		case bits > 0:
			m[i] = ^byte(0xff >> bits)
			bits = 0
		}
	}
	return m
}

// masked6 is a with mask applied.
func masked6(a, mask *hdr.Addr6) hdr.Addr6 {
	var r hdr.Addr6
	for i := range r {
		r[i] = a[i] & mask[i]
	}
	return r
}

// service6Folded finds the IPv6 service whose VIP folds to vip (a
// persistence template's key, an FTP expectation's); control work.
func (s *Snapshot) service6Folded(vip uint32, port uint16, proto uint8) (int32, bool) {
	for k, i := range s.six.services {
		if k.Port == port && k.Proto == proto && conn.Fold6(&k.VIP6) == vip {
			return i, true
		}
	}
	return 0, false
}
