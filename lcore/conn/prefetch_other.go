//go:build !amd64

package conn

import "unsafe"

// prefetch is a no-op where this package has no prefetch instruction.
func prefetch(unsafe.Pointer) {}
