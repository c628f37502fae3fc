package lcore

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// TestCookieTimestamps: the options in a cookie TSval come back from its
// echo; echoes from the future, from long ago or with an impossible
// shift are refused; the TSval is never ahead of the clock.
func TestCookieTimestamps(t *testing.T) {
	now := int64(500 * time.Second)
	for ws := uint8(0); ws <= maxWScale; ws++ {
		v := cookieTSval(now, ws, true, true, true)
		if int32(tsClock(now)-v) < 0 || v&tsSACK == 0 || v&tsECN == 0 {
			t.Fatalf("ws %d: TSval %#x (clock %#x)", ws, v, tsClock(now))
		}
		if got, has, ok := decodeCookieTS(v, now+int64(time.Second)); !ok || !has || got != ws {
			t.Fatalf("ws %d: decoded %d %v %v", ws, got, has, ok)
		}
	}
	v := cookieTSval(now, 0, false, false, false)
	if _, has, ok := decodeCookieTS(v, now); !ok || has {
		t.Fatalf("no window scale: %v %v", has, ok)
	}
	if _, _, ok := decodeCookieTS(v+1000, now); ok {
		t.Fatal("an echo from the future accepted")
	}
	if _, _, ok := decodeCookieTS(v, now+int64(300*time.Second)); ok {
		t.Fatal("an echo older than a cookie lives accepted")
	}
}

// tsOpts are a client SYN's options: MSS 1460, SACK-permitted,
// timestamps (tsval, tsecr), window scale ws.
func tsOpts(tsval, tsecr uint32, ws int) []byte {
	b := []byte{hdr.TCPOptMSS, 4, 0x05, 0xb4, hdr.TCPOptSACKPerm, 2, hdr.TCPOptTimestamp, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[8:], tsval)
	binary.BigEndian.PutUint32(b[12:], tsecr)
	if ws >= 0 {
		b = append(b, hdr.TCPOptNOP, hdr.TCPOptWScale, 3, byte(ws))
	}
	return b
}

// onlyTS are a data segment's options: NOP NOP timestamps.
func onlyTS(tsval, tsecr uint32) []byte {
	b := []byte{hdr.TCPOptNOP, hdr.TCPOptNOP, hdr.TCPOptTimestamp, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], tsval)
	binary.BigEndian.PutUint32(b[8:], tsecr)
	return b
}

// withWindow is tcpSeg with its window set.
func withWindow(f []byte, win uint16) []byte {
	ip := hdr.IPv4(hdr.Ethernet(f).Payload())
	tcp := hdr.TCP(ip.Payload())
	tcp.SetWindow(win)
	tcp.SetChecksum(0)
	tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
	return f
}

// TestSynProxyTimestampsAndWindowScale: with the client's timestamps,
// the cookie handshake offers window scaling; the SYN to the server
// passes the client's scale and TSval on; after the splice the server's
// TSval reach the client on the cookie's clock, the client's TSecr the
// server on its own, and windows are rescaled between the server's shift
// and the proxy's.
func TestSynProxyTimestampsAndWindowScale(t *testing.T) {
	for _, srvWS := range []int{5, -1} {
		r := newRig(t, defaultNeigh())
		withSynProxy(t, r, fwd.NAT)
		w := r.w
		w.now = int64(1000 * time.Second)
		const isn, rsISN, cliTS, srvTS = 100, 9000, 7000, 50000
		sport := uint16(41000 + srvWS + 1)
		r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagSYN, isn, 0, tsOpts(cliTS, 0, 9), ""))
		w.poll()
		_, _, tcp := checkTCP(t, one(t, r, 0))
		ourTS, ecr, ok := tcp.Timestamps()
		if ws, hasWS := tcp.WScale(); !ok || ecr != cliTS || !hasWS || ws != ourWScale || ourTS&0xf != 9 || !tcp.HasOption(hdr.TCPOptSACKPerm) {
			t.Fatalf("cookie SYN-ACK: TS %d/%d %v, wscale %d %v, options % x", ourTS, ecr, ok, ws, hasWS, tcp.Options())
		}
		cookie := tcp.Seq()

		// The ACK (window 500 << 9) opens the connection: the SYN carries
		// the client's scale and TSval, its window unscaled (clamped).
		r.inject(0, withWindow(tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagACK, isn+1, cookie+1, onlyTS(cliTS+1, ourTS), ""), 500))
		w.poll()
		_, _, tcp = checkTCP(t, one(t, r, 1))
		val, ecr, _ := tcp.Timestamps()
		if ws, _ := tcp.WScale(); tcp.Flags() != hdr.TCPFlagSYN || val != cliTS+1 || ecr != 0 || ws != 9 || tcp.Window() != 65535 || tcp.MSS() != 1460 {
			t.Fatalf("SYN to the server: TS %d/%d wscale %d window %d mss %d", val, ecr, ws, tcp.Window(), tcp.MSS())
		}

		var srvOpts []byte
		if srvWS >= 0 {
			srvOpts = tsOpts(srvTS, cliTS+1, srvWS)
		} else {
			srvOpts = tsOpts(srvTS, cliTS+1, -1)
		}
		r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, sport, hdr.TCPFlagSYN|hdr.TCPFlagACK, rsISN, isn+1, srvOpts, ""))
		w.poll()
		_, _, tcp = checkTCP(t, one(t, r, 1))
		val, ecr, _ = tcp.Timestamps()
		wantWin := uint16(65535 >> 9)
		if srvWS < 0 {
			wantWin = 65535
		}
		if tcp.Flags() != hdr.TCPFlagACK || val != cliTS+1 || ecr != srvTS || tcp.Window() != wantWin {
			t.Fatalf("server %d: ACK to the server: TS %d/%d window %d, want %d", srvWS, val, ecr, tcp.Window(), wantWin)
		}

		// The server's data: window 1000 at its shift, TSval on its clock.
		r.inject(1, withWindow(tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, sport, hdr.TCPFlagACK|hdr.TCPFlagPSH, rsISN+1, isn+1, onlyTS(srvTS+10, cliTS+1), "OK"), 1000))
		w.poll()
		_, _, tcp = checkTCP(t, one(t, r, 0))
		val, ecr, _ = tcp.Timestamps()
		wantWin = uint16(1000 << 5 >> ourWScale)
		if srvWS < 0 {
			wantWin = 1000 >> ourWScale
		}
		if tcp.Seq() != cookie+1 || val != ourTS+10 || ecr != cliTS+1 || tcp.Window() != wantWin {
			t.Fatalf("server %d: to the client: seq %d TS %d/%d (want %d) window %d, want %d", srvWS, tcp.Seq(), val, ecr, ourTS+10, tcp.Window(), wantWin)
		}
		// The client's data: its TSecr back on the server's clock.
		r.inject(0, withWindow(tcpSeg(clientMAC, wanMAC, clientIP, sport, vipSP, 80, hdr.TCPFlagACK|hdr.TCPFlagPSH, isn+1, cookie+3, onlyTS(cliTS+2, ourTS+10), "GET"), 500))
		w.poll()
		_, _, tcp = checkTCP(t, one(t, r, 1))
		val, ecr, _ = tcp.Timestamps()
		wantWin = 500
		if srvWS < 0 {
			wantWin = 65535 // 500 << 9, clamped: the server reads it unscaled
		}
		if tcp.Ack() != rsISN+3 || val != cliTS+2 || ecr != srvTS+10 || tcp.Window() != wantWin {
			t.Fatalf("server %d: to the server: ack %d TS %d/%d window %d, want %d", srvWS, tcp.Ack(), val, ecr, tcp.Window(), wantWin)
		}
	}
}

// TestSynProxyNoTimestamps: a client without timestamps gets neither
// timestamps nor window scaling from the cookie, as Linux does.
func TestSynProxyNoTimestamps(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	opts := []byte{hdr.TCPOptMSS, 4, 0x05, 0xb4, hdr.TCPOptNOP, hdr.TCPOptWScale, 3, 7, hdr.TCPOptNOP, hdr.TCPOptNOP, hdr.TCPOptSACKPerm, 2}
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 41100, vipSP, 80, hdr.TCPFlagSYN, 1, 0, opts, ""))
	r.w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 0))
	if _, ok := tcp.WScale(); ok || tcp.HasOption(hdr.TCPOptTimestamp) || !tcp.HasOption(hdr.TCPOptSACKPerm) {
		t.Fatalf("options % x", tcp.Options())
	}
}

// TestSynProxySplicedNoAllocs guards the spliced path (timestamps moved,
// windows rescaled) against heap allocations.
func TestSynProxySplicedNoAllocs(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSynProxy(t, r, fwd.NAT)
	w := r.w
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 41200, vipSP, 80, hdr.TCPFlagSYN, 10, 0, tsOpts(500, 0, 9), ""))
	w.poll()
	_, _, tcp := checkTCP(t, one(t, r, 0))
	ourTS, _, _ := tcp.Timestamps()
	cookie := tcp.Seq()
	r.inject(0, tcpSeg(clientMAC, wanMAC, clientIP, 41200, vipSP, 80, hdr.TCPFlagACK, 11, cookie+1, onlyTS(501, ourTS), ""))
	w.poll()
	r.drain(1)
	r.inject(1, tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 41200, hdr.TCPFlagSYN|hdr.TCPFlagACK, 900, 11, tsOpts(8000, 501, 5), ""))
	w.poll()
	r.drain(1)
	if a := r.allocsPerBurst(1, 0, func(i int) []byte {
		return tcpSeg(rs1MAC, lanMAC, rs1, 80, clientIP, 41200, hdr.TCPFlagACK, 901, 11, onlyTS(8001+uint32(i), 501), "data")
	}); a != 0 {
		t.Fatalf("spliced reply: %v allocations per burst", a)
	}
	if a := r.allocsPerBurst(0, 1, func(i int) []byte {
		return tcpSeg(clientMAC, wanMAC, clientIP, 41200, vipSP, 80, hdr.TCPFlagACK, 11, cookie+1, onlyTS(502+uint32(i), ourTS+1), "x")
	}); a != 0 {
		t.Fatalf("spliced client data: %v allocations per burst", a)
	}
}

// TestHandshakeOptsSize: the room rewriteTCP makes is what put writes,
// and the sum put returns is its words', for every combination of
// options.
func TestHandshakeOptsSize(t *testing.T) {
	for bits := range 16 {
		o := handshakeOpts{sack: bits&2 != 0, ts: bits&4 != 0, ws: -1, tsval: 0x01020304, tsecr: 0xa0b0c0d0}
		if bits&1 != 0 {
			o.mss = 1460
		}
		if bits&8 != 0 {
			o.ws = 7
		}
		var b [40]byte
		for i := range b {
			b[i] = 0xee
		}
		sum := o.put(b[:])
		n := o.size()
		if n%4 != 0 || strings.Trim(string(b[n:]), "\xee") != "" || n > 0 && b[n-1] == 0xee {
			t.Fatalf("%+v: put wrote % x, size says %d", o, b, n)
		}
		if hdr.Fold(sum) != hdr.Fold(hdr.Checksum(b[:n], 0)) {
			t.Fatalf("%+v: put's sum %#x, its words' %#x", o, hdr.Fold(sum), hdr.Fold(hdr.Checksum(b[:n], 0)))
		}
	}
}

// rewriteTCPByEncoders is rewriteTCP as the header encoders write it: the
// reference for the word-by-word version.
func rewriteTCPByEncoders(frame []byte, src, dst uint32, f *hdr.TCPFields, o *handshakeOpts) []byte {
	tcpLen := hdr.TCPMinLen + o.size()
	b := append([]byte(nil), frame[:l3]...)
	b = append(b, make([]byte, hdr.IPv4MinLen+tcpLen)...)
	hdr.IPv4(b[l3:]).Encode(&hdr.IPv4Fields{
		TotalLength: uint16(hdr.IPv4MinLen + tcpLen), Flags: hdr.IPv4FlagDontFragment,
		TTL: hdr.DefaultTTL, Protocol: hdr.ProtoTCP, Src: src, Dst: dst,
	})
	tcp := hdr.TCP(b[l3+hdr.IPv4MinLen:])
	tcp.SetSrcPort(f.SrcPort)
	tcp.SetDstPort(f.DstPort)
	tcp.SetSeq(f.Seq)
	tcp.SetAck(f.Ack)
	tcp.SetDataOffset(tcpLen)
	tcp.SetFlags(f.Flags)
	tcp.SetWindow(f.Window)
	o.put(tcp[hdr.TCPMinLen:])
	tcp.SetChecksum(hdr.TransportChecksum(src, dst, hdr.ProtoTCP, tcp))
	return b
}

// TestRewriteTCPMatchesEncoders: the handshake segments rewriteTCP writes
// word by word are byte for byte what the header encoders write, with
// both checksums right, over random addresses, ports, numbers and every
// combination of options, built over a longer packet (data dropped).
// randomHandshake is case i's handshake segment: random fields, and
// options the low bits of i choose (MSS, SACK-permitted, timestamps,
// window scale).
func randomHandshake(rnd *rand.Rand, i int) (hdr.TCPFields, handshakeOpts) {
	f := hdr.TCPFields{SrcPort: uint16(rnd.Uint32()), DstPort: uint16(rnd.Uint32()), Seq: rnd.Uint32(), Ack: rnd.Uint32(),
		Flags: uint8(rnd.Uint32()), Window: uint16(rnd.Uint32())}
	o := handshakeOpts{sack: i&2 != 0, ts: i&4 != 0, tsval: rnd.Uint32(), tsecr: rnd.Uint32(), ws: -1}
	if i&1 != 0 {
		o.mss = uint16(rnd.Uint32())
	}
	if i&8 != 0 {
		o.ws = int8(rnd.IntN(15))
	}
	return f, o
}

func TestRewriteTCPMatchesEncoders(t *testing.T) {
	r := newRig(t, defaultNeigh())
	rnd := rand.New(rand.NewPCG(1, 2))
	in := tcpSeg(clientMAC, wanMAC, clientIP, 40000, vipSP, 80, hdr.TCPFlagACK, 1, 1, nil, "some data the handshake drops")
	for i := range 2000 {
		src, dst := rnd.Uint32(), rnd.Uint32()
		f, o := randomHandshake(rnd, i)
		m := r.mbufOf(in)
		d := desc{m: m}
		if !d.rewriteTCP(src, dst, &f, &o) {
			t.Fatal("no room")
		}
		got, want := m.Data(), rewriteTCPByEncoders(in, src, dst, &f, &o)
		m.Free()
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got % x\nwant % x", i, got, want)
		}
		ip := hdr.IPv4(got[l3:])
		if !ip.IsChecksumValid() || hdr.TransportChecksum(src, dst, hdr.ProtoTCP, ip.Payload()) != hdr.TCP(ip.Payload()).Checksum() {
			t.Fatalf("case %d: a checksum is wrong", i)
		}
	}
}
