package lcore

import (
	"encoding/binary"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// Window scaling and timestamps through the SYN proxy, as Linux's
// cookies do it: when the client's SYN has timestamps, the TSval of the
// cookie SYN-ACK carries, in its low 6 bits, the client's window scale
// (0xf: none), SACK-permitted and ECN, and the client's ACK echoes it
// back in its TSecr. Without timestamps there is nowhere to keep the
// window scale and the proxy offers none (the cookie itself carries the
// MSS and SACK-permitted).
//
// After the splice two clocks and two scale factors meet:
//
//   - Timestamps (as netfilter's SYNPROXY): the server's TSval towards the
//     client gets TSOff = (the proxy's TSval) - (the server's first
//     TSval) added, the client's TSecr towards the server gets it taken
//     off; so the client sees one clock going on from the cookie's and
//     PAWS holds on both legs. A server that declines timestamps gets the
//     client's unchanged (it ignores them) and sends none.
//   - Window scale: the proxy offers the client ourWScale and passes the
//     client's own to the server. Server -> client windows are rescaled
//     from the server's shift to ourWScale, client -> server windows from
//     the client's shift to the one the server agreed to (none when it
//     declined scaling); a rescaled window that overflows is clamped to
//     65535, one that loses precision is rounded down (never more than
//     the receiver offered).

const (
	// ourWScale is the shift the cookie SYN-ACK offers: Linux's default
	// for a large receive buffer, so that a Linux server's own (usually
	// 7) needs no rescaling.
	ourWScale = 7

	tsOptMask    = 0x3f // the TSval's bits that carry options
	tsWScaleNone = 0xf  // no window scale
	tsSACK       = 1 << 4
	tsECN        = 1 << 5
	maxWScale    = 14 // RFC 7323's largest shift
)

// Bits of conn.Ext.Flags (with synproxy.go's).
const (
	extSynTS      uint16 = 1 << 5 // both legs have timestamps: TSOff applies
	extWSCliShift        = 6      // bits 6-9: the client's window scale
	extWSSrvShift        = 10     // bits 10-13: the server's window scale
	extWSCliLeg   uint16 = 1 << 14
	extWSSrvLeg   uint16 = 1 << 15
)

// tsClock is the proxy's timestamp clock: milliseconds.
func tsClock(now int64) uint32 { return uint32(now / 1e6) }

// cookieTSval is the TSval of a cookie SYN-ACK: the clock with its low
// bits replaced by the options, never ahead of the clock.
func cookieTSval(now int64, ws uint8, hasWS, sack, ecn bool) uint32 {
	opts := uint32(tsWScaleNone)
	if hasWS {
		opts = uint32(min(ws, maxWScale))
	}
	if sack {
		opts |= tsSACK
	}
	if ecn {
		opts |= tsECN
	}
	ts := tsClock(now)
	v := ts&^tsOptMask | opts
	if int32(v-ts) > 0 {
		v -= tsOptMask + 1
	}
	return v
}

// decodeCookieTS reads the client's window scale from the TSecr of the
// ACK proving a cookie; ok false for an echo from the future or older
// than a cookie lives.
func decodeCookieTS(tsecr uint32, now int64) (ws uint8, hasWS, ok bool) {
	age := int32(tsClock(now) - tsecr)
	if age < 0 || int64(age) > (2<<cookieSlotShift)/int64(1e6) {
		return 0, false, false
	}
	if v := uint8(tsecr & 0xf); v != tsWScaleNone { // 4 bits: at most 14 otherwise
		return v, true, true
	}
	return 0, false, true
}

// handshakeOpts are the options of a handshake segment the proxy writes.
type handshakeOpts struct {
	mss          uint16 // 0: none
	sack         bool
	ts           bool
	tsval, tsecr uint32
	ws           int8 // -1: none
	// toa: DPVS's TCP option address, the client's port and address
	// (toa.go), after the others; toa6 an IPv6 client's (NAT64).
	toa, toa6 bool
	toaPort   uint16
	toaAddr   uint32
	toaAddr6  hdr.Addr6
}

// size is the length put writes.
func (o *handshakeOpts) size() int {
	n := 0
	if o.mss != 0 {
		n = 4
	}
	switch {
	case o.ts:
		n += 12
	case o.sack:
		n += 4
	}
	if o.ws >= 0 {
		n += 4
	}
	switch {
	case o.toa6:
		n += toaLen6
	case o.toa:
		n += toaLen
	}
	return n
}

// put writes the options in Linux's order (MSS, SACK-permitted with the
// timestamps, window scale), padded with NOPs to 4-byte words, and
// returns the sum of their 16-bit words for the TCP checksum. They are
// written and summed a word at a time: summing bytes just stored one by
// one reads them back with wider loads, which stall store forwarding.
func (o *handshakeOpts) put(b []byte) (sum uint32) {
	const (
		nop, sackPerm = uint32(hdr.TCPOptNOP), uint32(hdr.TCPOptSACKPerm)
		mss, ts, ws   = uint32(hdr.TCPOptMSS), uint32(hdr.TCPOptTimestamp), uint32(hdr.TCPOptWScale)
	)
	n := 0
	if o.mss != 0 {
		sum += putOptWord(b, 0, mss<<24|4<<16|uint32(o.mss))
		n = 4
	}
	switch {
	case o.ts:
		first := nop<<24 | nop<<16
		if o.sack {
			first = sackPerm<<24 | 2<<16
		}
		sum += putOptWord(b, n, first|ts<<8|10)
		sum += putOptWord(b, n+4, o.tsval)
		sum += putOptWord(b, n+8, o.tsecr)
		n += 12
	case o.sack:
		sum += putOptWord(b, n, nop<<24|nop<<16|sackPerm<<8|2)
		n += 4
	}
	if o.ws >= 0 {
		sum += putOptWord(b, n, nop<<24|ws<<16|3<<8|uint32(byte(o.ws)))
		n += 4
	}
	switch {
	case o.toa6:
		sum += putOptWord(b, n, toaKind<<24|toaLen6<<16|uint32(o.toaPort))
		for i := 0; i < 16; i += 4 {
			sum += putOptWord(b, n+4+i, binary.BigEndian.Uint32(o.toaAddr6[i:]))
		}
	case o.toa:
		sum += putOptWord(b, n, toaKind<<24|toaLen<<16|uint32(o.toaPort))
		sum += putOptWord(b, n+4, o.toaAddr)
	}
	return sum
}

// putOptWord writes w at b[at:] and returns the sum of its two 16-bit
// halves.
func putOptWord(b []byte, at int, w uint32) uint32 {
	binary.BigEndian.PutUint32(b[at:], w)
	return w>>16 + w&0xffff
}

// windowShifts are the scale factors a segment travelling dir was sent
// with and is read with.
func windowShifts(x *conn.Ext, dir conn.Dir) (from, to uint) {
	cli, srv := x.Flags&extWSCliLeg != 0, x.Flags&extWSSrvLeg != 0
	wsCli, wsSrv := uint(x.Flags>>extWSCliShift&0xf), uint(x.Flags>>extWSSrvShift&0xf)
	if dir == conn.Original {
		if cli {
			from = wsCli
		}
		if srv {
			to = wsCli
		}
		return from, to
	}
	if srv {
		from = wsSrv
	}
	if cli {
		to = ourWScale
	}
	return from, to
}

// rescaleWindow is a window field sent with shift from as read with
// shift to.
func rescaleWindow(win uint16, from, to uint) uint16 {
	return uint16(min(uint64(win)<<from>>to, 65535))
}

// adjustSpliced moves a spliced segment's timestamps and window into its
// receiver's terms.
func adjustSpliced(tcp hdr.TCP, x *conn.Ext, dir conn.Dir, csum bool) {
	if x.Flags&extSynTS != 0 {
		if dir == conn.Original {
			tcp.ShiftTimestamps(0, x.TSOff, csum)
		} else {
			tcp.ShiftTimestamps(x.TSOff, 0, csum)
		}
	}
	if from, to := windowShifts(x, dir); from != to {
		old := tcp.Window()
		v := rescaleWindow(old, from, to)
		if csum {
			tcp.SetChecksum(hdr.Update16(tcp.Checksum(), old, v))
		}
		tcp.SetWindow(v)
	}
}
