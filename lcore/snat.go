package lcore

import "github.com/dplb/dplb/lcore/fwd"

// SNAT (DPVS's SNAT mode): the real servers' own connections out through
// lbd, their gateway (VS/NAT's servers route through the director). A
// Linux director masquerades them in its kernel; lbd owns the NIC, so it
// does it here, as a FullNAT connection whose server is the packet's own
// destination: the source becomes one of the rule's addresses and a port
// this worker owns (the answers steer to it, as FullNAT's do), the
// destination stays, and the answers to that address and port find the
// connection's reply key and go back to the server. The TCP state
// machine, the timeouts, sync and the listings are FullNAT's.

// SNATRule is a SNAT service's match: sources inside Net/Mask.
type SNATRule struct {
	Net, Mask uint32
}

// snatFor finds the SNAT rule for a packet from src to dst of proto that
// no connection and no service took: the first whose source network
// holds src; none for a destination that is one of lbd's own addresses
// (a local address, a VIP, a port's: the callers checked the last two).
func (s *Snapshot) snatFor(src, dst uint32, proto uint8) (int32, bool) {
	if len(s.snat) == 0 || s.lips[dst] {
		return 0, false
	}
	for _, i := range s.snat {
		svc := &s.Services[i]
		if svc.Key.Proto == proto && src&svc.SNAT.Mask == svc.SNAT.Net {
			return i, true
		}
	}
	return 0, false
}

// IsSNAT reports whether record r is a SNAT connection's: a FullNAT one
// whose server is its destination (no service's server is its VIP). A
// director installs it under its SNAT rule for the client (the real
// server that opened it), never as a service of that address.
func (r *SyncConn) IsSNAT() bool {
	return !r.IPv6 && !r.Template && r.Fwd == fwd.FullNAT && r.RIP == r.VIP && r.RPort == r.VPort
}
