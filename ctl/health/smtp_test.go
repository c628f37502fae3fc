package health_test

import (
	"bufio"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dplb/dplb/conf"
)

// smtpServer runs a TCP server that greets every client with greeting
// and answers its first line with helo, recording that line; it returns
// its address and the lines it read.
func smtpServer(t *testing.T, greeting, helo string) (string, func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var lines []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.Write([]byte(greeting))
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					mu.Lock()
					lines = append(lines, line)
					mu.Unlock()
					if strings.HasPrefix(line, "HELO") {
						c.Write([]byte(helo))
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), lines...)
	}
}

// TestProbeSMTP: keepalived's SMTP_CHECK: a 220 greeting (of one line or
// several) and a 250 answer to HELO pass, and the check says QUIT;
// another code, what is not SMTP, a server that closes or says nothing,
// and a closed port fail, each saying why.
func TestProbeSMTP(t *testing.T) {
	smtp := conf.HealthCheck{Type: "smtp", HeloName: "lb1.example.com", Timeout: probeTimeout}
	good, said := smtpServer(t, "220-mx.example.com ESMTP\r\n220 ready\r\n", "250 mx.example.com\r\n")
	probe(t, target(good, smtp), true, "")
	want := []string{"HELO lb1.example.com\r\n", "QUIT\r\n"}
	for deadline := time.Now().Add(2 * time.Second); strings.Join(said(), "") != strings.Join(want, "") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := said(); strings.Join(got, "") != strings.Join(want, "") {
		t.Errorf("the server read %q, want %q", got, want)
	}

	host, _ := os.Hostname()
	byHost, saidByHost := smtpServer(t, "220 ready\r\n", "250 ok\r\n")
	probe(t, target(byHost, conf.HealthCheck{Type: "smtp", Timeout: probeTimeout}), true, "")
	if got := saidByHost(); len(got) == 0 || got[0] != "HELO "+host+"\r\n" {
		t.Errorf("without helo_name the check said %q, want HELO %s", got, host)
	}

	tests := []struct {
		name, greeting, helo string
		closes               bool // after the greeting
		reason               string
	}{
		{"greeting 554", "554 no SMTP service here\r\n", "", false, "SMTP greeting 554 no SMTP service here, want 220"},
		{"HELO refused", "220 ready\r\n", "501-syntax\r\n501 error\r\n", false, "SMTP answer to HELO 501 syntax error, want 250"},
		{"not SMTP", "HTTP/1.1 400 Bad Request\r\n", "", false, `SMTP greeting is not an SMTP reply: "HTTP/1.1 400 Bad Request"`},
		{"cut short", "220 rea", "", true, "SMTP greeting cut short"},
		{"closed at once", "", "", true, "SMTP greeting: connection closed by the server"},
		{"silent", "", "", false, "SMTP greeting: timeout after 300ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addr string
			if tt.closes {
				addr = closingServer(t, tt.greeting)
			} else {
				addr, _ = smtpServer(t, tt.greeting, tt.helo)
			}
			probe(t, target(addr, smtp), false, tt.reason)
		})
	}
	probe(t, target(closedPort(t), smtp), false, "connect: connection refused")
}

// closingServer greets each client with greeting and closes.
func closingServer(t *testing.T, greeting string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(greeting))
			c.Close()
		}
	}()
	return ln.Addr().String()
}
