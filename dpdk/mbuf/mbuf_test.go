package mbuf_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/mbuf"
	"github.com/dplb/dplb/dpdk/mempool"
)

func TestMain(m *testing.M) { dpdktest.Main(m) }

func newPool(t *testing.T, name string, n uint) *mempool.Mempool {
	t.Helper()
	dpdktest.Skip(t)
	mp, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: name, N: n, Cache: 0, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mp.Free)
	return mp
}

func TestPoolInUse(t *testing.T) {
	mp := newPool(t, "inuse", 63)
	if mp.Size() != 63 || mp.InUse() != 0 || mp.Avail() != 63 || mp.Name() != "inuse" {
		t.Fatalf("new pool: size %d in use %d avail %d name %q", mp.Size(), mp.InUse(), mp.Avail(), mp.Name())
	}
	if got, err := mempool.Lookup("inuse"); err != nil || got != mp {
		t.Fatalf("Lookup: %v %v", got, err)
	}
	arr := mbuf.NewArray(63)
	defer arr.Free()
	for i := range arr.Pkt {
		m, err := mbuf.Alloc(mp)
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		arr.Pkt[i] = m
	}
	if mp.InUse() != 63 || mp.Avail() != 0 {
		t.Fatalf("after 63 allocs: in use %d avail %d", mp.InUse(), mp.Avail())
	}
	if _, err := mbuf.Alloc(mp); err == nil {
		t.Fatal("alloc from an empty pool succeeded")
	}
	arr.Pkt[0].Free()
	mbuf.FreeBulk(arr.Pkt[1:])
	if mp.InUse() != 0 {
		t.Fatalf("after freeing all: in use %d", mp.InUse())
	}
}

func TestDataPrependAdjAppend(t *testing.T) {
	mp := newPool(t, "data", 31)
	m, err := mbuf.Alloc(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	head, tail := m.Headroom(), m.Tailroom()
	if m.DataLen() != 0 || m.PktLen() != 0 || m.NbSegs() != 1 || head != 128 {
		t.Fatalf("fresh mbuf: len %d/%d segs %d headroom %d", m.DataLen(), m.PktLen(), m.NbSegs(), head)
	}
	b, err := m.Append(10)
	if err != nil {
		t.Fatal(err)
	}
	copy(b, "0123456789")
	if !bytes.Equal(m.Data(), []byte("0123456789")) || m.Tailroom() != tail-10 {
		t.Fatalf("after append: %q tailroom %d", m.Data(), m.Tailroom())
	}
	front, err := m.Prepend(4)
	if err != nil {
		t.Fatal(err)
	}
	copy(front, "abcd")
	if string(m.Data()) != "abcd0123456789" || m.Headroom() != head-4 || m.PktLen() != 14 {
		t.Fatalf("after prepend: %q headroom %d pktlen %d", m.Data(), m.Headroom(), m.PktLen())
	}
	if err := m.Adj(6); err != nil {
		t.Fatal(err)
	}
	if string(m.Data()) != "23456789" || m.DataLen() != 8 || m.PktLen() != 8 {
		t.Fatalf("after adj: %q", m.Data())
	}
	if err := m.SetLen(3); err != nil || string(m.Data()) != "234" {
		t.Fatalf("SetLen(3): %v %q", err, m.Data())
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"prepend beyond headroom", func() error { _, err := m.Prepend(m.Headroom() + 1); return err }()},
		{"adj beyond length", m.Adj(4)},
		{"append beyond tailroom", func() error { _, err := m.Append(m.Tailroom() + 1); return err }()},
		{"negative length", m.SetLen(-1)},
	} {
		if !errors.Is(tc.err, mbuf.ErrNoRoom) {
			t.Errorf("%s: got %v, want ErrNoRoom", tc.name, tc.err)
		}
	}
	if string(m.Data()) != "234" {
		t.Fatalf("refused operations changed the data: %q", m.Data())
	}
}

func TestOffloadFields(t *testing.T) {
	mp := newPool(t, "offload", 31)
	m, err := mbuf.Alloc(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	if m.OlFlags() != 0 {
		t.Fatalf("fresh mbuf ol_flags %#x", m.OlFlags())
	}
	m.SetOlFlags(mbuf.TxIPv4 | mbuf.TxIPCksum | mbuf.TxTCPCksum)
	m.SetHeaderLens(14, 20, 32)
	if m.L2Len() != 14 || m.L3Len() != 20 || m.L4Len() != 32 {
		t.Fatalf("lens %d %d %d", m.L2Len(), m.L3Len(), m.L4Len())
	}
	m.SetHeaderLens(127, 511, 255) // the bitfields' maxima
	if m.L2Len() != 127 || m.L3Len() != 511 || m.L4Len() != 255 {
		t.Fatalf("max lens %d %d %d", m.L2Len(), m.L3Len(), m.L4Len())
	}
	if m.OlFlags() != mbuf.TxIPv4|mbuf.TxIPCksum|mbuf.TxTCPCksum {
		t.Fatalf("ol_flags %#x", m.OlFlags())
	}
	// The same fields through DPDK's own C definitions: the oracle.
	if got := mbuf.CL2L3L4(m); got != [3]int{127, 511, 255} {
		t.Fatalf("C sees lens %v", got)
	}
	if mbuf.CHeadroom(m) != m.Headroom() || mbuf.CTailroom(m) != m.Tailroom() {
		t.Fatalf("C headroom/tailroom %d/%d, Go %d/%d", mbuf.CHeadroom(m), mbuf.CTailroom(m), m.Headroom(), m.Tailroom())
	}
	if m.RSSHash() != 0 {
		t.Fatalf("fresh RSS hash %#x", m.RSSHash())
	}
}

func TestAccessorsDoNotAllocate(t *testing.T) {
	mp := newPool(t, "allocs", 31)
	m, err := mbuf.Alloc(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	m.Append(64)
	var sink int
	if n := testing.AllocsPerRun(1000, func() {
		d := m.Data()
		sink += len(d) + m.DataLen() + m.Headroom() + int(m.OlFlags()) + int(m.RSSHash())
		m.SetHeaderLens(14, 20, 20)
		m.Prepend(2)
		m.Adj(2)
	}); n != 0 {
		t.Fatalf("accessors allocate %.1f times per run", n)
	}
	_ = sink
}

// TestRecycle: a used packet comes back as rte_pktmbuf_alloc would hand
// out a fresh one; a shared one is refused and left as it was.
func TestRecycle(t *testing.T) {
	mp := newPool(t, "recycle", 31)
	m, err := mbuf.Alloc(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	fresh := m.Headroom()
	if _, err := m.Append(100); err != nil {
		t.Fatal(err)
	}
	if err := m.Adj(20); err != nil {
		t.Fatal(err)
	}
	m.SetOlFlags(mbuf.TxIPv4 | mbuf.TxIPCksum)
	m.SetHeaderLens(14, 20, 20)
	m.SetPort(3)
	mbuf.CRefcntUpdate(m, 1) // shared: not recycled
	if m.Recycle() || m.DataLen() != 80 || m.OlFlags() == 0 {
		t.Fatalf("a shared mbuf recycled (len %d flags %#x)", m.DataLen(), m.OlFlags())
	}
	mbuf.CRefcntUpdate(m, -1)
	if !m.Recycle() {
		t.Fatal("a lone direct mbuf not recycled")
	}
	if m.Headroom() != fresh || mbuf.CHeadroom(m) != fresh || m.DataLen() != 0 || m.PktLen() != 0 ||
		m.OlFlags() != 0 || mbuf.CL2L3L4(m) != [3]int{} || m.Port() != 0xffff || m.NbSegs() != 1 {
		t.Fatalf("recycled: headroom %d (C %d, fresh %d) len %d/%d flags %#x lens %v port %d",
			m.Headroom(), mbuf.CHeadroom(m), fresh, m.DataLen(), m.PktLen(), m.OlFlags(), mbuf.CL2L3L4(m), m.Port())
	}
}
