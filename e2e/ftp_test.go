package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dplb/dplb/e2e/harness"
	"github.com/dplb/dplb/e2e/topo"
)

// vsftpdConf serves root anonymously, read only, passive ports
// 50000-50999, active connections from port 20; no sandboxing that a
// test namespace (or a container) may refuse.
const vsftpdConf = `listen=YES
listen_ipv6=NO
background=NO
anonymous_enable=YES
no_anon_password=YES
anon_root=%s
local_enable=NO
write_enable=NO
pasv_enable=YES
pasv_min_port=50000
pasv_max_port=50999
port_enable=YES
connect_from_port_20=YES
seccomp_sandbox=NO
isolate=NO
isolate_network=NO
secure_chroot_dir=%s
xferlog_enable=NO
vsftpd_log_file=%s
log_ftp_protocol=YES
`

// startVsftpd runs vsftpd in h's namespace serving a file "data" of 1 MiB
// of its own random bytes; it returns the file's SHA-256.
func startVsftpd(t *testing.T, tp *topo.Topo, h topo.Host, dir string) string {
	t.Helper()
	return startVsftpdConf(t, tp, h, dir, vsftpdConf)
}

// startVsftpdConf is startVsftpd with another configuration (the same
// three %s: root, empty directory, log).
func startVsftpdConf(t *testing.T, tp *topo.Topo, h topo.Host, dir, vsftpdConf string) string {
	t.Helper()
	base := filepath.Join(dir, h.Name)
	root, empty := filepath.Join(base, "pub"), filepath.Join(base, "empty")
	for _, d := range []string{root, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // the ftp user reads below the chroot
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(base, "vsftpd.conf")
	log := filepath.Join(base, "vsftpd.log")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(vsftpdConf, root, empty, log)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &harness.Buffer{}
	p, err := tp.Start(h.NS, out, "vsftpd", conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("%s vsftpd output: %s\nlog (last 40 lines):\n%s", h.Name, out.String(), harness.Tail(string(b), 40))
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ss, _ := tp.Exec(h.NS, "ss", "-ltn"); strings.Contains(ss, ":21 ") {
			break
		}
		select {
		case <-p.Done():
			t.Fatalf("vsftpd in %s exited: %v: %s", h.NS, p.Err(), out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("vsftpd in %s does not listen on port 21: %s", h.NS, out.String())
		}
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// ftpModes are curl's ways to open the data connection: passive with a
// 227 (the reply the helper rewrites) or a 229, active with PORT or EPRT.
var ftpModes = []struct {
	name  string
	flags []string
}{
	{"PASV/227", []string{"--ftp-pasv", "--disable-epsv"}},
	{"EPSV/229", []string{"--ftp-pasv"}},
	{"PORT", []string{"--ftp-port", "-", "--disable-eprt"}},
	{"EPRT", []string{"--ftp-port", "-"}},
}

// fetch downloads ftp://VIP/data with curl in the client's namespace,
// from address src, and returns the SHA-256 of what it got.
func (e *lbEnv) fetch(t *testing.T, dir, src string, flags []string) (string, error) {
	out, err := os.CreateTemp(dir, "got-*")
	if err != nil {
		return "", err
	}
	out.Close()
	os.Chmod(out.Name(), 0o666)
	args := append([]string{"curl", "-sS", "--connect-timeout", "10", "--max-time", "90", "--interface", src, "-o", out.Name()}, flags...)
	args = append(args, "ftp://"+e.vip+"/data")
	if msg, err := e.topo.ExecContext(e.ctx, e.client.NS, args...); err != nil {
		return "", fmt.Errorf("curl %s: %v: %s", strings.Join(flags, " "), err, msg)
	}
	b, err := os.ReadFile(out.Name())
	os.Remove(out.Name())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// warmUpFTP downloads from address src until one download succeeds (ARP
// or neighbour discovery done on every side), at most five tries; the
// failures before it are allowed.
func (e *lbEnv) warmUpFTP(t *testing.T, dir, src string, flags []string) {
	t.Helper()
	var err error
	for i := 0; i < 5; i++ {
		if _, err = e.fetch(t, dir, src, flags); err == nil {
			return
		}
		t.Logf("warm-up %d from %s failed (allowed): %v", i, src, err)
	}
	t.Fatalf("warm-up: no download from %s succeeded: %v", src, err)
}

// ftpNATEnv builds VS/NAT's topology with n real servers running vsftpd
// (their files' SHA-256 to their names) and lbd's configuration on two
// lcores, two queues a port, without services; the caller adds them
// and starts lbd.
func ftpNATEnv(t *testing.T, n int) (*lbEnv, string, *topo.NAT, map[string]string, harness.Config) {
	t.Helper()
	return ftpEnv(t, n, false)
}

// ftpEnv is ftpNATEnv, with IPv6 on every side (and vsftpd listening on
// it) when six: e.vip is then "[VIP]", for URLs.
func ftpEnv(t *testing.T, n int, six bool) (*lbEnv, string, *topo.NAT, map[string]string, harness.Config) {
	t.Helper()
	if _, err := exec.LookPath("vsftpd"); err != nil {
		t.Skip("FTP test: vsftpd not found (run scripts/setup.sh)")
	}
	e, dir := newEnv(t)
	nat, err := topo.BuildNAT(e.topo, n)
	if err != nil {
		t.Fatalf("build topology: %v", err)
	}
	e.client, e.servers, e.lbNS, e.vip = nat.Client, nat.Servers, nat.LBNS, nat.VIP.String()
	conf := vsftpdConf
	if six {
		withIPv6(t, e.topo, nat)
		e.vip = "[" + v6VIP + "]"
		conf = strings.Replace(vsftpdConf, "listen=YES\nlisten_ipv6=NO\n", "listen=NO\nlisten_ipv6=YES\n", 1)
	}
	sums := map[string]string{}
	for _, h := range nat.Servers {
		sums[startVsftpdConf(t, e.topo, h, dir, conf)] = h.Name
	}
	cfg := harness.NATConfig(nat, e.topo.Suffix(), dir)
	twoWorkers(&cfg)
	if six {
		cfg.Ports[0].Address6, cfg.Ports[1].Address6 = v6WAN+"/64", v6LAN+"/64"
	}
	return e, dir, nat, sums, cfg
}

// TestFTPThroughNAT: vsftpd on two real servers behind VS/NAT with the
// FTP helper (persistence on, two lcores); curl downloads a 1 MiB file in
// passive (PASV and EPSV) and active (PORT and EPRT) mode, from two client
// addresses, two downloads of each mode from each at once, twice; every
// download must be byte for byte one server's file, and each client
// address keeps its server (persistence).
func TestFTPThroughNAT(t *testing.T) {
	e, dir, nat, sums, cfg := ftpNATEnv(t, 2)
	svc := harness.Service{VIP: e.vip, Port: 21, Scheduler: "rr", Persistence: "300s", Helper: "ftp"}
	for _, h := range nat.Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: h.Addr.Addr().String(), Port: 21, Weight: 1})
	}
	cfg.Services = []harness.Service{svc}
	e.startLBD(t, cfg, dir)
	srcs := []string{nat.Client.Addr.Addr().String(), "192.0.2.3"}
	if err := e.topo.Addr(nat.Client.NS, nat.Client.If, srcs[1]+"/24"); err != nil {
		t.Fatal(err)
	}

	for _, src := range srcs {
		e.warmUpFTP(t, dir, src, ftpModes[0].flags)
	}
	const clients = 2 // per address and mode
	for round := 0; round < 2; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		got := map[string]map[string]int{} // client address -> server -> downloads
		for _, src := range srcs {
			got[src] = map[string]int{}
			for _, m := range ftpModes {
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						sum, err := e.fetch(t, dir, src, m.flags)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err != nil:
							t.Errorf("%s from %s: %v", m.name, src, err)
						case sums[sum] == "":
							t.Errorf("%s from %s: the download is neither server's file (sha256 %s)", m.name, src, sum)
						default:
							got[src][sums[sum]]++
						}
					}()
				}
			}
		}
		wg.Wait()
		t.Logf("round %d: downloads per client and server %v", round, got)
		for src, per := range got {
			if len(per) != 1 {
				t.Errorf("round %d: %s downloaded from %v: persistence should keep it on one server", round, src, per)
			}
		}
	}
	body := e.scrape(t)
	rewritten := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_rewritten")
	data := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_data_conns")
	n := 2 * len(srcs) * clients // per mode, both rounds
	if rewritten < float64(n) || data < float64(n*len(ftpModes)) {
		t.Errorf("ftp_rewritten %v (want >= %d), ftp_data_conns %v (want >= %d)", rewritten, n, data, n*len(ftpModes))
	}
	for _, why := range []string{"ftp_unparsed", "ftp_expect_full", "ftp_table_full"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v segments dropped as %s", v, why)
		}
	}
	t.Logf("ftp_rewritten %v, ftp_data_conns %v", rewritten, data)
	e.stop(t)
}

// TestFTPThroughNAT66: vsftpd on two IPv6 real servers behind an IPv6
// VIP (NAT66) with the FTP helper on two lcores; curl downloads a 1 MiB
// file in passive (EPSV) and active (EPRT |2|) mode, each twice, every
// download byte for byte one server's file; the helper made the data
// connections and dropped nothing.
func TestFTPThroughNAT66(t *testing.T) {
	e, dir, sums, cfg := ftpNAT66Env(t, 2)
	e.startLBD(t, cfg, dir)

	modes := []struct {
		name  string
		flags []string
	}{
		{"EPSV", []string{"-g", "--ftp-pasv"}},
		{"EPRT", []string{"-g", "--ftp-port", "-"}},
	}
	e.warmUpFTP(t, dir, v6Client, modes[0].flags)
	got := map[string]int{}
	for round := 0; round < 2; round++ {
		for _, m := range modes {
			sum, err := e.fetch(t, dir, v6Client, m.flags)
			switch {
			case err != nil:
				t.Errorf("%s: %v", m.name, err)
			case sums[sum] == "":
				t.Errorf("%s: the download is neither server's file (sha256 %s)", m.name, sum)
			default:
				got[m.name+" "+sums[sum]]++
			}
		}
	}
	t.Logf("downloads per mode and server %v", got)
	body := e.scrape(t)
	if data := lcoreSum(body, "dplb_lcore_events_total", "counter", "ftp_data_conns"); data < 4 {
		t.Errorf("ftp_data_conns %v, want at least 4", data)
	}
	for _, why := range []string{"ftp_unparsed", "ftp_expect_full", "ftp_table_full"} {
		if v := lcoreSum(body, "dplb_lcore_drops_total", "reason", why); v != 0 {
			t.Errorf("%v segments dropped as %s", v, why)
		}
	}
	e.stop(t)
}

// ftpNAT66Env is ftpEnv with IPv6 and [VIP]:21 configured: the FTP
// helper, rr over the servers' port 21 (their IPv6 addresses).
func ftpNAT66Env(t *testing.T, n int) (*lbEnv, string, map[string]string, harness.Config) {
	t.Helper()
	e, dir, nat, sums, cfg := ftpEnv(t, n, true)
	svc := harness.Service{VIP: v6VIP, Port: 21, Scheduler: "rr", Helper: "ftp"}
	for i := range nat.Servers {
		svc.Servers = append(svc.Servers, harness.Server{Address: v6Server(i), Port: 21, Weight: 1})
	}
	cfg.Services = []harness.Service{svc}
	return e, dir, sums, cfg
}
