package conf

import (
	"net/netip"
)

// validate6 checks what differs for a service by IP version: an IPv6
// service has a persistence prefix length instead of a netmask, its
// fullnat servers are IPv4 ones (NAT64, from its IPv4 local_addresses,
// checked with the servers). PROXY v2 headers name an IPv6 client (to its
// NAT64 servers); the FTP helper reads EPRT and EPSV's 229.
func (s Service) validate6(f string, vip netip.Addr) error {
	if !vip.Is6() {
		if s.PersistencePrefix != 0 {
			return fieldErrorf(f+".persistence_prefix", "is for IPv6 services (an IPv4 service has netmask)")
		}
		return nil
	}
	if err := checkRange(f+".persistence_prefix", s.PersistencePrefix, 0, 128); err != nil {
		return err
	}
	if s.Netmask != "" && s.Netmask != defaultNetmask {
		return fieldErrorf(f+".netmask", "%s: an IPv6 service's persistence granularity is persistence_prefix (a prefix length, e.g. 64)", s.Netmask)
	}
	return nil
}

// PersistPrefixBits is an IPv6 service's persistence prefix length (128
// when unset).
func (s Service) PersistPrefixBits() int {
	if s.PersistencePrefix == 0 {
		return 128
	}
	return s.PersistencePrefix
}

// hasClientPort6 reports whether a client-facing port has an IPv6 address.
func (c *Config) hasClientPort6() bool {
	for _, p := range c.Ports {
		if _, ok := p.Prefix6(); ok && p.FacesClients() {
			return true
		}
	}
	return false
}
