package sched

import "time"

// Locality tables (lblc, lblcr) map a destination address to its server(s).
// IPVS keeps them in a chained hash of 1024 buckets that grows without
// bound, pruned by a timer; here each is a fixed array of LocalityTableSize
// pointer-free entries so that Schedule never allocates: an address lives
// in one of localityProbe consecutive slots from hash_32(addr, 14); when
// all are taken, the least recently used of them is replaced. A bounded
// sweep of localitySweep slots per Schedule frees expired entries, so no
// call ever scans the whole table, and a lookup ignores an expired entry
// whether or not the sweep has reached it yet.
const (
	// LocalityTableSize is the entry capacity of an lblc or lblcr table
	// (IPVS's max_size before it collects: IP_VS_LBLC_TAB_SIZE*16).
	LocalityTableSize = 1 << localityBits

	// LBLCExpiration and LBLCRExpiration are how long an entry lives
	// unused: IPVS's sysctls lblc_expiration and lblcr_expiration,
	// DEFAULT_EXPIRATION 24 hours. lblcr also drops the busiest member of a
	// set that has not changed for LBLCRExpiration.
	LBLCExpiration  = 24 * time.Hour
	LBLCRExpiration = 24 * time.Hour

	localityBits  = 14
	localityMask  = LocalityTableSize - 1
	localityProbe = 8 // slots an address may occupy
	localitySweep = 4 // slots the sweep visits per Schedule
)

// expired is IPVS's full check: an entry is kept while now is before
// lastuse + expiration.
func expired(now, lastuse int64, exp time.Duration) bool {
	return now-lastuse >= int64(exp)
}

// localityOverloaded is is_overloaded of ip_vs_lblc.c and ip_vs_lblcr.c:
// dest i has more active connections than its weight while some available
// dest has fewer active connections than half its weight (seed 001: "and
// another server is at half load"). IPVS looks at every dest's weight only;
// here the other one must also be available (not over its thresholds).
func (p *pool) localityOverloaded(i int, c Counts) bool {
	if int64(activeConns(c, p.dests[i].ID)) <= int64(p.dests[i].Weight) {
		return false
	}
	for j := range p.dests {
		if j == i {
			continue
		}
		if a, _, ok := p.state(j, c); ok && 2*int64(a) < int64(p.dests[j].Weight) {
			return true
		}
	}
	return false
}
