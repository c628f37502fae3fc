package lcore

import (
	"sync/atomic"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// ConnInfo is one connection (or persistence template) as listed for
// lbctl -c.
type ConnInfo struct {
	Proto      uint8
	State      conn.State
	Template   bool
	Fwd        fwd.Method
	ClientIP   uint32
	ClientPort uint16
	VIP        uint32
	VPort      uint16
	RIP        uint32
	RPort      uint16
	Expires    int64 // nanoseconds left
	// SeqAdjusted: its sequence numbers move (a SYN-proxied NAT
	// connection); a record without the deltas could not rebuild it.
	SeqAdjusted bool
	// LIP, LPort: a FullNAT connection's local address and port.
	LIP   uint32
	LPort uint16
	// IPv6: an IPv6 connection, whose addresses are Client6, VIP6 and
	// RIP6 (ClientIP, VIP and RIP are then folds, meaningless outside),
	// and LIP6 for FNAT66 (LIP then 0).
	IPv6                      bool
	Client6, VIP6, RIP6, LIP6 hdr.Addr6
	// HasExt: a FullNAT or sequence-adjusted connection's extension, Ext,
	// which sync and the handover carry.
	HasExt bool
	Ext    conn.Ext
	// FTP: an FTP control connection, with its helper's sequence
	// adjustments (sync and the handover carry them).
	FTP           bool
	FTPIn, FTPOut SeqShift
	// FTPData: an FTP data connection, of the FTP service on
	// VIP:ServicePort.
	FTPData     bool
	ServicePort uint16
}

// SyncConn is the connection as a sync record. An IPv6 template has no
// record (its key holds folds: the next lbd, or a peer, rebuilds it from
// its connections); the caller leaves it out.
func (c *ConnInfo) SyncConn() SyncConn {
	r := SyncConn{
		ClientIP: c.ClientIP, VIP: c.VIP, RIP: c.RIP, ClientPort: c.ClientPort, VPort: c.VPort, RPort: c.RPort,
		Proto: c.Proto, State: c.State, Fwd: c.Fwd, Template: c.Template, HasExt: c.HasExt, Ext: c.Ext,
	}
	if !c.HasExt && !c.Template {
		r.FTP, r.FTPIn, r.FTPOut = c.FTP, c.FTPIn, c.FTPOut
		r.FTPData, r.ServicePort = c.FTPData, c.ServicePort
	}
	if c.IPv6 {
		syncConn6(&r, &conn.Addrs6{Client: c.Client6, VIP: c.VIP6, RIP: c.RIP6, LIP: c.LIP6})
	}
	return r
}

// ConnFilter selects connections to list; zero fields match everything.
// An IPv4 VIP or Client selects IPv4 connections only, an IPv6 one IPv6
// connections only.
type ConnFilter struct {
	VIP     uint32
	VPort   uint16
	Proto   uint8
	Client  uint32
	VIP6    hdr.Addr6
	Client6 hdr.Addr6
	// LIP: only FullNAT (and NAT64) connections from this local address
	// (and no templates); LIP6 only FNAT66 ones from this IPv6 one.
	LIP  uint32
	LIP6 hdr.Addr6
}

// matches6 is matches for an IPv6 connection.
func (r *ConnFilter) matches6(proto uint8, vip *hdr.Addr6, vport uint16, client *hdr.Addr6) bool {
	return r.VIP == 0 && r.Client == 0 && (r.Proto == 0 || r.Proto == proto) &&
		(r.VIP6.IsUnspecified() || r.VIP6 == *vip) && (r.VPort == 0 || r.VPort == vport) &&
		(r.Client6.IsUnspecified() || r.Client6 == *client)
}

// DumpRequest asks a worker for its connections. The control plane makes
// it with Out's capacity as the limit and waits for Done; the worker fills
// Out a slice of its table at a time, between bursts, and never blocks.
type DumpRequest struct {
	ConnFilter

	Out       []ConnInfo // appended by the worker, up to cap(Out)
	Truncated bool       // more matched than cap(Out)

	cursor    uint32
	templates bool // the connections are listed; now the shared templates (worker 0)
	done      atomic.Bool
}

// Done reports whether the worker finished; Out is then the caller's.
func (r *DumpRequest) Done() bool { return r.done.Load() }

// dumpSlots is how many table slots a commands job examines for a dump.
const dumpSlots = 4096

func (r *ConnFilter) matches(proto uint8, vip uint32, vport uint16, client uint32) bool {
	return r.VIP6.IsUnspecified() && r.Client6.IsUnspecified() && r.LIP6.IsUnspecified() && (r.Proto == 0 || r.Proto == proto) && (r.VIP == 0 || r.VIP == vip) &&
		(r.VPort == 0 || r.VPort == vport) && (r.Client == 0 || r.Client == client)
}

// matchesLIP applies the LIP filter to a connection and its extension.
func (r *ConnFilter) matchesLIP(x *conn.Ext, c *conn.Conn) bool {
	return r.LIP == 0 || x != nil && c.Fwd == fwd.FullNAT && x.LIP == r.LIP
}

// add appends a listed entry, or notes that the buffer is full.
func (r *DumpRequest) add(c ConnInfo) {
	if len(r.Out) == cap(r.Out) {
		r.Truncated = true
		return
	}
	r.Out = append(r.Out, c)
}

// runDump advances the dump in progress by a slice of the table; worker 0
// then lists the shared persistence templates the same way.
func (w *Worker) runDump() {
	r := w.dump
	if r.templates {
		w.dumpTemplates(r)
		return
	}
	next, done := w.table.Scan(r.cursor, dumpSlots, func(id uint32, c *conn.Conn) {
		if c.Flags&flagSteer != 0 {
			return // not a connection (steerentry.go)
		}
		if a := w.table.Addrs6(id); a != nil {
			lipOK := r.LIP == 0 && r.LIP6.IsUnspecified() ||
				r.LIP6.IsUnspecified() && !isFNAT66(a) && r.matchesLIP(w.table.Ext(id), c) ||
				!r.LIP6.IsUnspecified() && r.LIP6 == a.LIP
			if r.matches6(c.Proto, &a.VIP, c.VPort, &a.Client) && lipOK {
				ci := ConnInfo{
					Proto: c.Proto, State: c.State, Fwd: c.Fwd, IPv6: true,
					Client6: a.Client, ClientPort: c.ClientPort, VIP6: a.VIP, VPort: c.VPort, RIP6: a.RIP, RPort: c.RPort,
					Expires: c.Expires - w.now, SeqAdjusted: c.Flags&flagSeqAdj != 0,
				}
				// NAT64's extension (an IPv4 server, a local endpoint),
				// FNAT66's (an IPv6 local address), or a SYN proxy's
				// NAT66 deltas.
				if x := w.table.Ext(id); x != nil {
					ci.HasExt, ci.Ext = true, *x
					switch {
					case isFNAT66(a):
						ci.LIP6, ci.LPort, ci.Ext.LIP = a.LIP, x.LPort, 0
					case c.Fwd == fwd.FullNAT:
						ci.RIP, ci.LIP, ci.LPort = c.RIP, x.LIP, x.LPort
					}
				}
				w.dumpFTPFields(&ci, c, id)
				r.add(ci)
			}
			return
		}
		if r.matches(c.Proto, c.VIP, c.VPort, c.ClientIP) && r.matchesLIP(w.table.Ext(id), c) {
			ci := ConnInfo{
				Proto: c.Proto, State: c.State, Fwd: c.Fwd,
				ClientIP: c.ClientIP, ClientPort: c.ClientPort, VIP: c.VIP, VPort: c.VPort, RIP: c.RIP, RPort: c.RPort,
				Expires: c.Expires - w.now, SeqAdjusted: c.Flags&flagSeqAdj != 0,
			}
			if x := w.table.Ext(id); x != nil {
				ci.HasExt, ci.Ext = true, *x
				if c.Fwd == fwd.FullNAT {
					ci.LIP, ci.LPort = x.LIP, x.LPort
				}
			}
			w.dumpFTPFields(&ci, c, id)
			r.add(ci)
		}
	})
	r.cursor = next
	if done {
		if w.cfg.ID == 0 {
			r.templates, r.cursor = true, 0
			return
		}
		w.dump = nil
		r.done.Store(true) // publishes Out to the control plane
	}
}

// dumpTemplates lists a slice of the shared template table.
func (w *Worker) dumpTemplates(r *DumpRequest) {
	t := w.tmpl
	if r.LIP != 0 { // templates have no local address
		r.cursor = uint32(t.Cap())
	}
	end := min(int(r.cursor)+dumpSlots, t.Cap())
	for i := int(r.cursor); i < end; i++ {
		s := &t.slots[i]
		v := s.val.Load()
		key := s.key.Load()
		if !templateLive(v) || s.val.Load() != v {
			continue // not a template, or freed while read
		}
		cnet, vip, vport, proto := uint32(key>>32), uint32(key), uint16(v>>48), uint8(v>>40)
		if !r.matches(proto, vip, vport, cnet) {
			continue
		}
		c := ConnInfo{Proto: proto, Template: true, ClientIP: cnet, VIP: vip, VPort: vport,
			Expires: s.expires.Load() - (w.now + w.tmplOff)}
		if si, ok := w.snap.service(vip, vport, proto); ok {
			svc := &w.snap.Services[si]
			if di := svc.destIndex(uint32(v&templateDest) - 1); di >= 0 {
				c.RIP, c.RPort, c.Fwd = svc.Dests[di].Addr, svc.Dests[di].Port, svc.Dests[di].Fwd
			}
		} else if si, ok := w.snap.service6Folded(vip, vport, proto); ok {
			svc := &w.snap.Services[si]
			// An IPv6 service's template: its key holds folds, so the
			// client network is not known (Client6 stays ::).
			c.IPv6, c.VIP6, c.ClientIP, c.VIP = true, svc.Key.VIP6, 0, 0
			if di := svc.destIndex(uint32(v&templateDest) - 1); di >= 0 {
				c.RIP6, c.RPort, c.Fwd = svc.Dests[di].Addr6, svc.Dests[di].Port, svc.Dests[di].Fwd
			}
		}
		r.add(c)
	}
	r.cursor = uint32(end)
	if end == t.Cap() {
		w.dump = nil
		r.done.Store(true)
	}
}

// dumpFTPFields gives ci, listed from entry c (id), the FTP helper's part
// as sync would send it.
func (w *Worker) dumpFTPFields(ci *ConnInfo, c *conn.Conn, id uint32) {
	f := SyncConn{HasExt: ci.HasExt}
	w.syncFTPFields(&f, c, id)
	ci.FTP, ci.FTPIn, ci.FTPOut, ci.FTPData, ci.ServicePort = f.FTP, f.FTPIn, f.FTPOut, f.FTPData, f.ServicePort
}
