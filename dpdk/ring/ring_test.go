package ring_test

import (
	"errors"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/dplb/dplb/dpdk/dpdktest"
	"github.com/dplb/dplb/dpdk/ring"
)

func TestMain(m *testing.M) { dpdktest.Main(m) }

// backing gives the tests real, distinct addresses to pass through rings
// (the ring never dereferences them).
var backing [1 << 17]uint64

func fill(o ring.Objs, base int) {
	for i := range o {
		o[i] = unsafe.Pointer(&backing[base+i])
	}
}

func TestSPSCBurst(t *testing.T) {
	dpdktest.Skip(t)
	r, err := ring.Create("spsc", 16, -1, ring.SingleProducer|ring.SingleConsumer)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	if r.Name() != "spsc" || r.Count() != 0 || r.FreeCount() != 15 {
		t.Fatalf("new ring: %q count %d free %d", r.Name(), r.Count(), r.FreeCount())
	}
	in, out := ring.NewObjs(20), ring.NewObjs(20)
	defer ring.FreeObjs(in)
	defer ring.FreeObjs(out)
	fill(in, 0)
	if n := r.SPEnqueueBurst(in); n != 15 { // a 16-slot ring holds 15
		t.Fatalf("enqueued %d, want 15", n)
	}
	if n := r.SPEnqueueBurst(in[:1]); n != 0 {
		t.Fatalf("enqueue into a full ring took %d", n)
	}
	if n := r.SCDequeueBurst(out[:10]); n != 10 {
		t.Fatalf("dequeued %d, want 10", n)
	}
	if n := r.SCDequeueBurst(out[10:]); n != 5 {
		t.Fatalf("dequeued %d, want 5", n)
	}
	for i := 0; i < 15; i++ {
		if out[i] != in[i] {
			t.Fatalf("FIFO order broken at %d", i)
		}
	}
	if n := r.SCDequeueBurst(out); n != 0 || r.Count() != 0 {
		t.Fatalf("empty ring gave %d", n)
	}
}

func TestExactSizeAndErrors(t *testing.T) {
	dpdktest.Skip(t)
	r, err := ring.Create("exact", 10, -1, ring.ExactSize)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	if r.FreeCount() != 10 {
		t.Fatalf("exact ring free %d, want 10", r.FreeCount())
	}
	if _, err := ring.Create("exact", 10, -1, ring.ExactSize); !errors.Is(err, syscall.EEXIST) {
		t.Fatalf("duplicate name: got %v, want EEXIST", err)
	}
	if _, err := ring.Create("bad", 10, -1, 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("non-power-of-two size: got %v, want EINVAL", err)
	}
}

// TestMPMC runs four producers and four consumers and checks that every
// object arrives exactly once.
func TestMPMC(t *testing.T) {
	dpdktest.Skip(t)
	r, err := ring.Create("mpmc", 256, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Free()
	const producers, perProducer = 4, 20000 // perProducer is a multiple of 16
	var seen sync.Map
	var wg sync.WaitGroup
	var got [4]int
	done := make(chan struct{})
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			out := ring.NewObjs(32)
			defer ring.FreeObjs(out)
			for {
				n := r.MCDequeueBurst(out)
				for _, o := range out[:n] {
					if _, dup := seen.LoadOrStore(uintptr(o), true); dup {
						t.Errorf("object %#x dequeued twice", uintptr(o))
					}
				}
				got[c] += n
				if n == 0 {
					select {
					case <-done:
						if r.Count() == 0 {
							return
						}
					default:
					}
				}
			}
		}(c)
	}
	var pwg sync.WaitGroup
	for p := 0; p < producers; p++ {
		pwg.Add(1)
		go func(p int) {
			defer pwg.Done()
			in := ring.NewObjs(16)
			defer ring.FreeObjs(in)
			for i := 0; i < perProducer; i += 16 {
				for j := range in {
					in[j] = unsafe.Pointer(&backing[p*perProducer+i+j])
				}
				for sent := 0; sent < len(in); {
					sent += r.MPEnqueueBurst(in[sent:])
				}
			}
		}(p)
	}
	pwg.Wait()
	close(done)
	wg.Wait()
	total := got[0] + got[1] + got[2] + got[3]
	if want := producers * ((perProducer + 15) / 16 * 16); total != want {
		t.Fatalf("received %d objects, want %d", total, want)
	}
}
