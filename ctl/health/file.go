package health

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/dplb/dplb/conf"
)

// maxFileRead is how much of a file check's file is read: a number and
// its newline (keepalived reads 127 bytes).
const maxFileRead = 128

// probeFile reads a file check's number (keepalived's FILE_CHECK and
// track_file). With file_weight 0 it passes while the number is 0 (not
// 0 with file_reverse); else it passes and says how much the number times
// file_weight (negated by file_reverse) adds to the server's weight. An
// absent or empty file reads 0, as in keepalived, so that an operator
// drains a server by writing a 1 and brings it back by removing the file.
// A file that cannot be read or holds no number fails the probe: the
// server's rise and fall smooth a file caught half written.
func probeFile(c conf.HealthCheck) Result {
	v, err := readNumber(c.File)
	if err != nil {
		return Outcome(false, truncate("file: "+err.Error()))
	}
	if c.FileWeight == 0 {
		if down := v != 0; down != c.FileReverse {
			return Outcome(false, fmt.Sprintf("file %s reads %d", c.File, v))
		}
		return Outcome(true, "")
	}
	d := v * int64(c.FileWeight)
	if c.FileReverse {
		d = -d
	}
	// Any weight plus or minus this many is at a bound of 0..65535.
	const bound = 2 * conf.MaxFileWeight
	return Result{OK: true, Weight: -1, Delta: int(min(max(d, -bound), bound))}
}

// readNumber reads the number at the start of the file at path: 0 when
// the file is absent or empty.
func readNumber(path string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, maxFileRead)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return 0, err
	}
	fields := strings.Fields(string(buf[:n]))
	if len(fields) == 0 {
		return 0, nil
	}
	// keepalived's strtol(..., 0) and its range: an int32, or 2^31.
	v, err := strconv.ParseInt(fields[0], 0, 64)
	if err != nil || v < -1<<31 || v > 1<<31 {
		return 0, fmt.Errorf("%s holds %.40q, not a number in -2147483648..2147483648", path, fields[0])
	}
	return v, nil
}
