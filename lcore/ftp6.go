package lcore

import (
	"bytes"
	"net/netip"
	"unsafe"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/hdr"
)

// The FTP helper of IPv6 (NAT66) services. Over IPv6 only the extended
// commands can name an endpoint: the client's "EPRT |2|addr|port|" (its
// own address, which NAT66 does not hide: nothing rewritten, the server's
// connection to that port expected) and the server's "229 (|||port|)"
// (no address: the client's connection to VIP:port expected). Neither
// changes a segment's length, so an IPv6 control connection never needs
// a sequence adjustment. PORT, "EPRT |1|" and 227 cannot name an IPv6
// endpoint and are dropped (ftp_unparsed), as IPv4's unreadable ones are.
// Expectations share IPv4's table, keyed by the folds of the addresses
// (conn.Fold6, one key for all workers); the data connection is made
// with the full addresses, from its SYN and its service.

// ftpControl6 is ftpControl for an IPv6 control connection.
func (w *Worker) ftpControl6(d *desc, c *conn.Conn, id uint32, dir conn.Dir) (exit, bool) {
	if w.ftp.get(id) == nil {
		return exit{}, true
	}
	p := hdr.TCP(d.l4Bytes6()).Payload()
	var x expectation
	if dir == conn.Original {
		switch {
		case hasPrefixFold(p, "EPRT "):
			addr, port, ok := parseEPRT6(p[5:])
			if !ok || addr != w.table.Addrs6(id).Client {
				return drop(DropFTPUnparsed), false
			}
			x = expectation{src: c.RIP, dst: c.ClientIP, dport: port} // the server connects from any port
		case hasPrefixFold(p, "PORT "):
			return drop(DropFTPUnparsed), false
		default:
			return exit{}, true
		}
	} else {
		switch {
		case bytes.HasPrefix(p, []byte("229 ")):
			i := bytes.IndexByte(p, '(')
			if i < 0 {
				return drop(DropFTPUnparsed), false
			}
			port, ok := parseEPSV(p[i+1:])
			if !ok {
				return drop(DropFTPUnparsed), false
			}
			x = expectation{src: c.ClientIP, dst: c.VIP, dport: port}
		case bytes.HasPrefix(p, []byte("227 ")):
			return drop(DropFTPUnparsed), false
		default:
			return exit{}, true
		}
	}
	if !w.expect(&x, c) {
		return drop(DropFTPExpectFull), false
	}
	return exit{}, true
}

// parseEPRT6 reads "|2|addr|port|" (any delimiter, protocol 2: IPv6) up
// to the line's end.
func parseEPRT6(p []byte) (hdr.Addr6, uint16, bool) {
	if len(p) < 4 || !lineEnds(p) || p[1] != '2' || p[2] != p[0] {
		return hdr.Addr6{}, 0, false
	}
	delim := p[0]
	end := bytes.IndexByte(p[3:], delim)
	if end <= 0 {
		return hdr.Addr6{}, 0, false
	}
	text := p[3 : 3+end]
	// ParseAddr keeps nothing of its argument: a view, not a copy.
	a, err := netip.ParseAddr(unsafe.String(&text[0], len(text)))
	if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" {
		return hdr.Addr6{}, 0, false
	}
	i := 3 + end + 1
	port, n := parseDec(p[i:])
	if n == 0 || port == 0 || port > 0xffff || i+n >= len(p) || p[i+n] != delim {
		return hdr.Addr6{}, 0, false
	}
	return hdr.Addr6From(a), uint16(port), true
}

// ftpData6 is ftpData for an IPv6 SYN from src to dst.
func (w *Worker) ftpData6(d *desc, src, dst *hdr.Addr6) (uint32, conn.Dir, Stat, bool) {
	k := &d.flow
	var x expectation
	if !w.expects.take(conn.Fold6(src), conn.Fold6(dst), k.dport, w.now+w.tmplOff, &x) {
		return 0, 0, 0, false
	}
	si, ok := w.snap.service6Folded(x.vip, x.vport, hdr.ProtoTCP)
	if !ok || w.snap.Services[si].Helper != HelperFTP {
		return 0, 0, DropNoService, true
	}
	svc := &w.snap.Services[si]
	idx := svc.destIndex(x.dest)
	if idx < 0 {
		return 0, 0, DropNoService, true // its server left the service meanwhile
	}
	rs := &svc.Dests[idx]
	c := conn.Conn{Proto: hdr.ProtoTCP, State: conn.StateNone, Dest: x.dest, Service: uint32(si), Flags: flagFTPData, Fwd: rs.Fwd}
	var a conn.Addrs6
	dir := conn.Original
	if x.passive() { // client:any -> VIP:P, to the real server's P
		a = conn.Addrs6{Client: *src, VIP: *dst, RIP: rs.Addr6}
		c.ClientPort, c.VPort, c.RPort = k.sport, k.dport, k.dport
	} else { // RIP:any -> client:P, seen by the client from VIP:same port
		a = conn.Addrs6{Client: *dst, VIP: svc.Key.VIP6, RIP: *src}
		c.ClientPort, c.VPort, c.RPort = k.dport, k.sport, k.sport
		dir = conn.Reply
	}
	w.table.Relieve(w.now, w.expire)
	id, err := w.table.Insert6(&c, &a)
	if why := insertDrop(err); why != 0 {
		return 0, 0, why, true
	}
	w.ftpDataOpened(&c)
	return id, dir, 0, true
}
