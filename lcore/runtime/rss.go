package runtime

import (
	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
)

// rssFor chooses a port's RSS hash functions. Where the device can hash
// on source fields only (client-facing ports) and destination fields only
// (server-facing ports), a client's packets and the real server's replies
// hash alike, the NIC delivers both to the same queue, and the lcores need
// not hand replies over (lcore.RSSAligned...). byAddr hashes the address
// alone, as persistent services need. Other devices get a plain 5-tuple
// spread and the lcores steer in software.
func rssFor(info ethdev.DevInfo, role string, queues uint16, byAddr bool) (hf uint64, mode uint8) {
	if queues < 2 || info.FlowTypeRSSOffloads == 0 {
		return 0, lcore.RSSSoftware
	}
	hf = ethdev.RSSIP | ethdev.RSSTCP | ethdev.RSSUDP
	var only uint64
	switch role {
	case conf.RoleClient:
		only = ethdev.RSSL3SrcOnly | ethdev.RSSL4SrcOnly
	case conf.RoleServer:
		only = ethdev.RSSL3DstOnly | ethdev.RSSL4DstOnly
	default: // a port facing both sides cannot hash both ways at once
		return hf, lcore.RSSSoftware
	}
	if byAddr {
		only &^= ethdev.RSSL4SrcOnly | ethdev.RSSL4DstOnly
		hf = ethdev.RSSIP
	}
	if info.FlowTypeRSSOffloads&only != only || queues&(queues-1) != 0 {
		// No field selection, or a queue count the default redirection
		// table does not spread alike on every port.
		return hf, lcore.RSSSoftware
	}
	mode = lcore.RSSAlignedEndpoint
	if byAddr {
		mode = lcore.RSSAlignedAddress
	}
	return hf | only, mode
}

// rssKey is the Toeplitz key every aligned port gets, n bytes of the
// common 0x6d5a pattern (any key works, as long as all ports share it).
func rssKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = [2]byte{0x6d, 0x5a}[i%2]
	}
	return k
}
