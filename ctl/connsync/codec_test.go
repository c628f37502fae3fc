package connsync

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

var testKey = []byte("0123456789abcdef-test-key")

func mustCodec(t testing.TB, key []byte) *Codec {
	t.Helper()
	c, err := NewCodec(key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sampleRecords: a NAT TCP connection, a DR UDP one, a template.
func sampleRecords() []lcore.SyncConn {
	return []lcore.SyncConn{
		{ClientIP: 0xc6336401, VIP: 0xcb007101, RIP: 0x0a000102, ClientPort: 40000, VPort: 80, RPort: 8080,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT},
		{ClientIP: 0xc6336402, VIP: 0xcb007101, RIP: 0x0a000103, ClientPort: 5353, VPort: 53, RPort: 53,
			Proto: hdr.ProtoUDP, State: conn.StateUDP, Fwd: fwd.DR},
		{ClientIP: 0xc6336400, VIP: 0xcb007101, RIP: 0x0a000102, VPort: 443, RPort: 443,
			Proto: hdr.ProtoTCP, Fwd: fwd.TUN, Template: true},
	}
}

func TestRoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	recs := sampleRecords()
	h := Header{Kind: KindRecords, SyncID: 7, Boot: 1 << 40, Seq: 99}
	msg := c.Append(nil, h, recs)
	if len(msg) != MinMessageLen+len(recs)*RecordLen {
		t.Fatalf("length %d", len(msg))
	}
	got, out, r := c.Decode(msg, nil)
	if r != ReasonNone {
		t.Fatalf("dropped: %v", r)
	}
	if got != h {
		t.Errorf("header %+v, want %+v", got, h)
	}
	if len(out) != len(recs) {
		t.Fatalf("%d records, want %d", len(out), len(recs))
	}
	for i := range recs {
		if out[i] != recs[i] {
			t.Errorf("record %d: %+v, want %+v", i, out[i], recs[i])
		}
	}
	// Network byte order: the first record's client address leads the body.
	if !bytes.Equal(msg[HeaderLen:HeaderLen+4], []byte{0xc6, 0x33, 0x64, 0x01}) {
		t.Errorf("client address on the wire: % x", msg[HeaderLen:HeaderLen+4])
	}
	end := c.Append(nil, Header{Kind: KindBulkEnd, Boot: 5, Seq: 1, Ref: 77}, nil)
	if h, out, r := c.Decode(end, nil); r != ReasonNone || h.Ref != 77 || len(out) != 0 {
		t.Errorf("bulk-end: %+v %v %v", h, out, r)
	}
}

// resign recomputes msg's MAC after a test edited its body.
func resign(c *Codec, msg []byte) []byte {
	body := msg[:len(msg)-MACLen]
	c.mac.Reset()
	c.mac.Write(body)
	return c.mac.Sum(append([]byte(nil), body...))
}

func TestDecodeDrops(t *testing.T) {
	c := mustCodec(t, testKey)
	valid := func() []byte {
		return c.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 10, Seq: 3}, sampleRecords())
	}
	edit := func(f func(m []byte) []byte, sign bool) []byte {
		m := f(valid())
		if sign {
			m = resign(c, m)
		}
		return m
	}
	other := mustCodec(t, []byte("another-key-of-16-bytes"))
	cases := []struct {
		name string
		msg  []byte
		want Reason
	}{
		{"empty", nil, ReasonLength},
		{"short", valid()[:MinMessageLen-1], ReasonLength},
		{"too long", make([]byte, MaxMessageLen+1), ReasonLength},
		{"magic", edit(func(m []byte) []byte { m[0] = 'X'; return m }, true), ReasonMagic},
		{"version", edit(func(m []byte) []byte { m[offVersion] = 2; return m }, true), ReasonVersion},
		{"count beyond length", edit(func(m []byte) []byte { m[offCount+1]++; return m }, true), ReasonLength},
		{"truncated record", edit(func(m []byte) []byte { return append(m[:len(m)-MACLen-1], make([]byte, MACLen)...) }, true), ReasonLength},
		{"kind", edit(func(m []byte) []byte { m[offKind] = byte(lastKind) + 1; return m }, true), ReasonKind},
		{"records on a bulk request", edit(func(m []byte) []byte { m[offKind] = byte(KindBulkRequest); return m }, true), ReasonMalformed},
		{"reserved", edit(func(m []byte) []byte { m[offRsv3] = 1; return m }, true), ReasonMalformed},
		{"flipped body bit", edit(func(m []byte) []byte { m[HeaderLen+3] ^= 1; return m }, false), ReasonMAC},
		{"flipped MAC bit", edit(func(m []byte) []byte { m[len(m)-1] ^= 0x80; return m }, false), ReasonMAC},
		{"other key", other.Append(nil, Header{Kind: KindRecords, Boot: 1, Seq: 1}, sampleRecords()), ReasonMAC},
		{"zero boot", edit(func(m []byte) []byte { clear(m[offBoot : offBoot+8]); return m }, true), ReasonMalformed},
		{"zero sequence", edit(func(m []byte) []byte { clear(m[offSeq : offSeq+8]); return m }, true), ReasonMalformed},
		{"bad protocol", edit(func(m []byte) []byte { m[HeaderLen+18] = 1; return m }, true), ReasonRecord},
		{"bad state", edit(func(m []byte) []byte { m[HeaderLen+19] = byte(conn.NumStates); return m }, true), ReasonRecord},
		{"bad method", edit(func(m []byte) []byte { m[HeaderLen+20] = 3; return m }, true), ReasonRecord},
		{"bad flags", edit(func(m []byte) []byte { m[HeaderLen+21] = 2; return m }, true), ReasonRecord},
		{"no real server", edit(func(m []byte) []byte { clear(m[HeaderLen+8 : HeaderLen+12]); return m }, true), ReasonRecord},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prev := []lcore.SyncConn{{VIP: 1}}
			_, out, r := c.Decode(tc.msg, prev)
			if r != tc.want {
				t.Errorf("reason %v, want %v", r, tc.want)
			}
			if len(out) != 1 || out[0] != prev[0] {
				t.Errorf("a dropped message changed the records: %+v", out)
			}
		})
	}
}

func TestRecordsFit(t *testing.T) {
	if n := RecordsFit(1500 - 28); n != 58 {
		t.Errorf("an Ethernet MTU's UDP payload holds %d records, want 58", n)
	}
	if n := RecordsFit(10); n != 0 {
		t.Errorf("a tiny payload holds %d records", n)
	}
	if n := RecordsFit(1 << 20); n != MaxRecords {
		t.Errorf("a huge payload holds %d records, want MaxRecords %d", n, MaxRecords)
	}
	c := mustCodec(t, testKey)
	if m := c.Append(nil, Header{Kind: KindRecords, Boot: 1, Seq: 1}, make([]lcore.SyncConn, MaxRecords)); len(m) > MaxMessageLen {
		t.Errorf("MaxRecords make %d bytes", len(m))
	}
}

func TestKeys(t *testing.T) {
	if _, err := NewCodec([]byte("short")); err == nil {
		t.Error("a 5-byte key was accepted")
	}
	dir := t.TempDir()
	if _, err := LoadKey("sync.key_file", ""); err == nil || !strings.Contains(err.Error(), "sync.key_file") {
		t.Errorf("no key file: %v", err)
	}
	if _, err := LoadKey("sync.key_file", filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "sync.key_file") {
		t.Errorf("missing key file: %v", err)
	}
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("abc\n"), 0o600)
	if _, err := LoadKey("sync.key_file", short); err == nil || !strings.Contains(err.Error(), "sync.key_file") {
		t.Errorf("short key file: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte("0123456789abcdef0123\n"), 0o644)
	if _, err := LoadKey("sync.key_file", open); err == nil || !strings.Contains(err.Error(), "every user") {
		t.Errorf("a world-readable key file: %v", err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("0123456789abcdef0123\n"), 0o600)
	if k, err := LoadKey("sync.key_file", good); err != nil || string(k) != "0123456789abcdef0123" {
		t.Errorf("good key file: %q %v", k, err)
	}
}

func TestWindow(t *testing.T) {
	var w Window
	steps := []struct {
		boot, seq uint64
		want      Reason
	}{
		{5, 1, ReasonNone},
		{5, 1, ReasonReplay},
		{5, 3, ReasonNone},
		{5, 2, ReasonNone}, // reordered, still in the window
		{5, 2, ReasonReplay},
		{5, 3 + WindowSize, ReasonNone},
		{5, 3, ReasonStale}, // fell out of the window
		{5, 4, ReasonNone},  // just inside
		{4, 1000, ReasonStale},
		{6, 1, ReasonNone}, // the sender restarted
		{5, 1 << 20, ReasonStale},
		{6, 1, ReasonReplay},
		{6, 1 << 40, ReasonNone},
		{6, 1<<40 - WindowSize + 1, ReasonNone},
		{6, 1<<40 - WindowSize, ReasonStale},
	}
	for i, s := range steps {
		if r := w.Accept(s.boot, s.seq); r != s.want {
			t.Errorf("step %d (%d,%d): %v, want %v", i, s.boot, s.seq, r, s.want)
		}
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Reasons() {
		n := r.String()
		if n == "" || n == "invalid" || seen[n] {
			t.Errorf("reason %d named %q", r, n)
		}
		seen[n] = true
	}
}
