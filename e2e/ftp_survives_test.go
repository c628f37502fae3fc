package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// ftpSession is one FTP control connection opened from a namespace, with
// a reader of its replies: the test's own client, so that one control
// connection can span an upgrade (curl opens one per run).
type ftpSession struct {
	ns, vip string
	c       net.Conn
	r       *bufio.Reader
}

// dialFTP opens a control connection from namespace ns to vip:21 and
// logs in anonymously.
func dialFTP(ns, vip string) (*ftpSession, error) {
	s := &ftpSession{ns: ns, vip: vip}
	err := topo.InNS(ns, func() (err error) {
		s.c, err = net.DialTimeout("tcp4", net.JoinHostPort(vip, "21"), 10*time.Second)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.r = bufio.NewReader(s.c)
	if _, err := s.reply(220); err != nil {
		s.c.Close()
		return nil, err
	}
	code, err := s.cmd("USER anonymous")
	if err == nil && code == 331 {
		code, err = s.cmd("PASS test@")
	}
	if err == nil && code != 230 {
		err = fmt.Errorf("login: reply %d", code)
	}
	if err == nil {
		code, err = s.cmd("TYPE I")
		if err == nil && code != 200 {
			err = fmt.Errorf("TYPE I: reply %d", code)
		}
	}
	if err != nil {
		s.c.Close()
		return nil, err
	}
	return s, nil
}

// reply reads one reply (all its lines) and returns its last line; want
// non-zero: a reply with another code is an error.
func (s *ftpSession) reply(want int) (string, error) {
	s.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("reading a reply: %w (so far %q)", err, line)
		}
		if len(line) < 4 || line[3] != ' ' { // "ddd-" goes on
			continue
		}
		code, err := strconv.Atoi(line[:3])
		if err != nil {
			return "", fmt.Errorf("reply %q", line)
		}
		if want != 0 && code != want {
			return line, fmt.Errorf("reply %q, want %d", strings.TrimSpace(line), want)
		}
		return line, nil
	}
}

// cmd sends a command and returns its reply's code.
func (s *ftpSession) cmd(c string) (int, error) {
	s.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(s.c, c+"\r\n"); err != nil {
		return 0, err
	}
	line, err := s.reply(0)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(line[:3])
}

// retr downloads name in passive mode (PASV: a 227, which the helper
// rewrites) and returns its SHA-256 and the address the 227 named. With
// mid, the data connection has a small receive buffer (the server waits
// on the client's window) and mid runs once 64 KiB have arrived, the
// transfer still under way.
func (s *ftpSession) retr(name string, mid func()) (sum, named string, err error) {
	if _, err := io.WriteString(s.c, "PASV\r\n"); err != nil {
		return "", "", err
	}
	line, err := s.reply(227)
	if err != nil {
		return "", "", err
	}
	open, end := strings.IndexByte(line, '('), strings.IndexByte(line, ')')
	if open < 0 || end < open {
		return "", "", fmt.Errorf("227 without an address: %q", line)
	}
	f := strings.Split(line[open+1:end], ",")
	if len(f) != 6 {
		return "", "", fmt.Errorf("227 %q", line)
	}
	p1, _ := strconv.Atoi(f[4])
	p2, _ := strconv.Atoi(f[5])
	named = strings.Join(f[:4], ".")
	var d net.Conn
	dialer := net.Dialer{Timeout: 10 * time.Second}
	if mid != nil {
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8192) })
			return errors.Join(err, serr)
		}
	}
	if err := topo.InNS(s.ns, func() (err error) {
		d, err = dialer.Dial("tcp4", net.JoinHostPort(named, strconv.Itoa(p1<<8|p2)))
		return err
	}); err != nil {
		return "", named, fmt.Errorf("data connection to %s: %w", named, err)
	}
	defer d.Close()
	if _, err := io.WriteString(s.c, "RETR "+name+"\r\n"); err != nil {
		return "", named, err
	}
	if _, err := s.reply(150); err != nil {
		return "", named, err
	}
	d.SetReadDeadline(time.Now().Add(60 * time.Second))
	h := sha256.New()
	if mid != nil {
		if _, err := io.CopyN(h, d, 64<<10); err != nil {
			return "", named, fmt.Errorf("data: %w", err)
		}
		mid()
		d.SetReadDeadline(time.Now().Add(60 * time.Second))
	}
	if _, err := io.Copy(h, d); err != nil {
		return "", named, fmt.Errorf("data: %w", err)
	}
	if _, err := s.reply(226); err != nil {
		return "", named, err
	}
	return hex.EncodeToString(h.Sum(nil)), named, nil
}

// TestFTPSurvivesUpgrade: an FTP control connection (vsftpd behind VS/NAT
// with the helper, lbd on two lcores) downloads a file in passive mode,
// whose 227 the helper rewrites to the VIP, two characters shorter than
// the server's address: the rest of the control connection is numbered
// two less on the client's side. It downloads again, and lbd is upgraded
// in place while that transfer's data connection is under way. The data
// connection must finish, and the same control connection then
// downloads a third time: its replies must be numbered as before the
// upgrade (else the client's TCP never sees them) and its 227 rewritten
// again (else the client is sent to an address it cannot reach); every
// file must be byte for byte the server's.
func TestFTPSurvivesUpgrade(t *testing.T) {
	if _, err := exec.LookPath("vsftpd"); err != nil {
		t.Skip("FTP test: vsftpd not found (run scripts/setup.sh)")
	}
	e, dir := newEnv(t)
	nat, err := topo.BuildNAT(e.topo, 1)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS, e.vip = nat.Client, nat.Servers, nat.LBNS, nat.VIP.String()
	rs := nat.Servers[0]
	if len(rs.Addr.Addr().String()) == len(e.vip) {
		t.Fatalf("the server's address %s is as long as the VIP's %s: the 227 rewrite would shift nothing", rs.Addr.Addr(), e.vip)
	}
	want := startVsftpd(t, e.topo, rs, dir)
	cfg := harness.NATConfig(nat, e.topo.Suffix(), dir)
	cfg.Workers = []int{0, 1}
	cfg.Ports = []harness.Port{
		harness.AFPacketPort(0, "wan", cfg.WANIf, cfg.WANAddr, "", "client"),
		harness.AFPacketPort(1, "lan", cfg.LANIf, cfg.LANAddr, "", "server"),
	}
	for i := range cfg.Ports {
		cfg.Ports[i].Device += ",qpairs=2"
	}
	cfg.Services = []harness.Service{{VIP: e.vip, Port: 21, Scheduler: "rr", Helper: "ftp",
		Servers: []harness.Server{{Address: rs.Addr.Addr().String(), Port: 21, Weight: 1}}}}
	e.startLBD(t, cfg, dir)

	// Warm-up (ARP on both sides): a session of its own, retried.
	var s *ftpSession
	for i := 0; ; i++ {
		if s, err = dialFTP(nat.Client.NS, e.vip); err == nil {
			break
		}
		if i == 4 {
			t.Fatalf("no control connection: %v", err)
		}
		t.Logf("control connection %d failed (allowed while ARP resolves): %v", i, err)
		time.Sleep(time.Second)
	}
	defer s.c.Close()
	download := func(when string, mid func()) {
		t.Helper()
		sum, named, err := s.retr("data", mid)
		switch {
		case err != nil:
			t.Fatalf("%s: %v (the 227 named %q)", when, err, named)
		case named != e.vip:
			t.Fatalf("%s: the 227 named %s, not the VIP", when, named)
		case sum != want:
			t.Fatalf("%s: the download is not the server's file (sha256 %s)", when, sum)
		}
	}
	download("before the upgrade", nil)
	// The second download's data connection spans the upgrade (its 227
	// grows the shift before the handover); the control connection
	// waits for its 226 meanwhile.
	download("across the upgrade", func() {
		e.upgrade(t, cfg)
		t.Logf("handover: %s", e.list(t).Info.Handover)
	})
	download("after the upgrade, on the same control connection", nil)
	if code, err := s.cmd("NOOP"); err != nil || code != 200 {
		t.Errorf("NOOP after the upgrade: %d, %v", code, err)
	}
	body := e.scrape(t)
	if v := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_rewritten"); v < 1 {
		t.Errorf("the new lbd rewrote %v 227s, want the one after the upgrade", v)
	}
	for _, why := range []string{"ftp_unparsed", "ftp_expect_full", "ftp_table_full"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v segments dropped as %s", v, why)
		}
	}
	io.WriteString(s.c, "QUIT\r\n")
	if _, err := s.reply(221); err != nil {
		t.Errorf("QUIT: %v", err)
	}
	e.stop(t)
}

// TestFailoverFTP: the VS/NAT director pair with an FTP service (the
// helper) on vsftpd servers. One control connection downloads in passive
// mode (its 227 rewritten two characters shorter), then again, and the
// master dies (kill -9 of its lbd and keepalived) while that transfer's
// data connection is under way: the backup, which holds the control
// connection's shift and the data connection from sync, takes over, the
// transfer finishes, and the same control connection downloads a third
// time through the new master, every file byte for byte its server's,
// all from the same server.
func TestFailoverFTP(t *testing.T) {
	e := newHAEnvWith(t, false, false, true)
	a, b := e.nodes[0], e.nodes[1]
	e.checkMaster(t, "at start", a)
	vip := e.ha.VIP.String()
	var s *ftpSession
	var err error
	for i := 0; ; i++ {
		if s, err = dialFTP(e.ha.Client.NS, vip); err == nil {
			break
		}
		if i == 4 {
			t.Fatalf("no control connection: %v", err)
		}
		t.Logf("control connection %d failed (allowed while ARP resolves): %v", i, err)
		time.Sleep(time.Second)
	}
	defer s.c.Close()
	server := ""
	download := func(when string, mid func()) {
		t.Helper()
		sum, named, err := s.retr("data", mid)
		switch {
		case err != nil:
			t.Fatalf("%s: %v (the 227 named %q)", when, err, named)
		case named != vip:
			t.Fatalf("%s: the 227 named %s, not the VIP", when, named)
		case e.ftp[sum] == "":
			t.Fatalf("%s: the download is neither server's file (sha256 %s)", when, sum)
		case server != "" && e.ftp[sum] != server:
			t.Fatalf("%s: the file of %s, the control connection's server is %s", when, e.ftp[sum], server)
		}
		server = e.ftp[sum]
	}
	download("before the failover", nil)
	// The backup holds the control connection (and the first data
	// connection) before the second transfer starts.
	if have, err := e.waitConnections(b, 2, 10*time.Second); err != nil {
		t.Fatalf("node b holds %d connection entries, want the control and the data connection (%v)", have, err)
	}
	download("across the failover", func() {
		// Let the second 227's shift and the data connection reach the
		// backup (sync drains every 5 ms) before the master dies.
		time.Sleep(500 * time.Millisecond)
		_, takeover := e.killNode(t, a, b)
		t.Logf("failover: node b alone answers ARP for the VIP %v after node a was killed", takeover.Round(time.Millisecond))
	})
	download("after the failover, on the same control connection", nil)
	if code, err := s.cmd("NOOP"); err != nil || code != 200 {
		t.Errorf("NOOP after the failover: %d, %v", code, err)
	}
	t.Logf("node b's drops after failover: %s", e.drops(b))
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	if err := b.ka.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
}
