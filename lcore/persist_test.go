package lcore

import (
	"github.com/dplb/dplb/lcore/conn"
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/hdr"
	"github.com/dplb/dplb/lcore/sched"
)

// connectTo sends a SYN to VIP:443 and returns the real server it reached.
func connectTo(t *testing.T, r *rig, client uint32, sport uint16) uint32 {
	t.Helper()
	r.inject(0, tcpFrame(clientMAC, wanMAC, client, sport, vip, 443, hdr.TCPFlagSYN, ""))
	r.w.poll()
	out := r.sent(1)
	if len(out) != 1 {
		t.Fatalf("SYN from %x:%d not forwarded (stats %v)", client, sport, r.w.cnt.own)
	}
	_, ip, _ := checkTCP(t, out[0])
	return ip.Dst()
}

func TestPersistence(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	other := ip4(203, 0, 113, 8)
	// rr alone would alternate; the templates keep each client on its server
	// whatever source port it uses.
	if got := connectTo(t, r, clientIP, 40000); got != rs1 {
		t.Fatalf("first client went to %x", got)
	}
	if got := connectTo(t, r, other, 50000); got != rs2 {
		t.Fatalf("second client went to %x", got)
	}
	for port := uint16(40001); port < 40006; port++ {
		if got := connectTo(t, r, clientIP, port); got != rs1 {
			t.Fatalf("client on port %d moved to %x", port, got)
		}
	}
	if got := connectTo(t, r, other, 50001); got != rs2 {
		t.Fatalf("second client moved to %x", got)
	}
	w.runPublish(0)
	if w.cnt.own[Templates] != 2 || w.cnt.dest[7][DestPersistent] != 1 || w.cnt.dest[8][DestPersistent] != 1 {
		t.Fatalf("templates %d, persistent gauges %d/%d", w.cnt.own[Templates], w.cnt.dest[7][DestPersistent], w.cnt.dest[8][DestPersistent])
	}
	tmpl := templateOf(t, w, clientIP, 443)
	if tmpl == nil || tmpl.controls.Load() != 6 {
		t.Fatalf("template controls %v connections, want 6", tmpl)
	}

	// rs1 becomes quiescent: the template is re-pointed for new
	// connections (expire_quiescent_template); old ones stay on rs1.
	old := w.snap
	svcs := append([]Service(nil), old.Services...)
	p := svcs[len(svcs)-1]
	p.Dests = append([]sched.Dest(nil), p.Dests...)
	p.Dests[0].Weight = 0
	rr, _ := sched.New("rr", p.Dests, sched.Options{})
	p.Scheds = []sched.Scheduler{rr}
	svcs[len(svcs)-1] = p
	w.Commands().Push(Command{Kind: CmdSnapshot, Snap: NewSnapshot(2, old.Ports, svcs, old.Neigh, old.Timeouts)})
	w.runCommands(0)
	if got := connectTo(t, r, clientIP, 40100); got != rs2 {
		t.Fatalf("client stayed on quiescent rs1")
	}
	if got := connectTo(t, r, clientIP, 40101); got != rs2 {
		t.Fatalf("client left rs2 after the re-point")
	}
	w.runPublish(0)
	if w.cnt.dest[7][DestPersistent] != 0 || w.cnt.dest[8][DestPersistent] != 2 {
		t.Fatalf("gauges after re-point %d/%d", w.cnt.dest[7][DestPersistent], w.cnt.dest[8][DestPersistent])
	}
}

// TestTemplateLivesWhileItControls: past its persistence time a template
// stays while a connection it chose is alive, then goes.
func TestTemplateLivesWhileItControls(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	connectTo(t, r, clientIP, 40000)
	tmpl := templateOf(t, w, clientIP, 443)
	cid, _, _ := w.table.Lookup(hdr.ProtoTCP, clientIP, 40000, vip, 443)
	w.table.SetExpires(cid, w.now+int64(time.Hour)) // a long-lived connection
	expire := func() {
		w.table.Expire(w.now, w.table.Cap(), w.expire)
		w.expireTemplates(w.tmpl.Cap())
	}

	w.now += int64(301 * time.Second)
	expire()
	if templateOf(t, w, clientIP, 443) == nil {
		t.Fatal("template expired while it controls a connection")
	}
	// The connection ends: the template goes at its next expiry.
	w.table.SetExpires(cid, w.now)
	expire()
	if tmpl.controls.Load() != 0 {
		t.Fatal("the template still counts the expired connection")
	}
	w.now += int64(301 * time.Second)
	expire()
	if templateOf(t, w, clientIP, 443) != nil || w.table.Len() != 0 {
		t.Fatalf("template not expired (len %d)", w.table.Len())
	}
	w.runPublish(0)
	if w.cnt.dest[7][DestPersistent] != 0 || w.cnt.dest[7][DestInactive] != 0 {
		t.Fatal("gauges not back to 0")
	}
}

// TestDumpConnections: the worker lists its connections (and templates)
// for lbctl -c, a slice of its table per commands job, with filters.
func TestDumpConnections(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	connectTo(t, r, clientIP, 40000) // VIP:443, persistent: a template too
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40001, vip, 80, hdr.TCPFlagSYN, ""))
	r.inject(0, tcpFrame(clientMAC, wanMAC, ip4(203, 0, 113, 9), 40002, vip, 80, hdr.TCPFlagSYN, ""))
	w.poll()
	r.sent(1)
	dump := func(req *DumpRequest) []ConnInfo {
		w.Commands().Push(Command{Kind: CmdDump, Dump: req})
		for i := 0; i < 10 && !req.Done(); i++ {
			w.runCommands(0)
		}
		if !req.Done() {
			t.Fatal("dump not done")
		}
		return req.Out
	}
	all := dump(&DumpRequest{Out: make([]ConnInfo, 0, 16)})
	if len(all) != 4 {
		t.Fatalf("listed %d entries, want 3 connections and 1 template: %+v", len(all), all)
	}
	templates := 0
	for _, c := range all {
		if c.Template {
			templates++
			if c.ClientPort != 0 || c.VPort != 443 {
				t.Fatalf("template %+v", c)
			}
		}
		if c.Expires <= 0 {
			t.Fatalf("entry %+v has no time left", c)
		}
	}
	if templates != 1 {
		t.Fatalf("%d templates", templates)
	}
	if got := dump(&DumpRequest{ConnFilter: ConnFilter{VPort: 80, Client: clientIP}, Out: make([]ConnInfo, 0, 16)}); len(got) != 1 || got[0].ClientPort != 40001 || got[0].State != conn.StateSynRecv {
		t.Fatalf("filtered: %+v", got)
	}
	small := &DumpRequest{Out: make([]ConnInfo, 0, 2)}
	if got := dump(small); len(got) != 2 || !small.Truncated {
		t.Fatalf("a full listing must say it was cut: %d %v", len(got), small.Truncated)
	}
}

// templateOf finds the live template of a client network (the rig's
// persistent service, a /32 mask) for VIP:vport, or nil.
func templateOf(t *testing.T, w *Worker, cnet uint32, vport uint16) *templateSlot {
	t.Helper()
	key, sub := templateKey(cnet, vip, vport, hdr.ProtoTCP)
	if slot, _, _, _ := w.tmpl.find(key, sub); slot >= 0 {
		return &w.tmpl.slots[slot]
	}
	return nil
}
