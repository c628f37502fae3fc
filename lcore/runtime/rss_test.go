package runtime

import (
	"testing"

	"github.com/dplb/dplb/dpdk/ethdev"
	"github.com/dplb/dplb/lcore"
)

func TestRSSFor(t *testing.T) {
	only := ethdev.RSSL3SrcOnly | ethdev.RSSL3DstOnly | ethdev.RSSL4SrcOnly | ethdev.RSSL4DstOnly
	nic := ethdev.DevInfo{FlowTypeRSSOffloads: ethdev.RSSIP | ethdev.RSSTCP | ethdev.RSSUDP | only}
	plain := ethdev.DevInfo{FlowTypeRSSOffloads: ethdev.RSSIP | ethdev.RSSTCP | ethdev.RSSUDP}
	full := ethdev.RSSIP | ethdev.RSSTCP | ethdev.RSSUDP
	for _, tc := range []struct {
		name   string
		info   ethdev.DevInfo
		role   string
		queues uint16
		hf     uint64
		mode   uint8
	}{
		{"client port of a capable NIC", nic, "client", 4, full | ethdev.RSSL3SrcOnly | ethdev.RSSL4SrcOnly, lcore.RSSAlignedEndpoint},
		{"server port of a capable NIC", nic, "server", 4, full | ethdev.RSSL3DstOnly | ethdev.RSSL4DstOnly, lcore.RSSAlignedEndpoint},
		{"a port facing both sides", nic, "both", 4, full, lcore.RSSSoftware},
		{"no field selection", plain, "client", 4, full, lcore.RSSSoftware},
		{"three queues", nic, "client", 3, full, lcore.RSSSoftware},
		{"one queue", nic, "client", 1, 0, lcore.RSSSoftware},
		{"no RSS at all (af_packet)", ethdev.DevInfo{}, "client", 4, 0, lcore.RSSSoftware},
	} {
		hf, mode := rssFor(tc.info, tc.role, tc.queues)
		if hf != tc.hf || mode != tc.mode {
			t.Errorf("%s: hash functions %#x mode %d, want %#x %d", tc.name, hf, mode, tc.hf, tc.mode)
		}
	}
}
