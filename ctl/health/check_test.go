package health_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/md5"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dplb/dplb/conf"
	"github.com/dplb/dplb/ctl/health"
)

const probeTimeout = 300 * time.Millisecond

var vip = netip.MustParseAddrPort("192.0.2.100:80")

// target returns a target for the server at addr with check c (its
// timeout 2s unless set: cases that expect a timeout set probeTimeout).
func target(addr string, c conf.HealthCheck) health.Target {
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	return health.Target{Service: "tcp/" + vip.String(), Addr: netip.MustParseAddrPort(addr), VIP: vip, Check: c}
}

// closedPort returns 127.0.0.1:port with nothing listening on port (TCP
// and UDP).
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// probe runs health.Probe and checks its verdict and reason exactly, and
// that it took no longer than the timeout allows.
func probe(t *testing.T, tg health.Target, wantOK bool, wantReason string) {
	t.Helper()
	start := time.Now()
	ok, reason := health.Probe(context.Background(), tg)
	if took := time.Since(start); took > tg.Check.Timeout+time.Second {
		t.Errorf("Probe(%s) took %s", tg, took)
	}
	if ok != wantOK || reason != wantReason {
		t.Errorf("Probe(%s) = %v, %q, want %v, %q", tg, ok, reason, wantOK, wantReason)
	}
}

func TestProbeTCP(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	live := l.Addr().String()
	tcp := conf.HealthCheck{Type: "tcp"}
	probe(t, target(live, tcp), true, "")
	probe(t, target(closedPort(t), tcp), false, "connect: connection refused")

	// The check's port replaces the server's.
	_, port, _ := net.SplitHostPort(live)
	withPort := tcp
	fmt.Sscan(port, &withPort.Port)
	probe(t, target(closedPort(t), withPort), true, "")

	// Bound to a source address: one of the host's, and one it lacks.
	src := tcp
	src.Source = "127.0.0.1"
	probe(t, target(live, src), true, "")
	src.Source = "192.0.2.123"
	probe(t, target(live, src), false, "connect: source address not available")

	tcp.Timeout = probeTimeout
	probe(t, target(fullListener(t), tcp), false, "timeout after 300ms")
}

// fullListener returns the address of a listener whose accept queue is
// full, so that the kernel drops further SYNs: connecting to it hangs.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
	// Fill the accept queue (backlog 0 holds one) and the SYN queue.
	for range 4 {
		c, err := net.DialTimeout("tcp4", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { c.Close() })
	}
	return addr
}

// webHandler serves the paths the HTTP tests probe.
func webHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello, all ok\n")
	})
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/", http.StatusFound)
	})
	mux.HandleFunc("/host", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "host=%s method=%s", r.Host, r.Method)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 17 {
			w.Write(chunk)
		}
	})
	return mux
}

// helloDigest is the MD5 of what webHandler's "/" serves.
var helloDigest = fmt.Sprintf("%x", md5.Sum([]byte("hello, all ok\n")))

func serverAddr(url string) string {
	_, addr, _ := strings.Cut(url, "://")
	return addr
}

func TestProbeHTTP(t *testing.T) {
	srv := httptest.NewServer(webHandler())
	defer srv.Close()
	live := serverAddr(srv.URL)
	h := func(edit func(*conf.HealthCheck)) health.Target {
		c := conf.HealthCheck{Type: "http"}
		edit(&c)
		return target(live, c)
	}
	tests := []struct {
		name   string
		tg     health.Target
		ok     bool
		reason string
	}{
		{"defaults", h(func(*conf.HealthCheck) {}), true, ""},
		{"body", h(func(c *conf.HealthCheck) { c.ExpectBody = "all ok" }), true, ""},
		{"body missing", h(func(c *conf.HealthCheck) { c.ExpectBody = "healthy" }), false, `body does not contain "healthy"`},
		{"500", h(func(c *conf.HealthCheck) { c.Path = "/500" }), false, "HTTP status 500, want 200-399"},
		{"500 accepted", h(func(c *conf.HealthCheck) { c.Path = "/500"; c.ExpectStatus = "200,500" }), true, ""},
		{"404", h(func(c *conf.HealthCheck) { c.Path = "/missing/" + "x" }), true, ""}, // the mux's "/" serves every path
		{"redirect not followed", h(func(c *conf.HealthCheck) { c.Path = "/redirect"; c.ExpectStatus = "200" }), false, "HTTP status 302, want 200"},
		{"redirect in range", h(func(c *conf.HealthCheck) { c.Path = "/redirect" }), true, ""},
		{"host header", h(func(c *conf.HealthCheck) {
			c.Path = "/host"
			c.Host = "www.example.com"
			c.ExpectBody = "host=www.example.com method=GET"
		}), true, ""},
		{"default host", h(func(c *conf.HealthCheck) { c.Path = "/host"; c.ExpectBody = "host=" + live + " " }), true, ""},
		{"post", h(func(c *conf.HealthCheck) { c.Path = "/host"; c.Method = "POST"; c.ExpectBody = "method=POST" }), true, ""},
		{"regex", h(func(c *conf.HealthCheck) { c.ExpectRegex = `^hello, (all|some) ok$` }), false, "body does not match \"^hello, (all|some) ok$\""},
		{"regex multiline", h(func(c *conf.HealthCheck) { c.ExpectRegex = `(?m)^hello, (all|some) ok$` }), true, ""},
		{"regex and body", h(func(c *conf.HealthCheck) { c.ExpectRegex = `al+ ok`; c.ExpectBody = "hello" }), true, ""},
		// keepalived's url blocks: every url must pass, each with its own
		// expectations (status codes by default the check's).
		{"extra urls", h(func(c *conf.HealthCheck) {
			c.ExpectBody = "all ok"
			c.ExtraURLs = []conf.HealthURL{{Path: "/host", ExpectBody: "method=GET"}, {Path: "/500", ExpectStatus: "500"}}
		}), true, ""},
		{"extra url fails", h(func(c *conf.HealthCheck) {
			c.ExtraURLs = []conf.HealthURL{{Path: "/host"}, {Path: "/500"}}
		}), false, "/500: HTTP status 500, want 200-399"},
		{"extra url's body", h(func(c *conf.HealthCheck) {
			c.ExtraURLs = []conf.HealthURL{{Path: "/host", ExpectRegex: "^method="}}
		}), false, `/host: body does not match "^method="`},
		{"first url fails", h(func(c *conf.HealthCheck) {
			c.Path, c.ExtraURLs = "/500", []conf.HealthURL{{Path: "/"}}
		}), false, "/500: HTTP status 500, want 200-399"},
		// keepalived's url digest: the MD5 of the whole body, in either case.
		{"digest", h(func(c *conf.HealthCheck) { c.ExpectDigest = strings.ToUpper(helloDigest) }), true, ""},
		{"digest and body", h(func(c *conf.HealthCheck) { c.ExpectDigest = helloDigest; c.ExpectBody = "all ok" }), true, ""},
		{"digest, body missing", h(func(c *conf.HealthCheck) { c.ExpectDigest = helloDigest; c.ExpectBody = "healthy" }), false,
			`body does not contain "healthy"`},
		{"digest differs", h(func(c *conf.HealthCheck) { c.ExpectDigest = strings.Repeat("0", 32) }), false,
			"body digest " + helloDigest + ", want " + strings.Repeat("0", 32)},
		{"digest of a body too long", h(func(c *conf.HealthCheck) {
			c.Path = "/big"
			c.ExpectDigest = helloDigest
			c.Timeout = 5 * time.Second
			c.Interval = 10 * time.Second
		}), false,
			"body longer than 16 MiB: not digested"},
		{"hang", h(func(c *conf.HealthCheck) { c.Path = "/hang"; c.Timeout = probeTimeout }), false, "timeout after 300ms"},
		{"closed port", target(closedPort(t), conf.HealthCheck{Type: "http"}), false, "connect: connection refused"},
		{"https to a plain server", target(live, conf.HealthCheck{Type: "https", TLSSkipVerify: true}), false,
			"http: server gave HTTP response to HTTPS client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, tt.tg, tt.ok, tt.reason) })
	}
}

// selfSigned returns a certificate for the name rs.example, made now.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "rs.example"},
		DNSNames:     []string{"rs.example"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestProbeHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(webHandler())
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	live := serverAddr(srv.URL)
	tests := []struct {
		name   string
		check  conf.HealthCheck
		ok     bool
		reason string
	}{
		{"skip verify", conf.HealthCheck{Type: "https", TLSSkipVerify: true, ExpectBody: "all ok"}, true, ""},
		{"skip verify 500", conf.HealthCheck{Type: "https", TLSSkipVerify: true, Path: "/500"}, false, "HTTP status 500, want 200-399"},
		{"verify fails", conf.HealthCheck{Type: "https", Host: "rs.example"}, false, "TLS: x509: certificate signed by unknown authority"},
		{"http to a TLS server", conf.HealthCheck{Type: "http"}, false, "HTTP status 400, want 200-399"},
		{"hang", conf.HealthCheck{Type: "https", TLSSkipVerify: true, Path: "/hang", Timeout: probeTimeout}, false, "timeout after 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, target(live, tt.check), tt.ok, tt.reason) })
	}
}

// udpServer answers each datagram with reply(datagram), or not at all if
// reply returns nil.
func udpServer(t *testing.T, reply func([]byte) []byte) string {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if r := reply(buf[:n]); r != nil {
				pc.WriteTo(r, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

func TestProbeUDP(t *testing.T) {
	echo := udpServer(t, func(b []byte) []byte { return append([]byte("echo: "), b...) })
	silent := udpServer(t, func([]byte) []byte { return nil })
	tests := []struct {
		name   string
		addr   string
		check  conf.HealthCheck
		ok     bool
		reason string
	}{
		{"any reply", echo, conf.HealthCheck{Type: "udp", Send: "ping"}, true, ""},
		{"matching reply", echo, conf.HealthCheck{Type: "udp", Send: "ping", Expect: "echo: ping"}, true, ""},
		{"wrong reply", echo, conf.HealthCheck{Type: "udp", Send: "ping", Expect: "pong"}, false, `reply does not contain "pong"`},
		{"no reply", silent, conf.HealthCheck{Type: "udp", Send: "ping", Timeout: probeTimeout}, false, "no reply within 300ms"},
		{"closed port", closedPort(t), conf.HealthCheck{Type: "udp", Send: "ping"}, false, "port unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, target(tt.addr, tt.check), tt.ok, tt.reason) })
	}
}

func TestProbeICMP(t *testing.T) {
	icmp := conf.HealthCheck{Type: "icmp"}
	probe(t, target("127.0.0.1:80", icmp), true, "")
	probe(t, target("127.0.0.2:80", icmp), true, "")
	src := icmp
	src.Source = "127.0.0.1"
	probe(t, target("127.0.0.1:80", src), true, "")
	src.Source = "192.0.2.123"
	probe(t, target("127.0.0.1:80", src), false, "icmp: binding 192.0.2.123: source address not available")

	// A probe cut short by its caller.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, reason := health.Probe(ctx, target("127.0.0.1:80", icmp)); ok || reason != "canceled" {
		t.Errorf("Probe(canceled) = %v, %q, want false, canceled", ok, reason)
	}
}

// shCheck is an exec check running script with /bin/sh.
func shCheck(script string) conf.HealthCheck {
	return conf.HealthCheck{Type: "exec", Command: []string{"/bin/sh", "-c", script}}
}

func TestProbeExec(t *testing.T) {
	sh := shCheck
	tests := []struct {
		name   string
		check  conf.HealthCheck
		ok     bool
		reason string
	}{
		{"exit 0", conf.HealthCheck{Type: "exec", Command: []string{"/bin/true"}}, true, ""},
		{"environment", sh(`test "$DPLB_RS_ADDR:$DPLB_RS_PORT $DPLB_VIP:$DPLB_VPORT" = "127.0.0.1:8080 192.0.2.100:80"`), true, ""},
		{"exit 3 with output", sh("echo starting; echo 'db: connection refused' >&2; exit 3"), false, "exit status 3: db: connection refused"},
		{"exit 1 silent", conf.HealthCheck{Type: "exec", Command: []string{"/bin/false"}}, false, "exit status 1"},
		{"hangs with a child", withTimeout(sh("sleep 30 & sleep 30; wait"), probeTimeout), false, "timeout after 300ms"},
		{"missing", conf.HealthCheck{Type: "exec", Command: []string{"/nonexistent/check"}}, false,
			"exec: fork/exec /nonexistent/check: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, target("127.0.0.1:8080", tt.check), tt.ok, tt.reason) })
	}
}

// TestProbeExecWeight: with weight_from_exit, 2..255 pass and set the
// weight to status - 2, 0 passes and sets none, 1 and a signal fail.
func TestProbeExecWeight(t *testing.T) {
	sh := func(script string) conf.HealthCheck {
		c := shCheck(script)
		c.WeightFromExit = true
		return c
	}
	tests := []struct {
		name  string
		check conf.HealthCheck
		want  health.Result
	}{
		{"exit 0", sh("exit 0"), health.Result{OK: true, Weight: -1}},
		{"exit 1", sh("echo overloaded; exit 1"), health.Result{Reason: "exit status 1: overloaded", Weight: -1}},
		{"exit 2: weight 0", sh("exit 2"), health.Result{OK: true, Weight: 0}},
		{"exit 7: weight 5", sh("exit 7"), health.Result{OK: true, Weight: 5}},
		{"exit 255: weight 253", sh("exit 255"), health.Result{OK: true, Weight: 253}},
		{"killed", sh("kill -9 $$"), health.Result{Reason: "signal: killed", Weight: -1}},
		{"without weight_from_exit", conf.HealthCheck{Type: "exec", Command: []string{"/bin/sh", "-c", "exit 7"}},
			health.Result{Reason: "exit status 7", Weight: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := health.Check(context.Background(), target("127.0.0.1:8080", tt.check)); got != tt.want {
				t.Errorf("Check = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func withTimeout(c conf.HealthCheck, d time.Duration) conf.HealthCheck {
	c.Timeout = d
	return c
}

func TestProbeNoneAndUnknown(t *testing.T) {
	probe(t, target("127.0.0.1:1", conf.HealthCheck{}), true, "")
	probe(t, target("127.0.0.1:1", conf.HealthCheck{Type: "ftp"}), false, `unknown check type "ftp"`)
}

func TestTargets(t *testing.T) {
	svcs := []conf.Service{
		{Protocol: "tcp", VIP: "192.0.2.100", Port: 80,
			Health: conf.HealthCheck{Type: "http", Path: "/healthz"},
			Servers: []conf.RealServer{
				{Address: "198.51.100.11", Port: 8080},
				{Address: "198.51.100.12", Port: 80, Forward: "dr", Health: &conf.HealthCheck{Type: "tcp", Target: "vip", Port: 81}},
				{Address: "198.51.100.13", Port: 80, Health: &conf.HealthCheck{Type: "none"}},
			}},
		{Protocol: "udp", VIP: "192.0.2.100", Port: 53, Servers: []conf.RealServer{{Address: "198.51.100.11", Port: 53}}},
	}
	got := health.Targets(svcs)
	if len(got) != 2 {
		t.Fatalf("Targets() = %v, want 2 targets", got)
	}
	if got[0].Service != "tcp/192.0.2.100:80" || got[0].Addr != netip.MustParseAddrPort("198.51.100.11:8080") ||
		got[0].VIP != vip || got[0].Check.Path != "/healthz" || got[0].Check.Interval != 2*time.Second {
		t.Errorf("Targets()[0] = %+v", got[0])
	}
	if p := got[0].ProbeAddr(); p != netip.MustParseAddrPort("198.51.100.11:8080") {
		t.Errorf("ProbeAddr() = %v", p)
	}
	if p := got[1].ProbeAddr(); p != netip.MustParseAddrPort("192.0.2.100:81") {
		t.Errorf("ProbeAddr() with target vip, port 81 = %v", p)
	}
	if k := got[1].Key(); k.String() != "tcp/192.0.2.100:80 198.51.100.12:80" {
		t.Errorf("Key() = %v", k)
	}
}

// TestProbeAlso: a check's also checks run after it, each with its own
// type, port and timeout, when it passed; all must pass, and the reason
// names the one that failed.
func TestProbeAlso(t *testing.T) {
	srv := httptest.NewServer(webHandler())
	defer srv.Close()
	live := serverAddr(srv.URL)
	_, port, _ := net.SplitHostPort(closedPort(t))
	closed, _ := strconv.Atoi(port)
	sh := shCheck
	tests := []struct {
		name   string
		check  conf.HealthCheck
		ok     bool
		reason string
	}{
		{"all pass", conf.HealthCheck{Type: "tcp", Also: []conf.HealthCheck{{Type: "http", Path: "/host"}, sh("exit 0")}}, true, ""},
		{"an also port closed", conf.HealthCheck{Type: "http", Also: []conf.HealthCheck{sh("exit 0"), {Type: "tcp", Port: closed}}}, false,
			"also tcp: connect: connection refused"},
		{"an also command fails", conf.HealthCheck{Type: "tcp", Also: []conf.HealthCheck{sh("echo db down; exit 1")}}, false,
			"also exec: exit status 1: db down"},
		{"its own timeout", conf.HealthCheck{Type: "tcp", Also: []conf.HealthCheck{withTimeout(sh("sleep 5"), 200*time.Millisecond)}}, false,
			"also exec: timeout after 200ms"},
		{"the check fails first", conf.HealthCheck{Type: "http", Path: "/500", Also: []conf.HealthCheck{{Type: "tcp", Port: closed}}}, false,
			"HTTP status 500, want 200-399"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { probe(t, target(live, tt.check), tt.ok, tt.reason) })
	}
}
