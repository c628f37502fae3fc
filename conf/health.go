package conf

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HealthCheck is how lbd watches a real server: a probe every interval,
// a server taken out of scheduling after fall consecutive failures and put
// back after rise consecutive successes (keepalived's semantics: a server
// is assumed up until it fails). It sits on a service ("health", for all
// its servers) and may be overridden per server.
//
// Probes leave from the LB host's own network stack (the kernel's routing,
// normally a management interface), optionally bound to Source; they do not
// go out through the DPDK ports. Real servers must therefore be reachable
// from the host itself.
//
// Zero values in Go literals mean the defaults (Type "" is "none"), as
// Effective spells out; Load fills the defaults in for absent keys.
type HealthCheck struct {
	Type           string        `mapstructure:"type"`             // tcp, http, https, udp, dns, smtp, icmp, exec, file, bfd or none (not checked: always up); default "none"; reload: yes
	Interval       time.Duration `mapstructure:"interval"`         // time between the starts of two probes, 100ms..1h; default 2s; reload: yes
	Timeout        time.Duration `mapstructure:"timeout"`          // a probe not done within this fails, 10ms..1h and less than interval; default 1s; reload: yes
	Rise           int           `mapstructure:"rise"`             // consecutive successes that bring a down server back, 1..100; default 2; reload: yes
	Fall           int           `mapstructure:"fall"`             // consecutive failures that take an up server out, 1..100; default 3; reload: yes
	RetryInterval  time.Duration `mapstructure:"retry_interval"`   // after a failed probe of a server still up, the next comes this long after the last one started (keepalived's delay_before_retry), 0 = interval, else 100ms..1h; default 0; reload: yes
	Port           int           `mapstructure:"port"`             // port probed, 0 = the real server's (target vip: the service's), 0..65535; default 0; reload: yes
	Source         string        `mapstructure:"source"`           // IPv4 address the probes leave from (the management interface's), "" = the kernel's choice; default ""; reload: yes
	Target         string        `mapstructure:"target"`           // "server" probes the real server's address, "vip" the VIP (dr/tun servers only; see HealthTargetVIP); default "server"; reload: yes
	Method         string        `mapstructure:"method"`           // http(s): GET, HEAD, POST or OPTIONS; default "GET"; reload: yes
	Path           string        `mapstructure:"path"`             // http(s): request path, starting with "/"; default "/"; reload: yes
	Host           string        `mapstructure:"host"`             // http(s): Host header (and TLS server name), "" = the probed address; default ""; reload: yes
	ExpectStatus   string        `mapstructure:"expect_status"`    // http(s): accepted status codes, comma-separated codes and ranges in 100..599 ("200", "200-399,404"); default "200-399"; reload: yes
	ExpectBody     string        `mapstructure:"expect_body"`      // http(s): the body (first 64 KiB) must contain this, "" = any body; default ""; reload: yes
	ExpectRegex    string        `mapstructure:"expect_regex"`     // http(s): the body (first 64 KiB) must match this regular expression (Go's RE2 syntax: keepalived's url regex without PCRE's backtracking features), "" = not checked; default ""; reload: yes
	ExpectDigest   string        `mapstructure:"expect_digest"`    // http(s): the MD5 of the whole body (at most 16 MiB), 32 hex digits, keepalived's url digest (genhash prints it), "" = not checked; default ""; reload: yes
	ExtraURLs      []HealthURL   `mapstructure:"extra_urls"`       // http(s): more requests after path's, in turn, each of which must pass too, as keepalived's url blocks all must (one probe's timeout bounds them all); default none; reload: yes
	TLSSkipVerify  bool          `mapstructure:"tls_skip_verify"`  // https: accept any certificate (real servers usually have one for the VIP's name); default true; reload: yes
	Send           string        `mapstructure:"send"`             // udp: payload of the probe datagram, required for udp; default ""; reload: yes
	Expect         string        `mapstructure:"expect"`           // udp: the reply must contain this, "" = any reply; default ""; reload: yes
	DNSName        string        `mapstructure:"dns_name"`         // dns: the name queried (keepalived's DNS_CHECK name); default "."; reload: yes
	DNSType        string        `mapstructure:"dns_type"`         // dns: the type queried, A, AAAA, NS, CNAME, SOA, MX or TXT; the check passes on a reply to the query with rcode NOERROR (keepalived's DNS_CHECK type); default "SOA"; reload: yes
	HeloName       string        `mapstructure:"helo_name"`        // smtp: the name given in HELO; the check passes on a 220 greeting and a 250 answer to HELO, then says QUIT (keepalived's SMTP_CHECK); default "" (this host's name); reload: yes
	BFDInterval    time.Duration `mapstructure:"bfd_interval"`     // bfd: lbd's desired transmit and required receive interval once the session is up (before, 1s as RFC 5880 wants), 10ms..10s; a session is down after bfd_multiplier intervals without a packet; default 300ms; reload: yes
	BFDMultiplier  int           `mapstructure:"bfd_multiplier"`   // bfd: the detect multiplier lbd asks of the server, 1..255; default 3; reload: yes
	BFDAuth        string        `mapstructure:"bfd_auth"`         // bfd: the session's authentication (RFC 5880), both ways: none, simple (a password), keyed-md5, meticulous-keyed-md5, keyed-sha1 or meticulous-keyed-sha1 (bird's authentication types); default none; reload: yes
	BFDKeyID       int           `mapstructure:"bfd_key_id"`       // bfd: the key ID lbd's packets carry and the server's must, 0..255 (bird numbers its passwords from 1); default 1; reload: yes
	BFDPassword    string        `mapstructure:"bfd_password"`     // bfd: the shared key of bfd_auth, 1..16 bytes (1..20 for the sha1 types); required with bfd_auth; default ""; reload: yes
	Command        []string      `mapstructure:"command"`          // exec: argv, the first an absolute path; exit 0 = up; env DPLB_RS_ADDR, DPLB_RS_PORT, DPLB_VIP, DPLB_VPORT; default none; reload: yes
	WeightFromExit bool          `mapstructure:"weight_from_exit"` // exec: an exit status of 2..255 is up too, and sets the server's weight to the status - 2 (0..253) until the next one; 0 keeps the weight last set; 1 and signals are down (keepalived's misc_dynamic); default false; reload: yes
	File           string        `mapstructure:"file"`             // file: the file each probe reads, an absolute path; it holds a number as text (decimal, or 0x hex, as keepalived's track_file), an absent or empty file reads 0; required for file; default ""; reload: yes
	FileWeight     int           `mapstructure:"file_weight"`      // file: 0 = the server is down while the number is not 0 (a drain switch); else the number times file_weight is added to the server's weight (which stays in 0..65535) and the server stays up (keepalived's FILE_CHECK weight), -65535..65535; default 0; reload: yes
	FileReverse    bool          `mapstructure:"file_reverse"`     // file: with file_weight 0 the server is down while the number is 0; else the product is subtracted (keepalived's weight ... reverse); default false; reload: yes
	Also           []HealthCheck `mapstructure:"also"`             // more checks of the server that must pass too (keepalived's several checkers of a real server), each with its type, its type's settings, its own timeout and its via (default this check's), probed after this one in the same probe; interval, rise, fall and the server's settings (start_down, on_failure, slow_start, passive) are this check's; default none; reload: yes
	OnFailure      string        `mapstructure:"on_failure"`       // existing connections of a failed server: "keep" them or "expire" them (IPVS's expire_nodest_conn); default "keep"; reload: yes
	SlowStart      time.Duration `mapstructure:"slow_start"`       // after recovery, ramp the weight linearly from 1 to the configured one over this time, 0 = off, 0..1h; default 0; reload: yes
	Via            string        `mapstructure:"via"`              // where probes leave from: "host" (the host's own stack, a management interface) or "lbd" (tcp, http, udp and icmp: lbd sends a SYN from its port's address, IPv4 or IPv6, through the DPDK port and reads the answer; for http it then sends the request and reads the answer's status line, so no expect_body, and one more connection for each of extra_urls; for udp it sends the datagram and searches expect in the reply's first 64 bytes; for icmp an echo request), for servers reachable only through lbd (or keep "host" and give the port a kernel interface, ports[].kni: the host's checks, with bodies and https, then reach the servers through the port); default "" (host); reload: yes
	Passive        bool          `mapstructure:"passive"`          // also watch TCP traffic: a server whose new connections mostly never reach ESTABLISHED, two 10 s windows running, is held out of scheduling for 30 s (works with type none too); default false; reload: yes
	StartDown      bool          `mapstructure:"start_down"`       // a server starts down, with no new connection, until rise probes passed (keepalived's alpha), when lbd starts and when the server is added; needs a type; default false (a server starts up); reload: yes (a server already checked keeps its state)
}

// HealthURL is one more request of an http(s) check: keepalived's url
// blocks after the first. Its status codes default to the check's; the
// body is checked only as it says.
type HealthURL struct {
	Path         string `mapstructure:"path"`          // request path, starting with "/"; required
	ExpectStatus string `mapstructure:"expect_status"` // accepted status codes, as the check's; default the check's expect_status
	ExpectBody   string `mapstructure:"expect_body"`   // the body (first 64 KiB) must contain this; default "" (not checked)
	ExpectRegex  string `mapstructure:"expect_regex"`  // the body (first 64 KiB) must match this (RE2); default "" (not checked)
	ExpectDigest string `mapstructure:"expect_digest"` // the MD5 of the whole body, 32 hex digits; default "" (not checked)
}

// maxViaLBDRequest bounds an HTTP check's path and Host header through
// lbd: its request goes in one TCP segment (lcore.MaxProbePayload, 1024
// bytes, with the request line's and headers' fixed text).
const maxViaLBDRequest = 900

// maxViaLBDSend and maxViaLBDExpect bound a UDP check through lbd: its
// datagram is one probe segment (lcore.MaxProbePayload), and lbd keeps
// the first 64 bytes of the reply (lcore.ProbeDataLen) to search. conf
// cannot import lcore: ctl's TestViaLBDLimitsFitTheDataplane holds these
// bounds and maxViaLBDRequest to lcore's.
const (
	maxViaLBDSend   = 1024
	maxViaLBDExpect = 64
)

// checkViaLBD checks what a probe through lbd can do with e (the check at
// field f, defaults filled in): a TCP connect, an HTTP request whose
// answer's status line lbd reads (not TLS, not the body), a UDP datagram
// whose reply's start lbd reads, or an ICMP echo.
func checkViaLBD(f string, e HealthCheck) error {
	switch e.Type {
	case HealthTCP:
		return nil
	case HealthUDP:
		if len(e.Send) > maxViaLBDSend {
			return fieldErrorf(f+".send", "a UDP check through lbd sends at most %d bytes, not %d (via: lbd)", maxViaLBDSend, len(e.Send))
		}
		if len(e.Expect) > maxViaLBDExpect {
			return fieldErrorf(f+".expect", "a UDP check through lbd searches the first %d bytes of the reply: %d bytes cannot be found there (via: lbd)", maxViaLBDExpect, len(e.Expect))
		}
		return nil
	case HealthHTTP:
		if e.ExpectBody != "" {
			return fieldErrorf(f+".expect_body", "an HTTP check through lbd reads the status line only (via: lbd)")
		}
		for i, u := range e.ExtraURLs {
			g := fmt.Sprintf("%s.extra_urls[%d]", f, i)
			switch {
			case u.ExpectBody != "":
				return fieldErrorf(g+".expect_body", "an HTTP check through lbd reads the status line only (via: lbd)")
			case u.ExpectRegex != "":
				return fieldErrorf(g+".expect_regex", "an HTTP check through lbd reads the status line only (via: lbd)")
			case u.ExpectDigest != "":
				return fieldErrorf(g+".expect_digest", "an HTTP check through lbd reads the status line only, not the body it would digest (via: lbd)")
			}
			if err := checkViaLBDRequest(g, u.Path, e.Host); err != nil {
				return err
			}
		}
		if e.ExpectDigest != "" {
			return fieldErrorf(f+".expect_digest", "an HTTP check through lbd reads the status line only, not the body it would digest (via: lbd)")
		}
		if e.ExpectRegex != "" {
			return fieldErrorf(f+".expect_regex", "an HTTP check through lbd reads the status line only (via: lbd)")
		}
		return checkViaLBDRequest(f, e.Path, e.Host)
	case HealthICMP:
		return nil
	}
	return fieldErrorf(f+".via", "lbd sends TCP, HTTP, UDP and ICMP probes only (type is %s)", e.Type)
}

// checkViaLBDRequest checks a request lbd sends for an HTTP check (the
// check's or an extra URL's, at f): one segment, path and host written
// as they are.
func checkViaLBDRequest(f, path, host string) error {
	for _, fv := range [...][2]string{{"path", path}, {"host", host}} {
		if i := strings.IndexFunc(fv[1], func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
			return fieldErrorf(f+"."+fv[0], "%q has a space or control character at byte %d (via: lbd sends it as it is)", fv[1], i)
		}
	}
	if n := len(path) + len(host); n > maxViaLBDRequest {
		return fieldErrorf(f+".path", "path and host of an HTTP check through lbd are %d bytes, at most %d (via: lbd: one segment)", n, maxViaLBDRequest)
	}
	return nil
}

// Values of HealthCheck.Type.
const (
	HealthNone  = "none"
	HealthTCP   = "tcp"
	HealthHTTP  = "http"
	HealthHTTPS = "https"
	HealthUDP   = "udp"
	HealthICMP  = "icmp"
	HealthExec  = "exec"
	HealthDNS   = "dns"
	HealthSMTP  = "smtp"
	HealthFile  = "file"
	HealthBFD   = "bfd"
)

// DNSTypes are the query types a dns check asks (keepalived's DNS_CHECK).
var DNSTypes = []string{"A", "AAAA", "NS", "CNAME", "SOA", "MX", "TXT"}

// Values of HealthCheck.Target. With HealthTargetVIP (dr and tun servers,
// which hold the VIP on a loopback or tunnel interface) the probe is sent
// to VIP:port from the host's own stack; it reaches the intended real
// server only if the host routes the VIP to that server (a host route or a
// policy route per source address, one server per route). Without such a
// route the kernel sends it wherever the VIP is routed, so use it only
// where that route exists.
const (
	HealthTargetServer = "server"
	HealthTargetVIP    = "vip"
)

// Values of HealthCheck.Via.
const (
	HealthViaHost = "host"
	HealthViaLBD  = "lbd"
)

// Values of HealthCheck.OnFailure.
const (
	OnFailureKeep   = "keep"
	OnFailureExpire = "expire"
)

// Limits of the health check settings (exported: the keepalived
// importer keeps converted checks within them).
const (
	MinHealthInterval = 100 * time.Millisecond
	MaxHealthInterval = time.Hour
	MinHealthTimeout  = 10 * time.Millisecond
	MaxHealthCount    = 100
	maxSlowStart      = time.Hour
)

// HealthTypes lists the values of HealthCheck.Type.
var HealthTypes = []string{HealthTCP, HealthHTTP, HealthHTTPS, HealthUDP, HealthDNS, HealthSMTP, HealthICMP, HealthExec, HealthFile, HealthBFD, HealthNone}

// MaxFileWeight bounds file_weight, as keepalived bounds FILE_CHECK's
// weight: a server's weight's range.
const MaxFileWeight = MaxWeight

// httpMethods are the methods an http(s) check may use.
var httpMethods = []string{"GET", "HEAD", "POST", "OPTIONS"}

// DefaultHealthCheck returns the health check of a service without a
// "health" key: no checking, with every other default filled in.
func DefaultHealthCheck() HealthCheck {
	return HealthCheck{
		Type:          HealthNone,
		Interval:      2 * time.Second,
		Timeout:       time.Second,
		Rise:          2,
		Fall:          3,
		Target:        HealthTargetServer,
		Method:        "GET",
		Path:          "/",
		ExpectStatus:  "200-399",
		TLSSkipVerify: true,
		OnFailure:     OnFailureKeep,
		DNSName:       ".",
		DNSType:       "SOA",
		BFDInterval:   300 * time.Millisecond,
		BFDMultiplier: 3,
		BFDKeyID:      1,
	}
}

// healthDefaults are the values Load fills in for absent keys of a
// "health" map.
func healthDefaults() map[string]any {
	d := DefaultHealthCheck()
	return map[string]any{
		"type": d.Type, "interval": d.Interval, "timeout": d.Timeout,
		"rise": d.Rise, "fall": d.Fall, "target": d.Target,
		"method": d.Method, "path": d.Path, "expect_status": d.ExpectStatus,
		"tls_skip_verify": d.TLSSkipVerify, "on_failure": d.OnFailure,
		"dns_name": d.DNSName, "dns_type": d.DNSType,
		"bfd_interval": d.BFDInterval, "bfd_multiplier": d.BFDMultiplier, "bfd_key_id": d.BFDKeyID,
	}
}

// Effective returns h with its zero values replaced by the defaults
// (TLSSkipVerify excepted: false in a Go literal means verify).
func (h HealthCheck) Effective() HealthCheck {
	d := DefaultHealthCheck()
	if h.Type == "" {
		h.Type = d.Type
	}
	if h.Interval == 0 {
		h.Interval = d.Interval
	}
	if h.Timeout == 0 {
		h.Timeout = d.Timeout
	}
	if h.Rise == 0 {
		h.Rise = d.Rise
	}
	if h.Fall == 0 {
		h.Fall = d.Fall
	}
	if h.Target == "" {
		h.Target = d.Target
	}

	if h.Method == "" {
		h.Method = d.Method
	}
	if h.Path == "" {
		h.Path = d.Path
	}
	if h.ExpectStatus == "" {
		h.ExpectStatus = d.ExpectStatus
	}
	if h.OnFailure == "" {
		h.OnFailure = d.OnFailure
	}
	if h.DNSName == "" {
		h.DNSName = d.DNSName
	}
	if h.DNSType == "" {
		h.DNSType = d.DNSType
	}
	if h.BFDInterval == 0 {
		h.BFDInterval = d.BFDInterval
	}
	if h.BFDMultiplier == 0 {
		h.BFDMultiplier = d.BFDMultiplier
	}
	return h
}

// Enabled reports whether the check probes anything (its type is not none).
func (h HealthCheck) Enabled() bool {
	return h.Type != "" && h.Type != HealthNone
}

// StatusOK reports whether an HTTP status code is in ExpectStatus (the
// default 200-399 if empty, nothing if invalid, which Validate rules out).
func (h HealthCheck) StatusOK(code int) bool {
	ranges, err := parseStatus(h.Effective().ExpectStatus)
	if err != nil {
		return false
	}
	for _, r := range ranges {
		if code >= r[0] && code <= r[1] {
			return true
		}
	}
	return false
}

// SourceAddr returns the probes' source address, the zero Addr for the
// kernel's choice (or an invalid Source, which Validate rules out).
func (h HealthCheck) SourceAddr() netip.Addr {
	a, err := netip.ParseAddr(h.Source)
	if err != nil {
		return netip.Addr{}
	}
	return a
}

// parseStatus parses "200", "200-399", "200-299,404" into inclusive ranges.
func parseStatus(s string) ([][2]int, error) {
	var out [][2]int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			return nil, fmt.Errorf("%q is not a status code", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				return nil, fmt.Errorf("%q is not a status code range", part)
			}
		}
		if a < 100 || b > 599 || a > b {
			return nil, fmt.Errorf("%q is not a status code or range in 100..599", part)
		}
		out = append(out, [2]int{a, b})
	}
	return out, nil
}

// HealthFor returns the check that applies to a server of the service: the
// server's own if it has one, else the service's, with defaults applied.
func (s Service) HealthFor(r RealServer) HealthCheck {
	if r.Health != nil {
		return r.Health.Effective()
	}
	return s.Health.Effective()
}

// SorryAddr returns the service's sorry server and whether it has a valid
// one.
func (s Service) SorryAddr() (netip.AddrPort, bool) {
	if s.SorryServer == "" {
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(s.SorryServer)
	if err != nil {
		return netip.AddrPort{}, false
	}
	return ap, true
}

// validate checks a health check written at field path f ("services[0].health").
func (h HealthCheck) validate(f string) error {
	if h.Type != "" {
		if err := checkOneOf(f+".type", h.Type, HealthTypes...); err != nil {
			return err
		}
	}
	e := h.Effective()
	if h.Via != "" {
		if err := checkOneOf(f+".via", h.Via, HealthViaHost, HealthViaLBD); err != nil {
			return err
		}
		if h.Via == HealthViaLBD {
			if err := checkViaLBD(f, e); err != nil {
				return err
			}
		}
	}
	if h.StartDown && !e.Enabled() {
		return fieldErrorf(f+".start_down", "needs a check type: a server that starts down comes up when its probes pass")
	}
	if err := checkDuration(f+".interval", e.Interval, MinHealthInterval, MaxHealthInterval, "100ms..1h"); err != nil {
		return err
	}
	if err := checkDuration(f+".timeout", e.Timeout, MinHealthTimeout, MaxHealthInterval, "10ms..1h"); err != nil {
		return err
	}
	if e.RetryInterval != 0 {
		if err := checkDuration(f+".retry_interval", e.RetryInterval, MinHealthInterval, MaxHealthInterval, "0 or 100ms..1h"); err != nil {
			return err
		}
	}
	if e.Timeout >= e.Interval {
		return fieldErrorf(f+".timeout", "%s is not less than %s.interval %s", e.Timeout, f, e.Interval)
	}
	if err := checkRange(f+".rise", e.Rise, 1, MaxHealthCount); err != nil {
		return err
	}
	if err := checkRange(f+".fall", e.Fall, 1, MaxHealthCount); err != nil {
		return err
	}
	if err := checkRange(f+".port", e.Port, 0, 65535); err != nil {
		return err
	}
	if e.Source != "" {
		if _, err := parseHost(f+".source", e.Source); err != nil {
			return err
		}
	}
	if err := checkOneOf(f+".target", e.Target, HealthTargetServer, HealthTargetVIP); err != nil {
		return err
	}
	if err := checkOneOf(f+".method", e.Method, httpMethods...); err != nil {
		return err
	}
	if err := checkRequest(f, HealthURL{Path: e.Path, ExpectStatus: e.ExpectStatus, ExpectRegex: e.ExpectRegex, ExpectDigest: e.ExpectDigest}); err != nil {
		return err
	}
	if strings.ContainsAny(e.Host, " \t\r\n/") {
		return fieldErrorf(f+".host", "%q is not a host name", e.Host)
	}
	if e.ExpectRegex != "" && e.Type != HealthHTTP && e.Type != HealthHTTPS {
		return fieldErrorf(f+".expect_regex", "only an http or https check reads a body (type is %s)", e.Type)
	}
	if e.ExpectDigest != "" && e.Type != HealthHTTP && e.Type != HealthHTTPS {
		return fieldErrorf(f+".expect_digest", "only an http or https check reads a body (type is %s)", e.Type)
	}
	if e.Type == HealthDNS {
		if err := checkOneOf(f+".dns_type", e.DNSType, DNSTypes...); err != nil {
			return err
		}
		if err := checkDNSName(f+".dns_name", e.DNSName); err != nil {
			return err
		}
	}
	if e.Type == HealthUDP && e.Send == "" {
		return fieldErrorf(f+".send", "must not be empty for a udp check")
	}
	if e.Type == HealthExec && len(e.Command) == 0 {
		return fieldErrorf(f+".command", "must not be empty for an exec check")
	}
	if err := checkExtraURLs(f, e); err != nil {
		return err
	}
	if err := checkAlso(f, e); err != nil {
		return err
	}
	if e.HeloName != "" {
		if e.Type != HealthSMTP {
			return fieldErrorf(f+".helo_name", "only an smtp check says HELO (type is %s)", e.Type)
		}
		if err := CheckHeloName(f+".helo_name", e.HeloName); err != nil {
			return err
		}
	}
	if err := checkFile(f, e); err != nil {
		return err
	}
	if e.Type == HealthBFD {
		if err := checkBFD(f, e); err != nil {
			return err
		}
	}
	if e.WeightFromExit && e.Type != HealthExec {
		return fieldErrorf(f+".weight_from_exit", "only an exec check has an exit status (type is %s)", e.Type)
	}
	for i, a := range e.Command {
		g := fmt.Sprintf("%s.command[%d]", f, i)
		if a == "" {
			return fieldErrorf(g, "must not be empty")
		}
		if i == 0 && !filepath.IsAbs(a) {
			return fieldErrorf(g, "%q is not an absolute path", a)
		}
	}
	if err := checkOneOf(f+".on_failure", e.OnFailure, OnFailureKeep, OnFailureExpire); err != nil {
		return err
	}
	return checkDuration(f+".slow_start", e.SlowStart, 0, maxSlowStart, "0s..1h")
}

// checkFile checks a file check's settings, and that no other type has
// them.
func checkFile(f string, e HealthCheck) error {
	if e.Type != HealthFile {
		switch {
		case e.File != "":
			return fieldErrorf(f+".file", "only a file check reads a file (type is %s)", e.Type)
		case e.FileWeight != 0:
			return fieldErrorf(f+".file_weight", "only a file check reads a file (type is %s)", e.Type)
		case e.FileReverse:
			return fieldErrorf(f+".file_reverse", "only a file check reads a file (type is %s)", e.Type)
		}
		return nil
	}
	switch {
	case e.File == "":
		return fieldErrorf(f+".file", "must not be empty for a file check")
	case !filepath.IsAbs(e.File):
		return fieldErrorf(f+".file", "%q is not an absolute path", e.File)
	case strings.HasSuffix(e.File, "/"):
		return fieldErrorf(f+".file", "%q names a directory, not a file", e.File)
	}
	return checkRange(f+".file_weight", e.FileWeight, -MaxFileWeight, MaxFileWeight)
}

// checkBFD checks a bfd check's settings.
func checkBFD(f string, e HealthCheck) error {
	if err := checkDuration(f+".bfd_interval", e.BFDInterval, 10*time.Millisecond, 10*time.Second, "10ms..10s"); err != nil {
		return err
	}
	if err := checkRange(f+".bfd_multiplier", e.BFDMultiplier, 1, 255); err != nil {
		return err
	}
	if e.Target == HealthTargetVIP {
		return fieldErrorf(f+".target", "a BFD session is with the server's own address, not the VIP")
	}
	none := e.BFDAuth == "" || e.BFDAuth == "none"
	maxKey := 16 // a simple password's and MD5's (RFC 5880 4.2, 4.3)
	if strings.HasSuffix(e.BFDAuth, "sha1") {
		maxKey = 20
	}
	switch {
	case !none && !slices.Contains(BFDAuthTypes, e.BFDAuth):
		return fieldErrorf(f+".bfd_auth", "%q is not one of %s", e.BFDAuth, strings.Join(BFDAuthTypes, ", "))
	case none && e.BFDPassword != "":
		return fieldErrorf(f+".bfd_password", "is set but bfd_auth is none (say which authentication it is for)")
	case none:
		return nil
	case e.BFDPassword == "" || len(e.BFDPassword) > maxKey:
		return fieldErrorf(f+".bfd_password", "must be 1..%d bytes for bfd_auth %s (it has %d)", maxKey, e.BFDAuth, len(e.BFDPassword))
	}
	return checkRange(f+".bfd_key_id", e.BFDKeyID, 0, 255)
}

// BFDAuthTypes are bfd_auth's values: RFC 5880's authentication types.
var BFDAuthTypes = []string{"none", "simple", "keyed-md5", "meticulous-keyed-md5", "keyed-sha1", "meticulous-keyed-sha1"}

// validateHealth checks a service's health check and sorry server.
func (c *Config) validateHealth(f string, s Service, vip netip.Addr) error {
	if err := s.Health.validate(f + ".health"); err != nil {
		return err
	}
	if err := checkRange(f+".quorum", s.Quorum, 0, 1000000); err != nil {
		return err
	}
	if s.Hysteresis < 0 || s.Hysteresis >= s.QuorumWeight() {
		return fieldErrorf(f+".hysteresis", "%d is out of range 0..%d: below the quorum %d (the quorum would never be lost)", s.Hysteresis, s.QuorumWeight()-1, s.QuorumWeight())
	}
	if s.SorryServer == "" {
		return nil
	}
	g := f + ".sorry_server"
	// Reached by nat, so in the VIP's family: NAT66 for an IPv6 service.
	ap, err := netip.ParseAddrPort(s.SorryServer)
	if vip.Is6() {
		if err != nil || !ap.Addr().Is6() || ap.Addr().Is4In6() {
			return fieldErrorf(g, "%q is not an IPv6 [address]:port (want e.g. [fd00:1::99]:80): the sorry server of IPv6 VIP %s is reached by nat, in IPv6", s.SorryServer, vip)
		}
		if _, err := parseHost46(g, ap.Addr().String()); err != nil {
			return err
		}
	} else {
		if err != nil || !ap.Addr().Is4() {
			return fieldErrorf(g, "%q is not an IPv4 address:port (want e.g. 198.51.100.99:80)", s.SorryServer)
		}
		if !usable(ap.Addr()) {
			return fieldErrorf(g, "%s is not a unicast host address", ap.Addr())
		}
	}
	if ap.Port() == 0 {
		return fieldErrorf(g, "port 0 is out of range 1..65535")
	}
	if ap.Addr() == vip {
		return fieldErrorf(g, "%s is the service's VIP", ap.Addr())
	}
	if j := c.portWithAddr(ap.Addr()); j >= 0 {
		return fieldErrorf(g, "%s is the address of ports[%d]", ap.Addr(), j)
	}
	// The sorry server is reached by nat (its port may differ).
	return c.checkReachable(g, ap.Addr(), "nat")
}

// validateServerHealth checks a server's own health check (field path g is
// "services[0].servers[1]") and that the check that applies suits the
// server's forwarding method.
func validateServerHealth(f, g string, s Service, r RealServer) error {
	if r.Health != nil {
		if err := r.Health.validate(g + ".health"); err != nil {
			return err
		}
	}
	if h := s.HealthFor(r); h.Enabled() && h.Target == HealthTargetVIP && r.Forward == "nat" {
		field := f + ".health.target"
		if r.Health != nil {
			field = g + ".health.target"
		}
		return fieldErrorf(field, "vip needs dr or tun servers, %s forwards by nat (its VIP is on the load balancer)", g)
	}
	if h := s.HealthFor(r); h.Enabled() && r.Port == 0 {
		field := f + ".health"
		if r.Health != nil {
			field = g + ".health"
		}
		if h.Port == 0 && probesPort(h.Type) {
			return fieldErrorf(field+".port", "0: %s has no port of its own (a port-zero service's), say which one the %s check probes", g, h.Type)
		}
		for i, a := range h.Also {
			if a.Port == 0 && probesPort(a.Type) {
				return fieldErrorf(fmt.Sprintf("%s.also[%d].port", field, i), "0: %s has no port of its own (a port-zero service's), say which one the %s check probes", g, a.Type)
			}
		}
	}
	return nil
}

// probesPort reports whether a check of type typ connects to a port.
func probesPort(typ string) bool {
	return typ == HealthTCP || typ == HealthHTTP || typ == HealthHTTPS || typ == HealthUDP || typ == HealthDNS || typ == HealthSMTP
}

// checkAlso checks a check's also checks: each a check of its own type
// and settings, with no part in what is the main check's (timing, the
// server's state, where probes leave from), and all of them, one after
// the other, within the interval.
func checkAlso(f string, e HealthCheck) error {
	if len(e.Also) == 0 {
		return nil
	}
	d := DefaultHealthCheck()
	for i, a := range e.Also {
		g := fmt.Sprintf("%s.also[%d]", f, i)
		switch {
		case a.Type == "" || a.Type == HealthNone:
			return fieldErrorf(g+".type", "an also check needs a type")
		case len(a.Also) > 0:
			return fieldErrorf(g+".also", "also checks do not nest: list them all in %s.also", f)
		case a.Interval != 0 && a.Interval != d.Interval, a.Rise != 0 && a.Rise != d.Rise, a.Fall != 0 && a.Fall != d.Fall, a.RetryInterval != 0:
			return fieldErrorf(g, "an also check is probed with %s: its interval, rise, fall and retry_interval are that check's", f)
		case a.StartDown, a.Passive, a.WeightFromExit, a.SlowStart != 0, a.OnFailure != "" && a.OnFailure != d.OnFailure:
			return fieldErrorf(g, "start_down, passive, weight_from_exit, slow_start and on_failure are the server's: set them in %s", f)
		}
		a = e.AlsoAsProbed(a)
		if err := a.validate(g); err != nil {
			return err
		}
	}
	if t := e.ProbeTimeout(); t >= e.Interval {
		return fieldErrorf(f+".also", "the check's and its also checks' timeouts add up to %s, not less than %s.interval %s", t, f, e.Interval)
	}
	return nil
}

// AlsoAsProbed is one of h's also checks as a probe runs it: at h's
// interval, and leaving the way h's probes do unless it names its via.
func (h HealthCheck) AlsoAsProbed(a HealthCheck) HealthCheck {
	a.Interval = h.Interval
	if a.Via == "" {
		a.Via = h.Via
	}
	return a
}

// ProbeTimeout bounds one probe of the check: its timeout and its also
// checks', which run one after the other.
func (h HealthCheck) ProbeTimeout() time.Duration {
	t := h.Effective().Timeout
	for _, a := range h.Also {
		t += a.Effective().Timeout
	}
	return t
}

// checkExtraURLs checks an http(s) check's extra_urls, each as the
// check's own path and expectations are checked.
func checkExtraURLs(f string, e HealthCheck) error {
	if len(e.ExtraURLs) == 0 {
		return nil
	}
	if e.Type != HealthHTTP && e.Type != HealthHTTPS {
		return fieldErrorf(f+".extra_urls", "only an http or https check requests URLs (type is %s)", e.Type)
	}
	for i, u := range e.ExtraURLs {
		if u.ExpectStatus == "" {
			u.ExpectStatus = e.ExpectStatus
		}
		if err := checkRequest(fmt.Sprintf("%s.extra_urls[%d]", f, i), u); err != nil {
			return err
		}
	}
	return nil
}

// checkRequest checks an http(s) request's path and expectations, the
// check's own or an extra URL's; f names where they are.
func checkRequest(f string, u HealthURL) error {
	if !strings.HasPrefix(u.Path, "/") || strings.ContainsAny(u.Path, " \t\r\n") {
		return fieldErrorf(f+".path", "%q is not a request path (want e.g. /healthz)", u.Path)
	}
	if _, err := parseStatus(u.ExpectStatus); err != nil {
		return &FieldError{Field: f + ".expect_status", Msg: err.Error() + ` (want e.g. "200-399")`, Err: err}
	}
	if u.ExpectRegex != "" {
		if _, err := regexp.Compile(u.ExpectRegex); err != nil {
			return fieldErrorf(f+".expect_regex", "%q is not a regular expression (Go's RE2 syntax): %v", u.ExpectRegex, err)
		}
	}
	if u.ExpectDigest != "" {
		if b, err := hex.DecodeString(u.ExpectDigest); err != nil || len(b) != md5.Size {
			return fieldErrorf(f+".expect_digest", "%q is not an MD5 digest: want 32 hex digits (keepalived's genhash prints it)", u.ExpectDigest)
		}
	}
	return nil
}

// URL is the check's request for extra URL u: u's path and expectations,
// the check's status codes unless u has its own.
func (h HealthCheck) URL(u HealthURL) HealthCheck {
	h.Path, h.ExpectBody, h.ExpectRegex, h.ExpectDigest = u.Path, u.ExpectBody, u.ExpectRegex, u.ExpectDigest
	if u.ExpectStatus != "" {
		h.ExpectStatus = u.ExpectStatus
	}
	h.ExtraURLs = nil
	return h
}

// CheckHeloName checks an smtp check's helo_name, a domain name (not the
// root's "."), as Load does; field names it in the error.
func CheckHeloName(field, name string) error {
	if name == "." {
		return fieldErrorf(field, "the root %q is no name to say HELO with", name)
	}
	return checkDNSName(field, name)
}

// checkDNSName checks a dns check's query name: dot-separated labels of
// 1..63 bytes, 253 at most without the root's dot ("." is the root).
func checkDNSName(field, name string) error {
	n := strings.TrimSuffix(name, ".")
	if name == "." {
		return nil
	}
	if n == "" || len(n) > 253 {
		return fieldErrorf(field, "%q is not a domain name (1..253 bytes, or \".\")", name)
	}
	for _, l := range strings.Split(n, ".") {
		if l == "" || len(l) > 63 || strings.ContainsFunc(l, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return fieldErrorf(field, "%q is not a domain name: label %q (1..63 printable bytes each)", name, l)
		}
	}
	return nil
}
