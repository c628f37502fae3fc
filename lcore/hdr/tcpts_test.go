package hdr

import "testing"

func TestWScaleAndTimestamps(t *testing.T) {
	opts := []byte{TCPOptMSS, 4, 0x05, 0xb4, TCPOptSACKPerm, 2, TCPOptTimestamp, 10, 0, 0, 0, 100, 0xff, 0xff, 0xff, 0xf0,
		TCPOptNOP, TCPOptWScale, 3, 7}
	b := seg(opts)
	if ws, ok := b.WScale(); !ok || ws != 7 {
		t.Fatalf("wscale %d %v", ws, ok)
	}
	val, ecr, ok := b.Timestamps()
	if !ok || val != 100 || ecr != 0xfffffff0 {
		t.Fatalf("timestamps %d %d %v", val, ecr, ok)
	}
	b.ShiftTimestamps(5, 0x20, true) // TSecr wraps
	if val, ecr, _ = b.Timestamps(); val != 105 || ecr != 0xffffffd0 {
		t.Fatalf("shifted to %d %d", val, ecr)
	}
	got := b.Checksum()
	b.SetChecksum(0)
	if want := TransportChecksum(1, 2, ProtoTCP, b); got != want {
		t.Fatalf("checksum %#x, want %#x", got, want)
	}
	none := seg([]byte{TCPOptMSS, 4, 0x05, 0xb4})
	if _, ok := none.WScale(); ok {
		t.Fatal("wscale without the option")
	}
	if _, _, ok := none.Timestamps(); ok {
		t.Fatal("timestamps without the option")
	}
	none.ShiftTimestamps(1, 1, true) // nothing to do, nothing broken
}

// FuzzSynOptions: the one-pass reader finds what the four single-option
// readers find, whatever the options area holds (malformed lists included).
func FuzzSynOptions(f *testing.F) {
	f.Add([]byte{TCPOptMSS, 4, 0x05, 0xb4, TCPOptSACKPerm, 2, TCPOptTimestamp, 10, 0, 0, 0, 100, 0xff, 0xff, 0xff, 0xf0, TCPOptNOP, TCPOptWScale, 3, 7})
	f.Add([]byte{TCPOptMSS, 4, 0, 0, TCPOptMSS, 4, 0x05, 0xb4, TCPOptWScale, 3, 1, TCPOptWScale, 3, 2, TCPOptEnd, 0})
	f.Add([]byte{TCPOptNOP, TCPOptTimestamp, 9, 0, 0, 0, 0, 0, 0, 0, TCPOptSACKPerm, 3, 0})
	f.Add([]byte{TCPOptMSS, 1, 0, 0})
	f.Fuzz(func(t *testing.T, opts []byte) {
		opts = opts[:min(len(opts), 40)&^3] // an options area is whole words, at most 40 bytes
		b := seg(opts)
		got := SynOptions{MSS: 1, HasTS: true} // filled over: nothing stays
		b.SynOptions(&got)
		var want SynOptions
		want.MSS, want.SACKPerm = b.MSS(), b.HasOption(TCPOptSACKPerm)
		want.WScale, want.HasWScale = b.WScale()
		want.TSval, want.TSecr, want.HasTS = b.Timestamps()
		if got != want {
			t.Fatalf("options % x: one pass %+v, single readers %+v", opts, got, want)
		}
	})
}
