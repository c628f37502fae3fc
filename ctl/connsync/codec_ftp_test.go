package connsync

import (
	"encoding/binary"
	"testing"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// sampleFTPRecords: a control connection whose 227 replies were rewritten
// (the server's stream shifted twice, once back), one never shifted, a
// data connection of the FTP service on port 21.
func sampleFTPRecords() []lcore.SyncConn {
	return []lcore.SyncConn{
		{ClientIP: 0xc6336401, VIP: 0xcb007101, RIP: 0x0a000102, ClientPort: 40000, VPort: 21, RPort: 21,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTP: true,
			FTPOut: lcore.SeqShift{Init: 0xfffffff0, Delta: -3, Prev: 4}},
		{ClientIP: 0xc6336402, VIP: 0xcb007101, RIP: 0x0a000103, ClientPort: 40001, VPort: 21, RPort: 2121,
			Proto: hdr.ProtoTCP, State: conn.StateCloseWait, Fwd: fwd.NAT, FTP: true},
		{ClientIP: 0xc6336401, VIP: 0xcb007101, RIP: 0x0a000102, ClientPort: 40002, VPort: 50000, RPort: 50000,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTPData: true, ServicePort: 21},
	}
}

// TestFTPRoundTrip: kind 6 carries a control connection's two sequence
// adjustments after the plain record's 24 bytes.
func TestFTPRoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	recs := sampleFTPRecords()
	h := Header{Kind: KindFTP, SyncID: 3, Boot: 5, Seq: 8}
	msg := c.Append(nil, h, recs)
	if len(msg) != MinMessageLen+len(recs)*FTPRecordLen || FTPRecordLen != 48 {
		t.Fatalf("length %d", len(msg))
	}
	if got := AppendRecord(nil, recs[0]); string(got) != string(msg[HeaderLen:HeaderLen+RecordLen]) {
		t.Errorf("FTP record does not start with the plain layout:\n% x\n% x", msg[HeaderLen:HeaderLen+RecordLen], got)
	}
	x := msg[HeaderLen+RecordLen:]
	if string(x[:12]) != string(make([]byte, 12)) || binary.BigEndian.Uint32(x[12:]) != 0xfffffff0 ||
		binary.BigEndian.Uint32(x[16:]) != 0xfffffffd || binary.BigEndian.Uint32(x[20:]) != 4 {
		t.Errorf("adjustments % x", x[:24])
	}
	checkDecodesTo(t, c, msg, h, recs)
	if one, ok := DecodeFTPRecord(AppendFTPRecord(nil, recs[0])); !ok || one != recs[0] {
		t.Errorf("AppendFTPRecord/DecodeFTPRecord: %+v %t", one, ok)
	}
	if d := msg[HeaderLen+2*FTPRecordLen:]; d[21] != 2 || binary.BigEndian.Uint16(d[22:]) != 21 {
		t.Errorf("data connection's flags and service port % x", d[20:24])
	}
	if _, ok := DecodeFTPRecord(AppendFTPRecord(nil, recs[0])[:FTPRecordLen-1]); ok {
		t.Error("a short FTP record decoded")
	}
	if k := RecordKind(&recs[1]); k != KindFTP || k.String() != "ftp-records" {
		t.Errorf("RecordKind %v", k)
	}
	if KindFit(KindFTP, 1500-28) != 29 {
		t.Errorf("KindFit(6, 1472) = %d", KindFit(KindFTP, 1500-28))
	}
	// The same connection in a plain message loses the helper's state,
	// as an older master sends it.
	plain := c.Append(nil, Header{Kind: KindRecords, Boot: 5, Seq: 9}, recs[:1])
	if _, out, r := c.Decode(plain, nil); r != ReasonNone || out[0].FTP || out[0].FTPOut != (lcore.SeqShift{}) {
		t.Errorf("plain: %v %+v", r, out)
	}
}

// TestFTPRefused: an impossible FTP record drops the message.
func TestFTPRefused(t *testing.T) {
	c := mustCodec(t, testKey)
	mod := func(f func(r *lcore.SyncConn)) []lcore.SyncConn {
		recs := sampleFTPRecords()
		f(&recs[1])
		return recs
	}
	for name, recs := range map[string][]lcore.SyncConn{
		"template":          mod(func(r *lcore.SyncConn) { r.Template = true }),
		"DR":                mod(func(r *lcore.SyncConn) { r.Fwd = fwd.DR }),
		"FullNAT":           mod(func(r *lcore.SyncConn) { r.Fwd = fwd.FullNAT }),
		"UDP":               mod(func(r *lcore.SyncConn) { r.Proto, r.State = hdr.ProtoUDP, conn.StateUDP }),
		"no client":         mod(func(r *lcore.SyncConn) { r.ClientIP = 0 }),
		"unshifted in init": mod(func(r *lcore.SyncConn) { r.FTPIn.Init = 1 }),
		"unshifted out":     mod(func(r *lcore.SyncConn) { r.FTPOut.Init = 7 }),
		"data, no service":  mod(func(r *lcore.SyncConn) { r.FTP, r.FTPData = false, true }),
		"shifted data": mod(func(r *lcore.SyncConn) {
			r.FTP, r.FTPData, r.ServicePort, r.FTPOut = false, true, 21, lcore.SeqShift{Init: 1, Delta: 2}
		}),
	} {
		msg := c.Append(nil, Header{Kind: KindFTP, Boot: 1, Seq: 1}, recs)
		if _, out, r := c.Decode(msg, nil); r != ReasonRecord || len(out) != 0 {
			t.Errorf("%s: %v, %d records; want dropped for its record", name, r, len(out))
		}
	}
	// A control connection's record with a service port.
	rec := AppendFTPRecord(nil, sampleFTPRecords()[0])
	rec[23] = 21
	if _, ok := DecodeFTPRecord(rec); ok {
		t.Error("a control connection with a service port decoded")
	}
	checkPlainLength(t, c, KindFTP)
	msg := c.Append(nil, Header{Kind: KindFTP, Boot: 1, Seq: 1}, sampleFTPRecords())
	if _, _, r := c.Decode(msg[:len(msg)-1], nil); r != ReasonLength {
		t.Errorf("short by a byte: %v, want length", r)
	}
}
