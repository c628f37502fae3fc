package connsync

import (
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// sampleExtRecords: a FullNAT connection with PROXY v2 and a SYN proxy's
// delta, a FullNAT UDP one, a SYN-proxied NAT one.
func sampleExtRecords() []lcore.SyncConn {
	return []lcore.SyncConn{
		{ClientIP: 0xc6336401, VIP: 0xcb007101, RIP: 0x0a000102, ClientPort: 40000, VPort: 80, RPort: 8080,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, HasExt: true,
			Ext: conn.Ext{LIP: 0x0a000132, LPort: 2049, Flags: 1, ClientISN: 7, ServerISN: 0xfffffff0, SeqIn: 28, SeqOut: 0x80000001,
				TSOff: 0xdeadbeef, TSPeer: 42}},
		{ClientIP: 0xc6336402, VIP: 0xcb007101, RIP: 0x0a000103, ClientPort: 5353, VPort: 53, RPort: 53,
			Proto: hdr.ProtoUDP, State: conn.StateUDP, Fwd: fwd.FullNAT, HasExt: true,
			Ext: conn.Ext{LIP: 0x0a000133, LPort: 65535}},
		{ClientIP: 0xc6336403, VIP: 0xcb007102, RIP: 0x0a000104, ClientPort: 1234, VPort: 443, RPort: 443,
			Proto: hdr.ProtoTCP, State: conn.StateFinWait, Fwd: fwd.NAT, HasExt: true,
			Ext: conn.Ext{LIP: 0xc6336403, LPort: 1234, ClientISN: 99, ServerISN: 12345, SeqOut: 4321}},
	}
}

// TestExtRoundTrip: kind 4 carries each record's extension, in 48 bytes
// whose first 24 are the plain record's layout.
func TestExtRoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	recs := sampleExtRecords()
	h := Header{Kind: KindExtRecords, SyncID: 3, Boot: 5, Seq: 8}
	msg := c.Append(nil, h, recs)
	if len(msg) != MinMessageLen+len(recs)*ExtRecordLen {
		t.Fatalf("length %d", len(msg))
	}
	if got := AppendRecord(nil, recs[0]); string(got) != string(msg[HeaderLen:HeaderLen+RecordLen]) {
		t.Errorf("extended record does not start with the plain layout:\n% x\n% x", msg[HeaderLen:HeaderLen+RecordLen], got)
	}
	x := msg[HeaderLen+RecordLen:]
	if binary.BigEndian.Uint32(x) != 0x0a000132 || binary.BigEndian.Uint16(x[4:]) != 2049 || binary.BigEndian.Uint32(x[20:]) != 0x80000001 {
		t.Errorf("extension % x", x[:24])
	}
	checkDecodesTo(t, c, msg, h, recs)
	if one, ok := DecodeExtRecord(AppendExtRecord(nil, recs[2])); !ok || one != recs[2] {
		t.Errorf("AppendExtRecord/DecodeExtRecord: %+v %t", one, ok)
	}
	if ExtRecordsFit(1500-28) != 25 || ExtRecordsFit(10) != 0 {
		t.Errorf("ExtRecordsFit(1472) = %d", ExtRecordsFit(1500-28))
	}
}

// TestExtRefused: an impossible extended record drops the message, and a
// FullNAT connection never travels in a plain record.
func TestExtRefused(t *testing.T) {
	c := mustCodec(t, testKey)
	mod := func(f func(r *lcore.SyncConn)) []lcore.SyncConn {
		recs := sampleExtRecords()
		f(&recs[0])
		return recs
	}
	cases := map[string]struct {
		kind Kind
		recs []lcore.SyncConn
	}{
		"fullnat in a plain record": {KindRecords, sampleExtRecords()[:1]},
		"template":                  {KindExtRecords, mod(func(r *lcore.SyncConn) { r.Template = true })},
		"DR":                        {KindExtRecords, mod(func(r *lcore.SyncConn) { r.Fwd = fwd.DR })},
		"no local address":          {KindExtRecords, mod(func(r *lcore.SyncConn) { r.Ext.LIP = 0 })},
		"no local port":             {KindExtRecords, mod(func(r *lcore.SyncConn) { r.Ext.LPort = 0 })},
		"NAT keyed elsewhere":       {KindExtRecords, mod(func(r *lcore.SyncConn) { r.Fwd = fwd.NAT })},
	}
	for name, tc := range cases {
		msg := c.Append(nil, Header{Kind: tc.kind, Boot: 1, Seq: 1}, tc.recs)
		if _, out, r := c.Decode(msg, nil); r != ReasonRecord || len(out) != 0 {
			t.Errorf("%s: %v, %d records; want dropped for its record", name, r, len(out))
		}
	}
	checkPlainLength(t, c, KindExtRecords)
}

// checkDecodesTo: msg decodes to h and recs.
func checkDecodesTo(t *testing.T, c *Codec, msg []byte, h Header, recs []lcore.SyncConn) {
	t.Helper()
	got, out, r := c.Decode(msg, nil)
	if r != ReasonNone || got != h || len(out) != len(recs) {
		t.Fatalf("decode: %v %+v, %d records", r, got, len(out))
	}
	for i := range recs {
		if out[i] != recs[i] {
			t.Errorf("record %d: %+v, want %+v", i, out[i], recs[i])
		}
	}
}

// checkPlainLength: a plain message's length is no message of kind k's.
func checkPlainLength(t *testing.T, c *Codec, k Kind) {
	t.Helper()
	msg := c.Append(nil, Header{Kind: KindRecords, Boot: 1, Seq: 1}, sampleRecords()[:2])
	msg[offKind] = byte(k)
	if _, _, r := c.Decode(msg, nil); r != ReasonLength {
		t.Errorf("kind %d with 24-byte records: %v, want length", k, r)
	}
}

// TestGroupByKind: the extended records go after the plain ones, then
// the IPv6 ones and the FTP ones last, each group in order.
func TestGroupByKind(t *testing.T) {
	plain, ext, six, ftp := sampleRecords(), sampleExtRecords(), sampleRecords6()[:3], sampleFTPRecords()
	recs := []lcore.SyncConn{ftp[0], six[0], ext[0], plain[0], plain[1], ext[1], six[1], ftp[1], plain[2], ext[2], ftp[2], six[2]}
	groupByKind(recs)
	want := append(append(append(append([]lcore.SyncConn(nil), plain...), ext...), six...), ftp...)
	for i := range want {
		if recs[i] != want[i] {
			t.Fatalf("record %d: %+v, want %+v", i, recs[i], want[i])
		}
	}
}
