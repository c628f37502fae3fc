package mempool_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/mempool"
)

func TestMain(m *testing.M) { dpdktest.Main(m) }

func TestCreateLookupFree(t *testing.T) {
	dpdktest.Skip(t)
	mp, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: "pool-a", N: 511, Cache: 32, Socket: -1})
	if err != nil {
		t.Fatal(err)
	}
	if mp.Name() != "pool-a" || mp.Size() != 511 || mp.InUse() != 0 || mp.Avail() != 511 {
		t.Fatalf("name %q size %d in use %d avail %d", mp.Name(), mp.Size(), mp.InUse(), mp.Avail())
	}
	if got, err := mempool.Lookup("pool-a"); err != nil || got != mp {
		t.Fatalf("Lookup: %p %v", got, err)
	}
	if _, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: "pool-a", N: 63, Socket: -1}); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("duplicate name: got %v, want EEXIST", err)
	}
	mp.Free()
	if _, err := mempool.Lookup("pool-a"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("lookup after free: got %v, want ENOENT", err)
	}
}

func TestCreateRefusesBadCache(t *testing.T) {
	dpdktest.Skip(t)
	_, err := mempool.CreatePktmbufPool(mempool.PktmbufPool{Name: "pool-b", N: 63, Cache: 4096, Socket: -1})
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("cache above RTE_MEMPOOL_CACHE_MAX_SIZE: got %v, want EINVAL", err)
	}
}
