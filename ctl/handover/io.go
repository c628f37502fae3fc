package handover

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// EnvFD names the environment variable an upgrading lbd passes the
// handover's file descriptor in (a memfd inherited across exec).
const EnvFD = "DPLB_HANDOVER_FD"

// EnvControlFD names the environment variable an upgrading lbd passes its
// listening control socket in: the new lbd serves the same socket, so a
// client (lbctl, keepalived's check) that connects during the exec waits
// in its backlog instead of finding no socket.
const EnvControlFD = "DPLB_CONTROL_FD"

// ControlFromEnv returns the listening control socket an upgrading lbd
// passed in EnvControlFD (nil: none) and clears the variable.
func ControlFromEnv() (*os.File, error) {
	v, set := os.LookupEnv(EnvControlFD)
	if !set {
		return nil, nil
	}
	os.Unsetenv(EnvControlFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: not a file descriptor", EnvControlFD, v)
	}
	syscall.CloseOnExec(fd) // a later exec passes it on explicitly
	return os.NewFile(uintptr(fd), "control socket"), nil
}

// WriteFile writes b to path atomically (a temporary file in the same
// directory, synced, then renamed), readable by root only.
func WriteFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// ReadFile reads a handover file, refusing one longer than MaxLen.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readAll(f)
}

func readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxLen+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxLen {
		return nil, fmt.Errorf("longer than the %d bytes a handover may have", MaxLen)
	}
	return b, nil
}

// Memfd puts b in an anonymous memory file that an exec'd program
// inherits (no close-on-exec), and returns its descriptor.
func Memfd(b []byte) (int, error) {
	fd, err := unix.MemfdCreate("dplb-handover", 0)
	if err != nil {
		return -1, fmt.Errorf("memfd_create: %w", err)
	}
	for p := b; len(p) > 0; {
		n, err := unix.Write(fd, p)
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("memfd write: %w", err)
		}
		p = p[n:]
	}
	if _, err := unix.Seek(fd, 0, io.SeekStart); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("memfd seek: %w", err)
	}
	return fd, nil
}

// FromEnv reads the handover an upgrading lbd passed in EnvFD, closes
// the descriptor and clears the variable; ok is false when there is
// none.
func FromEnv() (b []byte, ok bool, err error) {
	v, set := os.LookupEnv(EnvFD)
	if !set {
		return nil, false, nil
	}
	os.Unsetenv(EnvFD)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, true, fmt.Errorf("%s=%q: not a file descriptor", EnvFD, v)
	}
	f := os.NewFile(uintptr(fd), "handover")
	if f == nil {
		return nil, true, fmt.Errorf("%s=%d: not a file descriptor", EnvFD, fd)
	}
	defer f.Close()
	b, err = readAll(f)
	if err != nil {
		return nil, true, fmt.Errorf("%s=%d: %w", EnvFD, fd, err)
	}
	if len(b) == 0 {
		return nil, true, errors.New("the handover passed in " + EnvFD + " is empty")
	}
	return b, true, nil
}
