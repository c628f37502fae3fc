package handover

import (
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/ctl/connsync"
	"github.com/dplb/dplb/lcore"
	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

func sample() State {
	return State{
		Written: time.Unix(1700000000, 123456789), PID: 4242, ConfigPath: "/etc/dplb/lbd.yaml", HA: "backup",
		SyncDaemons: []SyncDaemon{{Mode: "master", SyncID: 1, Interface: "eth9"}, {Mode: "backup", SyncID: 1}},
		Records: []lcore.SyncConn{
			{ClientIP: 0xc0000202, ClientPort: 40000, VIP: 0xc6336401, VPort: 80, RIP: 0x0a000002, RPort: 8080,
				Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT},
			{ClientIP: 0xc0000203, ClientPort: 53000, VIP: 0xc6336401, VPort: 53, RIP: 0x0a000003, RPort: 53,
				Proto: hdr.ProtoUDP, State: conn.StateUDP, Fwd: fwd.DR},
			{ClientIP: 0xc0000200, VIP: 0xc6336401, VPort: 443, RIP: 0x0a000002, RPort: 443,
				Proto: hdr.ProtoTCP, Fwd: fwd.TUN, Template: true},
			// Extended records come after the plain ones.
			{ClientIP: 0xc0000204, ClientPort: 40001, VIP: 0xc6336402, VPort: 80, RIP: 0x0a000004, RPort: 80,
				Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT, HasExt: true,
				Ext: conn.Ext{LIP: 0x0a000032, LPort: 3333, Flags: 1, ClientISN: 1, ServerISN: 2, SeqIn: 28, SeqOut: 3}},
		},
		SteeringKey: []byte("0123456789012345678901234567890123456789"),
		Counters: []DestCounters{{Proto: hdr.ProtoTCP, VIP: 0xc6336401, VPort: 80, RIP: 0x0a000002, RPort: 8080,
			Counters: [5]uint64{1, 2, 3, 4, 1 << 40}, Base: [5]uint64{0, 1, 0, 0, 7}}},
		Neighbours: []Neighbour{{IP: 0x0a000002, MAC: hdr.MAC{2, 0, 0, 0, 0, 9}, Port: 1}},
	}
}

func TestRoundTrip(t *testing.T) {
	want := sample()
	got, err := Decode(Encode(nil, want))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Written.Equal(want.Written) {
		t.Errorf("written %v, want %v", got.Written, want.Written)
	}
	got.Written = want.Written
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	master := sample()
	master.HA = "master"
	if got, err := Decode(Encode(nil, master)); err != nil || got.HA != "master" {
		t.Errorf("HA master decoded as %q, %v", got.HA, err)
	}
	empty, err := Decode(Encode(nil, State{Written: time.Now()}))
	if err != nil || len(empty.Records)+len(empty.Counters)+len(empty.Neighbours) != 0 {
		t.Errorf("empty handover: %+v, %v", empty, err)
	}
}

// TestRecordLayout pins the record to the connection sync's 24-byte
// layout, so a handover and a sync message carry a connection alike.
func TestRecordLayout(t *testing.T) {
	r := sample().Records[0]
	b := connsync.AppendRecord(nil, r)
	want := []byte{0xc0, 0, 2, 2, 0xc6, 0x33, 0x64, 1, 10, 0, 0, 2, 0x9c, 0x40, 0, 80, 0x1f, 0x90,
		hdr.ProtoTCP, byte(conn.StateEstablished), byte(fwd.NAT), 0, 0, 0}
	if string(b) != string(want) {
		t.Errorf("record % x\nwant   % x", b, want)
	}
}

// TestDecodeRefuses: every defect refuses the whole handover, naming it.
func TestDecodeRefuses(t *testing.T) {
	good := Encode(nil, sample())
	flip := func(i int) []byte {
		b := append([]byte(nil), good...)
		b[i] ^= 0x40
		return b
	}
	badRecord := sample()
	badRecord.Records[1].Proto = 1 // ICMP
	badState := sample()
	badState.Records[0].State = conn.NumStates
	badFwd := sample()
	badFwd.Records[0].Fwd = 9
	zeroClient := sample()
	zeroClient.Records[0].ClientIP = 0
	noLocalPort := sample()
	noLocalPort.Records[3].Ext.LPort = 0
	cases := map[string]struct {
		in   []byte
		want string
	}{
		"empty":         {nil, "too short"},
		"truncated":     {good[:len(good)-1], "checksum"},
		"magic":         {flip(0), "wrong magic"},
		"version":       {flip(9), "version"},
		"flipped byte":  {flip(len(good) / 2), "checksum"},
		"flipped sum":   {flip(len(good) - 1), "checksum"},
		"protocol":      {Encode(nil, badRecord), "record 1: not a possible connection"},
		"state":         {Encode(nil, badState), "record 0: not a possible connection"},
		"method":        {Encode(nil, badFwd), "record 0: not a possible connection"},
		"zero client":   {Encode(nil, zeroClient), "record 0: not a possible connection"},
		"local port":    {Encode(nil, noLocalPort), "record 3: not a possible connection"},
		"appended junk": {append(append([]byte(nil), good...), 0), "checksum"},
	}
	for name, c := range cases {
		_, err := Decode(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
}

func TestCheck(t *testing.T) {
	s := sample()
	now := s.Written.Add(5 * time.Second)
	if err := s.Check("/etc/dplb/lbd.yaml", now, time.Minute); err != nil {
		t.Errorf("a fresh handover of the same configuration refused: %v", err)
	}
	for name, c := range map[string]struct {
		path string
		now  time.Time
		want string
	}{
		"foreign": {"/etc/other.yaml", now, "written by an lbd running"},
		"stale":   {"/etc/dplb/lbd.yaml", s.Written.Add(61 * time.Second), "restart.max_age"},
		"future":  {"/etc/dplb/lbd.yaml", s.Written.Add(-time.Minute), "in the future"},
	} {
		err := s.Check(c.path, c.now, time.Minute)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestFileAndMemfd(t *testing.T) {
	b := Encode(nil, sample())
	path := filepath.Join(t.TempDir(), "sub", "state")
	if err := WriteFile(path, b); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file %v, %v: want mode 0600", fi, err)
	}
	if got, err := ReadFile(path); err != nil || string(got) != string(b) {
		t.Errorf("read back %d bytes, %v; wrote %d", len(got), err, len(b))
	}
	fd, err := Memfd(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvFD, strconv.Itoa(fd))
	got, ok, err := FromEnv()
	if err != nil || !ok || string(got) != string(b) {
		t.Errorf("memfd: %d bytes, %t, %v", len(got), ok, err)
	}
	if _, set := os.LookupEnv(EnvFD); set {
		t.Errorf("%s still set after FromEnv", EnvFD)
	}
	t.Setenv(EnvFD, "banana")
	if _, ok, err := FromEnv(); !ok || err == nil || !strings.Contains(err.Error(), "not a file descriptor") {
		t.Errorf("a bad %s: %t, %v", EnvFD, ok, err)
	}
}

// encodeV3 turns a version 4 encoding without FTP records into the
// version 3 encoding of the same state (no FTP record count), as an lbd
// before version 4 wrote it.
func encodeV3(b []byte) []byte {
	b = encodeV4(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v3 := append([]byte(nil), b[:p+28]...) // up to the seven counts of version 3
	binary.BigEndian.PutUint16(v3[8:], 3)
	v3 = append(v3, b[p+32:]...) // the records and the rest
	sum := sha256.Sum256(v3)
	return append(v3, sum[:]...)
}

// encodeV7 turns a version 8 encoding without the peers' IPv6 local
// addresses into the version 7 encoding of the same state (no IPv6
// count after each peer's IPv4 local addresses), as an lbd before
// version 8 wrote it.
func encodeV7(b []byte) []byte {
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	np := int(binary.BigEndian.Uint32(b[p+36:]))
	n66 := int(binary.BigEndian.Uint32(b[p+40:]))
	end := len(b) - n66*FullNAT6RecordLen
	peers := b[end-np : end]
	var v7peers []byte
	for len(peers) > 0 {
		n := peerFixedLen + 4*int(peers[peerFixedLen-1])
		if peers[n] != 0 {
			panic("encodeV7: a peer with IPv6 local addresses")
		}
		v7peers = append(v7peers, peers[:n]...)
		peers = peers[n+1:]
	}
	v7 := append([]byte(nil), b[:end-np]...)
	binary.BigEndian.PutUint16(v7[8:], 7)
	binary.BigEndian.PutUint32(v7[p+36:], uint32(len(v7peers)))
	v7 = append(append(v7, v7peers...), b[end:]...)
	sum := sha256.Sum256(v7)
	return append(v7, sum[:]...)
}

// encodeV6 turns a version 8 encoding without FNAT66 records nor the
// peers' IPv6 local addresses into the version 6 encoding of the same
// state (no FNAT66 count), as an lbd before version 7 wrote it.
func encodeV6(b []byte) []byte {
	b = encodeV7(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v6 := append([]byte(nil), b[:p+40]...) // up to the ten counts of version 6
	binary.BigEndian.PutUint16(v6[8:], 6)
	v6 = append(v6, b[p+44:]...) // the records and the rest
	sum := sha256.Sum256(v6)
	return append(v6, sum[:]...)
}

// encodeV5 turns a version 7 encoding without peers or FNAT66 records
// into the version 5 encoding of the same state (no peers length), as an
// lbd before version 6 wrote it.
func encodeV5(b []byte) []byte {
	b = encodeV6(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v5 := append([]byte(nil), b[:p+36]...) // up to the nine counts of version 5
	binary.BigEndian.PutUint16(v5[8:], 5)
	v5 = append(v5, b[p+40:]...) // the records and the rest
	sum := sha256.Sum256(v5)
	return append(v5, sum[:]...)
}

// encodeV4 turns a version 6 encoding without services or peers into
// the version 4 encoding of the same state (no services length), as an
// lbd before version 5 wrote it.
func encodeV4(b []byte) []byte {
	b = encodeV5(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v4 := append([]byte(nil), b[:p+32]...) // up to the eight counts of version 4
	binary.BigEndian.PutUint16(v4[8:], 4)
	v4 = append(v4, b[p+36:]...) // the records and the rest
	sum := sha256.Sum256(v4)
	return append(v4, sum[:]...)
}

// encodeV2 turns a version 4 encoding without IPv6 or FTP records,
// counters or neighbours into the version 2 encoding of the same state
// (no IPv6 counts), as an lbd before version 3 wrote it.
func encodeV2(b []byte) []byte {
	b = encodeV3(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v2 := append([]byte(nil), b[:p+16]...) // up to the four counts of version 2
	binary.BigEndian.PutUint16(v2[8:], 2)
	v2 = append(v2, b[p+28:]...) // the records and the rest
	sum := sha256.Sum256(v2)
	return append(v2, sum[:]...)
}

// countsOffset is where a version 2, 3 or 4 encoding's counts start.
func countsOffset(b []byte) int {
	pathLen := int(binary.BigEndian.Uint16(b[24:]))
	p := 26 + pathLen
	nd := int(b[p])
	p++
	for range nd {
		p += 3 + int(b[p+2])
	}
	return p + keyLen
}

// encodeV1 turns a version 4 encoding without extended or IPv6 records
// into the version 1 encoding of the same state (no steering key, no
// extended record count), as an lbd before version 2 wrote it.
func encodeV1(b []byte) []byte {
	b = encodeV2(b)
	b = b[:len(b)-sumLen]
	p := countsOffset(b)
	v1 := append([]byte(nil), b[:p-keyLen]...)
	binary.BigEndian.PutUint16(v1[8:], 1)
	v1 = append(v1, b[p:p+4]...) // records
	v1 = append(v1, b[p+8:]...)  // counters, neighbours and the rest
	sum := sha256.Sum256(v1)
	return append(v1, sum[:]...)
}

// TestDecodeVersion1: a handover from an lbd that wrote version 1 is read.
func TestDecodeVersion1(t *testing.T) {
	want := sample()
	want.Records = want.Records[:3]
	want.SteeringKey = nil
	checkDecodes(t, encodeV1(Encode(nil, want)), 1, want)
}

// checkDecodes decodes b, which must be of version v, into want.
func checkDecodes(t *testing.T, b []byte, v uint16, want State) {
	t.Helper()
	if got := binary.BigEndian.Uint16(b[8:]); got != v {
		t.Fatalf("version %d, want %d", got, v)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	got.Written = want.Written
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

// TestDecodeVersion2: a handover from an lbd that wrote version 2 (the
// steering key and extended records, no IPv6) is read whole.
func TestDecodeVersion2(t *testing.T) {
	want := sample()
	checkDecodes(t, encodeV2(Encode(nil, want)), 2, want)
}

// sample6 is sample with IPv6 connections (NAT66 and NAT64), an IPv6
// service's counters (an IPv6 server's and a NAT64 one's) and an IPv6
// neighbour: what version 3 adds.
func sample6() State {
	s := sample()
	client, vip := hdr.Addr6From(netip.MustParseAddr("2001:db8:1::7")), hdr.Addr6From(netip.MustParseAddr("2001:db8:1::100"))
	rip := hdr.Addr6From(netip.MustParseAddr("fd00:1::11"))
	s.Records = append(s.Records,
		lcore.SyncConn{ClientPort: 40000, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT,
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip, RIP: rip}},
		lcore.SyncConn{RIP: 0x0a000002, ClientPort: 40001, VPort: 8080, RPort: 80, Proto: hdr.ProtoTCP, State: conn.StateEstablished,
			Fwd: fwd.FullNAT, HasExt: true, Ext: conn.Ext{LIP: 0x0a000032, LPort: 4444},
			IPv6: true, Six: conn.Addrs6{Client: client, VIP: vip}})
	s.Counters = append(s.Counters,
		DestCounters{Proto: hdr.ProtoTCP, VIP6: vip, VPort: 80, RIP6: rip, RPort: 8080, Counters: [5]uint64{5, 6, 7, 8, 9}, Base: [5]uint64{1}},
		DestCounters{Proto: hdr.ProtoTCP, VIP6: vip, VPort: 8080, RIP: 0x0a000002, RPort: 80, Counters: [5]uint64{1, 1, 1, 1, 1}})
	s.Neighbours6 = []Neighbour6{{IP: rip, MAC: hdr.MAC{2, 0, 0, 0, 0, 0x11}, Port: 1}}
	return s
}

// TestRoundTrip6: version 3 carries IPv6 connections with their
// addresses, IPv6 services' counters and IPv6 neighbours. The records
// come back grouped as written (plain, extended, IPv6).
func TestRoundTrip6(t *testing.T) {
	want := sample6()
	b := Encode(nil, want)
	checkDecodes(t, b, Version, want)
	// A damaged IPv6 record refuses the whole handover.
	bad := b[:len(b)-sumLen]
	off := len(bad) - 2*Counters6Len - Neighbour6Len - Record6Len // the NAT64 record
	bad = append([]byte(nil), bad...)
	clear(bad[off+48 : off+52]) // its IPv4 server
	sum := sha256.Sum256(bad)
	if _, err := Decode(append(bad, sum[:]...)); err == nil || !strings.Contains(err.Error(), "record 5") {
		t.Errorf("a NAT64 record without its server: %v", err)
	}
}

// TestDecodeVersion3: a handover from an lbd that wrote version 3 (IPv6,
// no FTP records) is read whole.
func TestDecodeVersion3(t *testing.T) {
	want := sample6()
	checkDecodes(t, encodeV3(Encode(nil, want)), 3, want)
}

// sampleFTP is sample6 with the FTP helper's connections: a control
// connection whose server's stream a rewritten 227 shifted, a data
// connection, a control connection never shifted. What version 4 adds.
func sampleFTP() State {
	s := sample6()
	s.Records = append(s.Records,
		lcore.SyncConn{ClientIP: 0xc0000205, ClientPort: 40002, VIP: 0xc6336401, VPort: 21, RIP: 0x0a000002, RPort: 21,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTP: true,
			FTPOut: lcore.SeqShift{Init: 0x80000000, Delta: 5, Prev: -2}},
		lcore.SyncConn{ClientIP: 0xc0000205, ClientPort: 40004, VIP: 0xc6336401, VPort: 50000, RIP: 0x0a000002, RPort: 50000,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTPData: true, ServicePort: 21},
		lcore.SyncConn{ClientIP: 0xc0000206, ClientPort: 40003, VIP: 0xc6336401, VPort: 21, RIP: 0x0a000003, RPort: 21,
			Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT, FTP: true})
	return s
}

// TestRoundTripFTP: version 4 carries FTP control connections with their
// helper's sequence adjustments, after everything version 3 had; a
// damaged one refuses the whole handover.
func TestRoundTripFTP(t *testing.T) {
	want := sampleFTP()
	b := Encode(nil, want)
	checkDecodes(t, b, Version, want)
	bad := append([]byte(nil), b[:len(b)-sumLen]...)
	off := len(bad) - FTPRecordLen // the unshifted one
	bad[off+RecordLen+3] = 1       // its client stream's init, never shifted
	sum := sha256.Sum256(bad)
	if _, err := Decode(append(bad, sum[:]...)); err == nil || !strings.Contains(err.Error(), "record 8") {
		t.Errorf("an FTP record with an impossible adjustment: %v", err)
	}
	short := append([]byte(nil), b[:len(b)-sumLen-1]...)
	sum = sha256.Sum256(short)
	if _, err := Decode(append(short, sum[:]...)); err == nil || !strings.Contains(err.Error(), "FNAT66 records need") {
		t.Errorf("a handover short of a byte: %v", err)
	}
}

// FuzzDecode: no input crashes Decode, and what it accepts encodes back
// to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(nil, sample()))
	f.Add(Encode(nil, State{}))
	f.Add([]byte(magic))
	f.Add(encodeV1(Encode(nil, sample())))
	f.Add(encodeV2(Encode(nil, sample())))
	f.Add(Encode(nil, sample6()))
	f.Add(encodeV3(Encode(nil, sample6())))
	f.Add(Encode(nil, sampleFTP()))
	f.Add(Encode(nil, samplePeers()))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err != nil {
			return
		}
		again := Encode(nil, s)
		if binary.BigEndian.Uint16(b[8:]) < Version { // read, never written: it must mean the same
			back, err := Decode(again)
			back.Written = s.Written
			if err != nil || !reflect.DeepEqual(back, s) {
				t.Fatalf("an older version's handover re-encoded reads as %+v, %v", back, err)
			}
			return
		}
		if string(again) != string(b) {
			t.Fatalf("accepted %d bytes that encode back to %d different ones", len(b), len(again))
		}
	})
}

// BenchmarkHandover encodes and decodes a handover of a million
// connections: what an upgrade adds to the gap beyond DPDK's start-up
// (the dump and the install run in the lcores' commands jobs).
func BenchmarkHandover(b *testing.B) {
	s := sample()
	r := s.Records[0]
	s.Records = make([]lcore.SyncConn, 1<<20)
	for i := range s.Records {
		r.ClientIP, r.ClientPort = 0x0a000000+uint32(i>>8), uint16(1024+i&0xff)
		s.Records[i] = r
	}
	var buf []byte
	b.ResetTimer()
	for b.Loop() {
		buf = Encode(buf[:0], s)
		if _, err := Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf))/(1<<20), "MiB")
}

// TestDecodeVersion4: a handover from an lbd that wrote version 4 (no
// services) is read whole.
func TestDecodeVersion4(t *testing.T) {
	want := sampleFTP()
	checkDecodes(t, encodeV4(Encode(nil, want)), 4, want)
}

// samplePeers is sampleFTP with the peers a sync backup heard: one alive
// (an IPv4 director that takes over), one dead for an hour (IPv6, two
// local addresses), one leaving.
func samplePeers() State {
	s := sampleFTP()
	s.Written = time.Unix(1700000000, 0)
	s.Peers = []connsync.PeerHello{
		{Peer: netip.MustParseAddr("192.0.2.2"), Hello: connsync.Hello{Boot: 7, At: s.Written.Add(-800 * time.Millisecond), TakesOver: true,
			LIPs: []netip.Addr{netip.MustParseAddr("10.0.0.51")}}},
		{Peer: netip.MustParseAddr("2001:db8::3"), Hello: connsync.Hello{Boot: 1 << 60, At: s.Written.Add(-time.Hour),
			LIPs: []netip.Addr{netip.MustParseAddr("10.0.0.52"), netip.MustParseAddr("10.0.0.53")}}},
		{Peer: netip.MustParseAddr("192.0.2.4"), Hello: connsync.Hello{Boot: 9, At: s.Written, Leaving: true, TakesOver: true}},
	}
	return s
}

// samplePeers6 is samplePeers with IPv6 local addresses (FNAT66's) beside
// the IPv4 ones, and a peer with IPv6 ones alone.
func samplePeers6() State {
	s := samplePeers()
	s.Peers[1].LIPs = append(s.Peers[1].LIPs, netip.MustParseAddr("fd00:1::52"))
	s.Peers[2].LIPs = []netip.Addr{netip.MustParseAddr("fd00:1::54"), netip.MustParseAddr("fd00:1::55")}
	return s
}

// TestRoundTripPeers: version 6 carries the peers' hellos, with their
// ages at writing, version 8 their IPv6 local addresses too; a peer that
// is no peer is refused.
func TestRoundTripPeers(t *testing.T) {
	checkDecodes(t, Encode(nil, samplePeers6()), Version, samplePeers6())
	want := samplePeers()
	b := Encode(nil, want)
	checkDecodes(t, b, Version, want)
	bad := append([]byte(nil), b[:len(b)-sumLen]...)
	bad[len(bad)-peerFixedLen-1+28] = 4 // the last peer's flags: an unknown bit
	sum := sha256.Sum256(bad)
	if _, err := Decode(append(bad, sum[:]...)); err == nil || !strings.Contains(err.Error(), "peer 2: not a possible peer") {
		t.Errorf("a peer with an unknown flag: %v", err)
	}
	short := samplePeers()
	short.Peers[2].LIPs = []netip.Addr{netip.MustParseAddr("0.0.0.1")}
	cut := Encode(nil, short)
	cut = append([]byte(nil), cut[:len(cut)-sumLen-4]...)
	binary.BigEndian.PutUint32(cut[countsOffset(cut)+36:], binary.BigEndian.Uint32(cut[countsOffset(cut)+36:])-4)
	sum = sha256.Sum256(cut)
	if _, err := Decode(append(cut, sum[:]...)); err == nil || !strings.Contains(err.Error(), "peer 2: truncated") {
		t.Errorf("a peer cut short: %v", err)
	}
}

// TestDecodeVersion5: a handover from an lbd that wrote version 5 (no
// peers) is read whole.
func TestDecodeVersion5(t *testing.T) {
	want := sampleFTP()
	want.Services = []byte(`{"running":[]}`)
	checkDecodes(t, encodeV5(Encode(nil, want)), 5, want)
}

// TestRoundTripServices: version 5 carries the control plane's services
// as it gave them, after everything version 4 had.
func TestRoundTripServices(t *testing.T) {
	want := sampleFTP()
	want.Services = []byte(`{"running":[{"Protocol":"tcp"}]}`)
	b := Encode(nil, want)
	checkDecodes(t, b, Version, want)
	short := append([]byte(nil), b[:len(b)-sumLen-1]...)
	sum := sha256.Sum256(short)
	if _, err := Decode(append(short, sum[:]...)); err == nil || !strings.Contains(err.Error(), "FNAT66 records need") {
		t.Errorf("services short of a byte: %v", err)
	}
}

// TestDecodeVersion7: a handover from an lbd that wrote version 7 (no
// IPv6 local addresses of peers) is read.
func TestDecodeVersion7(t *testing.T) {
	want := samplePeers()
	checkDecodes(t, encodeV7(Encode(nil, want)), 7, want)
}

// TestDecodeVersion6: a handover from an lbd that wrote version 6 (no
// FNAT66 records) is read.
func TestDecodeVersion6(t *testing.T) {
	want := samplePeers()
	checkDecodes(t, encodeV6(Encode(nil, want)), 6, want)
}

// TestRoundTripFullNAT6: version 7 carries FNAT66 connections after the
// peers, their local addresses with them; an impossible one is refused.
func TestRoundTripFullNAT6(t *testing.T) {
	want := samplePeers()
	six := conn.Addrs6{Client: hdr.Addr6From(netip.MustParseAddr("2001:db8:1::7")), VIP: hdr.Addr6From(netip.MustParseAddr("2001:db8:1::100")),
		RIP: hdr.Addr6From(netip.MustParseAddr("fd00:1::11")), LIP: hdr.Addr6From(netip.MustParseAddr("fd00:1::200"))}
	want.Records = append(want.Records,
		lcore.SyncConn{ClientPort: 40000, VPort: 80, RPort: 8080, Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.FullNAT,
			HasExt: true, Ext: conn.Ext{LPort: 2049, Flags: 1, ClientISN: 7, SeqIn: 52}, IPv6: true, Six: six})
	b := Encode(nil, want)
	checkDecodes(t, b, Version, want)
	bad := append([]byte(nil), b[:len(b)-sumLen]...)
	clear(bad[len(bad)-16:]) // its local address
	sum := sha256.Sum256(bad)
	if _, err := Decode(append(bad, sum[:]...)); err == nil || !strings.Contains(err.Error(), "record") {
		t.Errorf("an FNAT66 record without its local address: %v", err)
	}
}
