package gen

import (
	"testing"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/lcore"
)

// TestAlignWithConfiguredKey: lbd configured with a steering key (parsed
// by conf, installed by lcore.SetSteeringKey as lbd does at start) and
// lbgen given the same key agree on every flow's owner, for any number of
// lcores; the owner under that key does not change between calls or
// processes (no per-boot randomness left).
func TestAlignWithConfiguredKey(t *testing.T) {
	const hexKey = "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa"
	key, err := conf.ParseSteeringKey(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Flows: 5000, Clients: Range{First: cip, Last: cip + 15}, ClientPorts: [2]uint16{1024, 65535},
		AlignOwner: true, SteeringKey: key}
	checkPlacement(t, cfg, lcore.Owner)
	// With the key configured, the owner is a plain function of it: the
	// Toeplitz hash of the endpoint computed bit by bit here, mod n.
	s, _ := lcore.NewSteering(key)
	for i := uint32(0); i < 2000; i++ {
		ip, port := cip+i*7919, uint16(1024+i*31)
		in := []byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip), byte(port >> 8), byte(port)}
		for _, n := range []int{2, 4, 8} {
			want := int(toeplitz(key, in) % uint32(n))
			if a, b := s.Owner(ip, port, n), lcore.Owner(ip, port, n); a != want || b != want {
				t.Fatalf("%x:%d on %d lcores: lbgen %d, lbd %d, the hash says %d", ip, port, n, a, b, want)
			}
		}
	}
}

// checkPlacement places cfg's flows on 2, 3 and 4 queues under its
// steering key (lbgen's side, before lbd's key is installed), installs
// the key as lbd does at start, and checks that every flow is on the
// queue owner (lbd's) gives it and every queue has flows.
func checkPlacement(t *testing.T, cfg Config, owner func(low uint32, sport uint16, n int) int) {
	t.Helper()
	var queues [][][]uint32
	for _, n := range []int{2, 3, 4} {
		cfg.Queues = n
		q, err := FlowQueues(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	if err := lcore.SetSteeringKey(cfg.SteeringKey); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{2, 3, 4} {
		total := 0
		for q, flows := range queues[i] {
			if len(flows) == 0 {
				t.Fatalf("%d lcores: queue %d got no flow", n, q)
			}
			for _, k := range flows {
				src, sport := flowTuple(&cfg, uint64(k))
				if o := owner(src, sport, n); o != q {
					t.Fatalf("%d lcores: flow %d sent on queue %d, owned by lcore %d", n, k, q, o)
				}
			}
			total += len(flows)
		}
		if total != cfg.Flows {
			t.Fatalf("%d lcores: %d flows placed of %d", n, total, cfg.Flows)
		}
	}
}

// toeplitz is the Toeplitz hash of in under key, one input bit at a time.
func toeplitz(key, in []byte) uint32 {
	var h uint32
	for i := 0; i < 8*len(in); i++ {
		if in[i/8]>>(7-i%8)&1 == 0 {
			continue
		}
		var w uint32
		for b := i; b < i+32; b++ {
			w = w<<1 | uint32(key[b/8]>>(7-b%8)&1)
		}
		h ^= w
	}
	return h
}
