package conn

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// CheckIndex verifies the index invariants the tests rely on: every
// occupied cell is reachable from its home cell without crossing an empty
// one, refers to a live entry whose stored hash matches, and each live
// entry has exactly the keys it should.
func (t *Table) CheckIndex() error {
	seen := make(map[uint32]int)
	for i, s := range t.slots {
		if s.empty() {
			continue
		}
		for j := s.hash & t.mask; j != uint32(i); j = (j + 1) & t.mask {
			if t.slots[j].empty() {
				return fmt.Errorf("cell %d (home %d) unreachable: empty cell %d", i, s.hash&t.mask, j)
			}
		}
		id := s.id()
		if int(id) >= len(t.entries) || t.entries[id].indexed&indexedLive == 0 {
			return fmt.Errorf("cell %d refers to dead entry %d", i, id)
		}
		e := &t.entries[id]
		want := e.hashOrig
		if s.dir() == Reply {
			want = e.hashReply
		}
		if s.hash != want {
			return fmt.Errorf("cell %d hash %#x, entry %d has %#x", i, s.hash, id, want)
		}
		seen[s.ref]++
	}
	live := 0
	for id := range t.entries {
		e := &t.entries[id]
		if e.indexed&indexedLive == 0 {
			continue
		}
		live++
		if seen[makeRef(uint32(id), Original)] != 1 {
			return fmt.Errorf("entry %d original key indexed %d times", id, seen[makeRef(uint32(id), Original)])
		}
		wantReply := 0
		if e.indexed&indexedReply != 0 {
			wantReply = 1
		}
		if got := seen[makeRef(uint32(id), Reply)]; got != wantReply {
			return fmt.Errorf("entry %d reply key indexed %d times, want %d", id, got, wantReply)
		}
	}
	if live != t.Len() {
		return fmt.Errorf("%d live entries, Len() = %d", live, t.Len())
	}
	return nil
}

// IndexCells exposes the index size for sizing tests.
func (t *Table) IndexCells() int { return len(t.slots) }

// ResidentMapped is the number of 4 KiB pages of the table's entries and
// index that are resident, and how many pages they span (mincore(2)).
func (t *Table) ResidentMapped() (resident, pages int, err error) {
	for _, b := range [][]byte{
		unsafe.Slice((*byte)(unsafe.Pointer(&t.entries[0])), sliceBytes(t.entries)),
		unsafe.Slice((*byte)(unsafe.Pointer(&t.slots[0])), sliceBytes(t.slots)),
	} {
		vec := make([]byte, (len(b)+4095)/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			return 0, 0, e
		}
		for _, v := range vec {
			resident += int(v & 1)
		}
		pages += len(vec)
	}
	return resident, pages, nil
}
