package lcore

import "github.com/dplb/dplb/lcore/hdr"

// The control plane owns the neighbour table, and a new entry reaches the
// lcores with the next snapshot, some hundred microseconds after the ARP
// that taught it. A client's first packet can be answered sooner than that
// (a UDP query and its reply), so each lcore also remembers the Ethernet
// source of the on-link clients whose connections it opens, in a small
// fixed table consulted when the snapshot has no entry.

const (
	neighCacheSize = 1024 // entries, a power of two
	neighCacheLife = 30e9 // ns an entry is trusted (the neighbour reachable time)
	// neighCacheRefresh: an entry learnt less than this long ago is not
	// written again for the same address (fresh).
	neighCacheRefresh = 1e9
)

type neighCacheEntry struct {
	ip    uint32
	mac   hdr.MAC
	until int64
}

type neighCache [neighCacheSize]neighCacheEntry

func neighSlot(ip uint32) uint32 { return (ip * 0x9E3779B1) >> (32 - 10) }

func (c *neighCache) learn(ip uint32, mac hdr.MAC, now int64) {
	c[neighSlot(ip)] = neighCacheEntry{ip: ip, mac: mac, until: now + neighCacheLife}
}

// fresh reports whether ip is cached with mac and was learnt less than
// neighCacheRefresh ago.
func (c *neighCache) fresh(ip uint32, mac hdr.MAC, now int64) bool {
	e := &c[neighSlot(ip)]
	return e.ip == ip && e.mac == mac && e.until-now > neighCacheLife-neighCacheRefresh
}

func (c *neighCache) lookup(ip uint32, now int64) (hdr.MAC, bool) {
	if e := c.entry(ip, now); e != nil {
		return e.mac, true
	}
	return hdr.MAC{}, false
}

// entry is ip's entry while it is trusted, else nil.
func (c *neighCache) entry(ip uint32, now int64) *neighCacheEntry {
	e := &c[neighSlot(ip)]
	if e.ip != ip || e.until <= now {
		return nil
	}
	return e
}

// neighCache6 is neighCache for on-link IPv6 clients.
type neighCache6 [neighCacheSize]neighCacheEntry6

type neighCacheEntry6 struct {
	ip    hdr.Addr6
	mac   hdr.MAC
	until int64
}

func neighSlot6(ip *hdr.Addr6) uint32 {
	v := uint32(ip[12])<<24 | uint32(ip[13])<<16 | uint32(ip[14])<<8 | uint32(ip[15])
	return neighSlot(v ^ uint32(ip[8])<<24 ^ uint32(ip[9])<<16 ^ uint32(ip[10])<<8 ^ uint32(ip[11]))
}

func (c *neighCache6) learn(ip *hdr.Addr6, mac hdr.MAC, now int64) {
	c[neighSlot6(ip)] = neighCacheEntry6{ip: *ip, mac: mac, until: now + neighCacheLife}
}

func (c *neighCache6) lookup(ip *hdr.Addr6, now int64) (hdr.MAC, bool) {
	e := &c[neighSlot6(ip)]
	if e.ip != *ip || e.until <= now {
		return hdr.MAC{}, false
	}
	return e.mac, true
}
