package rteerr

import (
	"errors"
	"syscall"
	"testing"
)

func TestFromRet(t *testing.T) {
	if err := FromRet("op", 0); err != nil {
		t.Fatalf("ret 0: got %v, want nil", err)
	}
	if err := FromRet("op", 7); err != nil {
		t.Fatalf("ret 7: got %v, want nil", err)
	}
	err := FromRet("rte_eth_dev_configure(port 3)", -int(syscall.EINVAL))
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("errors.Is(EINVAL) false for %v", err)
	}
	want := "rte_eth_dev_configure(port 3): EINVAL (Invalid argument)"
	if err.Error() != want {
		t.Fatalf("got %q, want %q", err.Error(), want)
	}
}

func TestDPDKErrnoNames(t *testing.T) {
	for _, tc := range []struct {
		errno int
		name  string
	}{
		{int(ESecondary), "E_RTE_SECONDARY"},
		{int(ENoConfig), "E_RTE_NO_CONFIG"},
		{int(syscall.ENOTSUP), "ENOTSUP"},
		{int(syscall.ENOMEM), "ENOMEM"},
	} {
		if got := Name(syscall.Errno(tc.errno)); got != tc.name {
			t.Errorf("Name(%d) = %q, want %q", tc.errno, got, tc.name)
		}
	}
	if got := Message(ESecondary); got != "Invalid call in secondary process" {
		t.Errorf("Message(E_RTE_SECONDARY) = %q", got)
	}
}

func TestFromErrnoZeroIsStillAnError(t *testing.T) {
	if err := FromErrno("rte_ring_create", 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("got %v, want EINVAL", err)
	}
}
