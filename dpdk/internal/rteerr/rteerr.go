// Package rteerr turns DPDK's negative return codes and rte_errno values into
// Go errors. Every binding package reports errors through it, so callers can
// test them with errors.Is(err, syscall.EINVAL) and read DPDK's own message.
package rteerr

/*
#cgo pkg-config: libdpdk
#include <rte_errno.h>
*/
import "C"

import (
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// DPDK's own errno values, beyond the standard ones.
const (
	ESecondary = syscall.Errno(C.E_RTE_SECONDARY) // invalid call in a secondary process
	ENoConfig  = syscall.Errno(C.E_RTE_NO_CONFIG) // missing rte_config structure
)

// Error is a failed DPDK call: which call, and the errno it reported.
type Error struct {
	Op    string
	Errno syscall.Errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Op, Name(e.Errno), Message(e.Errno))
}

// Unwrap lets errors.Is match the errno.
func (e *Error) Unwrap() error { return e.Errno }

// FromRet converts a DPDK return code: 0 and positive values are success,
// -errno is a failure.
func FromRet(op string, ret int) error {
	if ret >= 0 {
		return nil
	}
	return &Error{Op: op, Errno: syscall.Errno(-ret)}
}

// FromErrno wraps a positive errno (rte_errno after a call that returned NULL or -1).
func FromErrno(op string, errno int) error {
	if errno <= 0 {
		errno = int(syscall.EINVAL) // the call failed without saying why
	}
	return &Error{Op: op, Errno: syscall.Errno(errno)}
}

// Name is the symbolic name of an errno, DPDK's own included.
func Name(e syscall.Errno) string {
	switch e {
	case ESecondary:
		return "E_RTE_SECONDARY"
	case ENoConfig:
		return "E_RTE_NO_CONFIG"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno %d", int(e))
}

// Message is DPDK's description of an errno (rte_strerror also covers the
// standard ones).
func Message(e syscall.Errno) string {
	return C.GoString(C.rte_strerror(C.int(e)))
}
