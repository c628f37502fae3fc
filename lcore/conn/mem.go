package conn

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Table memory. A table far larger than the caches misses the TLB on
// every lookup with 4 KiB pages (a 2M-entry table spans 48 thousand of
// them). Its entries and index therefore live in anonymous memory the
// kernel is asked to back with 2 MiB transparent huge pages
// (MADV_HUGEPAGE: honoured when /sys/kernel/mm/transparent_hugepage/enabled
// is "always" or "madvise"), aligned to 2 MiB so every page can be one.
// The memory is outside the Go heap: the garbage collector neither scans
// it (it holds no pointers) nor counts it towards its next cycle. Tables
// smaller than a huge page, or a failed mapping, use the Go heap.

const hugePage = 2 << 20

// tableMem is one mapping, released when the table is collected.
type tableMem struct {
	b []byte
}

// hugeSlice returns n zeroed T in huge-page-backed memory when n T fill
// at least a huge page, else in the Go heap. The mapping is released when
// the table t is collected. T must hold no pointers.
func hugeSlice[T any](n int, t *Table) []T {
	var zero T
	size := n * int(unsafe.Sizeof(zero))
	if size < hugePage {
		return make([]T, n)
	}
	b, err := unix.Mmap(-1, 0, size+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return make([]T, n)
	}
	off := 0
	if r := uintptr(unsafe.Pointer(&b[0])) % hugePage; r != 0 {
		off = int(hugePage - r)
	}
	_ = unix.Madvise(b[off:off+size], unix.MADV_HUGEPAGE) // advice: without it, 4 KiB pages
	runtime.AddCleanup(t, func(m tableMem) { _ = unix.Munmap(m.b) }, tableMem{b})
	t.mapped += size
	return unsafe.Slice((*T)(unsafe.Pointer(&b[off])), n)
}

// MappedBytes is the table memory outside the Go heap (the entries and
// index in huge-page mappings; 0 for a table in the heap), so memory
// accounting can add it to what the heap holds.
func (t *Table) MappedBytes() int { return t.mapped }

// MemoryBytes is the table's whole memory: the entries, the index, the
// free list and the side arrays EnableExt and EnableSix added, from the
// lengths and element sizes of its arrays (wherever they live).
func (t *Table) MemoryBytes() int {
	return sliceBytes(t.entries) + sliceBytes(t.slots) + sliceBytes(t.free) + sliceBytes(t.due) + sliceBytes(t.ext) + sliceBytes(t.six)
}

func sliceBytes[T any](s []T) int {
	var zero T
	return len(s) * int(unsafe.Sizeof(zero))
}

// BytesPerConn is what one connection costs in a table of capacity
// entries: MemoryBytes over Cap, with the IPv6 address array when six
// (an lcore with IPv6 services) and the FullNAT extension array when ext.
func BytesPerConn(capacity int, six, ext bool) (float64, error) {
	t, err := NewWithSeed(capacity, 1)
	if err != nil {
		return 0, err
	}
	if six {
		t.EnableSix()
	}
	if ext {
		t.EnableExt()
	}
	return float64(t.MemoryBytes()) / float64(t.Cap()), nil
}

// Prefault makes the kernel back all of a new table's mapped memory now,
// before any packet needs it: left to the first touch, each 2 MiB of
// entries or index costs a page fault that zeroes a huge page (and may
// compact memory for it) inside one insertion, 1 to 20 ms here, so a
// table that grows stalls its lcore for that long once per 2 MiB. It
// writes a zero to every 4 KiB page of the entries and the index (one
// fault per huge page where the kernel gives huge pages); the sweep's
// bounds are written, so resident, when the table is made. Call it on a
// new table, before its first Insert; a table in the Go heap is left as
// it is.
func (t *Table) Prefault() {
	if t.mapped == 0 || t.Len() != 0 {
		return
	}
	touch(unsafe.Slice((*byte)(unsafe.Pointer(&t.entries[0])), sliceBytes(t.entries)))
	touch(unsafe.Slice((*byte)(unsafe.Pointer(&t.slots[0])), sliceBytes(t.slots)))
}

// touch writes a zero to every 4 KiB page of zeroed memory b.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
