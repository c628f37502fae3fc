package connsync

import (
	"crypto/hmac"
	"crypto/sha256"
	"testing"

	"github.com/dplb/dplb/lcore"
)

// FuzzDecode feeds the decoder anything. resign recomputes the MAC of the
// input with the right key first, so the checks behind the MAC (records,
// reserved fields) are fuzzed too. The decoder must never panic, never
// accept a message whose MAC is not the key's, and what it accepts must
// encode back to the same bytes.
func FuzzDecode(f *testing.F) {
	c := mustCodec(f, testKey)
	recs := sampleRecords()
	valid := c.Append(nil, Header{Kind: KindRecords, SyncID: 1, Boot: 10, Seq: 3}, recs)
	f.Add(valid, false)
	f.Add(c.Append(nil, Header{Kind: KindBulkRequest, Boot: 10, Seq: 4}, nil), false)
	f.Add(c.Append(nil, Header{Kind: KindBulkEnd, Boot: 10, Seq: 5, Ref: 9}, nil), false)
	f.Add(c.Append(nil, Header{Kind: KindRecords, Boot: 1, Seq: 1}, make([]lcore.SyncConn, MaxRecords)), true)
	f.Add(c.Append(nil, Header{Kind: KindExtRecords, SyncID: 1, Boot: 10, Seq: 6}, sampleExtRecords()), false)
	f.Add(c.Append(nil, Header{Kind: KindExtRecords, Boot: 10, Seq: 7}, sampleExtRecords()[:1]), true)
	f.Add(c.Append(nil, Header{Kind: KindRecords6, SyncID: 1, Boot: 10, Seq: 8}, sampleRecords6()), false)
	f.Add(c.Append(nil, Header{Kind: KindRecords6, Boot: 10, Seq: 9}, sampleRecords6()[2:]), true)
	f.Add(c.Append(nil, Header{Kind: KindRecords6, Boot: 10, Seq: 9}, sampleRecords6())[:HeaderLen+Record6Len-1], true)
	f.Add(c.Append(nil, Header{Kind: KindFTP, SyncID: 1, Boot: 10, Seq: 10}, sampleFTPRecords()), false)
	f.Add(c.Append(nil, Header{Kind: KindFTP, Boot: 10, Seq: 11}, sampleFTPRecords()[1:]), true)
	f.Add(c.Append(nil, Header{Kind: KindFTP, Boot: 10, Seq: 12}, sampleFTPRecords())[:HeaderLen+FTPRecordLen+MACLen-1], true)
	flipped := append([]byte(nil), valid...)
	flipped[HeaderLen] ^= 0xff
	f.Add(flipped, false)
	f.Add(valid[:len(valid)-1], false)
	f.Add(valid[:HeaderLen], true)
	f.Add([]byte{}, false)
	f.Add([]byte("DPSY garbage garbage garbage garbage garbage garbage garbage garbage"), true)
	other := mustCodec(f, []byte("another-key-of-16-bytes"))
	f.Add(other.Append(nil, Header{Kind: KindRecords, Boot: 1, Seq: 1}, recs), false)

	check := hmac.New(sha256.New, testKey)
	f.Fuzz(func(t *testing.T, msg []byte, sign bool) {
		if sign && len(msg) >= MACLen {
			msg = resign(c, msg)
		}
		h, out, r := c.Decode(msg, nil)
		if r != ReasonNone {
			if len(out) != 0 {
				t.Fatalf("dropped (%v) but returned %d records", r, len(out))
			}
			return
		}
		check.Reset()
		check.Write(msg[:len(msg)-MACLen])
		if !hmac.Equal(check.Sum(nil), msg[len(msg)-MACLen:]) {
			t.Fatalf("accepted a message with a bad MAC: % x", msg)
		}
		if again := c.Append(nil, h, out); string(again) != string(msg) {
			t.Fatalf("accepted message does not encode back:\n% x\n% x", msg, again)
		}
	})
}
