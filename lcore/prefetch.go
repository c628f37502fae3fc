package lcore

// prefetch is the lookup stage of a burst: every flow packet's key hashed
// and its index cell prefetched, then the entries those cells name
// prefetched, so that processing the burst in order finds them in the
// cache (conn/batch.go says why). It only warms the cache: the lookups
// stay where they were, in order.
func (w *Worker) prefetch(ds []desc) {
	hs := w.hashes[:len(ds)]
	for i := range ds {
		d := &ds[i]
		if d.class != classFlow {
			continue
		}
		k := &d.flow
		hs[i] = w.table.Hash(k.proto, k.src, k.sport, k.dst, k.dport)
		w.table.PrefetchCell(hs[i])
	}
	for i := range ds {
		if ds[i].class == classFlow {
			w.table.PrefetchEntry(hs[i])
		}
	}
}
