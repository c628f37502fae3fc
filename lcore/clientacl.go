package lcore

import (
	"net/netip"

	"github.com/dplb/dplb/lcore/hdr"
)

// ClientACL is a service's client lists (DPVS's blklst and whtlst): the
// clients its blocklist names get no new connection, and when its
// allowlist is not empty only the clients it names get one. Only a new
// connection is checked (a SYN, the SYN proxy's SYN before its cookie, a
// first datagram): connections a client already has go on, as in DPVS,
// so that editing a list breaks nothing established. It is immutable
// once made, shared by every lcore through the snapshot.
type ClientACL struct {
	block, allow prefixSet
	allowAll     bool // the allowlist is empty
}

// NewClientACL makes the lists of a service, nil when both are empty (no
// check at all). Prefixes are taken masked; IPv4 and IPv6 ones may mix.
func NewClientACL(block, allow []netip.Prefix) *ClientACL {
	if len(block) == 0 && len(allow) == 0 {
		return nil
	}
	return &ClientACL{block: newPrefixSet(block), allow: newPrefixSet(allow), allowAll: len(allow) == 0}
}

// admits is 0 when client src may open a connection, else the drop that
// counts why not.
func (a *ClientACL) admits(src uint32) Stat {
	switch {
	case a.block.has4(src):
		return DropClientBlocked
	case !a.allowAll && !a.allow.has4(src):
		return DropClientNotAllowed
	}
	return 0
}

// admits6 is admits for an IPv6 client.
func (a *ClientACL) admits6(src *hdr.Addr6) Stat {
	switch {
	case a.block.has6(src):
		return DropClientBlocked
	case !a.allowAll && !a.allow.has6(src):
		return DropClientNotAllowed
	}
	return 0
}

// prefixSet finds whether an address is in any of a set of prefixes with
// one map lookup per distinct prefix length (a list of single addresses
// costs one), and allocates nothing to look.
type prefixSet struct {
	lens4 []uint8
	v4    map[uint64]struct{} // length<<32 | masked address
	lens6 []uint8
	masks []hdr.Addr6 // the mask of each of lens6
	v6    map[prefix6]struct{}
}

type prefix6 struct {
	addr hdr.Addr6 // masked
	bits uint8
}

func newPrefixSet(ps []netip.Prefix) prefixSet {
	s := prefixSet{v4: map[uint64]struct{}{}, v6: map[prefix6]struct{}{}}
	seen4, seen6 := map[uint8]bool{}, map[uint8]bool{}
	for _, p := range ps {
		p = p.Masked()
		bits := uint8(p.Bits())
		if p.Addr().Is4() {
			s.v4[uint64(bits)<<32|uint64(ipv4Of(p.Addr()))] = struct{}{}
			if !seen4[bits] {
				seen4[bits] = true
				s.lens4 = append(s.lens4, bits)
			}
			continue
		}
		s.v6[prefix6{p.Addr().As16(), bits}] = struct{}{}
		if !seen6[bits] {
			seen6[bits] = true
			s.lens6 = append(s.lens6, bits)
			s.masks = append(s.masks, Mask6(int(bits)))
		}
	}
	return s
}

func ipv4Of(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func (s *prefixSet) has4(a uint32) bool {
	for _, bits := range s.lens4 {
		m := ^uint32(0)
		if bits < 32 {
			m = ^(^uint32(0) >> bits)
		}
		if _, ok := s.v4[uint64(bits)<<32|uint64(a&m)]; ok {
			return true
		}
	}
	return false
}

func (s *prefixSet) has6(a *hdr.Addr6) bool {
	for i, bits := range s.lens6 {
		if _, ok := s.v6[prefix6{masked6(a, &s.masks[i]), bits}]; ok {
			return true
		}
	}
	return false
}
