package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/hdr"
)

// TestTemplateSlotServesItsNetworkAgain: an expired template's slot is
// taken again by the same client network and VIP.
func TestTemplateSlotServesItsNetworkAgain(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	connectTo(t, r, clientIP, 40000)
	first := templateOf(t, w, clientIP, 443)
	cid, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 443)
	slot := w.table.Get(cid).Template
	w.now += int64(time.Hour) // the connection and then the template expire
	w.table.Expire(w.now, w.table.Cap(), w.expire)
	w.expireTemplates(w.tmpl.Cap())
	w.expireTemplates(w.tmpl.Cap())
	if templateOf(t, w, clientIP, 443) != nil {
		t.Fatal("template not expired")
	}
	connectTo(t, r, clientIP, 40001)
	cid, _, _ = w.table.Lookup(hdr.ProtoTCP, clientIP, 40001, vip, 443)
	if got := templateOf(t, w, clientIP, 443); got != first || w.table.Get(cid).Template != slot || w.cnt.own[Templates] != 2 {
		t.Fatalf("the network's new template is elsewhere (slot %d, was %d)", w.table.Get(cid).Template, slot)
	}
}

// TestTemplateTableFull: with no slot left within reach, a new network's
// connection is still served, without a template, and counted.
func TestTemplateTableFull(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	full, err := NewTemplates(1024)
	if err != nil {
		t.Fatal(err)
	}
	for i := range full.slots { // other networks' templates everywhere
		full.slots[i].key.Store(uint64(i+1)<<32 | uint64(vip))
		full.slots[i].val.Store(uint64(443)<<48 | uint64(hdr.ProtoTCP)<<40 | 8)
		full.slots[i].expires.Store(int64(time.Hour))
	}
	w.tmpl, w.tmplOff = full, full.offset(w.epoch)
	if got := connectTo(t, r, clientIP, 40000); got != rs1 {
		t.Fatalf("went to %x", got)
	}
	if w.cnt.own[TemplatesLost] != 1 || w.cnt.own[Templates] != 0 {
		t.Fatalf("templates_lost %d, templates %d", w.cnt.own[TemplatesLost], w.cnt.own[Templates])
	}
	cid, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 443)
	if w.table.Get(cid).Template != 0 {
		t.Fatal("the connection refers to a template that was not made")
	}
}

// TestTemplateTableFullOfExpired: with every slot within reach holding
// a template that expired and controls nothing (the sweep not there yet),
// a new network's connection frees one and makes its template.
func TestTemplateTableFullOfExpired(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	full, err := NewTemplates(1024)
	if err != nil {
		t.Fatal(err)
	}
	for i := range full.slots {
		full.slots[i].key.Store(uint64(i+1)<<32 | uint64(vip))
		full.slots[i].val.Store(uint64(443)<<48 | uint64(hdr.ProtoTCP)<<40 | 8)
		full.slots[i].expires.Store(-int64(time.Hour))
	}
	full.persistent[7].Store(int32(len(full.slots)))
	w.tmpl, w.tmplOff = full, full.offset(w.epoch)
	connectTo(t, r, clientIP, 40000)
	if w.cnt.own[TemplatesLost] != 0 || w.cnt.own[Templates] != 1 || templateOf(t, w, clientIP, 443) == nil {
		t.Fatalf("templates_lost %d, templates %d", w.cnt.own[TemplatesLost], w.cnt.own[Templates])
	}
	if got := full.persistent[7].Load() + full.persistent[8].Load(); got != int32(len(full.slots)) {
		t.Fatalf("persistent gauges sum to %d, want %d (one freed, one made)", got, len(full.slots))
	}
}

// TestTemplateRace: two workers that make the same template at once end
// with one, and the loser adopts the winner's server.
func TestTemplateRace(t *testing.T) {
	tt, err := NewTemplates(1024)
	if err != nil {
		t.Fatal(err)
	}
	key, sub := templateKey(clientIP&0xFFFFFF00, vip, 80, hdr.ProtoTCP)
	_, _, freeA, emptyA := tt.find(key, sub)
	_, _, freeB, emptyB := tt.find(key, sub) // both looked before either wrote
	if freeA != freeB || freeA < 0 {
		t.Fatalf("free slots %d and %d", freeA, freeB)
	}
	if !tt.claim(freeA, key, emptyA, sub|1, 0) { // A: real server id 0
		t.Fatal("the first claim failed")
	}
	if tt.claim(freeB, key, emptyB, sub|2, 0) { // B: real server id 1, too late
		t.Fatal("the second claim succeeded")
	}
	slot, v, _, _ := tt.find(key, sub)
	if slot != freeA || v&templateDest != 1 {
		t.Fatalf("B finds slot %d value %#x, want A's", slot, v)
	}
	if c := tt.slots[slot].controls.Load(); c != 1 {
		t.Fatalf("controls %d after one successful claim, want 1 (the loser's pin given back)", c)
	}
	// Another port of the same network and VIP takes the next slot.
	key2, sub2 := templateKey(clientIP&0xFFFFFF00, vip, 443, hdr.ProtoTCP)
	if _, _, free, empty := tt.find(key2, sub2); free == freeA || !tt.claim(free, key2, empty, sub2|1, 0) {
		t.Fatalf("the second port could not make its template (free %d)", free)
	}
}

// TestTemplateFreeInterleavings steps the free protocol against a
// worker's pin and claim in the orders that matter (see templates.go).
func TestTemplateFreeInterleavings(t *testing.T) {
	tt, err := NewTemplates(1024)
	if err != nil {
		t.Fatal(err)
	}
	keyA, sub := templateKey(ip4(198, 51, 100, 0), vip, 80, hdr.ProtoTCP)
	keyB, _ := templateKey(ip4(203, 0, 113, 0), vip, 80, hdr.ProtoTCP)
	_, _, i, empty := tt.find(keyA, sub)
	if !tt.claim(i, keyA, empty, sub|1, 0) {
		t.Fatal("claim failed")
	}
	s := &tt.slots[i]
	tt.unpin(i)
	v := s.val.Load()

	// A pin taken before the free: the free backs off, nothing changes.
	if !tt.pin(i, keyA, v) {
		t.Fatal("pin of a live template failed")
	}
	if tt.free(s, v) || s.val.Load() != v || s.key.Load() != keyA {
		t.Fatalf("freed under a pin: key %#x value %#x", s.key.Load(), s.val.Load())
	}
	tt.unpin(i)

	// Freed after a worker read it, then made again for another network
	// with the same port, protocol and server: the worker's pin, its
	// re-point and its claim of the old empty value all fail.
	if !tt.free(s, v) || s.key.Load() != templateTomb || s.val.Load()&templateGen == v&templateGen {
		t.Fatalf("free: key %#x value %#x", s.key.Load(), s.val.Load())
	}
	tt.persistent[0].Add(-1)
	if tt.pin(i, keyA, v) {
		t.Fatal("pinned a freed template")
	}
	fresh := s.val.Load()
	if !tt.claim(i, keyB, fresh, sub|1, 0) {
		t.Fatal("a freed slot refused another network")
	}
	if s.val.Load()&^templateGen != v&^templateGen {
		t.Fatal("the test wants the recycled value equal but for the generation")
	}
	if tt.pin(i, keyA, v) || s.val.CompareAndSwap(v, v&^templateDest|2) {
		t.Fatal("the old template's value still matched the recycled slot (ABA)")
	}
	if tt.claim(i, keyA, empty, sub|2, 0) {
		t.Fatal("claimed with an empty value of an earlier life")
	}
	if s.key.Load() != keyB || s.controls.Load() != 1 {
		t.Fatalf("the new template was disturbed: key %#x controls %d", s.key.Load(), s.controls.Load())
	}

	// A claim that won the key but not the value leaves an empty slot
	// under a live key; worker 0 frees it, and the claimer's value fails.
	_, _, j, e := tt.find(keyA, sub)
	if !tt.slots[j].key.CompareAndSwap(0, keyA) {
		t.Fatal("could not take the key")
	}
	tt.expire(0, tt.Cap(), func(uint64, uint64) int64 { return 0 })
	if tt.slots[j].key.Load() != templateTomb || tt.claim(j, keyA, e, sub|1, 0) {
		t.Fatalf("the empty slot under a key was not freed (key %#x)", tt.slots[j].key.Load())
	}
}

// TestTemplateSweepIdleUntilUsed: worker 0's sweep reads no slot of a
// table no template was ever claimed in (services without persistence),
// and sweeps as before once one was.
func TestTemplateSweepIdleUntilUsed(t *testing.T) {
	tt, err := NewTemplates(1 << 12)
	if err != nil {
		t.Fatal(err)
	}
	called := 0
	again := func(uint64, uint64) int64 { called++; return 1 }
	tt.expire(0, tt.Cap()/2, again)
	if tt.sweep != 0 {
		t.Fatalf("the sweep moved to %d over a table never used", tt.sweep)
	}
	i := int(tt.home(42))
	if !tt.claim(i, 42, 0, 80<<48|1, 10) {
		t.Fatal("claim failed")
	}
	tt.expire(100, tt.Cap(), again) // expired, pinned by the claim: re-armed
	if called != 1 {
		t.Fatalf("after a claim: %d re-armed, want the claimed one", called)
	}
	tt.expire(100, tt.Cap()/2, again)
	if tt.sweep != tt.Cap()/2 {
		t.Fatalf("after a claim the sweep stayed at %d", tt.sweep)
	}
}
