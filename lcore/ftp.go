package lcore

import (
	"bytes"
	"strconv"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// The FTP helper of VS/NAT services with `helper: ftp`, after IPVS's
// ip_vs_ftp. On the control connection it reads the segments that open a
// data connection:
//
//   - the server's "227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)": the
//     address is the real server's, which the client cannot reach; it is
//     rewritten to the VIP (the port kept), and the client's connection
//     to VIP:port is expected, to go to this real server's port;
//   - the server's "229 Entering Extended Passive Mode (|||port|)": no
//     address to rewrite, the same expectation;
//   - the client's "PORT h1,h2,h3,h4,p1,p2" and "EPRT |1|addr|port|": the
//     address is the client's own (VS/NAT does not hide it), so nothing is
//     rewritten; the server's connection from any port to the client's
//     port is expected, and leaves from the VIP (same port: 20 for a
//     server that connects from port 20).
//
// A rewritten 227 changes the segment's length, so the server's later
// bytes are numbered differently on the two sides: the connection's
// sequence adjustment (seqadj.go) moves seq, ack and SACK edges for the
// rest of the connection. The 64-byte connection entry has no room for it
// (its spare bytes are connection sync's), so it lives in a per-worker
// side table keyed by the entry's id, flagged in the entry (flagFTP) so no
// other connection ever looks there. A segment that starts like one of
// these but cannot be read (a truncated line, numbers out of range, an
// address that is not the client's or the server's, EPRT for IPv6) is
// dropped and counted (ftp_unparsed): passed on, it would send a client
// to an address it cannot reach.

// flagFTP (a caller bit of conn.Conn.Flags, apart from flagSynced's)
// marks an FTP control connection, whose state is in the worker's
// ftpTable.
const flagFTP uint8 = 1 << 5

// flagFTPData marks a data connection the helper expected: sync and the
// handover name its FTP service (ftpServicePort), whose port is not its
// own.
const flagFTPData uint8 = 1 << 4

// HelperFTP is Service.Helper for IPVS's FTP helper.
const HelperFTP = 1

// ftpSlots bounds the FTP control connections a worker tracks at once;
// a new one beyond is dropped (ftp_table_full).
const ftpSlots = 1 << 14

// ftpState is one control connection's sequence adjustment.
type ftpState struct {
	id      uint32 // connection id + 1; 0: free
	in, out streamSeq
}

// ftpTable is a worker's FTP control connections: open addressing on the
// connection id, linear probing, backward-shift deletion, never more than
// half full.
type ftpTable struct {
	slots []ftpState
	n     int
}

func newFTPTable() *ftpTable { return &ftpTable{slots: make([]ftpState, 2*ftpSlots)} }

func (t *ftpTable) home(id uint32) int { return int(id*2654435761) & (len(t.slots) - 1) }

func (t *ftpTable) get(id uint32) *ftpState {
	for i := t.home(id); t.slots[i].id != 0; i = (i + 1) & (len(t.slots) - 1) {
		if t.slots[i].id == id+1 {
			return &t.slots[i]
		}
	}
	return nil
}

// full reports whether no other control connection fits.
func (t *ftpTable) full() bool { return t.n >= ftpSlots }

func (t *ftpTable) add(id uint32) bool {
	if t.full() {
		return false
	}
	i := t.home(id)
	for t.slots[i].id != 0 {
		i = (i + 1) & (len(t.slots) - 1)
	}
	t.slots[i] = ftpState{id: id + 1}
	t.n++
	return true
}

func (t *ftpTable) remove(id uint32) {
	mask := len(t.slots) - 1
	i := t.home(id)
	for ; t.slots[i].id != id+1; i = (i + 1) & mask {
		if t.slots[i].id == 0 {
			return
		}
	}
	t.n--
	// Backward shift: move later entries of the run into the hole when
	// their home does not lie between the hole and them.
	for j := (i + 1) & mask; t.slots[j].id != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].id - 1)
		if (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = ftpState{}
}

// ftpControl runs the helper on a control connection's segment, after
// its TCP state and before the NAT rewrite; a drop exit when the segment
// is refused.
func (w *Worker) ftpControl(d *desc, c *conn.Conn, id uint32, dir conn.Dir) (exit, bool) {
	st := w.ftp.get(id)
	if st == nil {
		return exit{}, true
	}
	tcp := hdr.TCP(d.l4Bytes())
	seq := tcp.Seq()
	if dir == conn.Original {
		st.in.fixSeq(tcp)
		st.out.fixAck(tcp)
		return w.ftpFromClient(c, tcp.Payload())
	}
	st.out.fixSeq(tcp)
	st.in.fixAck(tcp)
	diff, why := w.ftpFromServer(d, c, tcp.Payload())
	if why != 0 {
		return drop(why), false
	}
	if diff != 0 {
		before := st.out
		st.out.shifted(seq, int32(diff))
		if st.out != before {
			w.syncShifted(c, id)
		}
	}
	return exit{}, true
}

// ftpFromClient reads PORT and EPRT.
func (w *Worker) ftpFromClient(c *conn.Conn, p []byte) (exit, bool) {
	var addr uint32
	var port uint16
	var ok bool
	switch {
	case hasPrefixFold(p, "PORT "):
		addr, port, _, _, ok = parseHostPort(p[5:])
		ok = ok && lineEnds(p)
	case hasPrefixFold(p, "EPRT "):
		addr, port, ok = parseEPRT(p[5:])
	default:
		return exit{}, true
	}
	if !ok || addr != c.ClientIP {
		return drop(DropFTPUnparsed), false
	}
	// The server connects from any port to the client's.
	if !w.expect(&expectation{src: c.RIP, dst: c.ClientIP, dport: port}, c) {
		return drop(DropFTPExpectFull), false
	}
	return exit{}, true
}

// ftpFromServer reads 227 and 229, rewriting a 227's address to the VIP;
// it returns how much longer the segment became.
func (w *Worker) ftpFromServer(d *desc, c *conn.Conn, p []byte) (int, Stat) {
	var port uint16
	switch {
	case bytes.HasPrefix(p, []byte("227 ")):
		i := bytes.IndexByte(p, '(')
		if i < 0 {
			return 0, DropFTPUnparsed
		}
		addr, pt, start, end, ok := parseHostPort(p[i+1:])
		if !ok || (addr != c.RIP && addr != c.VIP) || !lineEnds(p) {
			return 0, DropFTPUnparsed
		}
		port = pt
		if !segmentChecksumGood(d) {
			// The rewrite computes a fresh checksum: a reply corrupted on
			// its way here would leave valid. Passed on untouched (and
			// still bad), the client drops it and the server sends it again.
			return 0, 0
		}
		if !w.expect(&expectation{src: c.ClientIP, dst: c.VIP, dport: port}, c) {
			return 0, DropFTPExpectFull
		}
		w.cnt.own[FTPRewritten]++
		return w.rewriteHostPort(d, i+1+start, i+1+end, c.VIP, port), 0
	case bytes.HasPrefix(p, []byte("229 ")):
		i := bytes.IndexByte(p, '(')
		if i < 0 {
			return 0, DropFTPUnparsed
		}
		pt, ok := parseEPSV(p[i+1:])
		if !ok {
			return 0, DropFTPUnparsed
		}
		if !w.expect(&expectation{src: c.ClientIP, dst: c.VIP, dport: pt}, c) {
			return 0, DropFTPExpectFull
		}
		return 0, 0
	}
	return 0, 0
}

// expect adds an expectation for connection c's data connection.
func (w *Worker) expect(x *expectation, c *conn.Conn) bool {
	x.vip, x.vport, x.rip, x.dest = c.VIP, c.VPort, c.RIP, c.Dest
	now := w.now + w.tmplOff
	x.expires = now + int64(expectExpiry*time.Second)
	if !w.expects.add(x, now) {
		return false
	}
	w.cnt.own[FTPExpected]++
	return true
}

// ftpData makes the connection an expectation announced for this first
// packet (a SYN), on the worker that owns it; ok false when none was.
func (w *Worker) ftpData(d *desc) (uint32, conn.Dir, Stat, bool) {
	k := &d.flow
	var x expectation
	if !w.expects.take(k.src, k.dst, k.dport, w.now+w.tmplOff, &x) {
		return 0, 0, 0, false
	}
	si, ok := w.snap.service(x.vip, x.vport, hdr.ProtoTCP)
	if !ok {
		return 0, 0, DropNoService, true
	}
	svc := &w.snap.Services[si]
	c := conn.Conn{VIP: x.vip, RIP: x.rip, Proto: hdr.ProtoTCP, State: conn.StateNone,
		Dest: x.dest, Service: uint32(si), Flags: flagFTPData}
	for i := range svc.Dests {
		if svc.Dests[i].ID == x.dest {
			c.Fwd = svc.Dests[i].Fwd
		}
	}
	dir := conn.Original
	if x.passive() { // client:any -> VIP:P, to the real server's P
		c.ClientIP, c.ClientPort, c.VPort, c.RPort = k.src, k.sport, k.dport, k.dport
	} else { // RIP:any -> client:P, seen by the client from VIP:same port
		c.ClientIP, c.ClientPort, c.VPort, c.RPort = k.dst, k.dport, k.sport, k.sport
		dir = conn.Reply
	}
	w.table.Relieve(w.now, w.expire)
	id, err := w.table.Insert(&c)
	if why := insertDrop(err); why != 0 {
		return 0, 0, why, true
	}
	w.ftpDataOpened(&c)
	return id, dir, 0, true
}

// ftpDataOpened counts data connection c, just entered.
func (w *Worker) ftpDataOpened(c *conn.Conn) {
	w.cnt.own[NewConns]++
	w.cnt.own[FTPDataConns]++
	w.cnt.dest[c.Dest][DestConns]++
	w.countState(c.Dest, c.State, true)
}

// ftpServicePort is the port of the FTP service whose helper expected
// data connection c (its server's service on its VIP), or 0 when this
// snapshot has none (the connection then travels as a plain one, which a
// peer refuses: no service has its port).
func (w *Worker) ftpServicePort(c *conn.Conn) uint16 {
	for i := range w.snap.Services {
		s := &w.snap.Services[i]
		vip := s.Key.VIP
		if s.Key.IsIPv6() {
			vip = conn.Fold6(&s.Key.VIP6) // an IPv6 entry holds the fold
		}
		if s.Key.IsIPv6() == c.IsIPv6() && vip == c.VIP && s.Key.Proto == hdr.ProtoTCP && s.Helper == HelperFTP && s.destIndex(c.Dest) >= 0 {
			return s.Key.Port
		}
	}
	return 0
}

// rewriteHostPort replaces the payload bytes [start, end) (an FTP
// h1,h2,h3,h4,p1,p2) with addr and port, growing or shrinking the packet,
// and recomputes the TCP checksum; it returns the change in length.
func (w *Worker) rewriteHostPort(d *desc, start, end int, addr uint32, port uint16) int {
	var buf [32]byte
	b := buf[:0]
	for i := 3; i >= 0; i-- {
		b = strconv.AppendUint(b, uint64(addr>>(8*i)&0xff), 10)
		b = append(b, ',')
	}
	b = strconv.AppendUint(b, uint64(port>>8), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(port&0xff), 10)

	ip := d.ip()
	tcp := hdr.TCP(ip.Payload())
	payload := int(d.l4) + tcp.DataOffset() // offset of the payload in the frame
	oldTotal := int(ip.TotalLength())
	diff := len(b) - (end - start)
	if oldTotal+diff > 0xffff || l3+oldTotal+diff > d.m.DataLen()+d.m.Tailroom() {
		return 0 // no room: left as it was (cannot happen with a 2 KB data room)
	}
	// Move the rest of the segment within the longer of the two frames
	// (the mbuf's view is its current length), then set the new length.
	if diff > 0 {
		d.m.SetLen(l3 + oldTotal + diff)
	}
	data := d.m.Data()
	copy(data[payload+start+len(b):], data[payload+end:l3+oldTotal])
	copy(data[payload+start:], b)
	d.m.SetLen(l3 + oldTotal + diff) // also trims Ethernet padding
	ip = d.ip()
	ip.SetChecksum(hdr.Update16(ip.Checksum(), uint16(oldTotal), uint16(oldTotal+diff)))
	ip.SetTotalLength(uint16(oldTotal + diff))
	tcp = hdr.TCP(ip.Payload())
	tcp.SetChecksum(0)
	tcp.SetChecksum(hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp))
	return diff
}

// segmentChecksumGood reports whether the TCP segment's checksum is right:
// the NIC's word when it checked, else one sum over the segment (control
// work: only FTP replies that are rewritten pay it).
func segmentChecksumGood(d *desc) bool {
	if l4ChecksumGood(d.m) {
		return true
	}
	ip := d.ip()
	tcp := ip.Payload()
	return hdr.TCP(tcp).Checksum() == hdr.TransportChecksum(ip.Src(), ip.Dst(), hdr.ProtoTCP, tcp)
}

// hasPrefixFold is bytes.HasPrefix ignoring ASCII case (FTP commands).
func hasPrefixFold(p []byte, prefix string) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if p[i]|0x20 != prefix[i]|0x20 {
			return false
		}
	}
	return true
}

// lineEnds reports whether the segment holds the end of its first line:
// a command or reply split over segments is not read.
func lineEnds(p []byte) bool { return bytes.IndexByte(p, '\n') >= 0 }

// parseHostPort reads "h1,h2,h3,h4,p1,p2" (spaces before it skipped), and
// where its digits start and end in p.
func parseHostPort(p []byte) (addr uint32, port uint16, start, end int, ok bool) {
	i := 0
	for i < len(p) && p[i] == ' ' {
		i++
	}
	start = i
	var v [6]uint32
	for n := 0; n < 6; n++ {
		j := i
		for i < len(p) && p[i] >= '0' && p[i] <= '9' && i-j < 3 {
			v[n] = v[n]*10 + uint32(p[i]-'0')
			i++
		}
		if i == j || v[n] > 255 {
			return 0, 0, 0, 0, false
		}
		if n < 5 {
			if i >= len(p) || p[i] != ',' {
				return 0, 0, 0, 0, false
			}
			i++
		}
	}
	return v[0]<<24 | v[1]<<16 | v[2]<<8 | v[3], uint16(v[4]<<8 | v[5]), start, i, true
}

// parseDec reads a decimal number of at most 5 digits from p's start:
// its value and length (0: none).
func parseDec(p []byte) (v uint32, n int) {
	for n < len(p) && n < 5 && p[n] >= '0' && p[n] <= '9' {
		v = v*10 + uint32(p[n]-'0')
		n++
	}
	return v, n
}

// parseEPRT reads "|1|a.b.c.d|port|" (any delimiter, protocol 1: IPv4)
// up to the line's end.
func parseEPRT(p []byte) (uint32, uint16, bool) {
	if len(p) < 4 || !lineEnds(p) || p[1] != '1' || p[2] != p[0] {
		return 0, 0, false
	}
	delim, i := p[0], 3
	var addr uint32
	for part := 0; part < 4; part++ {
		v, n := parseDec(p[i:])
		if n == 0 || v > 255 || i+n >= len(p) {
			return 0, 0, false
		}
		addr = addr<<8 | v
		i += n
		if want := byte('.'); part == 3 && p[i] != delim || part < 3 && p[i] != want {
			return 0, 0, false
		}
		i++
	}
	port, n := parseDec(p[i:])
	if n == 0 || port == 0 || port > 0xffff || i+n >= len(p) || p[i+n] != delim {
		return 0, 0, false
	}
	return addr, uint16(port), true
}

// parseEPSV reads "|||port|)" (any delimiter).
func parseEPSV(p []byte) (uint16, bool) {
	if len(p) < 5 || p[1] != p[0] || p[2] != p[0] {
		return 0, false
	}
	port, n := parseDec(p[3:])
	if n == 0 || port == 0 || port > 0xffff || 3+n >= len(p) || p[3+n] != p[0] {
		return 0, false
	}
	return uint16(port), true
}
