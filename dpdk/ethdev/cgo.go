package ethdev

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -I${SRCDIR}/../../cgo
*/
import "C"
