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
// not hand replies over (lcore.RSSAlignedEndpoint; the key must be
// lcore.RSSKey). Other devices get a plain 5-tuple spread and the lcores
// steer in software.
func rssFor(info ethdev.DevInfo, role string, queues uint16) (hf uint64, mode uint8) {
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
	if info.FlowTypeRSSOffloads&only != only || queues&(queues-1) != 0 {
		// No field selection, or a queue count the default redirection
		// table does not spread alike on every port.
		return hf, lcore.RSSSoftware
	}
	return hf | only, lcore.RSSAlignedEndpoint
}
