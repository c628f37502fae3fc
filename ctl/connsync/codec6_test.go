package connsync

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

func addr6(s string) hdr.Addr6 { return hdr.Addr6From(netip.MustParseAddr(s)) }

// sampleRecords6: a NAT66 TCP connection, a DR UDP one, a NAT64 one with
// its local endpoint and deltas, a NAT66 FTP control connection and one
// of its data connections (of the service on port 21), a SYN proxy's
// NAT66 connection with its ISNs and deltas.
func sampleRecords6() []lcore.SyncConn {
	client, vip := addr6("2001:db8:1::7"), addr6("2001:db8:1::100")
	return []lcore.SyncConn{
		{ClientPort: 40000, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip, RIP: addr6("fd00:1::11")}},
		{ClientPort: 5353, VPort: 53, RPort: 53, Proto: hdr.ProtoUDP, State: conn.StateUDP, Fwd: fwd.DR,
			IPv6: true, Six: conn.Addrs6{Client: addr6("2001:db8:2::1"), VIP: vip, RIP: addr6("fd00:1::12")}},
		{RIP: 0x0a000102, ClientPort: 40001, VPort: 8080, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateFinWait, Fwd: fwd.FullNAT,
			HasExt: true, Ext: conn.Ext{LIP: 0x0a000132, LPort: 2049, ClientISN: 7, SeqOut: 0x80000001},
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip}},
		{ClientPort: 40002, VPort: 21, RPort: 21, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTP: true,
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip, RIP: addr6("fd00:1::11")}},
		{ClientPort: 40003, VPort: 50001, RPort: 50001, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			FTPData: true, ServicePort: 21, IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip, RIP: addr6("fd00:1::11")}},
		{ClientPort: 40004, VPort: 443, RPort: 8443, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			HasExt: true, Ext: conn.Ext{Flags: lcore.ExtFlagsMask &^ 1, ClientISN: 9, ServerISN: 0xfffffff0, SeqOut: 0x80000003, TSOff: 5, TSPeer: 6},
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip, RIP: addr6("fd00:1::12")}},
	}
}

// TestRecords6RoundTrip: kind 5 carries the full addresses in 96-byte
// records, NAT64's IPv4 server and extension with them.
func TestRecords6RoundTrip(t *testing.T) {
	c := mustCodec(t, testKey)
	recs := sampleRecords6()
	h := Header{Kind: KindRecords6, SyncID: 3, Boot: 5, Seq: 8}
	msg := c.Append(nil, h, recs)
	if len(msg) != MinMessageLen+len(recs)*Record6Len || Record6Len != 96 {
		t.Fatalf("length %d, record %d", len(msg), Record6Len)
	}
	b := msg[HeaderLen+2*Record6Len:]
	if hdr.Addr6(b[0:16]) != recs[2].Six.Client || binary.BigEndian.Uint32(b[48:]) != 0x0a000102 ||
		binary.BigEndian.Uint16(b[52:]) != 40001 || b[60] != byte(fwd.FullNAT) || binary.BigEndian.Uint32(b[64:]) != 0x0a000132 {
		t.Errorf("NAT64 record % x", b[:Record6Len])
	}
	checkDecodesTo(t, c, msg, h, recs)
	for i := range recs {
		if one, ok := DecodeRecord6(AppendRecord6(nil, recs[i])); !ok || one != recs[i] {
			t.Errorf("AppendRecord6/DecodeRecord6 %d: %+v %t", i, one, ok)
		}
	}
	if _, ok := DecodeRecord6(AppendRecord6(nil, recs[0])[:Record6Len-1]); ok {
		t.Error("a short record decoded")
	}
	if KindFit(KindRecords6, 1500-28) != 14 || KindFit(KindRecords6, 100) != 0 {
		t.Errorf("KindFit(6, 1472) = %d", KindFit(KindRecords6, 1500-28))
	}
	if k := RecordKind(&recs[2]); k != KindRecords6 {
		t.Errorf("a NAT64 record travels in kind %v", k)
	}
}

// TestRecords6Refused: an impossible IPv6 record drops its message.
func TestRecords6Refused(t *testing.T) {
	c := mustCodec(t, testKey)
	bad := func(f func(b []byte)) []byte {
		msg := c.Append(nil, Header{Kind: KindRecords6, Boot: 1, Seq: 1}, sampleRecords6())
		f(msg[HeaderLen:])
		return resign(c, msg)
	}
	for name, msg := range map[string][]byte{
		"no client":           bad(func(b []byte) { clear(b[0:16]) }),
		"no VIP":              bad(func(b []byte) { clear(b[16:32]) }),
		"NAT66 without RIP":   bad(func(b []byte) { clear(b[32:48]) }),
		"NAT66 IPv4 RIP":      bad(func(b []byte) { b[48] = 10 }),
		"NAT66 local address": bad(func(b []byte) { b[5*Record6Len+64] = 1 }),
		"NAT66 local port":    bad(func(b []byte) { b[5*Record6Len+69] = 1 }),
		"UDP extension":       bad(func(b []byte) { b[Record6Len+72] = 1 }),
		"DR extension": bad(func(b []byte) {
			b[Record6Len+58] = hdr.ProtoTCP
			b[Record6Len+59] = byte(conn.StateEstablished)
			b[Record6Len+72] = 1
		}),
		"FTP extension":      bad(func(b []byte) { b[3*Record6Len+72] = 1 }),
		"client port 0":      bad(func(b []byte) { b[52], b[53] = 0, 0 }),
		"proto":              bad(func(b []byte) { b[58] = 1 }),
		"state":              bad(func(b []byte) { b[59] = byte(conn.NumStates) }),
		"fwd":                bad(func(b []byte) { b[60] = 9 }),
		"port without data":  bad(func(b []byte) { b[62] = 1 }),
		"FTP byte":           bad(func(b []byte) { b[61] = 3 }),
		"FTP over DR":        bad(func(b []byte) { b[Record6Len+61] = ftp6Control }),
		"FTP data no port":   bad(func(b []byte) { clear(b[4*Record6Len+62 : 4*Record6Len+64]) }),
		"FTP data over UDP":  bad(func(b []byte) { b[4*Record6Len+58] = hdr.ProtoUDP }),
		"NAT64 IPv6 RIP":     bad(func(b []byte) { b[2*Record6Len+40] = 1 }),
		"NAT64 no IPv4 RIP":  bad(func(b []byte) { clear(b[2*Record6Len+48 : 2*Record6Len+52]) }),
		"NAT64 no local":     bad(func(b []byte) { clear(b[2*Record6Len+64 : 2*Record6Len+68]) }),
		"NAT64 local port 0": bad(func(b []byte) { clear(b[2*Record6Len+68 : 2*Record6Len+70]) }),
	} {
		if _, out, r := c.Decode(msg, nil); r != ReasonRecord || len(out) != 0 {
			t.Errorf("%s: %v, %d records; want dropped for its record", name, r, len(out))
		}
	}
	checkPlainLength(t, c, KindRecords6)
	msg := c.Append(nil, Header{Kind: KindRecords6, Boot: 1, Seq: 1}, nil)
	msg[offKind] = byte(lastKind + 1)
	if _, _, r := c.Decode(msg, nil); r != ReasonKind {
		t.Errorf("kind %d: %v, want kind", lastKind+1, r)
	}
}

// sampleFullNAT6: FNAT66 connections, TCP with a PROXY header's delta and
// UDP.
func sampleFullNAT6() []lcore.SyncConn {
	six := conn.Addrs6{Client: addr6("2001:db8:1::7"), VIP: addr6("2001:db8:1::100"), RIP: addr6("fd00:1::11"), LIP: addr6("fd00:1::200")}
	return []lcore.SyncConn{
		{ClientPort: 40000, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT,
			HasExt: true, Ext: conn.Ext{LPort: 2049, Flags: 1, ClientISN: 7, SeqIn: 52}, IPv6: true, Six: six},
		{ClientPort: 5353, VPort: 53, RPort: 53, Proto: hdr.ProtoUDP, State: conn.StateUDP, Fwd: fwd.FullNAT,
			HasExt: true, Ext: conn.Ext{LPort: 3000}, IPv6: true, Six: six},
	}
}

// TestFullNAT6Records: kind 9 carries FNAT66 connections, kind 5's record
// and the IPv6 local address; an impossible one drops its message.
func TestFullNAT6Records(t *testing.T) {
	c := mustCodec(t, testKey)
	recs := sampleFullNAT6()
	h := Header{Kind: KindFullNAT6, SyncID: 3, Boot: 5, Seq: 8}
	msg := c.Append(nil, h, recs)
	if len(msg) != MinMessageLen+len(recs)*FullNAT6RecordLen || FullNAT6RecordLen != 112 {
		t.Fatalf("length %d, record %d", len(msg), FullNAT6RecordLen)
	}
	checkDecodesTo(t, c, msg, h, recs)
	for i := range recs {
		if k := RecordKind(&recs[i]); k != KindFullNAT6 {
			t.Errorf("record %d travels in kind %v", i, k)
		}
		if one, ok := DecodeFullNAT6Record(AppendFullNAT6Record(nil, recs[i])); !ok || one != recs[i] {
			t.Errorf("AppendFullNAT6Record/DecodeFullNAT6Record %d: %+v %t", i, one, ok)
		}
	}
	if _, ok := DecodeFullNAT6Record(AppendFullNAT6Record(nil, recs[0])[:FullNAT6RecordLen-1]); ok {
		t.Error("a short record decoded")
	}
	bad := func(f func(b []byte)) []byte {
		m := c.Append(nil, Header{Kind: KindFullNAT6, Boot: 1, Seq: 1}, sampleFullNAT6())
		f(m[HeaderLen:])
		return resign(c, m)
	}
	for name, m := range map[string][]byte{
		"no local address":     bad(func(b []byte) { clear(b[Record6Len:FullNAT6RecordLen]) }),
		"multicast local":      bad(func(b []byte) { b[Record6Len] = 0xff }),
		"no server":            bad(func(b []byte) { clear(b[32:48]) }),
		"an IPv4 server too":   bad(func(b []byte) { b[48] = 10 }),
		"a folded local":       bad(func(b []byte) { b[64] = 1 }),
		"local port 0":         bad(func(b []byte) { clear(b[68:70]) }),
		"not fullnat":          bad(func(b []byte) { b[60] = byte(fwd.NAT) }),
		"FTP":                  bad(func(b []byte) { b[61] = ftp6Control }),
		"proto":                bad(func(b []byte) { b[58] = 1 }),
		"second record's port": bad(func(b []byte) { clear(b[FullNAT6RecordLen+68 : FullNAT6RecordLen+70]) }),
	} {
		if _, out, r := c.Decode(m, nil); r != ReasonRecord || len(out) != 0 {
			t.Errorf("%s: %v, %d records; want dropped for its record", name, r, len(out))
		}
	}
	checkPlainLength(t, c, KindFullNAT6)
}
