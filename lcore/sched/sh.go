package sched

// sourceHashing is IPVS's sh (net/netfilter/ipvs/ip_vs_sh.c): a static
// table of 256 buckets filled honouring weights, looked up by
// hash_32(source port + source address, 8), the port counting only with
// FlagPort (sh-port); with FlagFallback (sh-fallback) an unavailable or
// overloaded dest makes it probe the other buckets, otherwise the flow gets
// no server.
type sourceHashing struct {
	hashTable
	port bool
}

func newSourceHashing(dests []Dest, o Options) (Scheduler, error) {
	return &sourceHashing{hashTable: newHashTable(dests, o), port: o.Flags&FlagPort != 0}, nil
}

func (s *sourceHashing) Schedule(f *Flow, c Counts) int {
	if f == nil {
		return -1
	}
	key := f.SrcIP
	if s.port {
		key += uint32(f.SrcPort)
	}
	return s.lookup(key, c)
}
