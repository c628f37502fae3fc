package lcore

import (
	"testing"
	"time"

	"github.com/dplb/dplb/lcore/conn"
	"github.com/dplb/dplb/lcore/fwd"
	"github.com/dplb/dplb/lcore/hdr"
)

// withSync switches the rig's worker to sync rules p (a master).
func withSync(r *rig, p SyncParams) {
	r.w.snap = r.w.snap.WithHA(r.w.snap.Gen+1, p, false)
}

// syncedRecords takes what the worker put on its sync ring.
func syncedRecords(w *Worker) []SyncConn {
	var out []SyncConn
	for {
		rec, ok := w.SyncOut().Pop()
		if !ok {
			return out
		}
		out = append(out, rec)
	}
}

// TestSyncEmission follows one NAT connection: synced when it becomes
// established, at the threshold, then every period, on a state change,
// and when the refresh period has passed; never during the handshake.
func TestSyncEmission(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withSync(r, SyncParams{On: true, Threshold: 3, Period: 5, RefreshPeriod: 10 * time.Second})
	w.now = int64(time.Second)
	client := func(flags uint8) {
		r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 80, flags, "x"))
		w.poll()
		r.drain(1)
	}
	client(hdr.TCPFlagSYN)
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagSYN|hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(0)
	if got := syncedRecords(w); len(got) != 0 {
		t.Fatalf("the handshake was synced: %+v", got)
	}
	client(hdr.TCPFlagACK) // 2nd client packet: ESTABLISHED
	got := syncedRecords(w)
	want := SyncConn{ClientIP: clientIP, VIP: vip, RIP: rs1, ClientPort: 40000, VPort: 80, RPort: 80,
		Proto: hdr.ProtoTCP, State: conn.StateEstablished, Fwd: fwd.NAT}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("on ESTABLISHED: %+v, want %+v", got, want)
	}
	counts := []int{}
	for i := 3; i <= 13; i++ { // client packets 3..13: the threshold (3), then 8 and 13
		client(hdr.TCPFlagACK)
		if n := len(syncedRecords(w)); n > 0 {
			counts = append(counts, i)
		}
	}
	if len(counts) != 3 || counts[0] != 3 || counts[1] != 8 || counts[2] != 13 {
		t.Fatalf("synced at client packets %v, want [3 8 13]", counts)
	}
	// The server's FIN changes the state (CLOSE_WAIT): synced at once.
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagFIN|hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(0)
	if got := syncedRecords(w); len(got) != 1 || got[0].State == conn.StateEstablished {
		t.Fatalf("state change synced as %+v", got)
	}
	// Quiet for the refresh period: the next packet syncs it again.
	w.now += int64(11 * time.Second)
	r.inject(1, tcpFrame(rs1MAC, lanMAC, rs1, 80, clientIP, 40000, hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(0)
	if got := syncedRecords(w); len(got) != 1 {
		t.Fatalf("refresh: %d records", len(got))
	}
	w.runPublish(0)
	if st := w.Stats(); st[SyncRecords] != 6 || st[SyncRingFull] != 0 {
		t.Fatalf("sync_records %d sync_ring_full %d", st[SyncRecords], st[SyncRingFull])
	}
}

// TestSyncOffAndTemplates: nothing is synced when sync is off; a new
// persistence template is synced when made, and again with its
// connections.
func TestSyncOffAndTemplates(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	connectTo(t, r, clientIP, 40000)
	r.inject(0, tcpFrame(clientMAC, wanMAC, clientIP, 40000, vip, 443, hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(1)
	if n := w.SyncOut().Len(); n != 0 {
		t.Fatalf("sync off, yet %d records", n)
	}
	withSync(r, SyncParams{On: true, Threshold: 3, Period: 50})
	other := ip4(203, 0, 113, 9)
	rs := connectTo(t, r, other, 40000)
	got := syncedRecords(w)
	want := SyncConn{ClientIP: other, VIP: vip, RIP: rs, VPort: 443, RPort: 443, Proto: hdr.ProtoTCP, Fwd: fwd.NAT, Template: true}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("new template: %+v, want %+v", got, want)
	}
	r.inject(0, tcpFrame(clientMAC, wanMAC, other, 40000, vip, 443, hdr.TCPFlagACK, ""))
	w.poll()
	r.drain(1)
	got = syncedRecords(w)
	if len(got) != 2 || got[0].Template || got[0].State != conn.StateEstablished || got[1] != want {
		t.Fatalf("established persistent connection: %+v", got)
	}
}

// TestSyncRingFullIsCounted: a full ring loses the record, counted; the
// worker never waits.
func TestSyncRingFullIsCounted(t *testing.T) {
	r := newRig(t, defaultNeigh())
	w := r.w
	withSync(r, SyncParams{On: true, Threshold: 1})
	for w.SyncOut().Push(SyncConn{}) {
	}
	r.inject(0, udpFrame(clientMAC, wanMAC, clientIP, 5000, vip, 53, "q", true))
	w.poll()
	if len(r.sent(1)) != 1 {
		t.Fatal("the packet waited for the sync ring")
	}
	if w.cnt.own[SyncRingFull] != 1 || w.cnt.own[SyncRecords] != 0 {
		t.Fatalf("sync_ring_full %d sync_records %d", w.cnt.own[SyncRingFull], w.cnt.own[SyncRecords])
	}
}

// TestSyncPathDoesNotAllocate: a packet that puts a record on the sync
// ring (a UDP flow at its threshold) allocates nothing.
func TestSyncPathDoesNotAllocate(t *testing.T) {
	r := newRig(t, defaultNeigh())
	withSync(r, SyncParams{On: true, Threshold: 1, Period: 1})
	allocs := r.allocsPerBurst(0, 1, func(i int) []byte {
		return udpFrame(clientMAC, wanMAC, clientIP, uint16(20000+i), vip, 53, "q", true)
	})
	if allocs != 0 {
		t.Fatalf("the sync path allocates %.1f times per burst", allocs)
	}
	if r.w.cnt.own[SyncRecords] < 100 {
		t.Fatalf("only %d records synced", r.w.cnt.own[SyncRecords])
	}
}
