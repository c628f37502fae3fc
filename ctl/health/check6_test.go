package health_test

import (
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/dplb/dplb/conf"
)

// TestProbeIPv6: TCP, HTTP, UDP and ICMPv6 echo checks of servers with
// IPv6 addresses (the host's loopback, ::1).
func TestProbeIPv6(t *testing.T) {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer l.Close()
	go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "up") }))
	addr := l.Addr().String()
	probe(t, target(addr, conf.HealthCheck{Type: "tcp"}), true, "")
	probe(t, target(addr, conf.HealthCheck{Type: "http", Method: "GET", Path: "/", ExpectStatus: "200", ExpectBody: "up"}), true, "")

	closed, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	probe(t, target(closedAddr, conf.HealthCheck{Type: "tcp"}), false, "connect: connection refused")

	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("echo: "), buf[:n]...), from)
		}
	}()
	probe(t, target(pc.LocalAddr().String(), conf.HealthCheck{Type: "udp", Send: "ping", Expect: "echo: ping"}), true, "")

	probe(t, target("[::1]:80", conf.HealthCheck{Type: "icmp"}), true, "")
	src := conf.HealthCheck{Type: "icmp", Source: "127.0.0.1"}
	probe(t, target("[::1]:80", src), false, "icmp: source 127.0.0.1 and server ::1 are of different IP versions")
}
