package e2e

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
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
	six     bool // over IPv6: EPSV (a 229) instead of PASV
}

// dialFTP opens a control connection from namespace ns to vip:21 (IPv4
// or IPv6) and logs in anonymously.
func dialFTP(ns, vip string) (*ftpSession, error) {
	s := &ftpSession{ns: ns, vip: vip, six: strings.Contains(vip, ":")}
	network := "tcp4"
	if s.six {
		network = "tcp6"
	}
	err := topo.InNS(ns, func() (err error) {
		s.c, err = net.DialTimeout(network, net.JoinHostPort(vip, "21"), 10*time.Second)
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
	var port int
	if named, port, err = s.passive(); err != nil {
		return "", named, err
	}
	var d net.Conn
	dialer := net.Dialer{Timeout: 10 * time.Second}
	if mid != nil {
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8192) })
			return errors.Join(err, serr)
		}
	}
	network := "tcp4"
	if s.six {
		network = "tcp6"
	}
	if err := topo.InNS(s.ns, func() (err error) {
		d, err = dialer.Dial(network, net.JoinHostPort(named, strconv.Itoa(port)))
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

// passive asks for a passive data connection: PASV and the address and
// port its 227 names or, over IPv6, EPSV and the control connection's
// address (the VIP) with the port its 229 names.
func (s *ftpSession) passive() (named string, port int, err error) {
	if s.six {
		if _, err := io.WriteString(s.c, "EPSV\r\n"); err != nil {
			return "", 0, err
		}
		line, err := s.reply(229)
		if err != nil {
			return "", 0, err
		}
		open, end := strings.Index(line, "(|||"), strings.Index(line, "|)")
		if open < 0 || end < open+4 {
			return "", 0, fmt.Errorf("229 without a port: %q", line)
		}
		port, err = strconv.Atoi(line[open+4 : end])
		return s.vip, port, err
	}
	if _, err := io.WriteString(s.c, "PASV\r\n"); err != nil {
		return "", 0, err
	}
	line, err := s.reply(227)
	if err != nil {
		return "", 0, err
	}
	open, end := strings.IndexByte(line, '('), strings.IndexByte(line, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("227 without an address: %q", line)
	}
	f := strings.Split(line[open+1:end], ",")
	if len(f) != 6 {
		return "", 0, fmt.Errorf("227 %q", line)
	}
	p1, _ := strconv.Atoi(f[4])
	p2, _ := strconv.Atoi(f[5])
	return strings.Join(f[:4], "."), p1<<8 | p2, nil
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
	e, dir, nat, sums, cfg := ftpNATEnv(t, 1)
	rs := nat.Servers[0]
	if len(rs.Addr.Addr().String()) == len(e.vip) {
		t.Fatalf("the server's address %s is as long as the VIP's %s: the 227 rewrite would shift nothing", rs.Addr.Addr(), e.vip)
	}
	cfg.Services = []harness.Service{{VIP: e.vip, Port: 21, Scheduler: "rr", Helper: "ftp",
		Servers: []harness.Server{{Address: rs.Addr.Addr().String(), Port: 21, Weight: 1}}}}
	e.startLBD(t, cfg, dir)

	c := newFTPCheck(t, nat.Client.NS, e.vip, sums)
	defer c.s.c.Close()
	body := c.acrossUpgrade(e, cfg)
	if v := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_rewritten"); v < 1 {
		t.Errorf("the new lbd rewrote %v 227s, want the one after the upgrade", v)
	}
	c.quit()
	e.stop(t)
}

// acrossUpgrade downloads before, across and after an upgrade of e's
// lbd: the second download's data connection spans the upgrade (a 227
// grows the shift before the handover), the control connection waiting
// for its 226 meanwhile, and the third goes through the new lbd on the
// same control connection. It returns the new lbd's metrics, checked
// for the helper's drops.
func (c *ftpCheck) acrossUpgrade(e *lbEnv, cfg harness.Config) string {
	t := c.t
	t.Helper()
	c.download("before the upgrade", nil)
	c.download("across the upgrade", func() {
		e.upgrade(t, cfg)
		t.Logf("handover: %s", e.list(t).Info.Handover)
	})
	c.download("after the upgrade, on the same control connection", nil)
	c.noop("after the upgrade")
	body := e.scrape(t)
	for _, why := range []string{"ftp_unparsed", "ftp_expect_full", "ftp_table_full"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v segments dropped as %s", v, why)
		}
	}
	return body
}

// quit ends the control connection as a client does.
func (c *ftpCheck) quit() {
	c.t.Helper()
	io.WriteString(c.s.c, "QUIT\r\n")
	if _, err := c.s.reply(221); err != nil {
		c.t.Errorf("QUIT: %v", err)
	}
}

// TestFTPSurvivesUpgrade6 is TestFTPSurvivesUpgrade over IPv6 (NAT66,
// EPSV): a data connection spans lbd's upgrade, and the same control
// connection downloads again through the new lbd, whose helper must
// know it (else the 229 announces nothing and the data connection
// finds no server).
func TestFTPSurvivesUpgrade6(t *testing.T) {
	e, dir, sums, cfg := ftpNAT66Env(t, 1)
	e.startLBD(t, cfg, dir)
	c := newFTPCheck(t, e.client.NS, v6VIP, sums)
	defer c.s.c.Close()
	body := c.acrossUpgrade(e, cfg)
	if v := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_data_conns"); v < 1 {
		t.Errorf("the new lbd made %v FTP data connections, want the one after the upgrade", v)
	}
	c.quit()
	e.stop(t)
}

// ftpCheck is one control connection whose downloads of "data" must each
// be named by the VIP in their 227 and be byte for byte one server's
// file, always the same server's.
type ftpCheck struct {
	t      *testing.T
	s      *ftpSession
	vip    string
	sums   map[string]string // SHA-256 to server
	server string
}

// newFTPCheck opens the control connection from namespace ns, retried
// while ARP resolves.
func newFTPCheck(t *testing.T, ns, vip string, sums map[string]string) *ftpCheck {
	t.Helper()
	for i := 0; ; i++ {
		s, err := dialFTP(ns, vip)
		if err == nil {
			return &ftpCheck{t: t, s: s, vip: vip, sums: sums}
		}
		if i == 4 {
			t.Fatalf("no control connection: %v", err)
		}
		t.Logf("control connection %d failed (allowed while ARP resolves): %v", i, err)
		time.Sleep(time.Second)
	}
}

// download downloads "data" (running mid during the transfer, see retr)
// and checks it.
func (c *ftpCheck) download(when string, mid func()) {
	c.t.Helper()
	sum, named, err := c.s.retr("data", mid)
	switch {
	case err != nil:
		c.t.Fatalf("%s: %v (the 227 named %q)", when, err, named)
	case named != c.vip:
		c.t.Fatalf("%s: the 227 named %s, not the VIP", when, named)
	case c.sums[sum] == "":
		c.t.Fatalf("%s: the download is no server's file (sha256 %s)", when, sum)
	case c.server != "" && c.sums[sum] != c.server:
		c.t.Fatalf("%s: the file of %s, the control connection's server is %s", when, c.sums[sum], c.server)
	}
	c.server = c.sums[sum]
}

// noop checks that the control connection still answers.
func (c *ftpCheck) noop(when string) {
	c.t.Helper()
	if code, err := c.s.cmd("NOOP"); err != nil || code != 200 {
		c.t.Errorf("NOOP %s: %d, %v", when, code, err)
	}
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
func TestFailoverFTP(t *testing.T) { testFailoverFTP(t, false) }

// TestFailoverFTP6 is TestFailoverFTP over IPv6: the FTP service on
// haVIP6 by NAT66, EPSV's 229 in the control connection, the backup
// holding both connections from IPv6 sync records with the helper's flag
// and service port; the new master's unsolicited NA moves the VIP.
func TestFailoverFTP6(t *testing.T) { testFailoverFTP(t, true) }

func testFailoverFTP(t *testing.T, six bool) {
	e := newHAEnvWith(t, false, six, true)
	a, b := e.nodes[0], e.nodes[1]
	e.checkMaster(t, "at start", a)
	vip := e.ha.VIP.String()
	if six {
		vip = haVIP6
	}
	c := newFTPCheck(t, e.ha.Client.NS, vip, e.ftp)
	defer c.s.c.Close()
	c.download("before the failover", nil)
	// The backup holds the control connection (and the first data
	// connection) before the second transfer starts.
	if have, err := e.waitConnections(b, 2, 10*time.Second); err != nil {
		t.Fatalf("node b holds %d connection entries, want the control and the data connection (%v)", have, err)
	}
	c.download("across the failover", func() {
		// Let the second 227's shift and the data connection reach the
		// backup (sync drains every 5 ms) before the master dies.
		time.Sleep(500 * time.Millisecond)
		_, takeover := e.killNode(t, a, b)
		t.Logf("failover: node b alone answers ARP for the VIP %v after node a was killed", takeover.Round(time.Millisecond))
	})
	c.download("after the failover, on the same control connection", nil)
	c.noop("after the failover")
	t.Logf("node b's drops after failover: %s", e.drops(b))
	if err := b.lbd.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
	if err := b.ka.Stop(10 * time.Second); err != nil {
		t.Errorf("node b: %v", err)
	}
}
