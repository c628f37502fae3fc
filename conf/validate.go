package conf

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FieldError is an invalid configuration value. Field is the key path as
// written in YAML, with list indices ("services[1].servers[0].weight").
type FieldError struct {
	Field string // key path, e.g. "ports[0].address"
	Msg   string // what is wrong, e.g. `"x" is not an IPv4 address`
	Err   error  // underlying cause, if any
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap returns the underlying cause, if any.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Limits checked by Validate.
const (
	maxWorkers       = 64
	maxTimeout       = 30 * 24 * time.Hour
	maxIdleSleep     = 10 * time.Millisecond
	maxReachableTime = time.Hour
	maxStaleTime     = 24 * time.Hour
	maxSocketPath    = 107 // sizeof(sockaddr_un.sun_path) - 1 on Linux
)

var (
	filePrefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	portNameRE   = regexp.MustCompile(`^[a-z0-9_-]{1,15}$`)
	kniNameRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,15}$`)
	vdevNameRE   = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// Validate checks every field and the rules between fields, and returns
// the first problem found as a *FieldError naming the field.
//
// schedulers lists the registered scheduler names; if it is nil, a
// service's scheduler is only required to be non-empty (Load and Parse
// validate this way; lbd validates again with the registry's names).
func (c *Config) Validate(schedulers []string) error {
	for _, check := range []func() error{
		c.EAL.validate,
		c.Dataplane.validate,
		c.validatePorts,
		func() error { return c.validateServices(schedulers) },
		c.Timeouts.validate,
		c.Neighbour.validate,
		c.Control.validate,
		c.Metrics.validate,
		c.Web.validate,
		c.Log.validate,
		c.Restart.validate,
		c.HA.validate,
		c.validateFloating,
		c.validateLocalAddresses,
		c.validateSNAT,
		c.Sync.validate,
		c.validateBGP,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return fieldErrorf(field, "%d is out of range %d..%d", v, lo, hi)
	}
	return nil
}

func checkDuration(field string, d, lo, hi time.Duration, rng string) error {
	if d < lo || d > hi {
		return fieldErrorf(field, "%s is out of range %s", d, rng)
	}
	return nil
}

func checkOneOf(field, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fieldErrorf(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
	}
	return nil
}

func (e EAL) validate() error {
	if e.FilePrefix == "" {
		return fieldErrorf("eal.file_prefix", "must not be empty")
	}
	if !filePrefixRE.MatchString(e.FilePrefix) {
		return fieldErrorf("eal.file_prefix", "%q has characters other than A-Z a-z 0-9 _ -", e.FilePrefix)
	}
	if err := checkRange("eal.memory_mb", e.MemoryMB, 64, 1048576); err != nil {
		return err
	}
	if e.MainCPU < 0 {
		return fieldErrorf("eal.main_cpu", "%d is negative", e.MainCPU)
	}
	for i, a := range e.ExtraArgs {
		if a == "" {
			return fieldErrorf(fmt.Sprintf("eal.extra_args[%d]", i), "must not be empty")
		}
	}
	return nil
}

func checkDescriptors(field string, n int) error {
	if err := checkRange(field, n, 64, 16384); err != nil {
		return err
	}
	if n&(n-1) != 0 {
		return fieldErrorf(field, "%d is not a power of two", n)
	}
	return nil
}

func (d Dataplane) validate() error {
	if n := len(d.Workers); n < 1 || n > maxWorkers {
		return fieldErrorf("dataplane.workers", "has %d entries, want 1..%d", n, maxWorkers)
	}
	for i, cpu := range d.Workers {
		if cpu < 0 {
			return fieldErrorf(fmt.Sprintf("dataplane.workers[%d]", i), "%d is negative", cpu)
		}
	}
	if _, err := ParseSteeringKey(d.SteeringKey); err != nil {
		return fieldErrorf("dataplane.steering_key", "%v", err)
	}
	if err := checkRange("dataplane.burst", d.Burst, 1, 512); err != nil {
		return err
	}
	if err := checkRange("dataplane.mbufs", d.Mbufs, 1023, 16777215); err != nil {
		return err
	}
	// DPDK also refuses a cache larger than mbufs/1.5; with at least 1023
	// mbufs that is at least 682, so the upper bound of 512 implies it.
	if err := checkRange("dataplane.mbuf_cache", d.MbufCache, 0, 512); err != nil {
		return err
	}
	if err := checkDescriptors("dataplane.rx_descriptors", d.RxDescriptors); err != nil {
		return err
	}
	if err := checkDescriptors("dataplane.tx_descriptors", d.TxDescriptors); err != nil {
		return err
	}
	if err := checkRange("dataplane.conn_table_size", d.ConnTableSize, 1024, 67108864); err != nil {
		return err
	}
	if err := checkDuration("dataplane.idle_sleep", d.IdleSleep, 0, maxIdleSleep, "0s..10ms"); err != nil {
		return err
	}
	if err := d.Defense.validate(); err != nil {
		return err
	}
	return d.Fragments.validate(d.Mbufs, len(d.Workers))
}

func (f Fragments) validate(mbufs, workers int) error {
	if err := checkRange("dataplane.fragments.datagrams", f.Datagrams, 16, 1<<20); err != nil {
		return err
	}
	if err := checkRange("dataplane.fragments.held", f.Held, 0, 65536); err != nil {
		return err
	}
	if f.Held*workers >= mbufs/2 {
		return fieldErrorf("dataplane.fragments.held", "%d per lcore on %d lcores must stay below half of dataplane.mbufs (%d): held fragments must not starve the pool", f.Held, workers, mbufs)
	}
	return checkDuration("dataplane.fragments.timeout", f.Timeout, 100*time.Millisecond, time.Minute, "100ms..60s")
}

func (d Defense) validate() error {
	if err := checkRange("dataplane.defense.drop_entry", d.DropEntry, 0, 100); err != nil {
		return err
	}
	if err := checkRange("dataplane.defense.secure", d.Secure, 0, 100); err != nil {
		return err
	}
	for _, f := range []struct {
		field string
		v     time.Duration
	}{
		{"dataplane.defense.idle_after", d.IdleAfter},
		{"dataplane.defense.syn_timeout", d.SYNTimeout},
		{"dataplane.defense.udp_timeout", d.UDPTimeout},
	} {
		if err := checkDuration(f.field, f.v, time.Second, maxTimeout, "1s..720h (30 days)"); err != nil {
			return err
		}
	}
	return nil
}

func (t Timeouts) validate() error {
	for _, d := range []struct {
		field string
		v     time.Duration
	}{
		{"timeouts.tcp", t.TCP},
		{"timeouts.tcp_fin", t.TCPFin},
		{"timeouts.udp", t.UDP},
		{"timeouts.syn", t.SYN},
	} {
		if err := checkDuration(d.field, d.v, time.Second, maxTimeout, "1s..720h (30 days)"); err != nil {
			return err
		}
	}
	return nil
}

func (n Neighbour) validate() error {
	if err := checkDuration("neighbour.reachable_time", n.ReachableTime, time.Second, maxReachableTime, "1s..1h"); err != nil {
		return err
	}
	if n.StaleTime <= n.ReachableTime {
		return fieldErrorf("neighbour.stale_time", "%s is not greater than neighbour.reachable_time %s", n.StaleTime, n.ReachableTime)
	}
	if n.StaleTime > maxStaleTime {
		return fieldErrorf("neighbour.stale_time", "%s is more than 24h", n.StaleTime)
	}
	return nil
}

func (c Control) validate() error {
	switch {
	case c.Socket == "":
		return fieldErrorf("control.socket", "must not be empty")
	case !filepath.IsAbs(c.Socket):
		return fieldErrorf("control.socket", "%q is not an absolute path", c.Socket)
	case len(c.Socket) > maxSocketPath:
		return fieldErrorf("control.socket", "%q is longer than %d bytes", c.Socket, maxSocketPath)
	}
	if c.SocketMode > 0o777 {
		return fieldErrorf("control.socket_mode", "%#o is out of range 0..0777 (write modes in octal, e.g. 0600)", c.SocketMode)
	}
	return nil
}

func (m Metrics) validate() error {
	if m.Listen == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(m.Listen)
	if err != nil {
		return fieldErrorf("metrics.listen", "%q is not host:port (want e.g. 127.0.0.1:9180)", m.Listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fieldErrorf("metrics.listen", "port %q is not a number in 1..65535", port)
	}
	return nil
}

func (l Log) validate() error {
	if err := checkOneOf("log.level", l.Level, "debug", "info", "warn", "error"); err != nil {
		return err
	}
	return checkOneOf("log.format", l.Format, "json", "console")
}

func (r Restart) validate() error {
	if r.StateFile != "" && !filepath.IsAbs(r.StateFile) {
		return fieldErrorf("restart.state_file", "%q is not an absolute path", r.StateFile)
	}
	if err := checkDuration("restart.max_age", r.MaxAge, time.Second, time.Hour, "1s..1h"); err != nil {
		return err
	}
	return checkDuration("restart.pull_wait", r.PullWait, 0, time.Minute, "0..60s")
}
