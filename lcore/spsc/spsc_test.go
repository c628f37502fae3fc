package spsc

import (
	"runtime"
	"testing"
)

func TestNewRejectsBadSizes(t *testing.T) {
	for _, n := range []int{-1, 0, 3, 6, 100} {
		if _, err := New[int](n); err == nil {
			t.Errorf("New(%d) succeeded", n)
		}
	}
}

func TestFIFOAndFull(t *testing.T) {
	r, err := New[int](4)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Pop(); ok {
		t.Fatal("pop from an empty ring succeeded")
	}
	for i := 1; i <= 4; i++ {
		if !r.Push(i) {
			t.Fatalf("push %d refused", i)
		}
	}
	if r.Push(5) || r.Len() != 4 || r.Cap() != 4 {
		t.Fatalf("full ring: push accepted or len %d", r.Len())
	}
	for i := 1; i <= 4; i++ {
		if v, ok := r.Pop(); !ok || v != i {
			t.Fatalf("pop = %d %v, want %d", v, ok, i)
		}
	}
	if r.Len() != 0 {
		t.Fatalf("len %d after draining", r.Len())
	}
}

// TestConcurrent moves 128k values between two goroutines and checks
// order and completeness (run with -race to check the memory ordering).
func TestConcurrent(t *testing.T) {
	r, _ := New[uint64](64)
	const n = 1 << 17
	done := make(chan error, 1)
	go func() {
		var want uint64
		for want < n {
			v, ok := r.Pop()
			if !ok {
				runtime.Gosched() // two CPUs: let the producer run
				continue
			}
			if v != want {
				done <- errorf(v, want)
				return
			}
			want++
		}
		done <- nil
	}()
	for i := uint64(0); i < n; {
		if r.Push(i) {
			i++
		} else {
			runtime.Gosched()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type orderError struct{ got, want uint64 }

func (e orderError) Error() string { return "out of order" }

func errorf(got, want uint64) error { return orderError{got, want} }

func TestNoAllocation(t *testing.T) {
	r, _ := New[*int](8)
	x := new(int)
	if n := testing.AllocsPerRun(1000, func() {
		r.Push(x)
		r.Pop()
	}); n != 0 {
		t.Fatalf("push/pop allocate %.1f times", n)
	}
}
